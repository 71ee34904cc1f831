"""JSON from files that are untrusted input (contributed records and their per-query sidecars).

Python's json keeps the last of two equal keys without a word: a metric written twice would show its
second value on the board. `loads_unique` refuses that. `read_bounded` opens only a regular file inside
a given folder (after symlinks and ``..``), of bounded size: a record naming ``/dev/zero`` or a file
elsewhere on the machine is refused by name, never read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError
from negharness.io.paths import require_size_at_most

MAX_FILE_BYTES = 256 * 2**20  # far above the largest record or per-query file (COCO retrieval: a few MB)


class DuplicateKeyError(ValueError):
    """A JSON object that holds one key twice."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)  # in C: a board reads hundreds of thousands of objects
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"key {key!r} appears twice in one object")
            seen.add(key)
    return out


def loads_unique(text: str) -> Any:
    """``json.loads`` that raises `DuplicateKeyError` for an object holding a key twice."""
    return json.loads(text, object_pairs_hook=_unique_pairs)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def read_capped(path: Path | str, limit: int, where: str, what: str = "a file") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (a FIFO would block the read, an endless
    device never end it), or a `UserError` starting with ``where``; the one capped read that records,
    sidecars and YAML task files go through. ``what`` names the kind of file in the size message."""
    require_size_at_most(path, limit, where, what)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(limit + 1)
    except OSError as exc:
        raise UserError(f"{where}: {path} cannot be read ({exc.strerror or exc})") from None
    if len(raw) > limit:  # grew since it was looked at
        raise UserError(f"{where}: {path} grew past {limit:,} bytes while read; {what} may have at most that")
    return raw


@dataclass(frozen=True)
class Folder:
    """A folder as written and its absolute and real (symlinks resolved) forms, resolved once: a board
    reads thousands of files inside one results folder (`read_bounded_bytes`)."""

    path: Path
    absolute: str
    real: str

    @classmethod
    def of(cls, folder: Path | Folder) -> Folder:
        if isinstance(folder, Folder):
            return folder
        return cls(Path(folder), os.path.normpath(os.path.abspath(folder)), os.path.realpath(folder))


def read_bounded_bytes(path: Path, folder: Path | Folder, where: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of ``path``, or a `UserError` starting with ``where``: a file outside ``folder`` (as
    written, ``..`` folded, or after symlinks), or one `read_capped` refuses."""
    top = Folder.of(folder)
    written, real = os.path.normpath(os.path.abspath(path)), os.path.realpath(path)
    if not _inside(written, top.absolute) or not _inside(real, top.real):
        raise UserError(f"{where}: {real} is outside {top.path}")
    return read_capped(real, limit, where, "a record file")


def read_bounded(path: Path, folder: Path | Folder, where: str, limit: int = MAX_FILE_BYTES) -> str:
    """`read_bounded_bytes` as UTF-8 text."""
    raw = read_bounded_bytes(path, folder, where, limit)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{where}: {path} is not UTF-8 text (byte {exc.start})") from None
