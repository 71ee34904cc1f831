"""The choice protocol's data: one medium, one true caption and one or more false ones per row.

A task hands the host a `ChoiceSet`; an embedding model is scored through its embeddings
(`negharness.scoring.choices.score_choices`), a generative model (``scores_choices_itself``) by the
likelihood of each option or by the letter it picks, a blind text model without the medium.
Rows may carry different numbers of options; missing slots score -inf (`pad_scores`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from negharness.contracts.media_set import MediaSet

if TYPE_CHECKING:
    import torch


@dataclass
class ChoiceSet:
    """Row r: medium ``media.ids[media_index[r]]``, options ``options[r]`` (the true one at ``correct[r]``),
    and for question-answering sets (NegVQA) the question asked, else None."""

    media: MediaSet
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
    import torch  # lazy: the contracts import no torch (a task's ChoiceSet is built before any model)

    width = max(len(o) for o in options)
    out = torch.full((len(options), width), float("-inf"), dtype=torch.float32)
    pos = 0
    for r, row in enumerate(options):
        out[r, : len(row)] = flat[pos: pos + len(row)].float()
        pos += len(row)
    return out
