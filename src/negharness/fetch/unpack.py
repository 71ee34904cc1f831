"""Archives unpacked only as far as the tasks need: the members under one prefix, each written
through a temporary name and renamed, so an interrupted unpack leaves no half-written image under
a name a task would read; a member that would land outside its folder is refused."""

from __future__ import annotations

import functools
import os
import shutil
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from negharness.contracts.errors import UserError
from negharness.fetch.sources import Unpack


def _kept(name: str, spec: Unpack) -> str | None:
    """The member's path under ``spec.into``, or None when the tasks do not need it."""
    name = name.replace("\\", "/")
    if spec.strip:
        if not name.startswith(spec.strip):
            return None
        name = name[len(spec.strip):]
    if spec.only and not name.startswith(spec.only):
        return None
    return name or None


def _tar_member(tf: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    """A regular member's bytes (`extractfile` gives None only for what is not a regular file)."""
    opened = tf.extractfile(member)
    assert opened is not None
    return opened


def _members(archive: Path) -> Iterator[tuple[str, Callable[[], IO[bytes]]]]:
    """(name, opener) of each regular file in a zip or tar archive."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                if not info.is_dir():
                    yield info.filename, functools.partial(zf.open, info)
        return
    try:
        with tarfile.open(archive) as tf:
            for member in tf:
                if member.isfile():
                    yield member.name, functools.partial(_tar_member, tf, member)
    except tarfile.TarError as exc:
        raise UserError(f"{archive}: not a zip or tar archive ({exc})") from exc


def unpack(archive: Path, root: Path, spec: Unpack) -> int:
    """Write the needed members of ``archive`` under ``root / spec.into``; the number written."""
    base = (root / spec.into).resolve()
    written = 0
    for name, open_member in _members(archive):
        rel = _kept(name, spec)
        if rel is None:
            continue
        dest = (base / rel).resolve()
        if not dest.is_relative_to(base):
            raise UserError(f"{archive}: member {name!r} would be written outside {base}; refused")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.unpacking")
        with open_member() as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        os.replace(tmp, dest)
        written += 1
    if not written:
        raise UserError(f"{archive}: no member under {spec.strip + spec.only!r}; the archive is not the one "
                        "the sources table describes")
    return written
