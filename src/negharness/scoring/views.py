"""The host's half of a model's scoring contract: embed the text views the model asks for, then let
the model combine them with media embeddings (`EmbeddingModel.text_views` / `combine`).

The model never receives the host's encoder: it names texts, the host embeds them through the
run's cache, and the model only does arithmetic on tensors. A model that scores choices itself (a
generative VLM, a text-only LM) is asked for its scores directly.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from negharness.contracts.context import EvalContext
from negharness.contracts.model import as_encoder


def embed_views(ctx: EvalContext, views: dict[str, list[str | None]]) -> dict[str, torch.Tensor]:
    """Each view's texts through the run's cache; rows whose entry is None are zeros."""
    out: dict[str, torch.Tensor] = {}
    for name, texts in views.items():
        keep = [i for i, t in enumerate(texts) if t is not None]
        emb = ctx.embed_texts([t for t in texts if t is not None])  # the texts at ``keep``, in order
        if len(keep) == len(texts):
            out[name] = emb
            continue
        full = torch.zeros(len(texts), emb.shape[1] if emb.numel() else 0)
        if keep:
            full[torch.as_tensor(keep, dtype=torch.long)] = emb
        out[name] = full
    return out


def query_scores(ctx: EvalContext, texts: Sequence[str], media_emb: torch.Tensor,
                 parts: Sequence[tuple[str, str] | None] | None = None) -> torch.Tensor:
    """(Q, N) scores of each query against each medium, as the model under test scores them."""
    model = as_encoder(ctx.model)
    views = model.text_views(texts, parts)
    return model.combine(views, embed_views(ctx, views), media_emb)


def pair_scores(ctx: EvalContext, texts: Sequence[str], media_rows: torch.Tensor) -> torch.Tensor:
    """(Q,) scores of text q against medium row q (choice options against their row's medium)."""
    model = as_encoder(ctx.model)
    views = model.text_views(texts, None)
    return model.combine(views, embed_views(ctx, views), media_rows, paired=True)


def rows_of(media_index: Sequence[int], options: Sequence[Sequence[Any]]) -> torch.Tensor:
    """For options flattened row by row, the position of each one's medium."""
    return torch.as_tensor(np.repeat(np.asarray(media_index), [len(o) for o in options]), dtype=torch.long)
