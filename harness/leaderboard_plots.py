"""The leaderboard page's plots, as SVG text from matplotlib (no JS library, works offline).

Every plot is a pure function of the records: fixed hash salt, no date metadata, text kept as
text, so the same records give byte-identical SVG (and the browser test can find the labels).
"""

from __future__ import annotations

import io
from typing import Any

from .leaderboard import blank_reason

SUFFIXES = ("_original", "_negated", "_composed")
TEMPLATES = ("positive", "negative", "hybrid")
MAX_MODELS = 20  # a plot of more bars than this is unreadable (and slow to draw): the top ones are shown
Newest = dict[tuple[str, str], dict[str, Any]]  # (model label, task) -> record


def top_models(newest: Newest, task: str, metric: str, higher: bool = True) -> list[str]:
    """The MAX_MODELS models with the best ``metric`` on ``task``, then sorted by label."""
    scored = sorted(((-1 if higher else 1) * float(r["metrics"].get(metric, float("nan"))), m)
                    for (m, t), r in newest.items() if t == task and metric in r["metrics"])
    return sorted(m for _, m in scored[:MAX_MODELS])


def _figure(width: float = 6.4, height: float = 3.4):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "negharness", "svg.fonttype": "none", "font.size": 9})
    return plt, plt.subplots(figsize=(width, height))


def _svg(plt, fig) -> str:
    buf = io.StringIO()
    fig.tight_layout()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "negharness"})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _err(rec: dict[str, Any], metric: str) -> tuple[float, float]:
    iv = (rec.get("intervals") or {}).get(metric)
    v = rec["metrics"][metric]
    # stored bounds have 12 significant digits: a zero-width interval may sit a hair off the value
    return (max(0.0, v - iv[0]), max(0.0, iv[1] - v)) if iv else (0.0, 0.0)


def _grouped_bars(ax, labels: list[str], series: list[tuple[str, list[float | None], list[tuple[float, float]]]]) -> None:
    width = 0.8 / max(len(series), 1)
    for k, (name, values, errs) in enumerate(series):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(labels))]
        shown = [(x, v, e) for x, v, e in zip(xs, values, errs) if v is not None]
        if shown:
            ax.bar([s[0] for s in shown], [s[1] for s in shown], width,
                   yerr=[[s[2][0] for s in shown], [s[2][1] for s in shown]], capsize=2, label=name)
    ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right")
    ax.legend(fontsize=8)


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
        series.append((f"{kind} {metric}", [r["metrics"].get(metric) if r else None for r in recs],
                       [_err(r, metric) if r and metric in r["metrics"] else (0.0, 0.0) for r in recs]))
    plt, (fig, ax) = _figure()
    _grouped_bars(ax, labels, series)
    ax.set_ylabel("MIR")
    ax.set_title(f"{prefix}: original vs negated vs composed queries")
    return _svg(plt, fig)


def mcq_templates(newest: Newest, task: str) -> str:
    """Accuracy per template of the correct answer, and how often each template was chosen."""
    labels = top_models(newest, task, "accuracy")
    recs = [newest[(m, task)] for m in labels]
    plt, (fig, axes) = _figure(9.0, 3.4)
    fig.clf()
    ax1, ax2 = fig.subplots(1, 2)
    _grouped_bars(ax1, labels, [(t, [r["metrics"].get(f"acc_{t}") for r in recs],
                                 [_err(r, f"acc_{t}") if f"acc_{t}" in r["metrics"] else (0.0, 0.0) for r in recs])
                                for t in TEMPLATES])
    ax1.set_ylabel("accuracy (%)")
    ax1.set_title(f"{task}: accuracy per template")
    bottom = [0.0] * len(labels)
    for t in TEMPLATES:
        vals = [float(r["metrics"].get(f"chose_{t}", 0.0)) for r in recs]
        ax2.bar(range(len(labels)), vals, 0.6, bottom=bottom, label=f"chose {t}")
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax2.set_xticks(range(len(labels)), labels, rotation=20, ha="right")
    ax2.set_ylabel("% of questions")
    ax2.set_title("template chosen")
    ax2.legend(fontsize=8)
    return _svg(plt, fig)


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
    plt, (fig, ax) = _figure()
    xs, ys = [p[1] for p in points], [p[2] for p in points]
    ax.errorbar(xs, ys, xerr=[[p[3][0] for p in points], [p[3][1] for p in points]],
                yerr=[[p[4][0] for p in points], [p[4][1] for p in points]], fmt="o", capsize=2)
    for name, x, y, _, _ in points:
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel("original MIR")
    ax.set_ylabel("ΔMIR (negated)")
    ax.set_title("does negation move the source video? ΔMIR against original MIR")
    return _svg(plt, fig)


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
