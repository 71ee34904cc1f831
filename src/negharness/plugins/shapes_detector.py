"""An exact detector for the embedded world: finds "<colour> <shape>" in pixels, with no learning.

Pixels within a colour distance of a named colour form connected components; a component's shape
follows from its bounding-box fill ratio and which corners it fills (square: all four; triangle:
the two lower ones; circle and cross: none, told apart by fill: ~0.79 against ~0.6). Confidence is
1.0 for a clean match. It reads what an editor produced, so it scores any editor fairly.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from negharness.api import Detection, Detector, ModelOptions, takes_options
from negharness.world.scenes import COLOURS

MAX_COLOUR_DISTANCE = 70.0
MIN_AREA = 6


def _components(mask: np.ndarray) -> list[np.ndarray]:
    """4-connected components as boolean masks (flood fill; the images are 32 px)."""
    seen = np.zeros_like(mask, dtype=bool)
    out = []
    h, w = mask.shape
    for y0, x0 in zip(*np.nonzero(mask)):
        if seen[y0, x0]:
            continue
        comp = np.zeros_like(mask, dtype=bool)
        stack = [(y0, x0)]
        seen[y0, x0] = True
        while stack:
            y, x = stack.pop()
            comp[y, x] = True
            for ny, nx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):
                if 0 <= ny < h and 0 <= nx < w and mask[ny, nx] and not seen[ny, nx]:
                    seen[ny, nx] = True
                    stack.append((ny, nx))
        out.append(comp)
    return out


def classify(comp: np.ndarray) -> str | None:
    ys, xs = np.nonzero(comp)
    if len(ys) < MIN_AREA:
        return None
    box = comp[ys.min(): ys.max() + 1, xs.min(): xs.max() + 1]
    fill = box.mean()
    corners = [box[0, 0], box[0, -1], box[-1, 0], box[-1, -1]]
    if all(corners) and fill > 0.85:
        return "square"
    if not corners[0] and not corners[1] and corners[2] and corners[3]:
        return "triangle"
    if not any(corners):
        return "circle" if fill > 0.7 else "cross"
    return None


class ShapesDetector(Detector):
    name = "shapes_exact"
    threshold = 0.5

    def detect(self, image: Any, labels: Sequence[str]) -> list[Detection]:
        pixels = np.asarray(image.convert("RGB") if hasattr(image, "convert") else image, dtype=np.float64)
        found = []
        wanted = {tuple(label.split()[-2:]) for label in labels if len(label.split()) >= 2}  # "<colour> <shape>"
        for colour in {c for c, _ in wanted}:
            if colour not in COLOURS:
                continue
            dist = np.linalg.norm(pixels - np.array(COLOURS[colour], dtype=np.float64), axis=-1)
            for comp in _components(dist < MAX_COLOUR_DISTANCE):
                shape = classify(comp)
                if shape and (colour, shape) in wanted:
                    ys, xs = np.nonzero(comp)
                    found.append(Detection(f"{colour} {shape}", 1.0,
                                           (float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1))))
        return found


@takes_options({})
def shapes_exact(options: ModelOptions) -> ShapesDetector:
    """Detector factory (no options)."""
    options.check_extra(set(), "shapes_exact")
    return ShapesDetector()
