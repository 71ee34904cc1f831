"""The bootstrap's vectorised steps give the numbers of the plain row-by-row one, bit for bit (issue 51,
item 3): records store intervals to 12 digits and the check recomputes them, so a faster bootstrap
must not move a single one. The reference below is the bootstrap as it was written before: one
metric at a time, `np.unique` for every cluster id, `np.nanquantile` per column."""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np
import pytest

from negharness.scoring import bootstrap
from negharness.scoring.bootstrap import bootstrap_estimates, cluster_totals, resampled_means


def _reference_totals(values: np.ndarray, clusters: Sequence[str] | None) -> tuple[np.ndarray, np.ndarray]:
    covered = ~np.isnan(values)
    filled = np.where(covered, values, 0.0)
    if clusters is None:
        return filled, covered.astype(np.float64)
    _, inverse = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    c = int(inverse.max()) + 1
    sums = np.empty((values.shape[0], c))
    for r in range(values.shape[0]):
        order = np.lexsort((filled[r], inverse))
        sums[r] = np.bincount(inverse[order], weights=filled[r][order], minlength=c)
    counts = np.stack([np.bincount(inverse, weights=row, minlength=c) for row in covered.astype(np.float64)])
    return sums, counts


def _reference_means(values: np.ndarray, n: int, seed: int, chunk_elems: int,
                     clusters: Sequence[str] | None) -> np.ndarray:
    sums, counts = _reference_totals(values, clusters)
    units = sums.shape[1]
    partial = ~(counts == 1.0).all(1)
    rng = np.random.default_rng(seed)
    step = max(1, chunk_elems // units)
    out = np.empty((n, sums.shape[0]), dtype=np.float64)
    for lo in range(0, n, step):
        c = min(step, n - lo)
        idx = rng.integers(0, units, size=(c, units), dtype=np.int32)
        for r in range(sums.shape[0]):
            total = sums[r][idx].sum(1)
            count = counts[r][idx].sum(1) if partial[r] else units
            with np.errstate(invalid="ignore", divide="ignore"):
                out[lo:lo + c, r] = total / count
    return out


def _reference_estimates(values: dict[str, list[Any]], n: int, seed: int,
                         clusters: Sequence[str] | None) -> dict[str, tuple[float, float, float]]:
    names = list(values)
    matrix = np.array([[np.nan if v is None else v for v in values[k]] for k in names], dtype=np.float64)
    means = _reference_means(matrix, n, seed, 1 << 22, clusters)
    out = {}
    for i, k in enumerate(names):
        with _quiet():
            lo, hi = np.nanquantile(means[:, i], [(1 - 0.95) / 2, 1 - (1 - 0.95) / 2])
        kept = means[:, i][~np.isnan(means[:, i])]
        out[k] = (float(lo), float(hi), float(kept.std(ddof=1)) if kept.size > 1 else 0.0)
    return out


class _quiet:
    """All-NaN columns warn in both implementations alike; the numbers are what is compared."""

    def __enter__(self) -> None:
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc: object) -> None:
        self._w.__exit__(*exc)


def _bits(x: float) -> bytes:
    return np.float64(x).tobytes()  # -0.0 and 0.0 differ, every NaN alike


def _case(seed: int) -> tuple[dict[str, list[Any]], list[str] | None, int]:
    rng = np.random.default_rng(seed)
    q, m = int(rng.integers(1, 300)), int(rng.integers(1, 6))
    values = {}
    for k in range(m):
        v = (rng.choice([0.0, 100.0, -0.0], size=q) if k % 2 else rng.normal(size=q) * 10).astype(object)
        if rng.random() < 0.4:  # a metric that covers some queries only (None), a few times none at all
            v[rng.random(q) < rng.uniform(0.0, 0.97)] = None
        values[f"m{k}"] = list(v)
    kind = seed % 3
    clusters = None if kind == 0 else (list(rng.permutation([f"q{i}" for i in range(q)])) if kind == 1
                                       else [f"img{int(c)}" for c in rng.integers(0, max(1, q // 3), q)])
    return values, clusters, int(rng.choice([1, 2, 7, 50, 400]))


@pytest.mark.parametrize("seed", range(60))
def test_intervals_are_the_row_by_row_bootstraps_bit_for_bit(seed):
    values, clusters, n = _case(seed)
    with _quiet():
        found = bootstrap_estimates(values, n, seed, 0.95, clusters)
    want = _reference_estimates(values, n, seed, clusters)
    assert {k: tuple(map(_bits, (iv.lo, iv.hi, iv.se))) for k, iv in found.items()} == \
        {k: tuple(map(_bits, iv)) for k, iv in want.items()}


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("chunk", [700, 1 << 22])
def test_resampled_means_are_the_row_by_row_ones_bit_for_bit(seed, chunk):
    values, clusters, n = _case(seed)
    matrix = np.array([[np.nan if v is None else v for v in values[k]] for k in values], dtype=np.float64)
    found = resampled_means(matrix, n, seed, chunk, clusters)
    assert found.tobytes() == _reference_means(matrix, n, seed, chunk, clusters).tobytes()


def test_a_full_sized_run_is_the_row_by_row_one():
    """10,000 resamples of 1,000 queries (what `negharness run` writes): several draws per chunk, all rows at once."""
    rng = np.random.default_rng(3)
    values = {"R@1": list((rng.random(1000) < 0.4) * 100.0), "MIR": list(1 / rng.integers(1, 50, 1000)),
              "acc": [None if i % 3 else float(i % 2) for i in range(1000)]}
    for clusters in (None, [f"q{i}" for i in range(1000)], [f"v{i // 5}" for i in range(1000)]):
        found = bootstrap_estimates(values, 10_000, 0, 0.95, clusters)
        want = _reference_estimates(values, 10_000, 0, clusters)
        assert {k: (iv.lo, iv.hi, iv.se) for k, iv in found.items()} == want


def test_each_query_its_own_cluster_takes_the_sorted_ids_as_np_unique_does():
    values = np.array([[1.0, -0.0, np.nan, 2.5], [0.0, 1.0, 1.0, np.nan]])
    ids = ["q10", "q2", "q1", "b"]
    found, want = cluster_totals(values, ids), _reference_totals(values, ids)
    assert [a.tobytes() for a in found] == [a.tobytes() for a in want]
    assert _bits(found[0][0, 3]) == _bits(0.0)  # q2's -0.0 (sorted last) summed from zero, as bincount gives it
    with_nul = ["a", "a\0", "b", "c"]  # numpy reads "a\0" as "a": one cluster, as before
    assert [a.tobytes() for a in cluster_totals(values, with_nul)] == \
        [a.tobytes() for a in _reference_totals(values, with_nul)]


def test_rows_are_gathered_within_the_memory_bound(monkeypatch):
    """All metrics at once only while their gathered draws fit in one chunk's elements."""
    seen = []
    real = bootstrap._drawn_means

    def spy(sums: np.ndarray, *rest: Any) -> np.ndarray:
        seen.append(sums.shape[0])
        return real(sums, *rest)
    monkeypatch.setattr(bootstrap, "_drawn_means", spy)
    matrix = np.random.default_rng(0).random((5, 100))
    resampled_means(matrix, 40, 0, chunk_elems=2000)  # 20 draws a chunk: 2,000 indices, one row at a time
    assert set(seen) == {1}
    seen.clear()
    resampled_means(matrix, 10, 0, chunk_elems=1 << 22)
    assert seen == [5]
