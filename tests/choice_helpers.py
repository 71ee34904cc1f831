"""A fake model whose cosine with each image is chosen by the test, and image writers for the readers' tests."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from negharness.model import EmbeddingModel
from negharness.runner import EvalContext, RunSettings
from negharness.task import TaskOptions

COLOUR_AXES = {"red": 0, "green": 1, "blue": 2}
RGB = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}


class TableModel(EmbeddingModel):
    """Images embed as the one-hot of their dominant colour; a caption in ``table`` embeds as
    [s_red, s_green, s_blue, rest], so its cosine with a red image is exactly s_red. Captions not in
    the table score 0 with every image. Two captions with equal rows tie exactly."""

    name = "table"
    modalities = frozenset({"text", "image"})

    def __init__(self, table: dict[str, dict[str, float]]) -> None:
        super().__init__()
        self.table = table

    def describe(self) -> dict[str, Any]:
        return {"arch": "table", "rows": sorted((k, sorted(v.items())) for k, v in self.table.items())}

    def preprocess_image(self, image: Any) -> torch.Tensor:
        arr = np.asarray(image.convert("RGB") if hasattr(image, "convert") else image, dtype=np.float32)
        return torch.from_numpy(arr.reshape(-1, 3).mean(0))

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(pixels.shape[0], 4)
        out[torch.arange(pixels.shape[0]), pixels.argmax(1)] = 1.0
        return out

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        rows = []
        for t in texts:
            sims = [self.table.get(t, {}).get(c, 0.0) for c in COLOUR_AXES]
            rows.append(sims + [math.sqrt(max(0.0, 1 - sum(s * s for s in sims)))])
        return torch.tensor(rows, dtype=torch.float32)


def write_image(path: Path, colour: str, size: int = 16, right: str | None = None) -> Path:
    """A solid JPEG, or with ``right`` its right half in another colour (to check crops)."""
    from PIL import Image

    arr = np.zeros((size, size, 3), dtype=np.uint8)
    arr[:] = RGB[colour]
    if right:
        arr[:, size // 2:] = RGB[right]
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path, quality=95)
    return path


def evaluate(task_cls: type, root: Path, model: EmbeddingModel, **extra: Any):
    """Run one task on one model in this process, as `negharness run` would, without the cache."""
    task = task_cls(TaskOptions(root, **extra))
    missing = [p for p in task.required_files() if not p.exists()]
    assert not missing, missing
    return task.evaluate(EvalContext(model, RunSettings(), None, log_samples=True))
