"""Content hashes of data and weight files, cheap on reruns: a memo keyed by (size, mtime, ctime, inode).

A record is reused only when the files it read are unchanged, so every run hashes them. Reading
gigabytes of media on every run would cost more than the run it saves; a file whose size, mtime,
ctime and inode are what they were when it was hashed is taken to have the same content (a
replaced file gets a new inode or ctime, an edited one a new mtime), so a warm rerun costs one
``stat`` per file. The memo lives in the cache folder (``file-hashes.json``) and is written
atomically; a missing or damaged memo only means hashing again.

Only regular files are hashed: a FIFO or a device under the data root is an error naming it, never
a hang (`negharness.paths.require_regular`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable

from .atomic import atomic_write_json
from .errors import UserError
from .paths import require_regular

CHUNK = 1 << 20
MEMO_NAME = "file-hashes.json"


def content_hash(path: Path) -> str:
    """blake2b-128 of the bytes (about as fast as the disk on one core)."""
    h = hashlib.blake2b(digest_size=16)
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(CHUNK):
                h.update(chunk)
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    return h.hexdigest()


class FileHasher:
    """Hashes files (and folders, as the sorted hashes of the regular files under them) with a memo."""

    def __init__(self, memo_path: Path | None = None) -> None:
        self.memo_path = memo_path
        self._memo: dict[str, list] = self._load() if memo_path else {}
        self._dirty = False
        self.hashed_bytes = 0  # bytes read this run (0 on a warm rerun): for benchmarks and tests

    def _load(self) -> dict[str, list]:
        try:
            memo = json.loads(Path(self.memo_path).read_text())
        except (OSError, ValueError):
            return {}
        return memo if isinstance(memo, dict) else {}

    def hash_file(self, path: Path, where: str = "") -> str:
        st = require_regular(path, where)
        key = os.path.abspath(path)
        stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        old = self._memo.get(key)
        if isinstance(old, list) and old[:4] == stamp and len(old) == 5:
            return old[4]
        digest = content_hash(Path(path))
        self.hashed_bytes += st.st_size
        self._memo[key] = [*stamp, digest]
        self._dirty = True
        return digest

    def hash_path(self, path: Path, where: str = "") -> str:
        """A file's hash, or a folder's: its regular files' relative names and hashes, hashed."""
        path = Path(path)
        if not path.is_dir():
            return self.hash_file(path, where)
        parts = []
        for sub in sorted(p for p in path.rglob("*") if p.is_file()):
            parts.append(f"{sub.relative_to(path).as_posix()}\0{self.hash_file(sub, where)}")
        return hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()

    def hash_many(self, paths: Iterable[Path], where: str = "") -> list[str]:
        return [self.hash_file(p, where) for p in paths]

    def save(self) -> None:
        """Write the memo back (best effort: an unwritable cache folder only costs a re-hash next time)."""
        if not self._dirty or self.memo_path is None:
            return
        try:
            atomic_write_json(self.memo_path, self._memo)
            self._dirty = False
        except OSError:
            pass


def combined_hash(named: list[tuple[str, str]]) -> str:
    """One hash of (name, hash) pairs in the given order."""
    blob = "\n".join(f"{n}\0{h}" for n, h in named).encode()
    return hashlib.blake2b(blob, digest_size=16).hexdigest()
