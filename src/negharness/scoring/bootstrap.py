"""Bootstrap statistics over per-query values: intervals, paired tests, McNemar's exact test, and
the Benjamini-Hochberg adjustment for many tests at once.

Queries that share an image, a video or a source item are not independent (NegBench COCO MCQ asks
5,914 questions about 3,926 images), so the bootstraps resample clusters: given each query's
cluster id, every resample draws whole clusters with replacement and averages the queries they
hold (a ratio of sums, so clusters of unequal size weigh by their queries). Cluster ids are sorted
before resampling, so the same rows in another order give the same intervals. Without cluster ids
each query is its own cluster.

One routine per question: `bootstrap_estimates` for a run's intervals and `paired_test` for
the difference between two runs; their NaN rules are stated where they live (`pairs` for the paired
one). Numpy only (no torch), so the leaderboard, `compare` and `--check` import them without loading a
deep-learning stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


def seed_means(per_seed: Sequence[np.ndarray]) -> np.ndarray:
    """Each query's value averaged over training seeds, for the bootstraps below: the query is the
    unit they resample. Pooling seeds as if they were more queries treats a query's three seeds as
    independent and narrows intervals by about 1/sqrt(seeds)."""
    arrays = [np.asarray(a, dtype=np.float64) for a in per_seed]
    if not arrays or any(a.shape != arrays[0].shape for a in arrays):
        raise ValueError("seed_means needs one value per query for every seed, the same queries in each")
    means: np.ndarray = np.mean(arrays, axis=0)
    return means


BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
_CHUNK_ELEMS = 1 << 22  # resampled indices drawn at once: 4M (16 MiB as int32), whatever the run size


def resampled_means(values: np.ndarray, n: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                    chunk_elems: int = _CHUNK_ELEMS, clusters: Sequence[str] | None = None) -> np.ndarray:
    """(n, m) means of each of the m rows of ``values`` (m, Q) over n resamples, the same resampled
    units for every row (so rows can be paired). NaN marks a query a row does not cover (e.g.
    acc_positive on a negative-template question): each resample averages what it covers.

    The units are the Q queries in their order, or with ``clusters`` (one id per query) the distinct
    cluster ids in sorted order, each resample drawing whole clusters (`cluster_totals`).
    Resamples are drawn ``chunk_elems`` indices at a time (int32), so memory stays bounded (about
    16 MiB of indices) whatever n and Q are; the draws are one stream, so the chunk size never
    changes the numbers."""
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    if values.shape[1] == 0:
        raise ValueError("bootstrap needs at least one query")
    sums, counts = cluster_totals(values, clusters)
    return _resample_totals(sums, counts, n, seed, chunk_elems)


def cluster_totals(values: np.ndarray, clusters: Sequence[str] | None) -> tuple[np.ndarray, np.ndarray]:
    """(sums, counts), each (m, C): per row and cluster, the sum of its covered values and how many
    there are; C = Q (queries in order) without ``clusters``, else the distinct ids, sorted. Within
    a cluster values are added in sorted order, so the totals do not depend on the rows' order."""
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    covered = ~np.isnan(values)
    filled = np.where(covered, values, 0.0)
    if clusters is None:
        return filled, covered.astype(np.float64)
    if len(clusters) != values.shape[1]:
        raise ValueError(f"{len(clusters)} cluster ids for {values.shape[1]} queries")
    ids = np.asarray([str(c) for c in clusters])
    order = np.argsort(ids, kind="stable")
    if ids.size < 2 or bool((ids[order][1:] != ids[order][:-1]).all()):
        # each query its own cluster (the intervals over rows, keyed by query id): the units are the
        # queries in sorted-id order, as below; + 0.0 as bincount's sum from zero turns -0.0 into 0.0
        return filled[:, order] + 0.0, covered[:, order].astype(np.float64)
    _, inverse = np.unique(ids, return_inverse=True)
    c = int(inverse.max()) + 1
    sums = np.empty((values.shape[0], c))
    for r in range(values.shape[0]):
        order = np.lexsort((filled[r], inverse))
        sums[r] = np.bincount(inverse[order], weights=filled[r][order], minlength=c)
    counts = np.stack([np.bincount(inverse, weights=row, minlength=c) for row in covered.astype(np.float64)])
    return sums, counts


