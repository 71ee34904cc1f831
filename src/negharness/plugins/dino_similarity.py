"""DINO image similarity (NeIn's and MagicBrush's DINO metric) as an image-only model plugin.

ViT-S/16 CLS embeddings, cosine. Preprocessing as DINO's evaluation: resize the short side to 256
(bicubic), centre-crop 224, ImageNet mean/std. Default ``facebook/dino-vits16`` through
transformers, or a local folder (``--arch`` / NeIn's ``-T dino_model=``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from negharness.api import EmbeddingModel, ModelOptions, UserError
from negharness.api.checkpoints import hash_state_dict, load_or_explain
from negharness.plugins import options as declared

DEFAULT = "facebook/dino-vits16"


class DinoModel(EmbeddingModel):
    """Images only: DINO has no text tower, so tasks that need text never get it (modalities)."""

    name = "dino"
    modalities = frozenset({"image"})

    def __init__(self, source: str, model: Any, size: int = 224, resize: int = 256) -> None:
        super().__init__()
        from torchvision import transforms

        self.source, self.model, self.size, self.resize = source, model.eval(), size, resize
        self._weights = hash_state_dict(model.state_dict())  # a folder retrained in place is another model
        self.transform = transforms.Compose([
            transforms.Resize(resize, interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.CenterCrop(size), transforms.ToTensor(),
            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])

    def modules(self) -> list[torch.nn.Module]:
        return [self.model]

    def describe(self) -> dict[str, Any]:
        return {"arch": "dino", "source": self.source, "size": self.size, "resize": self.resize, "weights": self._weights}

    def preprocess_image(self, image: Any) -> torch.Tensor:
        from PIL import Image

        pil = Image.fromarray(np.asarray(image)) if isinstance(image, np.ndarray) else image.convert("RGB")
        pixels: torch.Tensor = self.transform(pil)  # a torchvision Compose: its call reads as Any
        return pixels

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.model(pixel_values=pixels).last_hidden_state[:, 0], dim=-1)

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        raise UserError("model dino embeds images only")


def load_dino(source: str = DEFAULT) -> DinoModel:
    from transformers import AutoModel

    model = load_or_explain("DINO", source, lambda: AutoModel.from_pretrained(source),
                            "-T dino_model=FOLDER (or -T dino_model=none)")
    size = getattr(model.config, "image_size", 224)
    return DinoModel(str(source), model, size=size, resize=int(round(size * 256 / 224)))


@declared.NO_OPTIONS
def dino(options: ModelOptions) -> DinoModel:
    """``--arch ID_OR_FOLDER`` (default facebook/dino-vits16)."""
    return load_dino(options.arch or DEFAULT)
