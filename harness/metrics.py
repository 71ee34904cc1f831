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


def best_relevant_rank(sim: torch.Tensor, relevance: Relevance, chunk: int = 4096) -> torch.Tensor:
    """1-based rank of each query's best relevant item (pessimistic ties), int64 (Q,)."""
    if sim.shape != (relevance.n_queries, relevance.n_items):
        raise ValueError(f"similarity {tuple(sim.shape)} does not match relevance "
                         f"({relevance.n_queries}, {relevance.n_items})")
    out = torch.empty(sim.shape[0], dtype=torch.int64)
    for start in range(0, sim.shape[0], chunk):
        stop = min(start + chunk, sim.shape[0])
        block = sim[start:stop]
        rel = relevance.dense(start, stop, block.device)
        best = torch.where(rel, block, torch.full_like(block, -torch.inf)).amax(1, keepdim=True)
        ahead = ((block >= best) & ~rel).sum(1)
        out[start:stop] = (ahead + 1).cpu()
    return out


def source_rank(sim: torch.Tensor, source: Sequence[int] | np.ndarray, chunk: int = 4096) -> torch.Tensor:
    """1-based pessimistic rank of one given item per query (e.g. the source video of a query)."""
    src = torch.as_tensor(np.asarray(source), dtype=torch.int64)
    out = torch.empty(sim.shape[0], dtype=torch.int64)
    for start in range(0, sim.shape[0], chunk):
        stop = min(start + chunk, sim.shape[0])
        block = sim[start:stop]
        s = src[start:stop].to(block.device)
        own = block.gather(1, s[:, None])
        ahead = (block >= own).sum(1) - 1  # every item scoring >= it, except itself
        out[start:stop] = (ahead + 1).cpu()
    return out


def retrieval_metrics(ranks: torch.Tensor, ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """R@K in percent, MIR (mean of 1/rank) in [0, 1], median and mean rank."""
    r = ranks.double()
    out = {f"R@{k}": float((r <= k).double().mean() * 100.0) for k in ks}
    out["MIR"] = float((1.0 / r).mean())
    out["MedR"] = float(r.median())
    out["MeanR"] = float(r.mean())
    return out


# name -> (higher is better, format) for the metrics above, used by tasks when they declare metrics
RETRIEVAL_METRIC_INFO: dict[str, tuple[bool, str]] = {
    "R@1": (True, ".1f"), "R@5": (True, ".1f"), "R@10": (True, ".1f"), "MIR": (True, ".3f"),
    "MedR": (False, ".1f"), "MeanR": (False, ".1f"),
}
