"""How a video becomes frames: a value every model, task and cache key agrees on (no decoder here)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from negharness.contracts.errors import UserError

if TYPE_CHECKING:  # numpy loads when frames are sampled, not when the face is imported
    import numpy as np


@dataclass(frozen=True)
class FrameSampling:
    """``segments``: K frames at the centres of K equal segments (NegBench 4, CLIP4Clip 12).
    ``fps``: one frame every 1/fps seconds (nT2VR: fps=2, every 0.5 s), at most ``max_frames``.
    ``uniform``: K frames evenly spaced from the first to the last, ``linspace(0, n - 1, K)``
    truncated, as the nT2VR authors' training loader samples (8 frames).

    The rule names times (`times`); the frame taken for each is the one on screen then, the latest
    shown at or before it (`at_times`): on a constant frame rate these are the indices above, and a
    variable-frame-rate video gets the frames of those times, not of those indices."""

    mode: str = "segments"
    frames: int = 4
    fps: float = 2.0
    max_frames: int | None = None

    def __post_init__(self) -> None:
        problem = sampling_problem(self.mode, self.frames, self.fps, self.max_frames)
        if problem:
            raise UserError(f"frame sampling {self.mode}: {problem}")

    @classmethod
    def parse(cls, spec: str, option: str = "frames") -> "FrameSampling":
        """``segments:12``, ``fps:2`` or ``fps:2:max=64``. A bad spec is a `UserError` that starts with
        the option as given (``-M frames=fps:inf: ...``): caught here, not by the first video it meets."""
        where = f"{option}={spec}"
        parts = spec.split(":")
        try:
            if parts[0] in ("segments", "uniform") and len(parts) == 2:
                mode, frames, fps, cap = parts[0], int(parts[1]), 2.0, None
            elif parts[0] == "fps" and len(parts) == 2:
                mode, frames, fps, cap = "fps", 4, float(parts[1]), None
            elif parts[0] == "fps" and len(parts) == 3 and parts[2].startswith("max="):
                mode, frames, fps, cap = "fps", 4, float(parts[1]), int(parts[2].removeprefix("max="))
            else:
                raise ValueError(spec)
        except ValueError:
            raise UserError(f"{where}: expected segments:K, uniform:K, fps:F or fps:F:max=N") from None
        problem = sampling_problem(mode, frames, fps, cap)
        if problem:
            raise UserError(f"{where}: {problem}")
        return cls(mode, frames=frames, fps=fps, max_frames=cap)

    @property
    def key(self) -> str:
        if self.mode in ("segments", "uniform"):
            return f"{self.mode}:{self.frames}"
        return f"fps:{self.fps:g}" + (f":max={self.max_frames}" if self.max_frames else "")

    def indices(self, n_frames: int, native_fps: float) -> np.ndarray:
        """Frame indices to take from a clip of ``n_frames`` shown at a constant ``native_fps`` (a
        frame folder, a decoder without timestamps): `at_times` on that clock, e.g. segments:4 of 100
        frames -> 12, 37, 62, 87 (the frames at the segments' centres)."""
        import numpy as np

        return self.at_times(np.arange(max(0, n_frames)) / native_fps, n_frames / native_fps)

    def times(self, first: float, last: float, end: float) -> np.ndarray:
        """The presentation times (seconds) the rule names in a clip whose frames are shown from
        ``first`` to ``last`` and which ends at ``end`` (when the last frame stops showing): segment
        centres of [first, end), ``uniform``'s evenly spaced times from first to last, or every
        1/fps s from first while before end."""
        import numpy as np

        if self.mode == "segments":
            return first + (np.arange(self.frames) + 0.5) * (end - first) / self.frames
        if self.mode == "uniform":
            return np.linspace(first, last, self.frames)
        count = max(1, int(np.ceil((end - first) * self.fps - 1e-9)))
        return first + np.arange(count) / self.fps

    def at_times(self, shown: np.ndarray, end: float) -> np.ndarray:
        """Indices into ``shown`` (the presentation times of a clip's frames, ascending, in seconds):
        for each time the rule names, the frame on screen then, i.e. the latest shown at or before
        it (a variable-frame-rate clip gets the frames of those times, not of those indices). On a
        constant rate this is `indices`, frame for frame."""
        import numpy as np

        if len(shown) == 0:
            return np.zeros(0, dtype=np.int64)
        wanted = self.times(float(shown[0]), float(shown[-1]), end)
        slack = 1e-6 * max(1.0, abs(end))  # float rounding of a time that falls on a frame's own
        idx = np.clip(np.searchsorted(shown, wanted + slack, side="right") - 1, 0, len(shown) - 1).astype(np.int64)
        if self.mode != "fps":
            return idx
        idx = np.unique(idx)
        if self.max_frames and len(idx) > self.max_frames:  # keep the span: subsample evenly
            idx = idx[np.linspace(0, len(idx) - 1, self.max_frames).round().astype(np.int64)]
        return idx


def sampling_problem(mode: str, frames: int, fps: float, max_frames: int | None) -> str | None:
    """Why these values cannot sample a video, or None: every number finite and positive, so no video
    fails later on them (``fps:inf`` divided by zero, ``max=0`` meant no cap) with the blame on the video."""
    if mode not in ("segments", "fps", "uniform"):
        return "use segments:K, uniform:K or fps:F"
    if mode in ("segments", "uniform") and frames < 1:
        return f"{mode}:K needs K >= 1"
    if mode == "fps" and not (math.isfinite(fps) and fps > 0):
        return "fps:F needs a finite F > 0"
    if mode == "fps" and max_frames is not None and max_frames < 1:
        return "fps:F:max=N needs N >= 1"
    return None
