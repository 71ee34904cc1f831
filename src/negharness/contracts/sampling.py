"""How a video becomes frames: a value every model, task and cache key agrees on (no decoder here)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from negharness.contracts.errors import UserError


@dataclass(frozen=True)
class FrameSampling:
    """``segments``: K frames at the centres of K equal segments (NegBench 4, CLIP4Clip 12).
    ``fps``: one frame every 1/fps seconds (nT2VR: fps=2, every 0.5 s), at most ``max_frames``.
    ``uniform``: K frames evenly spaced from the first to the last, ``linspace(0, n - 1, K)``
    truncated, as the nT2VR authors' training loader samples (8 frames)."""

    mode: str = "segments"
    frames: int = 4
    fps: float = 2.0
    max_frames: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("segments", "fps", "uniform"):
            raise UserError(f"frame sampling {self.mode!r}: use segments:K, uniform:K or fps:F")
        if self.mode in ("segments", "uniform") and self.frames < 1:
            raise UserError(f"frame sampling {self.mode}:K needs K >= 1")
        if self.mode == "fps" and self.fps <= 0:
            raise UserError("frame sampling fps:F needs F > 0")

    @classmethod
    def parse(cls, spec: str) -> "FrameSampling":
        """``segments:12``, ``fps:2`` or ``fps:2:max=64``."""
        parts = spec.split(":")
        try:
            if parts[0] in ("segments", "uniform") and len(parts) == 2:
                return cls(parts[0], frames=int(parts[1]))
            if parts[0] == "fps" and len(parts) in (2, 3):
                cap = int(parts[2].removeprefix("max=")) if len(parts) == 3 else None
                return cls("fps", fps=float(parts[1]), max_frames=cap)
        except ValueError:
            pass
        raise UserError(f"frame sampling {spec!r}: expected segments:K, uniform:K, fps:F or fps:F:max=N")

    @property
    def key(self) -> str:
        if self.mode in ("segments", "uniform"):
            return f"{self.mode}:{self.frames}"
        return f"fps:{self.fps:g}" + (f":max={self.max_frames}" if self.max_frames else "")

    def indices(self, n_frames: int, native_fps: float) -> np.ndarray:
        """Frame indices to take from a clip of ``n_frames`` at ``native_fps``."""
        if n_frames <= 0:
            return np.zeros(0, dtype=np.int64)
        if self.mode == "segments":
            centres = (np.arange(self.frames) + 0.5) * n_frames / self.frames
            return np.minimum(centres.astype(np.int64), n_frames - 1)
        if self.mode == "uniform":
            return np.linspace(0, n_frames - 1, self.frames).astype(np.int64)
        step = native_fps / self.fps
        idx = np.unique(np.minimum(np.floor(np.arange(0, n_frames, step)).astype(np.int64), n_frames - 1))
        if self.max_frames and len(idx) > self.max_frames:  # keep the span: subsample evenly
            idx = idx[np.linspace(0, len(idx) - 1, self.max_frames).round().astype(np.int64)]
        return idx
