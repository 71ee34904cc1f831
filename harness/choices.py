"""The choice protocol: one medium, one true caption and one or more false ones per row.

A task hands the model a `ChoiceSet` and gets back one score per option (``model.score_choices``):
an embedding model scores by cosine through the run's cached embeddings (the default below), a
generative model by the likelihood of each option or by the letter it picks, a blind text model
without looking at the medium at all. Rows may carry different numbers of options; missing slots
score -inf. The true caption is scored against the rest and, as NegBench MCQ here, a tie at the
top counts as wrong (`negharness.mcq.mcq_choices`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    import torch

    from .media import MediaSet
    from .runner import EvalContext

CHOICE_METRIC_NAMES = ("accuracy", "tie_rate", "macro_accuracy")


@dataclass
class ChoiceSet:
    """Row r: medium ``media.ids[media_index[r]]``, options ``options[r]`` (the true one at ``correct[r]``),
    and for question-answering sets (NegVQA) the question asked, else None."""

    media: "MediaSet"
    media_index: Sequence[int]
    options: Sequence[Sequence[str]]
    correct: Sequence[int]
    questions: Sequence[str | None] | None = None

    def __len__(self) -> int:
        return len(self.options)

    def width(self) -> int:
        return max(len(o) for o in self.options)

    def question(self, r: int) -> str | None:
        return None if self.questions is None else self.questions[r]


def pad_scores(flat: "torch.Tensor", options: Sequence[Sequence[str]]) -> "torch.Tensor":
    """Scores of the options of all rows, flattened row by row -> (rows, widest row), -inf padding."""
    import torch

    width = max(len(o) for o in options)
    out = torch.full((len(options), width), float("-inf"), dtype=torch.float32)
    pos = 0
    for r, row in enumerate(options):
        out[r, : len(row)] = flat[pos: pos + len(row)].float()
        pos += len(row)
    return out


def cosine_choice_scores(ctx: "EvalContext", choices: ChoiceSet) -> "torch.Tensor":
    """Cosine of each option with its row's medium; every distinct caption and medium encoded once (cached)."""
    import numpy as np
    import torch

    from .errors import UserError

    if choices.questions is not None:
        raise UserError(f"model {ctx.model.name} scores captions against the medium and would ignore this task's "
                        "questions (e.g. NegVQA): use a generative model (--model hf_vlm) or a text model (text_only)")
    media_emb = ctx.embed_media(choices.media)
    flat = [o for row in choices.options for o in row]
    text_emb = ctx.embed_texts(flat)
    row_media = np.repeat(np.asarray(choices.media_index), [len(o) for o in choices.options])
    sims = (text_emb * media_emb[torch.as_tensor(row_media, dtype=torch.long)]).sum(-1)
    return pad_scores(sims, choices.options)


def choice_metrics(scores: "torch.Tensor", correct: Sequence[int], groups: Sequence[str] | None = None,
                   min_group: int = 1) -> tuple[dict[str, float], dict[str, Any], "torch.Tensor", "torch.Tensor"]:
    """Accuracy (percent; a tie at the top is wrong), tie rate, and with ``groups`` the macro mean of
    per-group accuracies over groups of at least ``min_group`` rows (ARO's VG-Attribution keeps
    attribute pairs with 25 or more). Returns (metrics, per-group accuracies, chosen, tie)."""
    import numpy as np
    import torch

    from .mcq import mcq_choices

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
