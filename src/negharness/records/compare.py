"""`negharness compare A B`: does model B really differ from model A on the same queries?

For every task both runs have, and every metric both have per-query values for: the difference
B - A, its 95% paired bootstrap interval (the task's clusters, e.g. images or videos, resampled
jointly; each query its own cluster where the task declares none) and a two-sided p-value; for
0/100 metrics (accuracies, R@K hits, removal) also McNemar's exact test on the discordant
questions. A query one run does not cover (NaN) is left out of the pair and the row says how many
(`negharness.scoring.bootstrap.pairs`, the one NaN rule). Every metric of every task is one test: the p-values are also given adjusted by
Benjamini-Hochberg over all the tests of the comparison (and McNemar's over its own), as the
output says. Runs are only compared when their query id lists are identical (same queries in the
same order) with the same clusters: anything else would compare different questions, and the
report says why it skipped. A record made before clusters (no ``interval_method.cluster``) is not
compared: its queries' clusters are unknown, and a test over rows could claim a difference the data
do not support. A record that cannot be used (truncated, another schema, NaN metrics) is an error
naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from negharness.contracts.errors import UserError
from negharness.records.check import read_checked
from negharness.records.results import iter_records
from negharness.records.schema import SIDECAR_SUFFIXES, record_key
from negharness.scoring.bootstrap import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    benjamini_hochberg,
    mcnemar_exact,
    paired_test,
    pairs,
)
from negharness.scoring.perquery import cluster_ids, clusters_known, read_sidecar, record_cluster


@dataclass
class Run:
    """One record with its per-query values."""

    path: Path
    record: dict[str, Any]
    per_query: dict[str, Any] | None


@dataclass
class MetricComparison:
    metric: str
    a: float
    b: float
    diff: float
    lo: float
    hi: float
    p_value: float
    queries: int
    higher_is_better: bool = True
    fmt: str = ".3f"
    mcnemar: tuple[int, int, float] | None = None  # (A right only, B right only, p)
    clusters: int = 0  # the units resampled
    p_adjusted: float | None = None  # Benjamini-Hochberg over every bootstrap test of the comparison
    mcnemar_adjusted: float | None = None  # the same over every McNemar test
    dropped: int = 0  # queries one of the runs does not cover (NaN), left out of the pair (`pairs`)


@dataclass
class TaskComparison:
    task: str
    metrics: list[MetricComparison] = field(default_factory=list)
    skipped: str | None = None  # why this task was not compared
    cluster: str = "row"  # what the task's queries share
    clusters: int = 0


def load_runs(spec: str, results_dir: Path, task: str | None = None,
              cache_dir: str | Path | None = None) -> tuple[str, dict[str, Run]]:
    """(label, task cell -> run) for a record folder, or a model label / folder name under results_dir.
    A task's variants (--seed, -T) are runs of their own (``task [seed=1]``, `RecordKey.task_cell`):
    only the same variant of a task is ever paired. ``cache_dir``: where the record check is remembered."""
    folder = Path(spec)
    if not folder.is_dir():
        folder = _folder_for_label(spec, Path(results_dir), cache_dir)
    runs: dict[str, Run] = {}
    label = None
    for path in sorted(folder.glob("*.json")):
        if path.name.endswith(SIDECAR_SUFFIXES):
            continue
        rec = read_checked(path, cache_dir=cache_dir)  # a record --check refuses is an error naming it, not skipped
        key = record_key(rec)
        if rec.get("limited") or (task and task not in (key.task, key.task_cell)):
            continue
        label = label or key.model
        old = runs.get(key.task_cell)
        if old is None or rec.get("created_at", "") > old.record.get("created_at", ""):
            runs[key.task_cell] = Run(path, rec, read_sidecar(path, rec))
    if not runs:
        raise UserError(f"{spec}: no full (not --limit) result records{f' for task {task}' if task else ''} in {folder}")
    return label or spec, runs


def _folder_for_label(label: str, results_dir: Path, cache_dir: str | Path | None = None) -> Path:
    if not results_dir.is_dir():
        raise UserError(f"{label}: not a record folder, and --results-dir {results_dir} does not exist")
    direct = results_dir / label
    if direct.is_dir():
        return direct
    folders = sorted({p.parent for p, rec in iter_records(results_dir, cache_dir) if rec["model"]["label"] == label})
    if len(folders) != 1:
        known = sorted({rec["model"]["label"] for _, rec in iter_records(results_dir, cache_dir)})
        raise UserError(f"{label}: no record folder or model label under {results_dir} "
                        f"(labels there: {', '.join(known) or 'none'})")
    return folders[0]


def _binary(values: np.ndarray) -> bool:
    kept = values[~np.isnan(values)]
    return kept.size > 0 and bool(np.isin(kept, (0.0, 100.0)).all())


def _array(vals: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in vals], dtype=np.float64)


def compare_task(name: str, a: Run, b: Run, n: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> TaskComparison:
    out = TaskComparison(name)
    qa, qb = a.per_query, b.per_query
    if qa is None or qb is None:
        which = "A" if qa is None else "B"
        out.skipped = f"run {which} has no per-query values (a record made before they existed: rerun it)"
        return out
    ia, ib = qa["ids"], qb["ids"]
    if ia != ib:
        shared = len(set(ia) & set(ib))
        out.skipped = (f"different queries: A has {len(ia)}, B has {len(ib)}, {shared} shared"
                       + (" (same ids, another order)" if shared == len(ia) == len(ib) else ""))
        return out
    out.skipped = _cluster_problem(a, b, qa, qb)
    if out.skipped:
        return out
    clusters = cluster_ids(qa)
    out.cluster, out.clusters = record_cluster(a.record), len(set(clusters))
    info = {**b.record.get("metric_info", {}), **a.record.get("metric_info", {})}
    for metric in [m for m in qa["values"] if m in qb["values"]]:
        va, vb = _array(qa["values"][metric]), _array(qb["values"][metric])
        try:
            pair = pairs(va, vb)  # the NaN rule of every paired routine: queries both runs cover
        except ValueError:
            continue  # no query both runs cover: nothing to pair
        res = paired_test(va, vb, n, seed, clusters=clusters)
        mi = info.get(metric, {})
        mc = None
        if _binary(pair.a) and _binary(pair.b):
            mc = mcnemar_exact(pair.a == 100.0, pair.b == 100.0)
        # with queries one run alone covers, A and B are shown over the paired queries, so B - A adds up
        shown_a, shown_b = ((float(pair.a.mean()), float(pair.b.mean())) if res.dropped else
                            (float(a.record["metrics"][metric]), float(b.record["metrics"][metric])))
        out.metrics.append(MetricComparison(metric, shown_a, shown_b,
                                            res.diff, res.lo, res.hi, res.p_value, res.n_queries,
                                            bool(mi.get("higher_is_better", True)), mi.get("fmt", ".3f"), mc,
                                            res.n_clusters, dropped=res.dropped))
    return out


def _cluster_problem(a: Run, b: Run, qa: dict[str, Any], qb: dict[str, Any]) -> str | None:
    """Why two runs' clusters cannot be resampled jointly: a record made before clusters, or
    another cluster declaration (a task version that groups its queries otherwise). ``qa``, ``qb``:
    the runs' per-query values (they have some)."""
    for which, run in (("A", a), ("B", b)):
        if not clusters_known(run.record):
            return (f"run {which} was recorded before clustered intervals (no interval_method.cluster): which "
                    "queries share an image or video is unknown, and a test over rows could be too confident; "
                    "rerun it with --overwrite")
    if record_cluster(a.record) != record_cluster(b.record) or cluster_ids(qa) != cluster_ids(qb):
        return (f"different clusters: A clusters by {record_cluster(a.record)!r}, B by {record_cluster(b.record)!r}"
                " (or the same queries are grouped otherwise)")
    return None


