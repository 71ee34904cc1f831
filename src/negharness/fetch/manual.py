"""Sources no program may fetch (a licence to sign, a Drive folder, Baidu Pan): the exact steps and
the target path, then a check of what the user put there."""

from __future__ import annotations

from pathlib import Path

from negharness.fetch.sources import Source


def target(source: Source, root: Path) -> Path:
    """Where the user puts the files: the source's ``done`` path (a folder or a file) under the root."""
    return root / source.lands


def steps(source: Source, root: Path) -> str:
    """The source's instructions with its target path filled in."""
    return source.manual.replace("{target}", str(target(source, root))).replace("<data root>", str(root))


def in_place(source: Source, root: Path) -> bool:
    """What the user put there: a file, or a folder with at least one file in it."""
    path = target(source, root)
    if path.is_file():
        return True
    return path.is_dir() and any(p.is_file() for p in path.rglob("*"))
