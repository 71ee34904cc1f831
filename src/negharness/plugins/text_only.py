"""A blind baseline: a causal language model scores each caption without seeing the image.

SugarCrepe reports such text-only scores (a grammar model, Vera) to show how much of a benchmark a
language prior solves; this model does the same for every choice task here. An option's score is
its length-normalised log-likelihood under the LM (``-M norm=sum`` for the plain sum), after the
BOS token, or after "Question: ...\\nAnswer:" where the task asks a question (NegVQA). Any
transformers causal LM works: ``--model text_only --arch gpt2`` (or a local folder).
"""

from __future__ import annotations

from typing import Any

import torch

from negharness.api import ModelOptions, UserError
from negharness.api.checkpoints import hash_state_dict, hash_tokenizer
from negharness.api.files import hash_json
from negharness.api.scoring import pad_scores
from negharness.plugins import options as declared

from .lm_scoring import (
    ChoiceScoringModel,
    check_norm,
    continuation_scores,
    inference,
    kept_positions,
    pad_right,
)


class TextOnlyLM(ChoiceScoringModel):
    name = "text_only"
    modalities = frozenset({"text", "image", "video"})  # takes any choice task; never looks at the medium

    def __init__(self, arch: str, norm: str = "mean") -> None:
        super().__init__()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        try:
            self.tokenizer = AutoTokenizer.from_pretrained(arch)
            self.lm = AutoModelForCausalLM.from_pretrained(arch)
        except (OSError, ValueError) as exc:
            raise UserError(f"--arch {arch}: cannot load a causal language model ({exc})") from exc
        self.arch, self.norm = arch, check_norm(norm)
        start = self.tokenizer.bos_token_id if self.tokenizer.bos_token_id is not None else self.tokenizer.eos_token_id
        if start is None:
            raise UserError(f"--arch {arch}: the tokenizer has neither a BOS nor an EOS token to start a caption from")
        self.start_id = start
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else start
        # what its scores rest on beside the config: the weights and the tokenizer, by content (once, here)
        self._weights, self._tokenizer = hash_state_dict(self.lm.state_dict()), hash_tokenizer(self.tokenizer)

    def modules(self) -> list[torch.nn.Module]:
        return [self.lm]

    def describe(self) -> dict[str, Any]:
        return {"arch": self.arch, "norm": self.norm, "config": hash_json(self.lm.config.to_dict()),
                "parameters": sum(p.numel() for p in self.lm.parameters()), "weights": self._weights,
                "tokenizer": self._tokenizer}


    def _ids(self, text: str) -> list[int]:
        ids: list[int] = self.tokenizer(text, add_special_tokens=False)["input_ids"]  # a transformers tokenizer
        return ids

    def sequences(self, choices: Any) -> list[tuple[list[int], int]]:
        """(token ids, where the option starts) for every option of every row, row by row."""
        out = []
        for r, row in enumerate(choices.options):
            question = choices.question(r)
            prefix = [self.start_id] + (self._ids(f"Question: {question}\nAnswer:") if question else [])
            for option in row:
                ids = self._ids(f" {option}" if question else option)
                out.append((prefix + ids, len(prefix)))
        return out

    def score_choices(self, choices: Any, batch_size: int, precision: str) -> torch.Tensor:
        seqs = self.sequences(choices)
        bs = batch_size
        flat = []
        with inference(self.device, precision):
            for lo in range(0, len(seqs), bs):
                chunk = seqs[lo: lo + bs]
                ids, mask = pad_right([s for s, _ in chunk], self.pad_id)
                keep = kept_positions(self.lm, ids.shape[1], [st for _, st in chunk])
                logits = self.lm(input_ids=ids.to(self.device), attention_mask=mask.to(self.device), **keep).logits
                flat.append(continuation_scores(logits, ids, [st for _, st in chunk], [len(s) for s, _ in chunk],
                                                self.norm))
        return pad_scores(torch.cat(flat), choices.options)


@declared.TEXT_ONLY
def text_only(options: ModelOptions) -> TextOnlyLM:
    values = options.values
    if not options.arch:
        raise UserError("model text_only needs --arch: a transformers causal LM id or folder (e.g. gpt2)")
    return TextOnlyLM(options.arch, values["norm"])
