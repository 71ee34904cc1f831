"""Scoring a `ChoiceSet`: every option against its row's medium, then accuracy with ties counted.

An embedding model is scored through the run's cached embeddings and its own `combine` (so the
boolean baseline scores s(positive) - s(negative) here too); a model that scores choices itself
(``scores_choices_itself``: a generative VLM, a text-only LM) is asked directly and no medium is
embedded. The true caption is scored against the rest and, as NegBench MCQ here, a tie at the top
counts as wrong (`mcq_choices`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

import numpy as np
import torch

from negharness.contracts.choices import ChoiceSet, pad_scores
from negharness.contracts.context import EvalContext
from negharness.contracts.errors import UserError
from negharness.scoring.views import pair_scores, rows_of

CHOICE_METRIC_NAMES = ("accuracy", "tie_rate", "macro_accuracy")


def scores_itself(ctx: EvalContext) -> bool:
    """Whether the model scores choices itself; a sharded pass-1 context (``embeddings_only``) never asks it."""
    return bool(getattr(ctx.model, "scores_choices_itself", False)) and not getattr(ctx, "embeddings_only", False)


def score_choices(ctx: EvalContext, choices: ChoiceSet) -> torch.Tensor:
    """(rows, widest row) scores, higher = more likely true; every distinct caption and medium encoded once."""
    if scores_itself(ctx):
        return ctx.model.score_choices(choices, ctx.batch_size, ctx.precision)
    if choices.questions is not None:
        raise UserError(f"model {ctx.model.name} scores captions against the medium and would ignore this task's "
                        "questions (e.g. NegVQA): use a generative model (--model hf_vlm) or a text model (text_only)")
    media_emb = ctx.embed_media(choices.media)
    flat = [o for row in choices.options for o in row]
    return pad_scores(pair_scores(ctx, flat, media_emb[rows_of(choices.media_index, choices.options)]), choices.options)


def mcq_choices(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen option, tie) per row: a tie is a row whose top score is shared by two or more options."""
    best = scores.max(1, keepdim=True).values
    tie = (scores == best).sum(1) > 1
    return scores.argmax(1), tie


def choice_metrics(scores: torch.Tensor, correct: Sequence[int], groups: Sequence[str] | None = None,
                   min_group: int = 1) -> tuple[dict[str, float], dict[str, Any], torch.Tensor, torch.Tensor]:
    """Accuracy (percent; a tie at the top is wrong), tie rate, and with ``groups`` the macro mean of
    per-group accuracies over groups of at least ``min_group`` rows (ARO's VG-Attribution keeps
    attribute pairs with 25 or more). Returns (metrics, per-group accuracies, chosen, tie)."""
    chosen, tie = mcq_choices(scores)
    right = (chosen == torch.as_tensor(np.asarray(correct))) & ~tie
    metrics = {"accuracy": float(right.double().mean() * 100), "tie_rate": float(tie.double().mean() * 100)}
    per_group: dict[str, Any] = {}
    if groups is not None:
        rows: dict[str, list[int]] = defaultdict(list)
        for r, g in enumerate(groups):
            rows[str(g)].append(r)
        accs = {g: float(right[rows[g]].double().mean() * 100) for g in sorted(rows) if len(rows[g]) >= min_group}
        per_group = {g: {"accuracy": round(a, 3), "rows": len(rows[g])} for g, a in accs.items()}
        if accs:
            metrics["macro_accuracy"] = float(np.mean(list(accs.values())))
    return metrics, per_group, chosen, tie