def adjust(results: list[TaskComparison]) -> None:
    """Benjamini-Hochberg over every metric compared (all tasks): bootstrap p-values as one family,
    McNemar's as another."""
    tested = [m for t in results for m in t.metrics]
    for m, q in zip(tested, benjamini_hochberg([m.p_value for m in tested])):
        m.p_adjusted = q
    exact = [(m, m.mcnemar[2]) for m in tested if m.mcnemar is not None]  # (comparison, McNemar's p)
    for (m, _), q in zip(exact, benjamini_hochberg([p for _, p in exact])):
        m.mcnemar_adjusted = q


def compare(a: dict[str, Run], b: dict[str, Run], n: int = BOOTSTRAP_RESAMPLES,
            seed: int = BOOTSTRAP_SEED) -> list[TaskComparison]:
    """Every task either run has; a task only one of them has is listed as skipped."""
    out = []
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            out.append(TaskComparison(name, skipped=f"only {'A' if name in a else 'B'} has a record"))
        else:
            out.append(compare_task(name, a[name], b[name], n, seed))
    adjust(out)
    return out


def n_tests(results: list[TaskComparison]) -> int:
    return sum(len(t.metrics) for t in results)


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _adjusted(q: float | None) -> str:
    return "–" if q is None else _p(q)


