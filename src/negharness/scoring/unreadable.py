"""The one rule for media that could not be decoded (``--skip-broken-media``): never scored.

The runner gives an unreadable item a NaN row and lists its id in ``ctx.broken``. A NaN row must
never reach a score: its argmax is option 0 (the correct answer in most NegBench files) and a NaN
similarity ranks as a hit. So every scorer (retrieval, negated deltas, multiple choice) asks this
module which items are unreadable and leaves them, and every query or question that needs them,
out of the scoring; the record counts them (``n_skipped_media``, the first few ids) and the run
summary shows them. A NaN row the runner did not list as unreadable came from the model itself:
that is an error naming the model and the items, never a silent drop.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from negharness.contracts.errors import UserError
from negharness.io.media import MediaSet
from negharness.scoring.metrics import Relevance


def unreadable_items(ctx: Any, media: MediaSet, media_emb: torch.Tensor) -> np.ndarray:
    """Boolean mask over ``media``: the items left out of scoring because they could not be decoded."""
    if media_emb.numel() == 0:
        return np.zeros(len(media), dtype=bool)
    bad = (~torch.isfinite(media_emb).all(1)).numpy()
    if not bad.any():
        return bad
    listed = set(getattr(ctx, "broken", {}).get(media.key, ()))
    unexplained = [media.ids[i] for i in np.flatnonzero(bad) if media.ids[i] not in listed]
    if unexplained:
        name = getattr(getattr(ctx, "model", None), "name", "?")
        raise UserError(f"model {name} gave non-finite embeddings for {len(unexplained)} {media.kind}(s) of "
                        f"{media.key} that decoded fine, e.g. {', '.join(unexplained[:3])}")
    return bad


def kept_media(media: MediaSet, media_emb: torch.Tensor, bad: np.ndarray) -> tuple[MediaSet, torch.Tensor]:
    """The readable items only, in order (the candidates every query is ranked against)."""
    keep = ~bad
    ids = [i for i, k in zip(media.ids, keep) if k]
    return MediaSet(media.key, media.kind, ids, media.load), media_emb[torch.from_numpy(keep)]


def restrict_relevance(relevance: Relevance, bad: np.ndarray) -> tuple[Relevance, np.ndarray]:
    """Relevance over the readable items; a query whose relevant items are all unreadable is
    dropped (mask of kept queries)."""
    if not bad.any():
        return relevance, np.ones(relevance.n_queries, dtype=bool)
    return relevance.restrict(~bad)


def skip_notes(bad: np.ndarray, dropped: int, what: str = "queries") -> dict[str, int]:
    """What a result's notes say of the rule (nothing when every item was readable)."""
    return {"media_skipped": int(bad.sum()), f"{what}_dropped": int(dropped)} if bad.any() else {}


def nothing_left(media: MediaSet, what: str) -> UserError:
    return UserError(f"every {what} of {media.key} needs an unreadable {media.kind}: nothing left to score "
                     "(fix the files, or run without them)")
