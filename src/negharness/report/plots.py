"""The leaderboard page's plots, as inline SVG drawn by `svg_charts` (no JS library, works offline).

Every plot is a pure function of the records, so the same records give byte-identical SVG (and
the browser test can find the labels). No plotting library is imported: the page for 1,000
records builds well inside the board's 2 s budget.
"""

from __future__ import annotations

from typing import Any

from negharness.report.labels import short_label
from negharness.report.leaderboard import blank_reason
from negharness.report.svg_charts import Point, Series, bar_chart, scatter

SUFFIXES = ("_original", "_negated", "_composed")
TEMPLATES = ("positive", "negative", "hybrid")
MAX_MODELS = 20  # a plot of more bars than this is unreadable: the top ones are shown
Newest = dict[tuple[str, str], dict[str, Any]]  # (model label, task) -> record


def top_models(newest: Newest, task: str, metric: str, higher: bool = True) -> list[str]:
    """The MAX_MODELS models with the best ``metric`` on ``task``, then sorted by label."""
    scored = sorted(((-1 if higher else 1) * float(r["metrics"].get(metric, float("nan"))), m)
                    for (m, t), r in newest.items() if t == task and metric in r["metrics"])
    return sorted(m for _, m in scored[:MAX_MODELS])


def _value(rec: dict[str, Any] | None, metric: str) -> float | None:
    """The value the board shows, or None where it shows none (no record, no such metric, or "–")."""
    if rec is None or metric not in rec["metrics"] or blank_reason(rec):
        return None
    return float(rec["metrics"][metric])


def _err(rec: dict[str, Any] | None, metric: str) -> tuple[float, float] | None:
    """(below, above) the value from the record's interval; None when the record has none."""
    iv = ((rec or {}).get("intervals") or {}).get(metric)
    if rec is None or _value(rec, metric) is None or not iv:
        return None
    v = rec["metrics"][metric]
    # stored bounds have 12 significant digits: a zero-width interval may sit a hair off the value
    return (max(0.0, v - iv[0]), max(0.0, iv[1] - v))


def collections(newest: Newest) -> dict[str, dict[str, str]]:
    """prefix -> {"original"|"negated"|"composed": task} for task names ending in those suffixes."""
    out: dict[str, dict[str, str]] = {}
    for _, task in newest:
        for suffix in SUFFIXES:
            if task.endswith(suffix):
                out.setdefault(task[: -len(suffix)], {})[suffix[1:]] = task
    return {k: v for k, v in sorted(out.items()) if len(v) >= 2}


def original_negated_composed(newest: Newest, prefix: str, tasks: dict[str, str]) -> str:
    """Two panels, both higher-is-better: MIR of the relevant items under original and composed
    queries, and, for the negated queries, ΔMIR (how far the negation moves the source item down:
    MIR(original) - MIR(negated), per query). neg_MIR itself is lower-is-better, so it never shares
    an axis with the MIRs; every bar carries its record's 95% interval."""
    anchor = tasks.get("original") or next(iter(tasks.values()))
    labels = top_models(newest, anchor, "MIR" if anchor != tasks.get("negated") else "ΔMIR")
    shown = [short_label(m) for m in labels]
    panels = []
    mir = [(kind, tasks[kind]) for kind in ("original", "composed") if kind in tasks]
    if mir:
        series = []
        for kind, task in mir:
            recs = [newest.get((m, task)) for m in labels]
            series.append(Series(f"{kind} MIR", [_value(r, "MIR") for r in recs], [_err(r, "MIR") for r in recs]))
        panels.append(bar_chart(shown, series, title=f"{prefix}: original and composed queries",
                                ylabel="MIR (higher is better)", width=470))
    if "negated" in tasks:
        recs = [newest.get((m, tasks["negated"])) for m in labels]
        panels.append(bar_chart(shown, [Series("negated ΔMIR", [_value(r, "ΔMIR") for r in recs],
                                               [_err(r, "ΔMIR") for r in recs])],
                                title=f"{prefix}: negated queries, ΔMIR = MIR(orig.) − MIR(neg.)", width=470,
                                ylabel="ΔMIR (higher is better)"))
    return "".join(panels)


