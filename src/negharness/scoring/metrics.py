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
    def from_lists(cls, lists: Sequence[Sequence[int] | np.ndarray], n_items: int) -> "Relevance":
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

    def select(self, rows: np.ndarray) -> "Relevance":
        """The queries a boolean mask keeps, in order (items unchanged)."""
        return Relevance.from_lists([self.indices[self.indptr[q]:self.indptr[q + 1]]
                                     for q in np.flatnonzero(rows)], self.n_items)

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


@dataclass(frozen=True)
class Within:
    """Each query ranked within its own candidate items (MRMR's split_corpus, mteb's top_ranked): the
    candidates are the columns of a small (queries, largest set) matrix, ``cols[q, j]`` the item in
    column j (-1: padding, scored -inf so it ranks behind every candidate even under pessimistic ties),
    and ``relevance`` names columns. Only candidate pairs are ever scored."""

    cols: np.ndarray
    relevance: Relevance

    @classmethod
    def of(cls, candidates: Relevance, relevance: Relevance) -> "Within":
        counts = candidates.counts()
        cols = np.full((candidates.n_queries, int(counts.max(initial=0))), -1, dtype=np.int64)
        lists = []
        for q in range(candidates.n_queries):
            own = candidates.indices[candidates.indptr[q]:candidates.indptr[q + 1]]
            cols[q, :len(own)] = own
            where = {int(item): j for j, item in enumerate(own)}
            rel = relevance.indices[relevance.indptr[q]:relevance.indptr[q + 1]]
            missing = [int(i) for i in rel if int(i) not in where]
            if missing:
                raise ValueError(f"query {q}: relevant item {missing[0]} is not among its candidates")
            lists.append([where[int(i)] for i in rel])
        return cls(cols, Relevance.from_lists(lists, cols.shape[1]))

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(query, item) of every candidate pair, row by row: the pairs to score."""
        q, j = np.nonzero(self.cols >= 0)
        return q, self.cols[q, j]

    def scatter(self, scores: torch.Tensor) -> torch.Tensor:
        """The pairs' scores (in `pairs` order) as the (queries, columns) matrix, -inf in the padding."""
        out = torch.full(self.cols.shape, -torch.inf, dtype=scores.dtype)
        q, j = np.nonzero(self.cols >= 0)
        out[torch.from_numpy(q), torch.from_numpy(j)] = scores.cpu()
        return out


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

