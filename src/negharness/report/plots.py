"""The leaderboard page's plots, as inline SVG drawn by `svg_charts` (no JS library, works offline).

Every plot is a pure function of the records, so the same records give byte-identical SVG (and
the browser test can find the labels). No plotting library is imported: the page for 1,000
records builds well inside the board's 2 s budget.
"""

from __future__ import annotations

from typing import Any

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


def _err(rec: dict[str, Any], metric: str) -> tuple[float, float]:
    iv = (rec.get("intervals") or {}).get(metric)
    v = rec["metrics"][metric]
    # stored bounds have 12 significant digits: a zero-width interval may sit a hair off the value
    return (max(0.0, v - iv[0]), max(0.0, iv[1] - v)) if iv else (0.0, 0.0)


def collections(newest: Newest) -> dict[str, dict[str, str]]:
    """prefix -> {"original"|"negated"|"composed": task} for task names ending in those suffixes."""
    out: dict[str, dict[str, str]] = {}
    for _, task in newest:
        for suffix in SUFFIXES:
            if task.endswith(suffix):
                out.setdefault(task[: -len(suffix)], {})[suffix[1:]] = task
    return {k: v for k, v in sorted(out.items()) if len(v) >= 2}


def original_negated_composed(newest: Newest, prefix: str, tasks: dict[str, str]) -> str:
    """MIR of the source/relevant items under original, negated (neg_MIR: lower is better) and composed queries."""
    anchor = tasks.get("original") or next(iter(tasks.values()))
    labels = top_models(newest, anchor, "MIR")
    series = []
    for kind, metric in (("original", "MIR"), ("negated", "neg_MIR"), ("composed", "MIR")):
        task = tasks.get(kind)
        if task is None:
            continue
        recs = [newest.get((m, task)) for m in labels]
        recs = [None if r is not None and blank_reason(r) else r for r in recs]  # shown as "–" on the board
        series.append(Series(f"{kind} {metric}", [r["metrics"].get(metric) if r else None for r in recs],
                             [_err(r, metric) if r and metric in r["metrics"] else (0.0, 0.0) for r in recs]))
    return bar_chart(labels, series, title=f"{prefix}: original vs negated vs composed queries", ylabel="MIR")


def mcq_templates(newest: Newest, task: str) -> str:
    """Accuracy per template of the correct answer, and how often each template was chosen."""
    labels = top_models(newest, task, "accuracy")
    recs = [newest[(m, task)] for m in labels]
    accuracy = bar_chart(labels, [Series(t, [r["metrics"].get(f"acc_{t}") for r in recs],
                                         [_err(r, f"acc_{t}") if f"acc_{t}" in r["metrics"] else (0.0, 0.0) for r in recs])
                                  for t in TEMPLATES],
                         title=f"{task}: accuracy per template", ylabel="accuracy (%)", width=470)
    chosen = bar_chart(labels, [Series(f"chose {t}", [float(r["metrics"].get(f"chose_{t}", 0.0)) for r in recs])
                                for t in TEMPLATES],
                       title="template chosen", ylabel="% of questions", stacked=True, width=470)
    return accuracy + chosen


def delta_vs_original(newest: Newest, cols: dict[str, dict[str, str]]) -> str | None:
    """ΔMIR (negated) against MIR (original), one point per (model, collection), with intervals."""
    points = []
    for prefix, tasks in cols.items():
        if "original" not in tasks or "negated" not in tasks:
            continue
        for m in top_models(newest, tasks["negated"], "ΔMIR"):
            rec, other = newest[(m, tasks["negated"])], newest.get((m, tasks["original"]))
            if other and "MIR" in other["metrics"]:
                points.append((f"{m} / {prefix}" if len(cols) > 1 else m, other["metrics"]["MIR"],
                               rec["metrics"]["ΔMIR"], _err(other, "MIR"), _err(rec, "ΔMIR")))
    if not points:
        return None
    return scatter([("", [Point(x, y, xe, ye, label=name, tip=f"{name}: MIR {x:.3f}, ΔMIR {y:.3f}")
                          for name, x, y, xe, ye in points])],
                   title="does negation move the source video? ΔMIR against original MIR",
                   xlabel="original MIR", ylabel="ΔMIR (negated)", zero_line=True)


def all_plots(newest: Newest) -> list[tuple[str, str, str]]:
    """(id, title, svg) for every plot the records allow, in a fixed order."""
    out = []
    cols = collections(newest)
    for prefix, tasks in cols.items():
        out.append((f"plot-{prefix}-onc", f"{prefix}: original vs negated vs composed",
                    original_negated_composed(newest, prefix, tasks)))
    for task in sorted({t for (_, t), r in newest.items() if any(k.startswith("chose_") for k in r["metrics"])}):
        out.append((f"plot-{task}-templates", f"{task}: MCQ accuracy per template and the template chosen",
                    mcq_templates(newest, task)))
    scatter = delta_vs_original(newest, cols)
    if scatter:
        out.append(("plot-delta-mir", "ΔMIR against original MIR", scatter))
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
    return scatter(list(groups.items()), title=f"{diagnosis['model']['label']}: negation gap {s['negation_gap']:+.3f}",
                   xlabel=f"PC 1 ({100 * ev[0]:.1f}% of variance)", ylabel=f"PC 2 ({100 * ev[1]:.1f}% of variance)",
                   width=560, height=460, radius=2.5)
