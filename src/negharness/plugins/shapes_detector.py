"""An exact detector for the embedded world: finds "<colour> <shape>" in pixels, with no learning.

It inverts `negharness.world.render`: an opaque shape of colour c makes each pixel
``background * (1 - a) + c * a``, where ``a`` is the fraction of the pixel the shape covers
(`render.coverage`, the supersampled mask 2x2 averaged). So:

1. pixels near a named colour (within `MAX_COLOUR_DISTANCE`: the tint and the soft edges) form
   4-connected components, one per drawn shape (the world's shapes sit in separate grid cells);
2. a component's own colour (named colour + tint) is its pixel farthest from the background, and
   each pixel around it gets its coverage ``a`` back by projecting onto the background-colour line
   (pixels off that line belong to something else and count as uncovered);
3. every shape the renderer knows is fitted to that coverage map (centre and size by a pattern
   search from the map's moments), and the shape whose rendered coverage reproduces the map best
   names the component, if it explains the map to within `MAX_FIT_ERROR` of its area.

Confidence is 1.0 for a match. It reads what an editor produced, so it scores any editor fairly
(an inpainted smudge matches no shape). The world's own samples are all read exactly
(tests/test_nein.py checks every sample of nein_shapes' default split).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache
from typing import Any, Sequence

import numpy as np
from PIL import Image

from negharness.api import Detection, Detector, ModelOptions
from negharness.api.files import hash_array
from negharness.plugins import options as declared
from negharness.world.render import BACKGROUND, CANVAS, coverage, coverages
from negharness.world.scenes import COLOURS, SHAPES

MAX_COLOUR_DISTANCE = 70.0  # seeds: the tint moves a colour by at most 18 per channel (31 in all)
MIN_AREA = 6  # seed pixels; smaller specks are no shape
OFF_LINE = 6.0  # a pixel farther than this from the background-colour line is not a blend of the two
MAX_FIT_ERROR = 0.15  # sum |rendered - observed coverage| over the shape's area: what still counts as that shape
MARGIN = 2  # pixels around a component's box where its soft edge may lie
MEMO_SIZE = 4096  # components whose shape a detector remembers (their fits are most of its time)


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


@lru_cache(maxsize=None)
def _shape_constants(shape: str) -> tuple[float, float]:
    """(area / r^2, centroid's vertical offset / r) of a shape as the renderer draws it, measured
    on a large rendering (so no constant is copied from render.py by hand)."""
    r = 8.0
    cov = coverage(shape, CANVAS / 2, CANVAS / 2, r)
    area = float(cov.sum())
    ys = np.arange(CANVAS) + 0.5
    cy = float((cov.sum(axis=1) * ys).sum() / area)
    return area / (r * r), (cy - CANVAS / 2) / r


def coverage_map(pixels: np.ndarray, comp: np.ndarray) -> tuple[np.ndarray, tuple[slice, slice]]:
    """The covered fraction of each pixel near a component, and the window it lives in."""
    ys, xs = np.nonzero(comp)
    window = (slice(max(0, ys.min() - MARGIN), min(pixels.shape[0], ys.max() + 1 + MARGIN)),
              slice(max(0, xs.min() - MARGIN), min(pixels.shape[1], xs.max() + 1 + MARGIN)))
    rel = pixels - BACKGROUND
    own = rel[comp][np.argmax(np.linalg.norm(rel[comp], axis=-1))]  # the shape's colour, tint included
    sub = rel[window]
    a = np.clip(sub @ own / float(own @ own), 0.0, 1.0)
    off = np.linalg.norm(sub - a[..., None] * own, axis=-1) > OFF_LINE
    a[off] = 0.0
    out = np.zeros(pixels.shape[:2])
    out[window] = a
    return out, window


def fit(shape: str, cov: np.ndarray, window: tuple[slice, slice]) -> tuple[float, tuple[float, float, float]]:
    """(error, (cx, cy, r)): the rendering of ``shape`` closest to ``cov`` inside ``window``, error
    being sum |rendered - observed| over the observed area. The start comes from the map's moments;
    a pattern search (steps halving from 1/2 to 1/16 px) then refines it, which is exact enough
    because the renderer draws on a 1/2 px grid."""
    area = float(cov.sum())
    k_area, k_dy = _shape_constants(shape)
    ys, xs = np.mgrid[0:CANVAS, 0:CANVAS] + 0.5
    r = float(np.sqrt(area / k_area))
    params = [float((cov * xs).sum() / area), float((cov * ys).sum() / area) - k_dy * r, r]

    observed = cov[window]
    seen: dict[tuple[float, ...], float] = {}  # the search revisits points: each is rendered once

    def errors(trials: list[list[float]]) -> list[float]:
        """Each trial's error; the new ones rendered together (one numpy pass, not one per point)."""
        todo = list(dict.fromkeys(tuple(t) for t in trials if t[2] > 0 and tuple(t) not in seen))
        if todo:
            diff = np.abs(coverages(shape, np.array(todo), window) - observed)
            seen.update(zip(todo, (float(d.sum()) for d in diff)))
        return [seen[tuple(t)] if t[2] > 0 else np.inf for t in trials]

    best = errors([params])[0]
    moves = [(i, sign) for i in range(3) for sign in (1, -1)]
    for step in (0.5, 0.25, 0.125, 0.0625):
        improved = True
        while improved:  # a sweep tries each move from the current point, taking each improvement at once
            improved, pending = False, moves
            while pending:
                trials = [[v + sign * step if j == i else v for j, v in enumerate(params)] for i, sign in pending]
                hit = next((n for n, e in enumerate(errors(trials)) if e < best - 1e-12), None)
                if hit is None:
                    break
                best, params, improved = seen[tuple(trials[hit])], trials[hit], True
                pending = pending[hit + 1:]
    return best / area, (params[0], params[1], params[2])


def classify(pixels: np.ndarray, comp: np.ndarray) -> str | None:
    """The shape a component is, or None when it is too small or no shape explains it."""
    if comp.sum() < MIN_AREA:
        return None
    cov, window = coverage_map(pixels, comp)
    errors = {shape: fit(shape, cov, window)[0] for shape in SHAPES}
    shape = min(errors, key=errors.__getitem__)
    return shape if errors[shape] <= MAX_FIT_ERROR else None


def world_pixels(image: Any) -> np.ndarray:
    """(32, 32, 3) float RGB: the fitted shapes live on the world's canvas, so an editor's output of
    another size is first resized to it (box filter, which averages as the renderer does)."""
    if not hasattr(image, "convert"):
        image = Image.fromarray(np.asarray(image, dtype=np.uint8))
    image = image.convert("RGB")
    if image.size != (CANVAS, CANVAS):
        image = image.resize((CANVAS, CANVAS), Image.Resampling.BOX)
    return np.asarray(image, dtype=np.float64)


class ShapesDetector(Detector):
    name = "shapes_exact"
    threshold = 0.5

    def __init__(self) -> None:
        self._shapes: OrderedDict[tuple[str, str], str | None] = OrderedDict()  # pixels and component -> its shape
        self._lock = threading.Lock()  # the memo's order and size (a fit runs outside it)

    def _classified(self, pixels: np.ndarray, comp: np.ndarray) -> str | None:
        """`classify`, remembered by the pixels and the component (all it reads): NeIn reads each edited
        image twice (the target, then the objects it kept) and an editor that changed nothing gives back
        its source, so most components were fitted before."""
        key = (hash_array(pixels), hash_array(comp))  # each with its dtype and shape
        with self._lock:
            if key in self._shapes:
                self._shapes.move_to_end(key)
                return self._shapes[key]
        shape = classify(pixels, comp)
        with self._lock:
            self._shapes[key] = shape
            if len(self._shapes) > MEMO_SIZE:
                self._shapes.popitem(last=False)
        return shape

    def detect(self, image: Any, labels: Sequence[str]) -> list[Detection]:
        pixels = world_pixels(image)
        found = []
        wanted = {tuple(label.split()[-2:]) for label in labels if len(label.split()) >= 2}  # "<colour> <shape>"
        for colour in {c for c, _ in wanted}:
            if colour not in COLOURS:
                continue
            dist = np.linalg.norm(pixels - np.array(COLOURS[colour], dtype=np.float64), axis=-1)
            for comp in _components(dist < MAX_COLOUR_DISTANCE):
                shape = self._classified(pixels, comp)
                if shape and (colour, shape) in wanted:
                    ys, xs = np.nonzero(comp)
                    found.append(Detection(f"{colour} {shape}", 1.0,
                                           (float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1))))
        return found


@declared.NO_OPTIONS
def shapes_exact(options: ModelOptions) -> ShapesDetector:
    """Detector factory (no options)."""
    return ShapesDetector()
