"""What each installed hook-style plugin registered, kept on disk, so that a command imports a
plugin's module only when it uses one of that plugin's entries.

A third-party plugin module often imports torch at its top (the README's example once did), and the
host used to import every plugin to learn its names: one ordinary plugin made `list --brief`,
`leaderboard` and a cached rerun take 13-30 s instead of 2-3 s. The first command after an install
imports each plugin as before and writes what its hooks added (names, kinds, descriptions, lazy
targets, metadata) here; later commands replay that and import nothing.

An index entry holds only while nothing that made it changed. The environment stamp (Python,
negharness and hook-API versions, and the modification time of every folder on ``sys.path``:
installing or removing a distribution adds or removes entries there) invalidates the whole index. A
plugin's entry is keyed by every module file the command imported while its plugins were loaded and
their hooks ran (path, size, mtime_ns and inode; the standard library aside, which the Python version
stamps), so a name its hook reads from another module of its package is seen as soon as that module
changes; and by the data files and folders its hooks said they read (`Registrar.rests_on`, which
`register_yaml_folder` calls: a YAML task added to a plugin's shipped folder is seen too). A plugin
whose module was imported before the host loaded it is not indexed (what it imported is not known),
nor is one that sets ``NEGHARNESS_INDEX = False`` (its hooks read what they do not declare). An import
failure is never kept: a library absent on one machine and present on another sharing the cache (a
login node and a GPU node) must not be replayed as a failure.

The file only saves time: one that is damaged, hand-edited into another shape, too large or not a
regular file (a FIFO is never opened) is ignored and written again.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from negharness.contracts.errors import UserError
from negharness.contracts.names import name_problem
from negharness.discovery.registry import KINDS
from negharness.version import HOOK_API, __version__

INDEX_VERSION = 2
INDEX_FILE = "plugin-index.json"
MAX_PLUGINS = 64  # plugins kept; beyond it others than this command's are dropped (a re-import costs only time)
MAX_FILES = 20_000  # file stamps kept, all plugins together (one importing torch has ~1,000): under MAX_BYTES
MAX_BYTES = 8 * 2**20  # a larger file is not read: it was not written by this code

FileStamp = tuple[str, int, int, int]  # path, size, mtime_ns, inode


@dataclass(frozen=True)
class IndexedEntry:
    """One registration a plugin's hook made, as replayed without importing the plugin.

    ``target`` is the lazy ``"module:attribute"`` string, or None where the hook gave a callable
    (then the plugin is imported when the entry is used)."""

    kind: str
    name: str
    target: str | None
    description: str
    meta: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "target": self.target, "description": self.description,
                "meta": self.meta}


@dataclass(frozen=True)
class IndexedPlugin:
    """A plugin's replayable registrations and the module files they were made from."""

    entries: tuple[IndexedEntry, ...] = ()
    files: tuple[FileStamp, ...] = ()


def environment_stamp(path: list[str] | None = None) -> list[Any]:
    """What every index entry rests on: versions, and the mtime of each folder on ``path`` (default
    ``sys.path``; a pip install or uninstall adds or removes a dist-info folder there, which changes
    it). The working folder is left out: a run writing its results there would otherwise void the
    index each time. The host reads it before importing plugins and again, over the same folders,
    after: importing a plugin module may write its ``__pycache__`` beside it, which changes that
    folder once, and the index is written under what holds from then on."""
    folders = []
    here = os.getcwd()
    for entry in sys.path if path is None else path:
        if entry in ("", here):
            continue
        try:
            folders.append([entry, os.stat(entry).st_mtime_ns])
        except OSError:
            continue
    return [INDEX_VERSION, sys.version, __version__, HOOK_API, folders]


def plugin_key(ep_name: str, ep_value: str, distribution: str | None, version: str | None) -> str:
    """The key of one plugin's index entry: its entry point and distribution (its files are checked apart)."""
    return json.dumps([ep_name, ep_value, distribution, version])


def path_stamp(path: str) -> FileStamp | None:
    """What says a file is unchanged: size, mtime_ns and inode (a file replaced by a copy of the same
    size and time has another inode); of a folder, what says no file was added, removed or renamed in
    it. None when it is neither a regular file nor a folder one can stat."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    ok = stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)
    return (path, st.st_size, st.st_mtime_ns, st.st_ino) if ok else None


def read_files(paths: Iterable[str]) -> tuple[FileStamp, ...] | None:
    """The stamps of the data files and folders a plugin's hook said its registrations were read from
    (`negharness.discovery.registry.Registrar.rests_on`): a folder with each regular file in it (an
    edited YAML task). None when one cannot be stamped (the plugin is not indexed)."""
    found: dict[str, FileStamp | None] = {}
    for path in paths:
        found[path] = path_stamp(path)
        if os.path.isdir(path):
            with os.scandir(path) as listing:
                for entry in listing:
                    if entry.is_file():
                        found[entry.path] = path_stamp(entry.path)
    if any(s is None for s in found.values()):
        return None
    return tuple(s for _, s in sorted(found.items()) if s is not None)


def _stdlib_folders() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The standard library's folders (stamped by the Python version), and the site folders that may
    lie inside them (``/usr/local/lib/python3.X/site-packages``), which are not."""
    paths = sysconfig.get_paths()
    std = tuple(os.path.join(paths[k], "") for k in ("stdlib", "platstdlib") if k in paths)
    site = tuple(os.path.join(paths[k], "") for k in ("purelib", "platlib") if k in paths)
    return std, site


