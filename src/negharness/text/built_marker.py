"""Which rules built a query file: ``<c>.built.json`` beside the files `build-queries` writes.

nT2VR's negated and composed files sit under fixed names whatever made them (the authors' download,
``negharness build-queries``, ``-T build=true``). Without a mark, files built by older rules, or
from other captions, would be read as if the current builder had made them. The mark says the
builder's version and settings (seed, mode, ...) and the hash of the captions it read; files without one are the
user's (or the authors') data and are read as they are.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from negharness.api import UserError
from negharness.api.files import atomic_write_text

BUILDER = "negharness build-queries"


def marker_path(out_dir: Path, name: str) -> Path:
    return Path(out_dir) / f"{name}.built.json"


def captions_hash(rows: Iterable[tuple[str, str]]) -> str:
    """The captions' content, independent of the file's encoding and line ends."""
    digest = hashlib.sha256()
    for cap_id, caption in rows:
        digest.update(f"{cap_id}\t{caption}\n".encode("utf-8"))
    return digest.hexdigest()


def write_marker(out_dir: Path, name: str, version: str, settings: Mapping[str, object],
                 rows: Iterable[tuple[str, str]], complete: bool) -> Path:
    """Written twice: ``complete: false`` before the query files, ``true`` after them, so a build
    killed halfway leaves files that read as stale, never as data."""
    mark = {"builder": BUILDER, "builder_version": version, "settings": settings,
            "captions_sha256": captions_hash(rows), "complete": complete}
    return atomic_write_text(marker_path(out_dir, name), json.dumps(mark, indent=1) + "\n")


def read_marker(path: Path) -> dict[str, Any] | None:
    """The mark, or None where the files carry none (they are data, not ours to judge)."""
    if not path.is_file():
        return None
    try:
        mark = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: not a readable build mark ({exc}); delete it to read the query files as "
                        f"they are, or rebuild them with -T build=true") from None
    if not isinstance(mark, dict) or mark.get("builder") != BUILDER:
        raise UserError(f"{path}: not a build mark written by {BUILDER}")
    return mark


def stale_reason(mark: Mapping[str, Any], version: str, rows: Iterable[tuple[str, str]],
                 settings: Mapping[str, object] | None = None) -> str | None:
    """Why files under this mark are not what the current builder makes from these captions (None: they are).
    ``settings`` (seed, mode, ...): checked only where the caller is asked to build with them."""
    if mark.get("complete") is not True:
        return "a build that did not finish"
    if str(mark.get("builder_version")) != version:
        return f"built by builder version {mark.get('builder_version')}, this is version {version}"
    if mark.get("captions_sha256") != captions_hash(rows):
        return "built from other captions than the collection's caption file"
    said = mark.get("settings")
    made: Mapping[str, object] = said if isinstance(said, dict) else {}
    for key, wanted in (settings or {}).items():
        if made.get(key) != wanted:
            return f"built with {key} {made.get(key)!r}, this run asks for {wanted!r}"
    return None
