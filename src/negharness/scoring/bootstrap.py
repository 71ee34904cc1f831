"""Bootstrap statistics over per-query values: intervals, paired tests, McNemar's exact test.

Numpy only (no torch), so the leaderboard, `compare` and `--check` import them without loading a
deep-learning stack; `negharness.scoring.metrics` re-exports them for the tasks and scripts that use them.
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
    return np.mean(arrays, axis=0)


BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
_CHUNK_ELEMS = 1 << 22  # resampled indices drawn at once: 4M (16 MiB as int32), whatever the run size


def resampled_means(values: np.ndarray, n: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                    chunk_elems: int = _CHUNK_ELEMS) -> np.ndarray:
    """(n, m) means of each of the m rows of ``values`` (m, Q) over n resamples of the Q queries, the
    same resampled queries for every row (so rows can be paired). NaN marks a query a row does not
    cover (e.g. acc_positive on a negative-template question): each resample averages what it covers.

    Resamples are drawn ``chunk_elems`` indices at a time (int32), so memory stays bounded (about
    16 MiB of indices) whatever n and Q are; the draws are one stream, so the chunk size never
    changes the numbers."""
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    q = values.shape[1]
    if q == 0:
        raise ValueError("bootstrap needs at least one query")
    covered = ~np.isnan(values)
    partial = ~covered.all(1)  # rows with uncovered queries also need their per-resample counts
    filled = np.where(covered, values, 0.0)
    rng = np.random.default_rng(seed)
    step = max(1, chunk_elems // q)
    out = np.empty((n, values.shape[0]), dtype=np.float64)
    for lo in range(0, n, step):
        c = min(step, n - lo)
        idx = rng.integers(0, q, size=(c, q), dtype=np.int32)
        for r in range(values.shape[0]):
            sums = filled[r][idx].sum(1)
            counts = covered[r][idx].sum(1) if partial[r] else q
            with np.errstate(invalid="ignore", divide="ignore"):
                out[lo:lo + c, r] = sums / counts
    return out


def _interval(means: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.nanquantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def bootstrap_ci(values: np.ndarray, n: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of per-query values (FIRE, Rodriguez et al.);
    NaN values are queries the metric does not cover."""
    return _interval(resampled_means(values, n, seed)[:, 0], level)


def bootstrap_intervals(values: dict[str, Sequence[float | None]], n: int = BOOTSTRAP_RESAMPLES,
                        seed: int = BOOTSTRAP_SEED, level: float = 0.95) -> dict[str, tuple[float, float]]:
    """One interval per metric, every metric over the same resampled queries (None = not covered)."""
    names = list(values)
    if not names:
        return {}
    matrix = np.array([[np.nan if v is None else v for v in values[k]] for k in names], dtype=np.float64)
    means = resampled_means(matrix, n, seed)
    return {k: _interval(means[:, i], level) for i, k in enumerate(names)}


@dataclass(frozen=True)
class PairedResult:
    """b - a over the same queries: the observed difference, its percentile interval, and a
    two-sided p-value for "no difference"."""

    diff: float
    lo: float
    hi: float
    p_value: float
    n_queries: int


def paired_test(a: np.ndarray, b: np.ndarray, n: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                level: float = 0.95) -> PairedResult:
    """Paired bootstrap: resample queries jointly, difference of the two means per resample.

    The p-value centres the bootstrap distribution on zero (the null) and counts resampled
    differences at least as far from the observed one as the observed is from zero:
    p = (1 + #{c |d* - d| >= |d|}) / (n + 1), c = sqrt(Q / (Q - 1)) undoing the plug-in variance's
    shrinkage; p is never 0 and is 1 for identical runs. Its calibration under the null is tested
    by simulation (tests/test_intervals_compare.py)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError("paired bootstrap needs the same queries for both models")
    both = ~(np.isnan(a) | np.isnan(b))
    a, b = a[both], b[both]
    observed = float(b.mean() - a.mean())
    means = resampled_means(np.vstack([a, b]), n, seed)
    diffs = means[:, 1] - means[:, 0]
    lo, hi = _interval(diffs, level)
    # the resampled spread is the plug-in one, (Q - 1) / Q of the unbiased variance: widen it back
    spread = np.abs(diffs - observed) * np.sqrt(len(a) / max(len(a) - 1, 1))
    extreme = int((spread >= abs(observed) - 1e-12).sum())
    return PairedResult(observed, lo, hi, (1 + extreme) / (n + 1), int(both.sum()))


def paired_bootstrap(a: np.ndarray, b: np.ndarray, n: int = 1000, seed: int = 0,
                     level: float = 0.95) -> tuple[float, float, float]:
    """Mean difference b - a over the same queries, its interval, resampling queries jointly; and
    the share of resamples where the difference is <= 0 (a one-sided p-value for "b beats a")."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError("paired bootstrap needs the same queries for both models")
    means = resampled_means(np.vstack([a, b]), n, seed)
    diffs = means[:, 1] - means[:, 0]
    lo, hi = _interval(diffs, level)
    return lo, hi, float((diffs <= 0).mean())


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
