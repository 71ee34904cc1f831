"""What each installed hook-style plugin registered, kept on disk, so that a command imports a
plugin's module only when it uses one of that plugin's entries.

A third-party plugin module often imports torch at its top (the README's example once did), and the
host used to import every plugin to learn its names: one ordinary plugin made `list --brief`,
`leaderboard` and a cached rerun take 13-30 s instead of 2-3 s. The first command after an install
imports each plugin as before and writes what its hooks added (names, kinds, descriptions, lazy
targets, metadata) here; later commands replay that and import nothing.

An index entry holds only while nothing that made it changed. The environment stamp (Python,
negharness and hook-API versions, and the modification time of every folder on ``sys.path``:
installing or removing a distribution adds or removes entries there) invalidates the whole index; a
plugin's own stamp (entry point, distribution and version, and its module file's path, size and
mtime, found without importing it) invalidates that plugin. A plugin whose hooks compute their names
from other files sets ``NEGHARNESS_INDEX = False`` and is imported every time. Import failures are
kept too (with the error), so a broken plugin is reported without being imported again until the
environment or its file changes.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negharness.version import HOOK_API, __version__

INDEX_VERSION = 1
INDEX_FILE = "plugin-index.json"
MAX_PLUGINS = 256  # plugins kept; beyond it some are dropped (a re-import costs only time)
MAX_BYTES = 8 * 2**20  # a larger file is not read: it was not written by this code


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
    """A plugin's replayable registrations, or the error its import raised."""

    entries: tuple[IndexedEntry, ...] = ()
    error: str | None = None


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


def module_file(module: str) -> Path | None:
    """The file a module would load from, found without importing it or its parent packages."""
    parts = module.split(".")
    spec = importlib.machinery.PathFinder.find_spec(parts[0], sys.path)
    for part in parts[1:]:
        if spec is None or not spec.submodule_search_locations:
            return None
        spec = importlib.machinery.PathFinder.find_spec(part, list(spec.submodule_search_locations))
    if spec is None or not spec.origin or not spec.has_location:
        return None
    return Path(spec.origin)


def plugin_stamp(ep_name: str, ep_value: str, distribution: str | None, version: str | None) -> str | None:
    """The key of one plugin's index entry; None when its module file cannot be found (not indexed)."""
    module = ep_value.partition(":")[0].strip()
    path = module_file(module)
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    return json.dumps([ep_name, ep_value, distribution, version, str(path), st.st_size, st.st_mtime_ns])


def index_path(cache_dir: Path) -> Path:
    return cache_dir / INDEX_FILE


def read_index(cache_dir: Path, stamp: list[Any]) -> dict[str, IndexedPlugin]:
    """The plugins indexed under the environment ``stamp``; {} when the file is absent, damaged or
    stale (never an error: the index only saves time)."""
    raw = _read_raw(index_path(cache_dir))
    if raw is None or raw.get("environment") != stamp:
        return {}
    found = {}
    for key, item in raw.get("plugins", {}).items():
        try:
            entries = tuple(IndexedEntry(e["kind"], e["name"], e["target"], e["description"], dict(e["meta"]))
                            for e in item.get("entries", []))
        except (KeyError, TypeError, ValueError):
            continue
        found[key] = IndexedPlugin(entries, item.get("error"))
    return found


def _read_raw(path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
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
    from negharness.store.atomic import atomic_write_json  # lazy: only when something was imported

    path = index_path(cache_dir)
    raw = _read_raw(path) or {}
    plugins = raw.get("plugins", {}) if raw.get("environment") == stamp else {}
    for key, plugin in new.items():
        plugins[key] = {"entries": [e.as_json() for e in plugin.entries], "error": plugin.error}
    for stale in [k for k in plugins if k not in new][: max(0, len(plugins) - MAX_PLUGINS)]:
        del plugins[stale]
    try:
        atomic_write_json(path, {"environment": stamp, "plugins": plugins})
    except OSError:
        pass
