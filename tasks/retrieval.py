"""Text-to-media retrieval, shared by every retrieval task: embed, score, rank, and log samples."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from negharness.media import MediaSet
from negharness.metrics import RETRIEVAL_METRIC_INFO, Relevance, best_relevant_rank, retrieval_metrics
from negharness.runner import EvalContext
from negharness.task import MetricInfo, TaskResult

RETRIEVAL_METRICS = {k: MetricInfo(*v) for k, v in RETRIEVAL_METRIC_INFO.items()}


def relevance_notes(relevance: Relevance) -> dict[str, float]:
    """How much several-relevant-items evaluation matters: with only the source item counted,
    a perfect model could reach R@1 = mean(1/|relevant|) at best."""
    counts = relevance.counts()
    return {
        "queries_with_several_relevant": int((counts > 1).sum()),
        "mean_relevant_per_query": float(counts.mean()),
        "source_only_R@1_ceiling": float((1.0 / counts).mean() * 100.0),
    }


def evaluate_text_to_media(ctx: EvalContext, query_ids: Sequence[str], queries: Sequence[str],
                           relevance: Relevance, media: MediaSet, top_k: int = 10) -> TaskResult:
    media_emb = ctx.embed_media(media)
    notes: dict = {}
    broken = torch.isnan(media_emb).any(1).numpy()
    if broken.any():  # --skip-broken-media: score the rest, say what was left out
        relevance, kept = relevance.restrict(~broken)
        media_emb = media_emb[torch.from_numpy(~broken)]
        media = MediaSet(media.key, media.kind, [i for i, b in zip(media.ids, broken) if not b], media.load)
        query_ids = [q for q, k in zip(query_ids, kept) if k]
        queries = [q for q, k in zip(queries, kept) if k]
        notes = {"media_skipped": int(broken.sum()), "queries_dropped": int((~kept).sum())}
    text_emb = ctx.embed_texts(queries)
    sim = text_emb @ media_emb.t()
    ranks = best_relevant_rank(sim, relevance)
    samples = None
    if ctx.log_samples:
        top = torch.topk(sim, min(top_k, sim.shape[1]), dim=1).indices.numpy()
        samples = []
        for q in range(len(queries)):
            rel = relevance.indices[relevance.indptr[q]:relevance.indptr[q + 1]]
            samples.append({"id": query_ids[q], "query": queries[q], "rank": int(ranks[q]),
                            "relevant": [media.ids[i] for i in np.asarray(rel)],
                            "top": [media.ids[i] for i in top[q]]})
    return TaskResult(
        metrics=retrieval_metrics(ranks),
        n_items={"queries": len(queries), f"{media.kind}s": len(media)},
        samples=samples,
        notes={**relevance_notes(relevance), **notes},
    )
