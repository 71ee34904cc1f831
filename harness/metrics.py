"""Retrieval metrics: pure, vectorised functions over a similarity matrix and relevance sets.

Ranks use the *pessimistic* tie rule: an irrelevant item whose score equals the best relevant
item's score is placed before it. A model that scores everything the same therefore gets the worst
rank, never a lucky one from list order. With several relevant items, the rank of a query is the
rank of its best-placed relevant item (R@K is then "a hit within K", and MIR uses that rank), as
the nT2VR paper's code does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch


@dataclass(frozen=True)
class Relevance:
    """Relevant item indices per query, in CSR form: query q's items are indices[indptr[q]:indptr[q+1]]."""

    indptr: np.ndarray
    indices: np.ndarray
    n_items: int

    @classmethod
    def from_lists(cls, lists: Sequence[Sequence[int]], n_items: int) -> "Relevance":
        counts = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
        if (counts == 0).any():
            raise ValueError(f"query {int(np.argmin(counts))} has no relevant item")
        indptr = np.concatenate([[0], np.cumsum(counts)])
        indices = np.fromiter((i for x in lists for i in x), dtype=np.int64, count=int(indptr[-1]))
        if indices.size and (indices.min() < 0 or indices.max() >= n_items):
            raise ValueError("relevant index out of range")
        return cls(indptr, indices, n_items)

    @classmethod
    def from_groups(cls, query_groups: Sequence[str], item_groups: Sequence[str]) -> "Relevance":
        """Every item whose group equals the query's group is relevant (identical scene facts)."""
        by_group: dict[str, list[int]] = {}
        for i, g in enumerate(item_groups):
            by_group.setdefault(g, []).append(i)
        return cls.from_lists([by_group.get(g, []) for g in query_groups], len(item_groups))

    def restrict(self, keep_items: np.ndarray) -> tuple["Relevance", np.ndarray]:
        """Drop items (e.g. unreadable videos): renumber the rest, and drop queries left with no
        relevant item. Returns the new relevance and the boolean mask of kept queries."""
        keep_items = np.asarray(keep_items, dtype=bool)
        new_index = np.cumsum(keep_items) - 1
        lists, kept = [], np.zeros(self.n_queries, dtype=bool)
        for q in range(self.n_queries):
            rel = self.indices[self.indptr[q]:self.indptr[q + 1]]
            rel = new_index[rel[keep_items[rel]]]
            if len(rel):
                lists.append(rel)
                kept[q] = True
        return Relevance.from_lists(lists, int(keep_items.sum())), kept

    @property
    def n_queries(self) -> int:
        return len(self.indptr) - 1

    def counts(self) -> np.ndarray:
        return np.diff(self.indptr)

    def dense(self, start: int, stop: int, device: torch.device | str = "cpu") -> torch.Tensor:
        """Boolean (stop - start, n_items) mask for a block of queries."""
        lo, hi = self.indptr[start], self.indptr[stop]
        rows = np.repeat(np.arange(stop - start), np.diff(self.indptr[start:stop + 1]))
        mask = torch.zeros(stop - start, self.n_items, dtype=torch.bool, device=device)
        mask[torch.from_numpy(rows).to(device), torch.from_numpy(self.indices[lo:hi]).to(device)] = True
        return mask


