"""Generative vision-language models (LLaVA-style, Qwen-VL-style) through transformers, as a model
kind that scores choice tasks: ``--model hf_vlm --arch MODEL_ID_OR_FOLDER``.

Two ways to score, chosen with ``-M scoring=``:

- ``loglik`` (default): each option's log-likelihood as the assistant's reply to the prompt and the
  image, divided by its token count (``-M norm=sum`` for the plain sum). The prompt is the task's
  question (NegVQA) or ``-M prompt=...`` (default "Describe the image in one sentence.").
- ``letter``: NegBench's appendix A: the options are listed as "A. ... B. ..." and the model is
  asked for the letter; each option scores the next-token logit of its letter. The order of the
  options is shuffled per row (seeded by the row's content), so a model that always says "A"
  gains nothing from files that put the true caption first; scores come back in the task's order.

NegVQA's own protocol (VLMEvalKit) generates a reply and extracts the letter; reading the letter's
logit picks the same letter whenever the reply starts with it, and never fails to parse.

A video (NegBench's MSR-VTT MCQ) is shown as ``-M frames=`` images (4 by default), evenly spaced over
the frames the task samples, in one user turn before the text, the multi-image form image-text chat
templates take (4 LLaVA-1.5 images are 2,304 tokens of its 4,096).
Batches follow ``--batch-size`` (sequences per forward pass), under autocast on a GPU; the weights
load in ``-M dtype=`` (fp32 by default; bf16 for a 7B model on one GPU).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import torch

from negharness.api import ModelOptions, UserError
from negharness.api.checkpoints import hash_processor, hash_state_dict
from negharness.api.devices import resolve_precision
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

if TYPE_CHECKING:  # transformers loads when a model is built, not when this module is imported
    from transformers import BatchFeature, PreTrainedModel, PreTrainedTokenizerBase, ProcessorMixin

    from negharness.api import ChoiceSet

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
DEFAULT_PROMPT = "Describe the image in one sentence."
LETTER_QUESTION = "Which caption describes the image?"
LETTER_SUFFIX = "Answer with the option's letter from the given choices directly."


DEFAULT_FRAMES = declared.VLM_FRAMES


def evenly_spaced(n_total: int, n: int) -> list[int]:
    """``n`` frame positions spread over ``n_total`` (all of them when there are fewer), first and last
    included, so a clip is seen from its start to its end."""
    if n_total <= n:
        return list(range(n_total))
    return sorted({int(round(x)) for x in np.linspace(0, n_total - 1, n)})


def as_pictures(item: Any, frames: int) -> list[Any]:
    """An image as itself; a video ((T, H, W, 3) uint8 frames, or a list of frame images) as
    ``frames`` RGB images evenly spaced over it."""
    from PIL import Image

    if isinstance(item, np.ndarray) and item.ndim == 4:
        return [Image.fromarray(item[t]) for t in evenly_spaced(item.shape[0], frames)]
    if isinstance(item, (list, tuple)):
        return [as_pictures(item[t], frames)[0] for t in evenly_spaced(len(item), frames)]
    if isinstance(item, np.ndarray):
        return [item]
    return [item.convert("RGB") if hasattr(item, "convert") else item]


class HFVLM(ChoiceScoringModel):
    name = "hf_vlm"
    modalities = frozenset({"text", "image", "video"})

    def __init__(self, processor: ProcessorMixin, vlm: PreTrainedModel, arch: str, scoring: str = "loglik",
                 norm: str = "mean", prompt: str = DEFAULT_PROMPT, dtype: str = "fp32", frames: int = DEFAULT_FRAMES
                 ) -> None:
        """From a loaded processor and model (`hf_vlm` loads them; perf scripts build them from configs)."""
        super().__init__()
        if scoring not in ("loglik", "letter"):
            raise UserError(f"-M scoring={scoring}: choose loglik or letter")
        if frames < 1:
            raise UserError(f"-M frames={frames}: a video needs at least one frame")
        self.processor, self.vlm, self.frames = processor, vlm, frames
        self.arch, self.scoring, self.norm, self.prompt, self.dtype = arch, scoring, check_norm(norm), prompt, dtype
        tok = self.tokenizer()
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
        # what its scores rest on beside the config: the weights and the processor (tokenizer, chat template,
        # image settings), by content, once, here
        self._weights, self._processor = hash_state_dict(vlm.state_dict()), hash_processor(processor)

    def tokenizer(self) -> PreTrainedTokenizerBase:
        """The processor's text tokenizer (transformers adds it per processor class, so types it Any)."""
        tok: PreTrainedTokenizerBase = self.processor.tokenizer
        return tok

    def modules(self) -> list[torch.nn.Module]:
        return [self.vlm]

    def describe(self) -> dict[str, Any]:
        # a frame count other than the default only: image runs keep the fingerprints they had before videos
        frames = {"video_frames": self.frames} if self.frames != DEFAULT_FRAMES else {}
        return {**frames, "arch": self.arch, "scoring": self.scoring, "norm": self.norm, "prompt": self.prompt,
                "dtype": self.dtype, "config": hash_json(self.vlm.config.to_dict()),
                "parameters": sum(p.numel() for p in self.vlm.parameters()), "weights": self._weights,
                "processor": self._processor}


    # prompts ------------------------------------------------------------------------------------
    def chat(self, text: str, n_images: int = 1) -> str:
        """The model's own chat template around ``n_images`` images (one, or a video's frames) and
        ``text``, ending where the reply starts."""
        content = [{"type": "image"}] * n_images + [{"type": "text", "text": text}]
        messages = [{"role": "user", "content": content}]
        if getattr(self.processor, "chat_template", None):
            # transformers annotates a message's content as a string only; its image-text templates take
            # this list of parts (the form its own multimodal examples pass): called untyped, the text kept typed
            template: Any = self.processor.apply_chat_template
            prompt: str = template(messages, add_generation_prompt=True, tokenize=False)
            return prompt
        image_token = getattr(self.processor, "image_token", "<image>")
        return f"USER: {image_token * n_images}\n{text} ASSISTANT:"

    @staticmethod
    def letter_order(r: int, options: Sequence[str]) -> list[int]:
        """The option shown as A, B, ... for row ``r``: a permutation seeded by the row's content."""
        order = list(range(len(options)))
        random.Random("|".join([str(r), *options])).shuffle(order)
        return order

    def letter_prompt(self, question: str | None, options: Sequence[str], order: Sequence[int]) -> str:
        listed = "\n".join(f"{LETTERS[j]}. {options[k]}" for j, k in enumerate(order))
        return f"{question or LETTER_QUESTION}\n{listed}\n{LETTER_SUFFIX}"

    def letter_ids(self, n: int) -> list[list[int]]:
        """Token ids a reply may start the letter with ("A" and " A" tokenise apart in most vocabularies)."""
        tok = self.tokenizer()
        out = []
        for letter in LETTERS[:n]:
            ids = {tok(v, add_special_tokens=False)["input_ids"][-1] for v in (letter, f" {letter}")}
            out.append(sorted(ids))
        return out

    # scoring ------------------------------------------------------------------------------------
    def _forward(self, prompts: list[str], images: list[list[Any]], tails: list[list[int]]
                 ) -> tuple[torch.Tensor, torch.Tensor, list[int], list[int]]:
        """One batch: the processor expands image tokens in each prompt (``images``: each prompt's
        pictures, in order); ``tails`` (option tokens) are appended after each prompt's real tokens.
        Returns logits, ids, tail starts and ends."""
        flat = [picture for pictures in images for picture in pictures]
        enc: BatchFeature = self.processor(text=prompts, images=flat, return_tensors="pt", padding=True)
        mask = enc["attention_mask"].bool()
        heads = [enc["input_ids"][b][mask[b]].tolist() for b in range(len(prompts))]
        seqs = [h + t for h, t in zip(heads, tails)]
        ids, attn = pad_right(seqs, self.pad_id)
        inputs = {k: v for k, v in enc.items() if k not in ("input_ids", "attention_mask")}
        for k, v in list(inputs.items()):  # per-token side inputs (token types): realign like input_ids
            if torch.is_tensor(v) and v.shape[:2] == enc["input_ids"].shape:
                side = torch.zeros_like(ids)
                for b in range(len(prompts)):
                    side[b, : len(heads[b])] = v[b][mask[b]]
                inputs[k] = side
        inputs = {k: (v.to(self.device) if torch.is_tensor(v) else v) for k, v in inputs.items()}
        if "pixel_values" in inputs and inputs["pixel_values"].is_floating_point():
            inputs["pixel_values"] = inputs["pixel_values"].to(next(self.vlm.parameters()).dtype)
        keep = kept_positions(self.vlm, ids.shape[1], [len(h) for h in heads])
        out = self.vlm(input_ids=ids.to(self.device), attention_mask=attn.to(self.device), **inputs, **keep)
        logits: torch.Tensor = out.logits
        return logits, ids, [len(h) for h in heads], [len(s) for s in seqs]

    def _images(self, choices: ChoiceSet) -> dict[int, list[Any]]:
        """Each medium the rows use, as the pictures the model is shown (see `as_pictures`)."""
        return {i: as_pictures(choices.media.load(i), self.frames) for i in dict.fromkeys(choices.media_index)}

    def score_choices(self, choices: ChoiceSet, batch_size: int, precision: str) -> torch.Tensor:
        if choices.media.kind not in ("image", "video"):
            raise UserError(f"model hf_vlm scores images and videos; task media are {choices.media.kind}s")
        images = self._images(choices)
        bs = batch_size
        with inference(self.device, precision):
            if self.scoring == "letter":
                return self._letters(choices, images, bs)
            items = [(r, o) for r, row in enumerate(choices.options) for o in row]
            tok = self.tokenizer()
            flat = []
            for lo in range(0, len(items), bs):
                chunk = items[lo: lo + bs]
                shown = [images[choices.media_index[r]] for r, _ in chunk]
                prompts = [self.chat(choices.question(r) or self.prompt, len(p)) for (r, _), p in zip(chunk, shown)]
                tails = [tok(o, add_special_tokens=False)["input_ids"] for _, o in chunk]
                logits, ids, starts, ends = self._forward(prompts, shown, tails)
                flat.append(continuation_scores(logits, ids.to(logits.device), starts, ends, self.norm))
        return pad_scores(torch.cat(flat), choices.options)

    def _letters(self, choices: ChoiceSet, images: dict[int, list[Any]], bs: int) -> torch.Tensor:
        out = torch.full((len(choices), choices.width()), float("-inf"))
        for lo in range(0, len(choices), bs):
            rows = list(range(lo, min(lo + bs, len(choices))))
            orders = [self.letter_order(r, choices.options[r]) for r in rows]
            shown = [images[choices.media_index[r]] for r in rows]
            prompts = [self.chat(self.letter_prompt(choices.question(r), choices.options[r], o), len(p))
                       for r, o, p in zip(rows, orders, shown)]
            logits, ids, _, ends = self._forward(prompts, shown, [[] for _ in rows])
            for b, (r, order) in enumerate(zip(rows, orders)):
                last = logits[b, ends[b] - 1 - (ids.shape[1] - logits.shape[1])].float().cpu()
                for j, letter_tokens in enumerate(self.letter_ids(len(order))):
                    out[r, order[j]] = last[letter_tokens].max()
        return out


@declared.HF_VLM
def hf_vlm(options: ModelOptions) -> HFVLM:
    e = options.values
    if not options.arch:
        raise UserError("model hf_vlm needs --arch: a transformers image-text-to-text model id or folder "
                        "(e.g. llava-hf/llava-1.5-7b-hf, Qwen/Qwen2-VL-2B-Instruct)")
    from transformers import AutoModelForImageTextToText, AutoProcessor

    dtype = e["dtype"]
    torch_dtype = resolve_precision(dtype, "-M dtype=")
    try:
        processor = AutoProcessor.from_pretrained(options.arch)
        vlm = AutoModelForImageTextToText.from_pretrained(options.arch, dtype=torch_dtype)
    except (OSError, ValueError) as exc:
        raise UserError(f"--arch {options.arch}: cannot load a vision-language model and its processor ({exc})") from exc
    return HFVLM(processor, vlm, options.arch, e["scoring"], e["norm"], e["prompt"] or DEFAULT_PROMPT, dtype,
                 e["frames"])
