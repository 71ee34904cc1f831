"""nT2VR's frame index (``id.imagepath.txt``): which pre-extracted frame files make each video."""

from __future__ import annotations

from pathlib import Path

from negharness.api import UserError
from negharness.api.files import RootGuard, require_regular
from negharness.text.nt2vr_files import open_text


def read_frame_index(path: str | Path, root: str | Path | None = None,
                     data_root: str | Path | None = None) -> dict[str, list[Path]]:
    """``id.imagepath.txt``: lines ``<video_id>_<frame_no> <image path>`` -> video id -> frames in order.

    Relative image paths resolve against ``root`` (default: the index file's folder). With
    ``data_root``, every frame path must stay under it, symlinks followed (`RootGuard`): an error
    names the index file and line.
    """
    path = Path(path)
    base = Path(root) if root is not None else path.parent
    guard = RootGuard(data_root) if data_root is not None else None
    frames: dict[str, list[tuple[int, Path]]] = {}
    require_regular(path)
    with open_text(path) as fh:  # a BOM is dropped
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            parts = line.split(maxsplit=1)
            vid, sep, num = parts[0].rpartition("_")
            if len(parts) != 2 or not sep or not num.isdigit():
                raise UserError(f"{path}:{lineno}: expected '<video_id>_<frame_no> <image path>', got {line.strip()!r}")
            frame = base / parts[1].strip()
            if guard is not None:
                frame = guard.check(frame, f"{path}:{lineno}")
            frames.setdefault(vid, []).append((int(num), frame))
    return {vid: [p for _, p in sorted(items)] for vid, items in frames.items()}
