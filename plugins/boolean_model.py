"""The boolean-operation baseline (Wu & Ngo) as a wrapper around any retrieval model.

``--model boolean -M base=clip`` embeds exactly as the base model does (and shares its cached
embeddings); tasks that know a query's positive and negative parts score it as
s(positive) - s(negative) (see `negharness.retrieval.similarities`). Composed queries use their
stored parts; negated queries the negator's cue and rule-based scope. Queries without a negative
part score as the base model would.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from negharness.errors import UserError
from negharness.model import EmbeddingModel, ModelOptions


class BooleanModel(EmbeddingModel):
    boolean = True

    def __init__(self, base: EmbeddingModel, base_name: str) -> None:
        super().__init__()
        self.base = base
        self.name = f"boolean({base_name})"
        self.modalities = base.modalities
        self.frame_sampling = base.frame_sampling

    def modules(self) -> list[torch.nn.Module]:
        return self.base.modules()

    def to(self, device: torch.device | str) -> "BooleanModel":
        self.base.to(device)
        self.device = self.base.device
        return self

    def describe(self) -> dict[str, Any]:
        return self.base.describe()

    def fingerprint(self) -> str:
        return self.base.fingerprint()  # same embeddings as the base: share its cache

    def preprocess_image(self, image: Any) -> torch.Tensor:
        return self.base.preprocess_image(image)

    def preprocess_video(self, frames: Any) -> torch.Tensor:
        return self.base.preprocess_video(frames)

    def preprocess_batch(self, raw: Any, kind: str) -> torch.Tensor:
        return self.base.preprocess_batch(raw, kind)

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        return self.base.encode_text(texts)

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.base.encode_image(pixels)

    def encode_video(self, frames: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.base.encode_video(frames, mask)


def boolean(options: ModelOptions) -> BooleanModel:
    """``-M base=NAME``: the model to wrap; every other option goes to it."""
    base_name = options.extra.get("base")
    if not base_name:
        raise UserError("model boolean needs -M base=MODEL (the retrieval model to wrap, e.g. -M base=clip)")
    if base_name == "boolean":
        raise UserError("-M base=boolean: the wrapper cannot wrap itself")
    from negharness.plugin_manager import active_host

    rest = {k: v for k, v in options.extra.items() if k != "base"}
    base = active_host().registry.create("model", base_name,
                                         ModelOptions(options.arch, options.pretrained, options.checkpoint, rest))
    return BooleanModel(base, base_name)