def _count(mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Row counts of a boolean tensor; summing bytes into int32 is ~3x faster than bool.sum()."""
    return mask.view(torch.uint8).sum(dim, dtype=torch.int32)


def best_relevant_rank(sim: torch.Tensor, relevance: Relevance, chunk: int = 512) -> torch.Tensor:
    """1-based rank of each query's best relevant item (pessimistic ties), int64 (Q,)."""
    if sim.shape != (relevance.n_queries, relevance.n_items):
        raise ValueError(f"similarity {tuple(sim.shape)} does not match relevance "
                         f"({relevance.n_queries}, {relevance.n_items})")
    counts = relevance.counts()
    if (counts == 1).all():  # one relevant item each: no mask needed
        return source_rank(sim, relevance.indices, chunk)
    out = torch.empty(sim.shape[0], dtype=torch.int64)
    for start in range(0, sim.shape[0], chunk):
        stop = min(start + chunk, sim.shape[0])
        block = sim[start:stop]
        rel = relevance.dense(start, stop, block.device)
        best = torch.where(rel, block, torch.full_like(block, -torch.inf)).amax(1, keepdim=True)
        ahead = _count((block >= best) & ~rel, 1)
        out[start:stop] = (ahead + 1).cpu()
    return out


def average_precision(sim: torch.Tensor, relevance: Relevance, max_elems: int = 1 << 21) -> torch.Tensor:
    """Per-query average precision over all relevant items (FIRE, Rodriguez et al.): the mean of
    precision at each relevant item's rank, ranks pessimistic. With one relevant item it is 1/rank.

    Queries are grouped by their number of relevant items k, so each group is one (m, k, N)
    comparison: no per-query loop and no full sort of the rankings."""
    counts = relevance.counts()
    out = torch.empty(sim.shape[0], dtype=torch.float64)
    for k in np.unique(counts):
        rows = np.flatnonzero(counts == k)
        cols = relevance.indices[relevance.indptr[rows][:, None] + np.arange(k)[None, :]]
        step = max(1, max_elems // (int(k) * sim.shape[1]))
        for lo in range(0, len(rows), step):
            r = torch.from_numpy(rows[lo:lo + step])
            block = sim[r]
            rel_scores = block.gather(1, torch.from_numpy(cols[lo:lo + step]).to(block.device))
            rel_scores = rel_scores.sort(1, descending=True).values  # (m, k)
            all_ge = _count(block[:, None, :] >= rel_scores[:, :, None])  # every item scoring >= each
            rel_ge = _count(rel_scores[:, None, :] >= rel_scores[:, :, None])
            j = torch.arange(1, int(k) + 1, device=block.device)
            ranks = (all_ge - rel_ge) + j  # irrelevant ahead (ties count), then the relevant ones in order
            out[r] = (j.double() / ranks.double()).mean(1).cpu()
    return out


def source_rank(sim: torch.Tensor, source: Sequence[int] | np.ndarray, chunk: int = 512) -> torch.Tensor:
    """1-based pessimistic rank of one given item per query (e.g. the source video of a query)."""
    src = torch.as_tensor(np.asarray(source), dtype=torch.int64)
    out = torch.empty(sim.shape[0], dtype=torch.int64)
    for start in range(0, sim.shape[0], chunk):
        stop = min(start + chunk, sim.shape[0])
        block = sim[start:stop]
        s = src[start:stop].to(block.device)
        own = block.gather(1, s[:, None])
        out[start:stop] = _count(block >= own, 1).cpu()  # every item scoring >= it, itself included
    return out


def retrieval_metrics(ranks: torch.Tensor, ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """R@K in percent, MIR (mean of 1/rank) in [0, 1], median and mean rank."""
    r = ranks.double()
    out = {f"R@{k}": float((r <= k).double().mean() * 100.0) for k in ks}
    out["MIR"] = float((1.0 / r).mean())
    out["MedR"] = float(r.median())
    out["MeanR"] = float(r.mean())
    return out


def several_relevant_metrics(sim: torch.Tensor, relevance: Relevance, ranks: torch.Tensor,
                             ks: Sequence[int] = (1, 5, 10), ap: torch.Tensor | None = None) -> dict[str, float]:
    """Correct@K (at least one relevant item in the top K, percent) and mAP, as FIRE recommends for
    queries with several relevant items. Correct@K equals R@K under the hit-at-K definition."""
    r = ranks.double()
    out = {f"C@{k}": float((r <= k).double().mean() * 100.0) for k in ks}
    out["mAP"] = float((average_precision(sim, relevance) if ap is None else ap).mean())
    return out


def negation_deltas(orig_ranks: torch.Tensor, neg_ranks: torch.Tensor, ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """nT2VR's ΔR@K and ΔMIR: each negated query against its own original (``orig_ranks[j]`` is the
    source video's rank under negated query j's original), averaged over negated queries. Positive
    means the negation pushed the source video down. Also the source video's mean rank under both,
    so that a model that merely reverses rankings is visible."""
    o, n = orig_ranks.double(), neg_ranks.double()
    out = {f"ΔR@{k}": float(((o <= k).double() - (n <= k).double()).mean() * 100.0) for k in ks}
    out["ΔMIR"] = float((1.0 / o - 1.0 / n).mean())
    out["SrcMeanR_orig"] = float(o.mean())
    out["SrcMeanR_neg"] = float(n.mean())
    return out


# name -> (higher is better, format) for the metrics above, used by tasks when they declare metrics
RETRIEVAL_METRIC_INFO: dict[str, tuple[bool, str]] = {
    "R@1": (True, ".1f"), "R@5": (True, ".1f"), "R@10": (True, ".1f"), "MIR": (True, ".3f"),
    "MedR": (False, ".1f"), "MeanR": (False, ".1f"),
    "C@1": (True, ".1f"), "C@5": (True, ".1f"), "C@10": (True, ".1f"), "mAP": (True, ".3f"),
    "ΔR@1": (True, ".1f"), "ΔR@5": (True, ".1f"), "ΔR@10": (True, ".1f"), "ΔMIR": (True, ".3f"),
    "SrcMeanR_orig": (False, ".1f"), "SrcMeanR_neg": (True, ".1f"),  # context, not a target: see negation_deltas
}


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
