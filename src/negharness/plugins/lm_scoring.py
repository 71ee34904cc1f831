"""Scoring text continuations with a causal language model (text-only or vision-language).

An option's score is the log-likelihood of its tokens after a prompt, either summed or divided by
its token count (``mean``: length-normalised, the default, so long captions are not penalised for
their length alone). Batches are right-padded; only the positions that predict option tokens are
turned into log-probabilities, so memory grows with the options, not with the vocabulary times the
image tokens.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import torch

from negharness.api import ChoiceScorer, UserError
from negharness.api.devices import autocast

NORMS = ("mean", "sum")


def pad_right(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention mask), each (B, longest)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


def kept_positions(model: torch.nn.Module, width: int, starts: Sequence[int]) -> dict[str, int]:
    """``logits_to_keep`` for a forward pass whose rows need logits from position ``start - 1`` on:
    the LM head then skips the prompt (for a VLM, hundreds of image tokens per sequence)."""
    import inspect

    if "logits_to_keep" not in inspect.signature(model.forward).parameters:
        return {}
    return {"logits_to_keep": width - (min(starts) - 1)}


def continuation_scores(logits: torch.Tensor, ids: torch.Tensor, starts: Sequence[int], ends: Sequence[int],
                        norm: str) -> torch.Tensor:
    """Per row, the log-likelihood of tokens ``ids[b, starts[b]:ends[b]]`` (each predicted by the
    logits one position earlier), summed or averaged over those tokens. ``logits`` may cover only the
    last positions of ``ids`` (see `kept_positions`)."""
    offset = ids.shape[1] - logits.shape[1]
    out = torch.empty(len(starts), dtype=torch.float32)
    for b, (s, e) in enumerate(zip(starts, ends)):
        if e <= s or s < 1:
            raise UserError("an option tokenised to no tokens (empty caption?)")
        logp = torch.log_softmax(logits[b, s - 1 - offset: e - 1 - offset].float(), dim=-1)
        total = logp.gather(1, ids[b, s:e].unsqueeze(1).to(logp.device)).sum()
        out[b] = total / (e - s) if norm == "mean" else total
    return out


@contextlib.contextmanager
def inference(device: torch.device, precision: str) -> Iterator[None]:
    """Inference mode under the run's --precision, by the one autocast rule every model follows."""
    with torch.inference_mode(), autocast(device, precision):
        yield


def check_norm(value: str) -> str:
    if value not in NORMS:
        raise UserError(f"-M norm={value}: choose mean (length-normalised) or sum")
    return value


class ChoiceScoringModel(ChoiceScorer):
    """The built-in scorers' base (hf_vlm, text_only): `negharness.api.ChoiceScorer`, whose tasks the
    host never embeds for (a retrieval task is refused naming the model)."""
