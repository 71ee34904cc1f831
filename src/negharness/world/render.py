"""Pixels for the embedded world: anti-aliased shapes, motion trails, blinking.

Rendering is vectorised numpy at 2x supersampling, then 2x2 averaged to the 32 px canvas, so
edges are soft and a conv tower sees shape rather than aliasing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .scenes import COLOURS, Scene, ShapeObject

CANVAS = 32
FRAMES = 4
_SS = 2  # supersampling factor
BACKGROUND = np.array([24.0, 24.0, 28.0])  # the canvas colour; the exact detector reads pixels against it
_TRAIL = (0.45, 0.2)  # opacity of the copies one and two steps behind a moving shape
_STEP = 2.2  # pixels per frame for sliding and bouncing
_REACH = 1.1  # the farthest a shape covers from its centre, in sizes (the triangle's base: 1.1 r)

_grid = (np.arange(CANVAS * _SS, dtype=np.float32) + 0.5) / _SS
_GX, _GY = np.meshgrid(_grid, _grid)


def _f32(value: Any) -> np.ndarray:
    """A float64 value (scalar or array) rounded to float32: what a Python float becomes beside the
    float32 grid, so k placements as arrays give the very masks k scalar calls give."""
    rounded: np.ndarray = np.asarray(value, dtype=np.float64).astype(np.float32)
    return rounded


def _mask(shape: str, cx: Any, cy: Any, r: Any, gx: np.ndarray = _GX, gy: np.ndarray = _GY) -> np.ndarray:
    """The supersampled pixels the shape covers (over the whole canvas, or the part of the grid given).
    Centres and sizes may be (k, 1, 1) arrays, giving k masks; products of the size are taken in float64
    and then rounded, as Python floats are."""
    r = np.asarray(r, dtype=np.float64)
    dx, dy = gx - _f32(cx), gy - _f32(cy)
    covered: np.ndarray  # bool, numpy's operators on an untyped dtype read as Any
    if shape == "circle":
        covered = (dx * dx + dy * dy) <= _f32(r * r)
    elif shape == "square":
        covered = np.maximum(np.abs(dx), np.abs(dy)) <= _f32(r * 0.82)
    elif shape == "triangle":  # apex up
        t = (dy + _f32(r)) / _f32(2 * r)
        covered = (t >= 0) & (t <= 1) & (np.abs(dx) <= t * _f32(r) * np.float32(1.1))
    elif shape == "cross":
        arm = _f32(r * 0.36)
        covered = ((np.abs(dx) <= arm) & (np.abs(dy) <= _f32(r))) | ((np.abs(dy) <= arm) & (np.abs(dx) <= _f32(r)))
    else:
        raise ValueError(f"unknown shape {shape!r}")
    return covered


def coverage(shape: str, cx: float, cy: float, r: float,
             window: tuple[slice, slice] | None = None) -> np.ndarray:
    """(32, 32) float: the fraction of each pixel the shape covers, as `render_frame` draws it (the
    supersampled mask, 2x2 averaged). A pixel of an opaque shape is background * (1 - c) + colour * c.
    With ``window`` (slices with start and stop), only that part: equal to ``coverage(...)[window]``,
    as each pixel reads only its own supersamples (the exact detector's fit evaluates it ~10^5 times)."""
    one: np.ndarray = coverages(shape, np.array([[cx, cy, r]]), window)[0]
    return one


def coverages(shape: str, params: np.ndarray, window: tuple[slice, slice] | None = None) -> np.ndarray:
    """`coverage` of k placements at once: ``params`` (k, 3) rows of (cx, cy, r) -> (k, h, w)."""
    gx, gy = _GX, _GY
    if window is not None:
        ys, xs = window
        grid = (slice(ys.start * _SS, ys.stop * _SS), slice(xs.start * _SS, xs.stop * _SS))
        gx, gy = _GX[grid], _GY[grid]
    h, w = gx.shape[0] // _SS, gx.shape[1] // _SS
    cx, cy, r = (np.asarray(params[:, i], dtype=np.float64)[:, None, None] for i in range(3))
    counts = _mask(shape, cx, cy, r, gx, gy).reshape(len(params), h, _SS, w, _SS).sum(axis=(2, 4))
    fractions: np.ndarray = counts * (1.0 / (_SS * _SS))  # a count of quarters: exact, as the mean was
    return fractions


def _position(o: ShapeObject, t: float) -> tuple[float, float]:
    """Centre at (possibly fractional) time t; t=0 is the clip's middle."""
    if o.action == "sliding":
        return o.x + o.direction * _STEP * t, o.y
    if o.action == "bouncing":  # up and down: a vertical trail, where sliding leaves a horizontal one
        return o.x, o.y + o.direction * _STEP * t
    return o.x, o.y


def _visible(o: ShapeObject, frame: int) -> bool:
    return o.action != "blinking" or (frame + o.phase) % 2 == 0


def _window(cx: float, cy: float, r: float) -> tuple[slice, slice]:
    """The rows and columns of the supersampled grid a shape of size ``r`` at (cx, cy) can cover (its
    reach, `_REACH` sizes, and a pixel more): its mask and blend are worked out there alone, the same
    values on a sixth of the grid."""
    reach, size = r * _REACH + 1.0, CANVAS * _SS

    def span(centre: float) -> slice:
        lo, hi = int(np.floor((centre - reach) * _SS)), int(np.floor((centre + reach) * _SS)) + 2
        return slice(min(max(lo, 0), size), min(max(hi, 0), size))

    return span(cy), span(cx)


def _layers(o: ShapeObject, frame: int, frames: int) -> list[tuple[tuple[slice, slice], np.ndarray, float]]:
    """(window, mask there, opacity) for one object in one frame: trail copies first, the shape last."""
    if not _visible(o, frame):
        return []
    t = frame - (frames - 1) / 2
    trail = o.action in ("sliding", "bouncing")
    placed = [(_position(o, t - back), alpha) for back, alpha in zip((2, 1), reversed(_TRAIL))] if trail else []
    out = []
    for (cx, cy), alpha in [*placed, (_position(o, t), 1.0)]:
        window = _window(cx, cy, o.size)
        out.append((window, _mask(o.shape, cx, cy, o.size, _GX[window], _GY[window]), alpha))
    return out


_EMPTY = np.broadcast_to(BACKGROUND, (CANVAS * _SS, CANVAS * _SS, 3)).copy()  # the supersampled blank canvas


def render_frame(scene: Scene, frame: int = 0, frames: int = 1) -> np.ndarray:
    """One uint8 frame, (32, 32, 3). Each layer is blended into its window only, where it covers:
    ``old * (1 - alpha) + colour * alpha``, pixel by pixel."""
    img = _EMPTY.copy()
    for o in scene.objects:
        colour = np.clip(np.array(COLOURS[o.colour], dtype=np.float64) + o.tint, 0, 255)
        for window, mask, alpha in _layers(o, frame, frames):
            part = img[window]  # a view of the canvas
            np.copyto(part, part * (1 - alpha) + colour * alpha, where=mask[..., None])
    return _downsample(img)


def _downsample(img: np.ndarray) -> np.ndarray:
    """The 2x2 mean of the supersampled canvas (`_SS` is 2), rounded to uint8. Its four samples are added
    in the order numpy's ``mean(axis=(1, 3))`` adds them (the same float64 sums, bit for bit: the world's pixels
    stay what they were), at a tenth of that reduction's cost over strided axes."""
    q = img.reshape(CANVAS, _SS, CANVAS, _SS, 3)
    total = ((q[:, 0, :, 0] + q[:, 0, :, 1]) + q[:, 1, :, 0]) + q[:, 1, :, 1]
    pixels: np.ndarray = np.round(total / (_SS * _SS)).astype(np.uint8)
    return pixels


def render_video(scene: Scene, frames: int = FRAMES) -> np.ndarray:
    """uint8 (frames, 32, 32, 3)."""
    return np.stack([render_frame(scene, f, frames) for f in range(frames)])


def render_image(scene: Scene) -> np.ndarray:
    return render_frame(scene, 0, 1)
