"""Where negharness keeps data and caches: explicit option, else environment variable, else a per-user folder."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from negharness.contracts.errors import UserError
from negharness.contracts.options import env_flag


def _user_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "negharness"


def cache_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Embedding cache and generated media: --cache-dir, else $NEGHARNESS_CACHE, else ~/.cache/negharness."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("NEGHARNESS_CACHE")
    return Path(env) if env else _user_cache()


def data_root(explicit: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """The folder tasks read their files from, and which rule chose it (for error messages)."""
    if explicit:
        return Path(explicit), "--data-root"
    env = os.environ.get("NEGHARNESS_DATA")
    if env:
        return Path(env), "$NEGHARNESS_DATA"
    return _user_cache() / "data", "the default data root"


# Paths read from data files ------------------------------------------------------------------------
ALLOW_LINKS_OUT_ENV = "NEGHARNESS_ALLOW_LINKS_OUT"


def links_out_allowed() -> bool:
    """``NEGHARNESS_ALLOW_LINKS_OUT=1``: symlinks under the data root may point outside it (a data
    root assembled from links into a shared dataset store). ``../`` in a data file never may."""
    return env_flag(ALLOW_LINKS_OUT_ENV)


def symlink_loop_error(path: str | os.PathLike[str], where: str = "") -> UserError:
    """The error for a path whose symlinks lead back to themselves (ELOOP)."""
    prefix = f"{where}: " if where else ""
    try:
        target = f" (it points to {os.readlink(path)})"
    except OSError:
        target = ""
    return UserError(f"{prefix}{os.fspath(path)}: symlink loop{target}: following its links never reaches a file")


def is_symlink_loop(path: str | os.PathLike[str]) -> bool:
    """True for a path that ``exists()`` calls absent because its symlinks lead back to themselves."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _resolved_link(path: str, where: str = "") -> str:
    """The real path of a symlink; a loop is a `UserError` (a broken link resolves as far as it goes:
    the file need not exist yet)."""
    try:
        return os.path.realpath(path, strict=True)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise symlink_loop_error(path, where) from None
        return os.path.realpath(path)


class RootGuard:
    """Checks that paths read from data files stay under one data root. Two checks: the path as
    written (``..`` components folded) must be under the root, always; and after following symlinks
    it must still be, unless links out are allowed (`links_out_allowed`). The path need not exist
    yet. Remembers each folder's real path, so checking a file costs one ``lstat`` after the first
    (string operations only: 90,000 frame paths of an nT2VR index must not cost seconds)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._lexical = os.path.normpath(os.path.abspath(root))
        self._real_root = os.path.realpath(root)
        self._allow_links = links_out_allowed()
        self._dirs: dict[str, str] = {}

    @staticmethod
    def _under(path: str, root: str) -> bool:
        return path == root or path.startswith(root.rstrip(os.sep) + os.sep)

    def _real(self, path: str, where: str = "") -> str:
        if os.path.islink(path):
            return _resolved_link(path, where)
        parent, name = os.path.split(path)
        real_parent = self._dirs.get(parent)
        if real_parent is None:
            real_parent = self._dirs[parent] = os.path.realpath(parent)
        return os.path.join(real_parent, name)

    def check(self, path: str | os.PathLike[str], where: str) -> Path:
        """``path`` as it will be opened, or a `UserError` naming ``where``: outside the root, or a
        symlink loop (which every later ``exists()`` would call "missing")."""
        raw = os.fspath(path)
        written = os.path.normpath(os.path.abspath(raw))
        if not self._under(written, self._lexical):
            raise UserError(f"{where}: path {raw!r} leaves the data root {self.root} "
                            "(through '..' or an absolute path)")
        if self._allow_links and os.path.islink(written):
            _resolved_link(written, where)  # a loop is refused even where links may leave the root
        if not self._allow_links:
            real = self._real(written, where)
            if not self._under(real, self._real_root):
                raise UserError(f"{where}: {raw} leads through a symlink to {real}, outside the data root "
                                f"{self.root}; set {ALLOW_LINKS_OUT_ENV}=1 to allow links out of the data root")
        return Path(os.path.normpath(raw))  # what is opened is what was checked ('a/link/..' folded)


def require_regular(path: str | os.PathLike[str], where: str = "") -> os.stat_result:
    """The file's stat when it is a regular file (after symlinks); a FIFO, socket, device or folder,
    a symlink loop or a broken symlink is a `UserError` naming it and the cause, checked before
    anything opens it (opening a FIFO blocks forever)."""
    import stat as _stat


    prefix = f"{where}: " if where else ""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise UserError(f"{prefix}{path}: broken symlink (it points to {os.readlink(path)}, which does not "
                            "exist)") from None
        raise UserError(f"{prefix}file not found: {path}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise symlink_loop_error(path, where) from None
        raise UserError(f"{prefix}{path}: cannot read ({exc.strerror or exc})") from exc
    if not _stat.S_ISREG(st.st_mode):
        kind = ("a folder" if _stat.S_ISDIR(st.st_mode) else "a FIFO" if _stat.S_ISFIFO(st.st_mode)
                else "a socket" if _stat.S_ISSOCK(st.st_mode) else "a device or special file")
        raise UserError(f"{prefix}{path} is {kind}, not a regular file")
    return st


def require_size_at_most(path: str | os.PathLike[str], limit: int, where: str, what: str, hint: str = "") -> int:
    """The size of ``path``, a regular file (`require_regular`) of at most ``limit`` bytes, or a `UserError`
    naming it (after ``where``, when given) and saying what ``what`` may have: the one size rule of the
    capped read (`negharness.io.json_files.read_capped`) and of a task's data files (`io.data_limits`)."""
    size = require_regular(path, where).st_size
    if size > limit:
        prefix = f"{where}: " if where else ""
        raise UserError(f"{prefix}{path} is {size:,} bytes; {what} may have at most {limit:,}{hint}")
    return size


def writable_folder(path: str | os.PathLike[str], option: str) -> Path:
    """``path`` made and written once (a probe file), before any work: an error names ``option``.
    Probe names carry the pid, since torchrun ranks probe one folder at once."""
    path = Path(path)
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise UserError(f"{option} {path}: {existing} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".negharness-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot write there ({exc.strerror or exc})") from exc
    return path