def imported_files(modules: Iterable[str]) -> tuple[FileStamp, ...] | None:
    """The stamps of the files the named modules (in ``sys.modules``) were loaded from, standard
    library aside; a module without a file (built in, a namespace package) has nothing to stamp, nor
    one made in memory under a relative name that is no file (torch's ``torch.ops``: "_ops.py"). A
    relative file (a relative ``PYTHONPATH`` entry) is stamped where it lies. None when a module's
    file cannot be stamped (nothing is indexed)."""
    std, site = _stdlib_folders()
    found: dict[str, FileStamp] = {}
    for name in sorted(modules):
        written = getattr(sys.modules.get(name), "__file__", None)
        if not isinstance(written, str):
            continue
        path = os.path.abspath(written)
        if path in found or (path.startswith(std) and not path.startswith(site)):
            continue
        stamp = path_stamp(path)
        if stamp is None and not os.path.isabs(written) and not os.path.lexists(path):
            continue
        if stamp is None:
            return None
        found[path] = stamp
    return tuple(found[p] for p in sorted(found))


def index_path(cache_dir: Path) -> Path:
    return cache_dir / INDEX_FILE


def read_index(cache_dir: Path, stamp: list[Any]) -> dict[str, IndexedPlugin]:
    """The plugins indexed under the environment ``stamp`` whose every file is unchanged; {} when the
    file is absent, damaged or stale (never an error: the index only saves time)."""
    raw = _read_raw(index_path(cache_dir))
    if raw is None or raw.get("environment") != stamp or not isinstance(raw.get("plugins"), dict):
        return {}
    seen: dict[str, FileStamp | None] = {}  # one stat a file, though several plugins list it
    found = {}
    for key, item in raw["plugins"].items():
        plugin = plugin_from_json(item)
        if plugin is not None and all(seen.setdefault(f[0], path_stamp(f[0])) == f for f in plugin.files):
            found[key] = plugin
    return found


def plugin_from_json(item: Any) -> IndexedPlugin | None:
    """One plugin as `write_index` wrote it; None for anything else (a hand edit, another version):
    the whole plugin is dropped then, and imported again, never replayed in part."""
    if not isinstance(item, dict) or not isinstance(item.get("entries"), list) or not isinstance(item.get("files"), list):
        return None
    entries = [_entry_from_json(e) for e in item["entries"]]
    files = [_file_from_json(f) for f in item["files"]]
    if not files or any(e is None for e in entries) or any(f is None for f in files):
        return None
    return IndexedPlugin(tuple(e for e in entries if e is not None), tuple(f for f in files if f is not None))


def _entry_from_json(e: Any) -> IndexedEntry | None:
    if not isinstance(e, dict):
        return None
    kind, name, target, description, meta = (e.get(k) for k in ("kind", "name", "target", "description", "meta"))
    if kind not in KINDS or not isinstance(name, str) or name_problem(name) or not isinstance(description, str) \
            or not (target is None or isinstance(target, str)) or not isinstance(meta, dict):
        return None
    return IndexedEntry(kind, name, target, description, meta)


def _file_from_json(f: Any) -> FileStamp | None:
    if not isinstance(f, list) or len(f) != 4 or not isinstance(f[0], str) \
            or not all(type(n) is int for n in f[1:]):
        return None
    return (f[0], f[1], f[2], f[3])


def _read_raw(path: Path) -> dict[str, Any] | None:
    """The index file's JSON object, read only when it is a regular file of at most MAX_BYTES (a FIFO
    is never opened: the read would block); None for anything else."""
    from negharness.io.json_files import read_capped  # lazy: only where an index is kept

    try:
        raw = json.loads(read_capped(path, MAX_BYTES, "plugin index", "the plugin index"))
    except (UserError, ValueError, RecursionError):
        return None
    return raw if isinstance(raw, dict) else None


def replayable(entries: list[IndexedEntry]) -> bool:
    """Entries whose metadata survives a JSON round trip unchanged (a tuple would come back a list)."""
    try:
        return all(json.loads(json.dumps(e.meta)) == e.meta and type(e.description) is str for e in entries)
    except (TypeError, ValueError):
        return False


def write_index(cache_dir: Path, stamp: list[Any], new: dict[str, IndexedPlugin]) -> None:
    """Add ``new``, found under the environment ``stamp`` (taken when the plugins were loaded), to the
    index (atomically; a folder that cannot be written just means no index)."""
    if not new:
        return
    from negharness.io.atomic_files import atomic_write_json  # lazy: only when something was imported

    path = index_path(cache_dir)
    raw = _read_raw(path) or {}
    kept = raw.get("plugins") if raw.get("environment") == stamp else None
    plugins = {k: v for k, v in kept.items() if plugin_from_json(v) is not None} if isinstance(kept, dict) else {}
    for key, plugin in new.items():
        plugins.pop(key, None)  # this command's last: the others are dropped first
        plugins[key] = {"entries": [e.as_json() for e in plugin.entries], "files": [list(f) for f in plugin.files]}
    while len(plugins) > len(new) and (len(plugins) > MAX_PLUGINS
                                       or sum(len(v["files"]) for v in plugins.values()) > MAX_FILES):
        del plugins[next(iter(plugins))]
    try:
        atomic_write_json(path, {"environment": stamp, "plugins": plugins})
    except OSError:
        pass