def mcq_templates(newest: Newest, task: str) -> str:
    """Accuracy per template of the correct answer, and how often each template was chosen."""
    labels = top_models(newest, task, "accuracy")
    recs = [newest[(m, task)] for m in labels]
    labels = [short_label(m) for m in labels]
    accuracy = bar_chart(labels, [Series(t, [_value(r, f"acc_{t}") for r in recs], [_err(r, f"acc_{t}") for r in recs])
                                  for t in TEMPLATES],
                         title=f"{task}: accuracy per template", ylabel="accuracy (%)", width=470)
    chosen = bar_chart(labels, [Series(f"chose {t}", [float(r["metrics"].get(f"chose_{t}", 0.0)) for r in recs])
                                for t in TEMPLATES],
                       title="template chosen (shares of 100%, no interval)", ylabel="% of questions", stacked=True,
                       width=470)
    return accuracy + chosen


def delta_vs_original(newest: Newest, cols: dict[str, dict[str, str]]) -> tuple[str | None, list[str]]:
    """ΔMIR (negated) against MIR (original), one point per (model, collection), with intervals; a
    model is drawn only where the board shows both values (the boolean baseline's original MIR is
    its base model's, shown "–", so it has no point). Returns the SVG (None with no point) and the
    models left out, for the caption."""
    points, left_out = [], []
    for prefix, tasks in cols.items():
        if "original" not in tasks or "negated" not in tasks:
            continue
        for m in top_models(newest, tasks["negated"], "ΔMIR"):
            rec, other = newest[(m, tasks["negated"])], newest.get((m, tasks["original"]))
            x, y = _value(other, "MIR"), _value(rec, "ΔMIR")
            name = short_label(f"{m} / {prefix}" if len(cols) > 1 else m)
            if x is None or y is None:
                left_out.append(name)
                continue
            points.append((name, x, y, _err(other, "MIR") or (0.0, 0.0), _err(rec, "ΔMIR") or (0.0, 0.0)))
    if not points:
        return None, left_out
    return scatter([("", [Point(x, y, xe, ye, label=name, tip=f"{name}: MIR {x:.3f}, ΔMIR {y:.3f}")
                          for name, x, y, xe, ye in points])],
                   title="does negation move the source video? ΔMIR against original MIR",
                   xlabel="original MIR", ylabel="ΔMIR (negated)", zero_line=True), left_out


def all_plots(newest: Newest) -> list[tuple[str, str, str]]:
    """(id, title, svg) for every plot the records allow, in a fixed order."""
    out = []
    cols = collections(newest)
    for prefix, tasks in cols.items():
        out.append((f"plot-{prefix}-onc", f"{prefix}: original vs negated vs composed (higher is better in both panels)",
                    original_negated_composed(newest, prefix, tasks)))
    for task in sorted({t for (_, t), r in newest.items() if any(k.startswith("chose_") for k in r["metrics"])}):
        out.append((f"plot-{task}-templates", f"{task}: MCQ accuracy per template and the template chosen",
                    mcq_templates(newest, task)))
    scatter, left_out = delta_vs_original(newest, cols)
    if scatter:
        note = f" (not drawn, no original MIR on the board: {', '.join(left_out)})" if left_out else ""
        out.append(("plot-delta-mir", "ΔMIR against original MIR" + note, scatter))
    return out


def pca_scatter(diagnosis: dict[str, Any]) -> str:
    """NegBench Fig. 6 for one model: every diagnosis caption on the first two principal components,
    coloured by template family; the axes say how much of the variance each component explains."""
    groups: dict[str, list[Point]] = {}
    for p in diagnosis["pca"]["points"]:
        groups.setdefault(p["family"].replace("_", " "), []).append(
            Point(p["x"], p["y"], tip=f"{p['caption']} ({p['family'].replace('_', ' ')}; {p['object']})"))
    ev = diagnosis["pca"]["explained_variance_ratio"]
    s = diagnosis["summary"]
    return scatter(list(groups.items()), title=f"{short_label(diagnosis['model']['label'])}: negation gap {s['negation_gap']:+.3f}",
                   xlabel=f"PC 1 ({100 * ev[0]:.1f}% of variance)", ylabel=f"PC 2 ({100 * ev[1]:.1f}% of variance)",
                   width=560, height=460, radius=2.5)
