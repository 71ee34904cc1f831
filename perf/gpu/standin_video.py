"""Stand-in videos written with OpenCV, not PyAV: the GPU machine has no PyAV (perf/gpu_check.sh's
training step failed on ``import av`` there) but has cv2, and opencv-python-headless is in the test extra.

MPEG-4 Part 2 in .mp4 where OpenCV's FFmpeg backend is built in (the pip wheels), else Motion-JPEG in
.avi (OpenCV's own writer, no FFmpeg needed). negharness reads both with any of its decoders (av,
decord, cv2) and its MSR-VTT-layout loaders accept both extensions. The format written is returned, so
a benchmark can say what its decoder was given.
"""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

FORMATS = (("mp4v", ".mp4"), ("MJPG", ".avi"))  # first that opens wins


def _cv2():
    try:
        import cv2
    except ImportError as exc:
        raise SystemExit("stand-in videos need OpenCV: pip install opencv-python-headless") from exc
    return cv2


def write_video(stem: Path, frames: Iterable[np.ndarray], fps: float) -> Path:
    """RGB uint8 frames (one size) written as ``stem`` plus the first extension of `FORMATS` whose
    writer opens here; returns the file written."""
    cv2 = _cv2()
    it = iter(frames)
    first = next(it)
    height, width = first.shape[:2]
    for fourcc, ext in FORMATS:
        path = stem.with_suffix(ext)
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, (width, height))
        if writer.isOpened():
            break
        writer.release()
    else:
        raise SystemExit(f"OpenCV {cv2.__version__} opens no video writer here (tried {FORMATS})")
    try:
        for frame in itertools.chain([first], it):
            writer.write(np.ascontiguousarray(frame[:, :, ::-1]))  # OpenCV takes BGR
    finally:
        writer.release()
    if path.stat().st_size == 0:
        raise SystemExit(f"OpenCV wrote an empty {path.name} ({fourcc})")
    return path


def write_videos(stems: Sequence[Path], frames_of: Callable[[int], Iterable[np.ndarray]], fps: float) -> list[Path]:
    """`write_video` for each stem (frames from ``frames_of(i)``), on every core: OpenCV's encoder
    releases the GIL, and 48 ten-second clips take ~1 s each on one core."""
    with ThreadPoolExecutor(max(1, min(len(stems), os.cpu_count() or 1))) as pool:
        return list(pool.map(lambda i: write_video(stems[i], frames_of(i), fps), range(len(stems))))
