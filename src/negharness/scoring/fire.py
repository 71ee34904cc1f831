"""FIRE (Rodriguez et al.): extra relevance judgements for any retrieval task, and how many queries
a difference needs.

MSR-VTT-style benchmarks label one positive video per caption; FIRE's annotators found many more
(CLIP4Clip's C@1 on MSR-VTT was understated by 25 points). ``-T qrels=FILE`` on a retrieval task
adds such judgements: the record then holds the original metrics and the augmented ones
(``fire_C@1`` ... ``fire_mAP``) side by side, as FIRE's Table 1 ("A (B + C)").

A qrels file has one judgement per line, ``query_id item_id relevance`` (tab or space separated),
or TREC's ``query_id 0 item_id relevance``; relevance > 0 is a positive, and lines starting with
``#`` are comments. Positives are added to the task's own (never removed: an original positive
judged 0 stays positive, since FIRE only adds).

`subsample_deltas` is FIRE's section 4.3 experiment: for N queries resampled 10,000 times, the
distribution of |mean on the resample - mean on all queries|, whose 95th percentile is the score
difference an N-query evaluation can tell apart at the 95% level, for Correct@K, MIR and mAP (FIRE's
Eq. 2: per query, the mean of precision at the rank of each relevant video). N is a number of the
task's own queries, so an N above the task's query count is refused (`check_sizes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from negharness.contracts.errors import UserError
from negharness.io.atomic_files import atomic_write

if TYPE_CHECKING:  # a name only: metrics imports torch, and `negharness fire` checks --sizes before torch
    from negharness.scoring.metrics import Relevance

FIRE_KS = (1, 5, 10)
FIRE_METRICS = tuple(f"fire_C@{k}" for k in FIRE_KS) + ("fire_MIR", "fire_mAP")


@dataclass(frozen=True)
class Qrels:
    """Positives per query id, from one file; ``path`` names it in messages and records."""

    path: Path
    positives: dict[str, set[str]]
    n_lines: int


def read_qrels(path: str | Path) -> Qrels:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"-T qrels={path}: cannot read it ({exc.__class__.__name__}: {exc})") from exc
    positives: dict[str, set[str]] = {}
    judged: dict[tuple[str, str], tuple[bool, int]] = {}  # (query, item) -> (relevant, first line)
    n = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if len(parts) == 4:  # TREC: query 0 item relevance
            parts = [parts[0], parts[2], parts[3]]
        if len(parts) != 3:
            raise UserError(f"{path}:{lineno}: expected 'query_id item_id relevance' (or TREC's four columns), "
                            f"got {line.strip()[:80]!r}")
        try:
            relevance = float(parts[2])
        except ValueError:
            raise UserError(f"{path}:{lineno}: relevance {parts[2]!r} is not a number") from None
        if not math.isfinite(relevance):
            raise UserError(f"{path}:{lineno}: relevance {parts[2]!r} is not a finite number")
        pair = (parts[0], parts[1])
        earlier = judged.setdefault(pair, (relevance > 0, lineno))
        if earlier[0] != (relevance > 0):
            raise UserError(f"{path}:{lineno}: {pair[0]} {pair[1]} judged {'relevant' if relevance > 0 else 'not relevant'}"
                            f" here and {'relevant' if earlier[0] else 'not relevant'} at line {earlier[1]}")
        n += 1
        if relevance > 0:
            positives.setdefault(parts[0], set()).add(parts[1])
    return Qrels(path, positives, n)


def augment(relevance: Relevance, query_ids: Sequence[str], item_ids: Sequence[str], qrels: Qrels,
            limited: bool = False, skipped: frozenset[str] = frozenset()) -> tuple[Relevance, dict[str, int]]:
    """The task's relevance plus the judged positives, and counts for the record. An item the
    collection does not have is an error naming the file, unless the run is cut by --limit; an item
    left out as unreadable (``skipped``, --skip-broken-media) leaves the judgements as it left the
    candidates, counted, as if its row were not in the data."""
    where = {item: i for i, item in enumerate(item_ids)}
    lists, added, unknown, left_out = [], 0, [], 0
    for q, qid in enumerate(query_ids):
        rel = set(relevance.indices[relevance.indptr[q]:relevance.indptr[q + 1]].tolist())
        for item in qrels.positives.get(str(qid), ()):
            if item in where:
                added += where[item] not in rel
                rel.add(where[item])
            elif item in skipped:
                left_out += 1
            else:
                unknown.append(item)
        lists.append(sorted(rel))
    if unknown and not limited:
        raise UserError(f"{qrels.path}: {len(unknown)} judged item(s) are not in the collection, e.g. "
                        f"{sorted(set(unknown))[:3]}")
    known_queries = set(map(str, query_ids))
    counts = {"qrels_lines": qrels.n_lines, "qrels_positives_added": added,
              **({"qrels_positives_unreadable": left_out} if left_out else {}),
              "qrels_queries_judged": sum(1 for q in qrels.positives if q in known_queries),
              "qrels_queries_unknown": sum(1 for q in qrels.positives if q not in known_queries)}
    return type(relevance).from_lists(lists, relevance.n_items), counts


def subsample_deltas(values: np.ndarray, size: int, resamples: int = 10_000, seed: int = 0) -> np.ndarray:
    """|mean of ``size`` queries drawn with replacement - mean of all|, for each of ``resamples`` draws."""
    values = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    full = values.mean()
    out = np.empty(resamples)
    step = max(1, 2_000_000 // max(size, 1))  # bounded memory for large N
    for lo in range(0, resamples, step):
        hi = min(resamples, lo + step)
        out[lo:hi] = np.abs(values[rng.integers(0, len(values), size=(hi - lo, size))].mean(1) - full)
    return out


def per_query_values(ranks: np.ndarray, average_precisions: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-query C@K (0/100), reciprocal rank and AP: the means of these are the task's metrics."""
    r = np.asarray(ranks, dtype=np.float64)
    out = {f"C@{k}": (r <= k) * 100.0 for k in FIRE_KS}
    out["MIR"] = 1.0 / r
    if average_precisions is not None:
        out["mAP"] = np.asarray(average_precisions, dtype=np.float64)
    return out


