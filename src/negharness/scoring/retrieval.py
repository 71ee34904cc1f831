"""Text-to-media retrieval shared by every retrieval task: original, negated and composed query sets.

The media are embedded once per (model, collection) through the context's cache, so the three
query sets of a collection share one pass over its videos. Scores come from the model's own
`similarity` (cosine for embedding models; the boolean baseline overrides it), so every task scores
every model the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, TypeVar

import numpy as np
import torch

from negharness.contracts.context import EvalContext
from negharness.contracts.errors import UserError
from negharness.contracts.model import as_encoder
from negharness.contracts.task import TaskResult
from negharness.io.media import MediaSet
from negharness.scoring import perquery
# what a text-to-media task may return and its -T qrels option: defined where no torch is imported
from negharness.scoring.catalog import (  # noqa: F401
    NEGATED_METRICS,
    QRELS_OPTION,
    RETRIEVAL_NEG_METRICS,
    TEXT_TO_MEDIA_METRICS,
)
from negharness.scoring.fire import Qrels, augment, read_qrels
from negharness.scoring.metrics import (
    Relevance,
    average_precision,
    best_relevant_rank,
    negation_deltas,
    Within,
    retrieval_metrics,
    several_relevant_metrics,
    source_rank,
)
from negharness.scoring.unreadable import (
    kept_media,
    nothing_left,
    restrict_relevance,
    skip_notes,
    unreadable_items,
)
from negharness.scoring.views import pair_scores, query_scores

T = TypeVar("T")



def task_qrels(opts: dict[str, Any]) -> Qrels | None:
    """The ``-T qrels=FILE`` judgements of a retrieval task, read once; None without the option."""
    return read_qrels(opts["qrels"]) if opts.get("qrels") else None


@dataclass
class QuerySet:
    ids: list[str]
    texts: list[str]
    relevance: Relevance
    # per query (positive part, negative part) where the data gives them (composed files, the
    # authors' neginfo); None for the whole set or for one query: the model splits it itself
    parts: Sequence[tuple[str, str] | None] | None = None
    # the item each query was written for (its caption's video), where that differs from "all relevant"
    source: list[int] | None = None

    def sources(self) -> np.ndarray:
        if self.source is not None:
            return np.asarray(self.source)
        if (self.relevance.counts() != 1).any():
            raise ValueError("queries with several relevant items need an explicit source item")
        return self.relevance.indices

def relevance_notes(relevance: Relevance) -> dict[str, float]:
    """How much several-relevant-items evaluation matters: with only the source item counted,
    a perfect model could reach R@1 = mean(1/|relevant|) at best."""
    counts = relevance.counts()
    return {
        "queries_with_several_relevant": int((counts > 1).sum()),
        "mean_relevant_per_query": float(counts.mean()),
        "source_only_R@1_ceiling": float((1.0 / counts).mean() * 100.0),
    }


def drop_unreadable(ctx: EvalContext, media: MediaSet, media_emb: torch.Tensor, queries: QuerySet,
                    candidates: Relevance | None = None
                    ) -> tuple[MediaSet, torch.Tensor, QuerySet, dict[str, Any], Relevance | None]:
    """`negharness.scoring.unreadable`'s rule for retrieval: unreadable items leave the candidates, and a
    query left with no relevant item leaves the scoring. Returns (media, media_emb, queries, notes,
    candidates) (candidates: each query's own set, restricted the same way; None stays None)."""
    bad = unreadable_items(ctx, media, media_emb)
    if not bad.any():
        return media, media_emb, queries, {}, candidates
    relevance, kept = restrict_relevance(queries.relevance, bad)
    if not kept.any():
        raise nothing_left(media, "query")
    media, media_emb = kept_media(media, media_emb, bad)
    parts = None if queries.parts is None else _kept(queries.parts, kept)
    queries = QuerySet(_kept(queries.ids, kept), _kept(queries.texts, kept), relevance, parts)
    if candidates is not None:  # a kept query keeps a readable relevant item, so a candidate
        candidates = candidates.select(kept).restrict(~bad)[0]
    return media, media_emb, queries, skip_notes(bad, int((~kept).sum())), candidates


def _kept(xs: Sequence[T], kept: np.ndarray) -> list[T]:
    """The entries a boolean mask keeps, in order."""
    return [x for x, k in zip(xs, kept) if k]


def similarities(ctx: EvalContext, queries: QuerySet, media_emb: torch.Tensor) -> torch.Tensor:
    """(Q, N) scores by the model under test (its `text_views` and `combine`), texts through the cache."""
    return query_scores(ctx, queries.texts, media_emb, queries.parts)


def _samples(queries: QuerySet, media: MediaSet, sim: torch.Tensor, ranks: torch.Tensor, top_k: int = 10,
             cols: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Each query's rank, relevant and top items by id; ``cols``: the item of each column when every
    query ranks its own candidates (`Within`), padding left out."""
    top = torch.topk(sim, min(top_k, sim.shape[1]), dim=1).indices.numpy()
    rel = queries.relevance
    def item(q: int, i: int) -> int:
        return int(cols[q, i]) if cols is not None else int(i)

    return [{"id": queries.ids[q], "query": queries.texts[q], "rank": int(ranks[q]),
             "relevant": [media.ids[item(q, i)] for i in np.asarray(rel.indices[rel.indptr[q]:rel.indptr[q + 1]])],
             "top": [media.ids[item(q, i)] for i in top[q] if torch.isfinite(sim[q, i])]}
            for q in range(len(queries.texts))]


def evaluate_text_to_media(ctx: EvalContext, query_ids: Sequence[str], queries: Sequence[str],
                           relevance: Relevance, media: MediaSet, parts: list[tuple[str, str]] | None = None,
                           several: bool = False, qrels: Qrels | None = None, limited: bool = False,
                           clusters: Sequence[str] | None = None, candidates: Relevance | None = None) -> TaskResult:
    """Original or composed queries: R@K, MIR (best-placed relevant item), and with ``several``
    Correct@K and mAP over all relevant items. With FIRE ``qrels``, the same metrics again over the
    task's positives plus the judged ones (``fire_*``), beside the original ones. ``clusters``:
    each query's cluster id (its source item), for a task that declares a cluster. ``candidates``:
    each query ranked within its own set of items only (`Within`)."""
    if not queries:
        raise UserError(f"no queries to evaluate over {media.key}")
    qs = QuerySet(list(query_ids), list(queries), relevance, parts)
    all_ids = list(media.ids)
    asked = None if candidates is None else dict(zip(qs.ids, candidates.counts().tolist()))
    media, media_emb, qs, notes, candidates = drop_unreadable(ctx, media, ctx.embed_media(media), qs, candidates)
    if candidates is not None:  # after unreadable media left the sets: a set of 1 is a sure hit, so say so
        notes["candidates_per_query"] = float(candidates.counts().mean())
        assert asked is not None  # set above wherever candidates are
        shrunk = sum(1 for q, n in zip(qs.ids, candidates.counts().tolist()) if n < asked[q])
        if shrunk:
            notes["candidate_sets_shrunk"] = shrunk
    skipped = frozenset(all_ids) - frozenset(media.ids)
    if candidates is not None:  # scored within each query's own set: the relevance then names columns
        if qrels is not None or qs.parts is not None:
            raise ValueError("candidate sets are scored pair by pair: not with FIRE qrels or query parts")
        within = Within.of(candidates, qs.relevance)
        q, item = within.pairs()
        sim = within.scatter(pair_scores(ctx, [qs.texts[i] for i in q], media_emb[torch.from_numpy(item)]))
        qs, cols = QuerySet(qs.ids, qs.texts, within.relevance), within.cols
        n_media = len(np.unique(candidates.indices))  # the media some query ranks
    else:
        sim, cols, n_media = similarities(ctx, qs, media_emb), None, len(media)
    notes.update(as_encoder(ctx.model).scoring_notes(qs.texts, qs.parts))
    ranks = best_relevant_rank(sim, qs.relevance)
    metrics = retrieval_metrics(ranks)
    per_query = rank_values(ranks)
    if several:
        ap = _add_several(metrics, per_query, notes, sim, qs.relevance, ranks, "item")
    samples = _samples(qs, media, sim, ranks, cols=cols) if ctx.log_samples else None
    if samples is not None:  # each query's AP, so `negharness fire` can resample mAP as FIRE reports it
        for s, a in zip(samples, (ap if several else average_precision(sim, qs.relevance)).tolist()):
            s["ap"] = a
    if qrels is not None:
        fire_ranks, fire_ap = _add_fire(metrics, notes, sim, qs, media, qrels, limited, skipped)
        for s, r, a in zip(samples or [], fire_ranks.tolist(), fire_ap.tolist()):
            s["fire_rank"], s["fire_ap"] = r, a
    return TaskResult(metrics, {"queries": len(qs.texts), f"{media.kind}s": n_media}, samples,
                      {**relevance_notes(qs.relevance), **notes},
                      perquery.per_query(qs.ids, per_query, _kept_clusters(query_ids, clusters, qs.ids)))


def evaluate_media_to_text(ctx: EvalContext, query_ids: Sequence[str], media: MediaSet, text_ids: Sequence[str],
                           texts: Sequence[str], relevance: Relevance,
                           candidates: Relevance | None = None) -> TaskResult:
    """Media as queries ranking texts (image-to-text retrieval): each medium's scores against every
    text, as the model scores the pair (its text-to-media scores, transposed), then the several-relevant
    metrics of `evaluate_text_to_media`. An unreadable medium is a query that cannot be asked: it leaves
    the scoring, counted. ``query_ids``: one per medium, the ids the records and samples name queries by.
    ``candidates``: each query ranked within its own set of texts only."""
    if not texts:
        raise UserError(f"no texts to rank for {media.key}")
    media_emb = ctx.embed_media(media)
    bad = unreadable_items(ctx, media, media_emb)
    notes: dict[str, Any] = skip_notes(bad, int(bad.sum()))
    if bad.all():
        raise nothing_left(media, "query")
    query_ids = list(query_ids)
    if bad.any():
        media, media_emb = kept_media(media, media_emb, bad)
        query_ids = [q for q, b in zip(query_ids, bad) if not b]
        relevance = relevance.select(~bad)
        candidates = None if candidates is None else candidates.select(~bad)
    names = list(text_ids)
    if candidates is not None:  # only the candidate pairs are scored; the relevance then names columns
        within = Within.of(candidates, relevance)
        q, text = within.pairs()
        sim = within.scatter(pair_scores(ctx, [texts[i] for i in text], media_emb[torch.from_numpy(q)]))
        relevance, rows = within.relevance, [[text_ids[i] for i in row if i >= 0] for row in within.cols]
    else:
        sim = query_scores(ctx, texts, media_emb).T.contiguous()  # (media queries, texts)
    ranks = best_relevant_rank(sim, relevance)
    metrics, per_query = retrieval_metrics(ranks), rank_values(ranks)
    ap = _add_several(metrics, per_query, notes, sim, relevance, ranks, "text")
    samples = None
    if ctx.log_samples:
        top = torch.topk(sim, min(10, sim.shape[1]), dim=1).indices.numpy()
        def name(q: int, i: int) -> str:
            return rows[q][i] if candidates is not None else names[i]

        samples = [{"id": query_ids[q], "medium": media.ids[q], "rank": int(ranks[q]), "ap": float(ap[q]),
                    "relevant": [name(q, i) for i in relevance.indices[relevance.indptr[q]:relevance.indptr[q + 1]]],
                    "top": [name(q, i) for i in top[q] if torch.isfinite(sim[q, i])]} for q in range(len(media))]
    ranked = len(texts) if candidates is None else len(np.unique(candidates.indices))  # texts some query ranks
    if candidates is not None:
        notes["candidates_per_query"] = float(candidates.counts().mean())
    return TaskResult(metrics, {"queries": len(media), "texts": ranked}, samples,
                      {**relevance_notes(relevance), **notes}, perquery.per_query(query_ids, per_query, None))


def _add_several(metrics: dict[str, Any], per_query: dict[str, Any], notes: dict[str, Any], sim: torch.Tensor,
                 relevance: Relevance, ranks: torch.Tensor, what: str) -> torch.Tensor:
    """Correct@K and mAP over all relevant ``what``s beside R@K and MIR, their per-query values, and the
    note saying how they differ; returns each query's AP."""
    ap = average_precision(sim, relevance)
    metrics.update(several_relevant_metrics(sim, relevance, ranks, ap=ap))
    per_query.update({f"C@{k}": per_query[f"R@{k}"] for k in (1, 5, 10)}, mAP=ap.numpy())
    notes["several_relevant"] = (f"R@K counts a hit when any relevant {what} is in the top K (= C@K, FIRE's "
                                 f"Correct@K); MIR uses the best-ranked relevant {what}; mAP uses all of them")
    return ap


def _kept_clusters(all_ids: Sequence[str], clusters: Sequence[str] | None, kept: Sequence[str]) -> list[str] | None:
    """The cluster ids of the queries still scored (unreadable media drop some), in their order."""
    if clusters is None:
        return None
    if len(clusters) != len(all_ids):
        raise ValueError(f"{len(clusters)} cluster ids for {len(all_ids)} queries")
    of = dict(zip(all_ids, clusters))
    return [of[i] for i in kept]


def rank_values(ranks: torch.Tensor, ks: Sequence[int] = (1, 5, 10), prefix: str = "") -> dict[str, np.ndarray]:
    """Per-query values whose means are `retrieval_metrics`: R@K as 0/100 hits, MIR as 1/rank, MeanR as the rank."""
    r = ranks.double().numpy()
    out = {f"{prefix}R@{k}": (r <= k) * 100.0 for k in ks}
    out[f"{prefix}MIR"] = 1.0 / r
    out[f"{prefix}MeanR"] = r
    return out


def delta_values(orig_ranks: torch.Tensor, neg_ranks: torch.Tensor, ks: Sequence[int] = (1, 5, 10)) -> dict[str, np.ndarray]:
    """Per negated query, the terms `negation_deltas` averages."""
    o, n = orig_ranks.double().numpy(), neg_ranks.double().numpy()
    out = {f"ΔR@{k}": ((o <= k) * 1.0 - (n <= k) * 1.0) * 100.0 for k in ks}
    out.update({"ΔMIR": 1.0 / o - 1.0 / n, "SrcMeanR_orig": o, "SrcMeanR_neg": n})
    return out


def _add_fire(metrics: dict[str, Any], notes: dict[str, Any], sim: torch.Tensor, qs: QuerySet, media: MediaSet,
              qrels: Qrels, limited: bool, skipped: frozenset[str] = frozenset()) -> tuple[torch.Tensor, torch.Tensor]:
    """FIRE's Table 1 for this run: metrics with the judged positives added, and "A (B + C)".
    Returns each query's best rank and AP under the augmented judgements."""
    augmented, counts = augment(qs.relevance, qs.ids, media.ids, qrels, limited, skipped)
    ranks = best_relevant_rank(sim, augmented)
    ap = average_precision(sim, augmented)
    fire = several_relevant_metrics(sim, augmented, ranks, ap=ap)
    fire["MIR"] = retrieval_metrics(ranks)["MIR"]
    original = several_relevant_metrics(sim, qs.relevance, best_relevant_rank(sim, qs.relevance))
    original["MIR"] = metrics["MIR"]
    metrics.update({f"fire_{k}": v for k, v in fire.items()})
    notes["fire"] = {"qrels": str(qrels.path), **counts,
                     "table": {k: f"{fire[k]:.3g} ({original[k]:.3g} + {fire[k] - original[k]:.3g})" for k in fire}}
    return ranks, ap


def evaluate_negated(ctx: EvalContext, media: MediaSet, originals: QuerySet, negated: QuerySet,
                     original_of: Sequence[int]) -> TaskResult:
    """ΔR@K and ΔMIR of each negated query against its own original (``original_of[j]`` indexes
    ``originals``); the source video is the only item each relevance row names, and each negated
    query's cluster (the task declares ``cluster = "video"`` or ``"image"``)."""
    media, media_emb, originals, negated, original_of, notes = _drop_unreadable_pairs(
        ctx, media, ctx.embed_media(media), originals, negated, original_of)
    orig_ranks = source_rank(similarities(ctx, originals, media_emb), originals.sources())
    neg_sim = similarities(ctx, negated, media_emb)
    scoring = as_encoder(ctx.model).scoring_notes(negated.texts, negated.parts)
    neg_ranks = source_rank(neg_sim, negated.sources())
    paired = orig_ranks[torch.as_tensor(np.asarray(original_of), dtype=torch.long)]
    metrics = negation_deltas(paired, neg_ranks)
    plain = retrieval_metrics(neg_ranks)
    metrics.update({f"neg_{k}": v for k, v in plain.items() if k in ("R@1", "R@10", "MIR")})
    samples = None
    if ctx.log_samples:  # with the original's rank of the source video, so deltas can be re-scored
        samples = _samples(negated, media, neg_sim, neg_ranks)
        for s, r in zip(samples, paired.tolist()):
            s["source_rank_original"] = r
    values = {**delta_values(paired, neg_ranks),
              **{k: v for k, v in rank_values(neg_ranks, prefix="neg_").items() if k[4:] in ("R@1", "R@10", "MIR")}}
    return TaskResult(metrics, {"negated_queries": len(negated.texts), "original_queries": len(originals.texts),
                                f"{media.kind}s": len(media)}, samples,
                      {"deltas": "each negated query against its own original, mean over negated queries; "
                                 "positive = the source video dropped under negation", **scoring, **notes},
                      perquery.per_query(negated.ids, values, [media.ids[int(i)] for i in negated.sources()]))


def _drop_unreadable_pairs(ctx: EvalContext, media: MediaSet, media_emb: torch.Tensor, originals: QuerySet,
                           negated: QuerySet, original_of: Sequence[int]
                           ) -> tuple[MediaSet, torch.Tensor, QuerySet, QuerySet, Sequence[int], dict[str, Any]]:
    """The rule for negated deltas: an unreadable video leaves the candidates, and every original
    and negated query whose source it is leaves the scoring (a delta needs both ranks)."""
    bad = unreadable_items(ctx, media, media_emb)
    if not bad.any():
        return media, media_emb, originals, negated, original_of, {}
    orig_rel, orig_kept = restrict_relevance(originals.relevance, bad)
    _, neg_kept = restrict_relevance(negated.relevance, bad)
    source_of = np.asarray(original_of)
    neg_kept &= orig_kept[source_of]  # its original must still be scored
    if not neg_kept.any():
        raise nothing_left(media, "negated query")
    renumber = np.cumsum(orig_kept) - 1
    orig_src = np.asarray(originals.sources())[orig_kept]
    neg_src = np.asarray(negated.sources())[neg_kept]
    new_index = np.cumsum(~bad) - 1
    originals = QuerySet(_kept(originals.ids, orig_kept), _kept(originals.texts, orig_kept), orig_rel,
                         None if originals.parts is None else _kept(originals.parts, orig_kept),
                         list(new_index[orig_src]))
    neg_rel = Relevance.from_lists([[int(new_index[s])] for s in neg_src], int((~bad).sum()))
    negated = QuerySet(_kept(negated.ids, neg_kept), _kept(negated.texts, neg_kept), neg_rel,
                       None if negated.parts is None else _kept(negated.parts, neg_kept), list(new_index[neg_src]))
    media, media_emb = kept_media(media, media_emb, bad)
    return media, media_emb, originals, negated, list(renumber[source_of[neg_kept]]), \
        skip_notes(bad, int((~neg_kept).sum()), "negated_queries")