def _resample_totals(sums: np.ndarray, counts: np.ndarray, n: int, seed: int, chunk_elems: int) -> np.ndarray:
    """(n, m) ratio means sum(sums[drawn]) / sum(counts[drawn]) over n draws of the C units."""
    units = sums.shape[1]
    partial = ~(counts == 1.0).all(1)  # rows whose units are not all one covered query
    rng = np.random.default_rng(seed)
    step = max(1, chunk_elems // units)
    out = np.empty((n, sums.shape[0]), dtype=np.float64)
    for lo in range(0, n, step):
        c = min(step, n - lo)
        idx = rng.integers(0, units, size=(c, units), dtype=np.int32)
        group = max(1, chunk_elems // idx.size)  # rows gathered at once, within the same memory bound
        for r in range(0, sums.shape[0], group):
            out[lo:lo + c, r:r + group] = _drawn_means(sums[r:r + group], counts[r:r + group], partial[r:r + group],
                                                       idx).T
    return out


def _drawn_means(sums: np.ndarray, counts: np.ndarray, partial: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """(rows, draws) means of the units each row of ``idx`` draws. `np.take` along the units gives a
    C-ordered gather, so each draw's sum runs over contiguous memory exactly as one row's ``sums[r][idx]``
    did: the same numbers, bit for bit, for all rows in one call (tested against the row-by-row loop)."""
    total = np.take(sums, idx, axis=1).sum(-1)
    count = np.full(total.shape, float(idx.shape[1]))
    some = np.flatnonzero(partial)
    if some.size:
        count[some] = np.take(counts[some], idx, axis=1).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        means: np.ndarray = total / count
    return means


def n_clusters(clusters: Sequence[str] | None, queries: int) -> int:
    """How many units a bootstrap resamples: the distinct cluster ids, else the queries."""
    return queries if clusters is None else len({str(c) for c in clusters})


def _interval(means: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.nanquantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Interval:
    """A percentile interval and the bootstrap standard error (the resampled means' spread)."""

    lo: float
    hi: float
    se: float


def bootstrap_estimates(values: dict[str, Sequence[float | None]], n: int = BOOTSTRAP_RESAMPLES,
                        seed: int = BOOTSTRAP_SEED, level: float = 0.95,
                        clusters: Sequence[str] | None = None) -> dict[str, Interval]:
    """The one interval routine (the records' intervals, so the board's; the negation-training
    table): interval and standard error per metric, every metric over the same resampled clusters.
    A NaN (or None) value is a query the metric does not cover: each resample averages the queries
    it covers (one run's mean, nothing paired; a paired difference goes through `paired_test`)."""
    names = list(values)
    if not names:
        return {}
    matrix = np.array([list(values[k]) for k in names], dtype=np.float64)  # None -> NaN
    means = resampled_means(matrix, n, seed, clusters=clusters)
    return dict(zip(names, _intervals(means, level)))


def _intervals(means: np.ndarray, level: float) -> list[Interval]:
    """Each column's percentile interval and standard error over the resamples it covers. The columns
    without NaN (nearly all) at once: as contiguous rows, `np.quantile` and ``std`` along them give
    what `np.nanquantile` and ``std`` of each column alone give, bit for bit (tested); a column with a
    NaN (a resample that covered none of its queries) alone, as before."""
    rows = np.ascontiguousarray(means.T)
    clean = np.flatnonzero(~np.isnan(rows).any(1))
    qs = [(1 - level) / 2, 1 - (1 - level) / 2]
    found: dict[int, Interval] = {}
    if clean.size and rows.shape[1]:
        bounds = np.quantile(rows[clean], qs, axis=1)
        spread = rows[clean].std(axis=1, ddof=1) if rows.shape[1] > 1 else np.zeros(clean.size)
        found = {int(i): Interval(float(bounds[0, j]), float(bounds[1, j]), float(spread[j]))
                 for j, i in enumerate(clean)}
    out = []
    for i in range(rows.shape[0]):
        if i not in found:
            lo, hi = _interval(rows[i], level)
            kept = rows[i][~np.isnan(rows[i])]
            found[i] = Interval(lo, hi, float(kept.std(ddof=1)) if kept.size > 1 else 0.0)
        out.append(found[i])
    return out


@dataclass(frozen=True)
class Pairs:
    """The queries two runs both cover, by the one NaN rule of every paired routine (`pairs`)."""

    a: np.ndarray
    b: np.ndarray
    clusters: list[str] | None
    dropped: int  # queries NaN (not covered) in either run, left out of the pair


def pairs(a: np.ndarray, b: np.ndarray, clusters: Sequence[str] | None = None) -> Pairs:
    """The NaN rule, stated once: a query whose value is NaN (not covered) in either run leaves the
    pair, and how many left is kept (`Pairs.dropped`) for the report. Averaging each run over what it
    covers instead would compare different queries: on a = [100, NaN, 0, 100], b = [100, 100, 0, 100]
    it reports a difference of 8.3 where the queries both answered agree exactly. Different lengths,
    or no query both cover, are errors."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"a paired test needs one value per query, the same queries for both runs "
                         f"(got {a.shape} and {b.shape})")
    if clusters is not None and len(clusters) != len(a):
        raise ValueError(f"{len(clusters)} cluster ids for {len(a)} queries")
    both = ~(np.isnan(a) | np.isnan(b))
    if not both.any():
        raise ValueError(f"no query is covered by both runs ({len(a)} queries, each NaN in one of them)")
    kept = None if clusters is None else [str(c) for c, k in zip(clusters, both) if k]
    return Pairs(a[both], b[both], kept, int((~both).sum()))


@dataclass(frozen=True)
class PairedResult:
    """b - a over the queries both runs cover (`pairs`): the observed difference, its percentile
    interval, and a two-sided p-value for "no difference"."""

    diff: float
    lo: float
    hi: float
    p_value: float
    n_queries: int  # the queries paired
    n_clusters: int = 0  # the units resampled (= n_queries when each query is its own cluster)
    dropped: int = 0  # queries NaN in either run, left out (`pairs`)


def paired_test(a: np.ndarray, b: np.ndarray, n: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                level: float = 0.95, clusters: Sequence[str] | None = None) -> PairedResult:
    """The one paired test (`compare`, the negation-training table): resample queries (or with
    ``clusters``, whole clusters) jointly, difference of the two means per resample, over the
    queries both runs cover (`pairs`: the NaN rule).

    The p-value centres the bootstrap distribution on zero (the null) and counts resampled
    differences at least as far from the observed one as the observed is from zero:
    p = (1 + #{c |d* - d| >= |d|}) / (n + 1), c = sqrt(G / (G - 1)) undoing the plug-in variance's
    shrinkage over the G resampled units; p is never 0 and is 1 for identical runs. Its calibration
    under the null is tested by simulation (tests/test_intervals_compare.py)."""
    pair = pairs(a, b, clusters)
    observed = float(pair.b.mean() - pair.a.mean())
    means = resampled_means(np.vstack([pair.a, pair.b]), n, seed, clusters=pair.clusters)
    diffs = means[:, 1] - means[:, 0]
    lo, hi = _interval(diffs, level)
    # the resampled spread is the plug-in one, (G - 1) / G of the unbiased variance: widen it back
    units = n_clusters(pair.clusters, len(pair.a))
    spread = np.abs(diffs - observed) * np.sqrt(units / max(units - 1, 1))
    extreme = int((spread >= abs(observed) - 1e-12).sum())
    return PairedResult(observed, lo, hi, (1 + extreme) / (n + 1), len(pair.a), units, pair.dropped)


def mcnemar_exact(a_right: np.ndarray, b_right: np.ndarray) -> tuple[int, int, float]:
    """McNemar's exact test on paired right/wrong outcomes: (A right & B wrong, A wrong & B right,
    two-sided p). Under the null each discordant pair goes either way with probability 1/2, so
    p = min(1, 2 * P[Binomial(b + c, 1/2) <= min(b, c)])."""
    a_right, b_right = np.asarray(a_right, dtype=bool), np.asarray(b_right, dtype=bool)
    only_a, only_b = int((a_right & ~b_right).sum()), int((~a_right & b_right).sum())
    return only_a, only_b, binomial_two_sided(min(only_a, only_b), only_a + only_b)


def binomial_two_sided(k: int, n: int) -> float:
    """2 * P[Binomial(n, 1/2) <= k], capped at 1, in log space (n may be tens of thousands)."""
    if n == 0:
        return 1.0
    from math import lgamma, log

    j = np.arange(0, k + 1, dtype=np.float64)
    logs = lgamma(n + 1) - np.array([lgamma(x + 1) + lgamma(n - x + 1) for x in j]) - n * log(2.0)
    top = logs.max()
    return float(min(1.0, 2.0 * np.exp(top) * np.exp(logs - top).sum()))


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (false discovery rate), in the input's order: the i-th
    smallest of m becomes min over j >= i of p_(j) * m / j, capped at 1. `compare` tests every
    metric of every task at once; an adjusted p < 0.05 keeps the expected share of false
    discoveries among them under 5%."""
    m = len(p_values)
    if m == 0:
        return []
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return [float(x) for x in out]
