"""InstructPix2Pix-style editors through diffusers (InstructPix2Pix, MagicBrush checkpoints).

``--model instruct_pix2pix -M model=timbrooks/instruct-pix2pix`` (or a local folder, or
``-M model=vinesmsuic/magicbrush-jul7`` for MagicBrush weights). Defaults of the published protocol:
the input's long side resized to 512 and both sides rounded to multiples of 64, 100 denoising
steps, text guidance 7.5, image guidance 1.5; every one is an ``-M`` option, as is the pipeline's
dtype (``-M precision=fp16``: editing runs take no ``--precision``). Batched, with one seeded
generator per sample so an edit does not depend on its batch.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from negharness.api import Editor, ModelOptions
from negharness.api.checkpoints import hash_state_dict, hash_tokenizer, load_or_explain
from negharness.api.files import hash_json
from negharness.api.devices import resolve_precision
from negharness.plugins import options as declared

DEFAULT = "timbrooks/instruct-pix2pix"
def fit_size(width: int, height: int, long_side: int) -> tuple[int, int]:
    """Long side to ``long_side``, aspect kept, both sides rounded to multiples of 64 (at least 64)."""
    scale = long_side / max(width, height)
    return (max(64, int(round(width * scale / 64)) * 64), max(64, int(round(height * scale / 64)) * 64))


class InstructPix2PixEditor(Editor):
    name = "instruct_pix2pix"

    def __init__(self, source: str, pipe: Any, steps: int, guidance: float, image_guidance: float, size: int,
                 precision: str = "fp32") -> None:
        self.source, self.pipe, self.precision = source, pipe, precision
        self.steps, self.guidance, self.image_guidance, self.size = steps, guidance, image_guidance, size
        self.device = torch.device("cpu")
        self._parts = pipeline_identity(pipe)  # once, on the weights as loaded (before any move to a GPU)

    def to(self, device: torch.device | str) -> "InstructPix2PixEditor":
        self.device = torch.device(device)
        self.pipe.to(self.device)
        return self

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "source": self.source, "steps": self.steps, "guidance": self.guidance,
                "image_guidance": self.image_guidance, "size": self.size, "precision": self.precision,
                "parts": self._parts}

    def edit(self, image: Any, instruction: str, seed: int) -> Any:
        return self.edit_batch([image], [instruction], [seed])[0]

    def edit_batch(self, images: Sequence[Any], instructions: Sequence[str], seeds: Sequence[int]) -> list[Any]:
        """One pipeline call per output size (a batch must share it), a generator per sample."""
        out: list[Any] = [None] * len(images)
        groups: dict[tuple[int, int], list[int]] = {}
        resized = []
        for i, img in enumerate(images):
            img = img.convert("RGB")
            width, height = img.size
            size = fit_size(width, height, self.size)
            resized.append(img.resize(size))
            groups.setdefault(size, []).append(i)
        for idx in groups.values():
            generators = [torch.Generator(device="cpu").manual_seed(int(seeds[i])) for i in idx]
            result = self.pipe(prompt=[instructions[i] for i in idx], image=[resized[i] for i in idx],
                               num_inference_steps=self.steps, guidance_scale=self.guidance,
                               image_guidance_scale=self.image_guidance, generator=generators)
            for i, img in zip(idx, result.images):
                out[i] = img
        return out


def pipeline_identity(pipe: Any) -> str:
    """What a diffusers pipeline's edits rest on, by content: each torch module's weights (UNet, VAE, text
    encoder), the tokenizer, and every other component's config (the scheduler): a folder retrained in place,
    or a hub id uploaded again, is another editor, whose edits are its own."""
    parts: dict[str, Any] = {}
    for name, part in sorted(getattr(pipe, "components", {}).items()):
        if isinstance(part, torch.nn.Module):
            parts[name] = hash_state_dict(part.state_dict())
        elif part is not None and hasattr(part, "get_vocab"):
            parts[name] = hash_tokenizer(part)
        elif part is not None:
            config = getattr(part, "config", None)
            parts[name] = [type(part).__name__, hash_json(dict(config)) if config is not None else None]
    return hash_json(parts)


@declared.INSTRUCT_PIX2PIX
def instruct_pix2pix(options: ModelOptions) -> InstructPix2PixEditor:
    opts = options.values
    source = opts["model"] or options.arch or options.checkpoint or DEFAULT
    from diffusers import StableDiffusionInstructPix2PixPipeline

    dtype = resolve_precision(opts["precision"], "-M precision=")
    pipe = load_or_explain("instruct_pix2pix", str(source), lambda: StableDiffusionInstructPix2PixPipeline.from_pretrained(
        source, torch_dtype=dtype, safety_checker=None, requires_safety_checker=False))
    pipe.set_progress_bar_config(disable=True)
    return InstructPix2PixEditor(str(source), pipe, opts["steps"], opts["guidance"], opts["image_guidance"], opts["size"],
                                 opts["precision"])
