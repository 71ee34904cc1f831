"""The boolean-operation baseline (Wu & Ngo) as a wrapper around any retrieval model.

``--model boolean -M base=clip`` embeds exactly as the base model does (and shares its cached
embeddings); tasks that know a query's positive and negative parts score it as
s(positive) - s(negative) (see `negharness.scoring.retrieval.similarities`). Composed queries use their
stored parts; negated queries the negator's cue and rule-based scope. Queries without a negative
part score as the base model would.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from negharness.api import (
    EmbeddingModel,
    ModelOptions,
    UserError,
)
from negharness.plugins import options as declared
from negharness.plugins.wrapped_model import WrappedModel
from negharness.text.negator import CUE_WORDS, expand_contractions, split_negated


def query_parts(text: str) -> tuple[str, str]:
    """(positive, negative) of a query by the negator's rule-based scope; the tagger runs only
    when the text has a negation cue, so plain captions cost nothing."""

    if not any(w.strip(".,;!?").lower() in CUE_WORDS for w in expand_contractions(text).split()):
        return text, ""
    return split_negated(text)


def rescaled(cos: torch.Tensor) -> torch.Tensor:
    """Cosine in [-1, 1] -> [0, 1], as the authors' code does before subtracting."""
    return (1 + cos) / 2


class BooleanModel(WrappedModel):
    """score = (1 + cos(positive)) / 2 - max(0, (1 + cos(negative)) / 2); the clip at 0 of the
    authors' code is a no-op after the rescaling, kept to read as the formula. Embeds as its base does."""

    def __init__(self, base: EmbeddingModel, base_name: str) -> None:
        super().__init__(base, f"boolean({base_name})")

    def fingerprint(self) -> str:
        return self.base.fingerprint()  # same embeddings as the base: share its cache

    def _parts(self, texts: Sequence[str], parts: Sequence[tuple[str, str] | None] | None) -> list[tuple[str, str]]:
        given = list(parts) if parts is not None else [None] * len(texts)
        return [p if p is not None else query_parts(t) for p, t in zip(given, texts)]

    def scoring_notes(self, texts: Sequence[str], parts: Sequence[tuple[str, str] | None] | None = None) -> dict[str, Any]:
        """How many queries had a negative part, and whence: with none, the baseline ranks exactly
        as its base model, and the leaderboard shows "–" there as nT2VR's tables do."""
        split = self._parts(texts, parts)
        from_data = 0 if parts is None else sum(p is not None for p in parts)
        return {"boolean": {"queries": len(split), "with_negative_part": sum(1 for _, n in split if n),
                            "parts_from_data": from_data, "parts_from_negator": len(split) - from_data}}

    def text_views(self, texts: Sequence[str], parts: Sequence[tuple[str, str] | None] | None = None
                   ) -> dict[str, list[str | None]]:
        """Positive parts for every query, negative parts where a query has one."""
        split = self._parts(texts, parts)
        return {"positive": [p for p, _ in split], "negative": [n or None for _, n in split]}

    def combine(self, views: dict[str, list[str | None]], embedded: dict[str, torch.Tensor],
                media: torch.Tensor, paired: bool = False) -> torch.Tensor:
        """s(positive) - s(negative) against each medium (or each row's own medium, ``paired``)."""
        def cos(text: torch.Tensor) -> torch.Tensor:
            return (text * media).sum(-1) if paired else text @ media.t()

        scores = rescaled(cos(embedded["positive"]))
        has_neg = [i for i, n in enumerate(views["negative"]) if n is not None]
        if has_neg:
            idx = torch.as_tensor(has_neg, dtype=torch.long)
            neg = embedded["negative"][idx]
            scores[idx] -= rescaled((neg * media[idx]).sum(-1) if paired else neg @ media.t()).clamp_min(0)
        return scores


@declared.BOOLEAN
def boolean(options: ModelOptions) -> BooleanModel:
    """``-M base=NAME``: the model to wrap; every other option goes to it (unparsed: the base checks it)."""
    base_name = options.values["base"]
    if not base_name:
        raise UserError("model boolean needs -M base=MODEL (the retrieval model to wrap, e.g. -M base=clip)")
    if base_name == "boolean":
        raise UserError("-M base=boolean: the wrapper cannot wrap itself")
    base = options.lookup().plugin("model", base_name,
                                   ModelOptions(options.arch, options.pretrained, options.checkpoint, dict(options.rest)))
    return BooleanModel(base, base_name)