def _cells(m: MetricComparison) -> list[str]:
    f = m.fmt
    mc = (f"{m.mcnemar[0]}/{m.mcnemar[1]}, p={_p(m.mcnemar[2])}, BH {_adjusted(m.mcnemar_adjusted)}"
          if m.mcnemar else "–")
    name = m.metric + (" ↑" if m.higher_is_better else " ↓")
    if m.dropped:
        name += f" ({m.queries} paired, {m.dropped} covered by one run only)"
    return [name, format(m.a, f), format(m.b, f),
            f"{m.diff:+{f}} [{m.lo:+{f}}, {m.hi:+{f}}]", _p(m.p_value), _adjusted(m.p_adjusted), mc]


HEADERS = ["metric", "A", "B", "B − A [95% CI]", "p (bootstrap)", "p (BH)", "McNemar (A only/B only, p, BH)"]


def method_text(results: list[TaskComparison], n: int, seed: int) -> str:
    """What the tests are, and how many p-values the Benjamini-Hochberg adjustment covers."""
    k = n_tests(results)
    return (f"Paired bootstrap over clusters (each task's images, videos or source items, resampled jointly; "
            f"{n} resamples, seed {seed}), two-sided p; McNemar's exact test on the discordant queries for 0/100 "
            f"metrics. {k} metric{'s' if k != 1 else ''} tested at once: \"p (BH)\" and McNemar's \"BH\" are "
            "Benjamini-Hochberg adjusted over all of them (false discovery rate); read those when asking which "
            "differences are real.")


def _heading(t: TaskComparison) -> str:
    if t.skipped or not t.clusters:
        return t.task
    what = "each query its own" if t.cluster == "row" else f"by {t.cluster}"
    return f"{t.task} ({t.clusters} clusters, {what})"


def to_markdown(label_a: str, label_b: str, results: list[TaskComparison], n: int, seed: int) -> str:
    parts = [f"# {label_b} (B) against {label_a} (A)\n\n", method_text(results, n, seed) + "\n"]
    for t in results:
        parts.append(f"\n## {_heading(t)}\n\n")
        if t.skipped:
            parts.append(f"Not compared: {t.skipped}.\n")
            continue
        parts.append("| " + " | ".join(HEADERS) + " |\n|---|" + "---:|" * (len(HEADERS) - 1) + "\n")
        for m in t.metrics:
            parts.append("| " + " | ".join(_cells(m)) + " |\n")
    return "".join(parts)


def to_rich(label_a: str, label_b: str, results: list[TaskComparison]) -> list[Any]:
    """Tables and lines for a console that parses no markup (labels hold brackets): styles as `Text`."""
    from rich.table import Table
    from rich.text import Text

    out: list[Any] = []
    for t in results:
        if t.skipped:
            out.append(Text(f"{t.task}: not compared: {t.skipped}", style="yellow"))
            continue
        table = Table(title=f"{_heading(t)}: {label_b} (B) vs {label_a} (A)", title_justify="left")
        for h in HEADERS:
            table.add_column(h, justify="left" if h == "metric" else "right")
        for m in t.metrics:
            cells: list[Any] = list(_cells(m))
            if (m.p_adjusted if m.p_adjusted is not None else m.p_value) < 0.05:
                cells[3] = Text(cells[3], style="bold")
            table.add_row(*cells)
        out.append(table)
    return out