DEFAULT_SIZES = (500, 1000, 3000)  # FIRE's Figure 4


def default_sizes(n_queries: int) -> tuple[list[int], str | None]:
    """The N to resample when the user names none: FIRE's sizes the task can supply, and a note
    naming those left out; for a task smaller than all of them, a quarter, half and all of its
    queries. (Sizes a user names are held to `check_sizes` instead: asked for, never dropped.)"""
    kept = [n for n in DEFAULT_SIZES if n <= n_queries]
    left = [n for n in DEFAULT_SIZES if n > n_queries]
    if not kept:
        kept = sorted({max(1, n_queries // 4), max(1, n_queries // 2), n_queries})
    note = (f"N={','.join(map(str, left))} left out: the task has {n_queries} queries; resampling "
            f"N={','.join(map(str, kept))}") if left else None
    return kept, note


def check_sizes(sizes: Sequence[int], n_queries: int, task: str) -> None:
    """Refuse an N the task cannot supply: FIRE samples N of the evaluation's own examples, so
    resampling more than there are would claim a precision the task does not have."""
    over = [n for n in sizes if n > n_queries]
    if over:
        raise UserError(f"--sizes {','.join(map(str, over))}: task {task} has only {n_queries} queries "
                        f"(give N of at most {n_queries})")


def detectable_differences(samples: list[dict[str, Any]], sizes: Sequence[int], resamples: int = 10_000,
                           seed: int = 0) -> tuple[dict[str, dict[int, float]], dict[str, dict[int, np.ndarray]]]:
    """Per metric and N: the 95th percentile of `subsample_deltas` (the smallest difference an
    N-query evaluation detects at the 95% level), and the distributions behind it, from a run's
    per-query samples (``rank`` and ``ap``; with qrels also ``fire_rank`` and ``fire_ap``). mAP is
    left out only for samples logged without their AP."""
    columns = {"": ("rank", "ap"), "fire_": ("fire_rank", "fire_ap")}
    table: dict[str, dict[int, float]] = {}
    dists: dict[str, dict[int, np.ndarray]] = {}
    for prefix, (key, ap_key) in columns.items():
        if not samples or key not in samples[0]:
            continue
        aps = np.array([s[ap_key] for s in samples]) if ap_key in samples[0] else None
        values = per_query_values(np.array([s[key] for s in samples]), aps)
        for name, v in values.items():
            metric = prefix + name
            for n in sizes:
                d = subsample_deltas(v, n, resamples, seed)
                dists.setdefault(metric, {})[n] = d
                table.setdefault(metric, {})[n] = float(np.quantile(d, 0.95))
    return table, dists


PLOT_COLUMNS = 3  # panels per row: the figure stays 9.6 in (about 920 px) wide whatever the metrics
PANEL_SIZE = (3.2, 2.5)  # inches per panel


def plot_deltas(dists: dict[str, dict[int, np.ndarray]], out: Path, title: str) -> Path:
    """FIRE's Figure 4: the distribution of |resample - full| per N, the 95th percentile marked in
    the colour of its N. Panels wrap onto rows of ``PLOT_COLUMNS`` so the figure has a fixed width
    (a fifth metric, or ten with qrels, makes it taller, never wider), and the constrained layout
    keeps every panel, label and the legend inside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = list(dists)
    cols = max(1, min(PLOT_COLUMNS, len(metrics)))
    rows = max(1, -(-len(metrics) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(PANEL_SIZE[0] * cols, PANEL_SIZE[1] * rows + 0.5),
                             squeeze=False, layout="constrained")
    flat = [ax for row in axes for ax in row]
    for ax, metric in zip(flat, metrics):
        for k, (n, d) in enumerate(sorted(dists[metric].items())):
            colour = f"C{k % 10}"
            ax.hist(d, bins=40, histtype="step", color=colour, label=f"N={n}")
            ax.axvline(np.quantile(d, 0.95), color=colour, linestyle=":", linewidth=0.9)
        ax.set_title(metric, fontsize=9)
        ax.set_xlabel("|resample - full|", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in flat[len(metrics):]:
        ax.axis("off")
    handles, labels = flat[0].get_legend_handles_labels()
    if len(flat) > len(metrics):  # the first free panel holds the legend
        flat[len(metrics)].legend(handles, labels, loc="center", fontsize=8, title="queries resampled")
    else:
        fig.legend(handles, labels, loc="outside lower center", fontsize=7, ncols=len(labels) or 1, frameon=False)
    fig.suptitle(f"{title}: |mean of N resampled queries - mean of all| (dotted: 95th percentile)", fontsize=9)
    fmt = out.suffix.lstrip(".").lower() or "png"
    atomic_write(out, lambda tmp: fig.savefig(tmp, format=fmt))
    plt.close(fig)
    return out
