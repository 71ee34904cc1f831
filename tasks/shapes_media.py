"""Rendered pixels of a world split, cached on disk (atomic .npy) so a split is drawn once per machine."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from negharness.atomic import atomic_write_bytes
from negharness.paths import cache_root

from .shapes_render import render_image, render_video
from .shapes_world import WORLD_VERSION, WorldSplit


def _render(split: WorldSplit) -> np.ndarray:
    draw = render_video if split.kind == "video" else render_image
    return np.stack([draw(s) for s in split.scenes])


def split_media(split: WorldSplit, cache_dir: str | Path | None = None) -> np.ndarray:
    """uint8 pixels: (N, T, 32, 32, 3) for videos, (N, 32, 32, 3) for images."""
    folder = cache_root(cache_dir) / "shapes_world"
    path = folder / f"v{WORLD_VERSION}-s{split.seed}-{split.split}-{split.kind}-{len(split.ids)}.npy"
    if path.is_file():
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            path.unlink(missing_ok=True)  # a damaged cache file is redrawn, never trusted
    pixels = _render(split)
    buf = io.BytesIO()
    np.save(buf, pixels, allow_pickle=False)
    atomic_write_bytes(path, buf.getvalue())
    return pixels
