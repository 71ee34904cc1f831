"""DINO image similarity (NeIn's and MagicBrush's DINO metric): ViT-S/16 CLS embeddings, cosine.

Preprocessing as DINO's evaluation: resize the short side to 256 (bicubic), centre-crop 224,
ImageNet mean/std. Default ``facebook/dino-vits16`` through transformers, or a local folder.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from negharness.hub import load_or_explain

DEFAULT = "facebook/dino-vits16"


class DinoSimilarity:
    def __init__(self, source: str, model: Any, size: int = 224, resize: int = 256) -> None:
        from torchvision import transforms

        self.source, self.model = source, model.eval()
        self.transform = transforms.Compose([
            transforms.Resize(resize, interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.CenterCrop(size), transforms.ToTensor(),
            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])

    @torch.inference_mode()
    def cosine(self, a: Any, b: Any) -> float:
        x = torch.stack([self.transform(i.convert("RGB")) for i in (a, b)]).to(self.model.device)
        cls = F.normalize(self.model(pixel_values=x).last_hidden_state[:, 0], dim=-1)
        return float((cls[0] * cls[1]).sum())


def load_dino(source: str = DEFAULT) -> DinoSimilarity:
    from transformers import AutoModel

    model = load_or_explain("DINO", source, lambda: AutoModel.from_pretrained(source),
                            "-T dino_model=FOLDER (or -T dino_model=none)")
    size = getattr(model.config, "image_size", 224)
    return DinoSimilarity(str(source), model, size=size, resize=int(round(size * 256 / 224)))
