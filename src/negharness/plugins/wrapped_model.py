"""A model around another one (`boolean`, `steer`): it holds the base's torch modules and embeds media,
and by default texts, exactly as the base does, so a wrapper says only what it changes. Without it each
wrapper restated the delegation, and the copies drifted (`boolean` lacked the base's tensor decoding and
text batching)."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from negharness.api import EmbeddingModel


class WrappedModel(EmbeddingModel):
    """Everything the host asks of a model, answered by ``base``; a subclass overrides what it changes."""

    def __init__(self, base: EmbeddingModel, name: str) -> None:
        super().__init__()
        self.base = base
        self.name = name
        self.modalities = base.modalities
        self.frame_sampling = base.frame_sampling

    def modules(self) -> list[torch.nn.Module]:
        return self.base.modules()

    def to(self, device: torch.device | str) -> "WrappedModel":
        self.base.to(device)
        self.device = self.base.device
        return self

    def describe(self) -> dict[str, Any]:
        return self.base.describe()

    def preprocess_image(self, image: Any) -> torch.Tensor:
        return self.base.preprocess_image(image)

    def preprocess_video(self, frames: Any) -> torch.Tensor:
        return self.base.preprocess_video(frames)

    def preprocess_batch(self, raw: Any, kind: str) -> torch.Tensor:
        return self.base.preprocess_batch(raw, kind)

    def pixel_transform(self) -> Any:
        return self.base.pixel_transform()

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.base.encode_image(pixels)

    def encode_video(self, frames: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.base.encode_video(frames, mask)

    def text_batches(self, texts: Sequence[str], batch_size: int) -> list[list[int]]:
        return self.base.text_batches(texts, batch_size)

    def prepare_texts(self, texts: Sequence[str]) -> Any:
        return self.base.prepare_texts(texts)

    def encode_prepared(self, prepared: Any) -> torch.Tensor:
        return self.base.encode_prepared(prepared)

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        return self.base.encode_text(texts)
