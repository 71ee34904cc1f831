"""Atomic file writes: a crash halfway leaves either the old file or the new one, never half a file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)`` on a temporary file beside ``path``, then rename it over ``path``.

    The rename is atomic on POSIX, so readers never see a partial file; on failure the temporary
    file is removed and the original (if any) is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        write(tmp_path)
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes 0600; give the file normal permissions
        os.replace(tmp_path, path)
    except OSError as exc:
        tmp_path.unlink(missing_ok=True)
        if exc.filename is None or exc.filename == str(tmp_path):
            # a full disk reports no path (or the temporary name): name the file the user will look for
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
        raise
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write bytes atomically (fsync'd before the rename so a power cut cannot expose an empty file)."""

    def _write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    return atomic_write(path, _write)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """JSON with sorted keys and a trailing newline, so equal objects give byte-identical files."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def cached_json(path: str | os.PathLike[str] | None, build: Callable[[], Any]) -> Any:
    """Read ``path`` if it holds valid JSON, else ``build()`` and write the result there atomically.

    For derived data that is costly to rebuild (query sets, soft negatives): a damaged file is rebuilt,
    never trusted, and a folder that cannot be written just means the result is not kept."""
    if path is not None and Path(path).is_file():
        try:
            return json.loads(Path(path).read_text())
        except (OSError, ValueError):
            pass
    data = build()
    if path is not None:
        try:
            atomic_write_json(path, data)
        except OSError:
            pass
    return data
