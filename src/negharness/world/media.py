"""A world split as tasks and trainers use it: ids, captions, relevance groups and pixels.

The split is a dataset like any other, so it lives under the data root
(``<data root>/shapes_world/``), generated on first use and written atomically; later runs load it
in milliseconds. Where the data root cannot be written, the split is generated in memory.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np

from negharness.api.files import atomic_write_bytes, hash_array

from .render import render_image, render_video
from .scenes import WORLD_VERSION, build_split


@dataclass(frozen=True)
class WorldData:
    ids: list[str]
    captions: list[list[str]]
    groups: list[str]  # facts key per item: equal keys are indistinguishable items
    pixels: np.ndarray  # uint8 (N, T, 32, 32, 3) for videos, (N, 32, 32, 3) for images (read-only)

    def __post_init__(self) -> None:
        self.pixels.flags.writeable = False  # the keys below stay the pixels' hashes

    @cached_property
    def row_keys(self) -> list[str]:
        """Each item's content hash, once per split and process (`MediaSet.content_keys`), not on every
        embedding call. Per item, not for the whole array: a ``--limit`` split is the first items of the
        full one, and shares their cache entries."""
        return [hash_array(row) for row in self.pixels]


def _generate(seed: int, split: str, kind: str, n: int) -> WorldData:
    ws = build_split(seed, split, kind, n)
    draw = render_video if kind == "video" else render_image
    pixels = np.stack([draw(s) for s in ws.scenes])
    return WorldData(ws.ids, ws.captions, ws.relevance_groups(), pixels)


def _encode(data: WorldData) -> bytes:
    meta = json.dumps({"ids": data.ids, "captions": data.captions, "groups": data.groups})
    buf = io.BytesIO()
    np.savez(buf, pixels=data.pixels, meta=np.array(meta))
    return buf.getvalue()


def _decode(path: Path) -> WorldData:
    with np.load(path, allow_pickle=False) as npz:
        meta = json.loads(str(npz["meta"]))
        return WorldData(meta["ids"], meta["captions"], meta["groups"], npz["pixels"])


def world_file(seed: int, split: str, kind: str, n: int, root: Path | None) -> Path | None:
    """Where a split of the world is kept under the data root (None: generated in memory only)."""
    return None if root is None else Path(root) / "shapes_world" / f"v{WORLD_VERSION}-s{seed}-{split}-{kind}-{n}.npz"


def kept_world_file(seed: int, split: str, kind: str, n: int, root: Path | None) -> Path | None:
    """The split's file under the data root, made there when absent and the root can be written; None
    where it cannot (the split then lives in memory). A file that exists is not decoded here: planning
    hashes it, and the run reads it (what a record's numbers rest on)."""
    path = world_file(seed, split, kind, n, root)
    if path is None:
        return None
    if not path.exists():
        if not _can_write(path.parent):
            return None  # a read-only data root: nothing would be written, so nothing is generated here
        load_world(seed, split, kind, n, root)
    return path if path.is_file() else None


def _can_write(folder: Path) -> bool:
    """Whether a file could be made in ``folder``: it, or its nearest existing parent, is writable."""
    while not folder.exists():
        if folder.parent == folder:
            return False
        folder = folder.parent
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


def load_world(seed: int, split: str, kind: str, n: int, root: Path | None) -> WorldData:
    """The split, read from its file under the data root (made there when absent). Kept in memory per
    process, keyed by the file as it stands (size, mtime, inode): a file rewritten since is read again."""
    path = world_file(seed, split, kind, n, root)
    try:
        st = path.stat() if path is not None else None
    except OSError:
        st = None
    stamp = None if st is None else (st.st_size, st.st_mtime_ns, st.st_ino)
    return _load_world(seed, split, kind, n, root, stamp)


@lru_cache(maxsize=16)
def _load_world(seed: int, split: str, kind: str, n: int, root: Path | None,
                stamp: tuple[int, int, int] | None) -> WorldData:
    path = world_file(seed, split, kind, n, root)
    if path is None:
        return _generate(seed, split, kind, n)
    if path.is_file():
        try:
            return _decode(path)
        except (OSError, ValueError, KeyError):
            pass  # a damaged file is regenerated, never trusted
    data = _generate(seed, split, kind, n)
    try:
        atomic_write_bytes(path, _encode(data))
    except OSError:
        pass  # read-only data root: the split still works, generated in memory
    return data
