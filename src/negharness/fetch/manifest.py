"""The data root's manifest (``<data root>/negharness-manifest.json``): what `negharness fetch` put
there, with each file's SHA-256 and where it came from.

A source with a pinned SHA-256 is checked against the pin; one without (a Drive file, a hub file
on a moving branch) is checked against the hash its first download had, recorded here, so a file
re-hosted or re-pointed later is refused instead of silently changing numbers. Runs check the
files they read against it too (`verify_files`).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError
from negharness.io.atomic_files import atomic_write_json

MANIFEST = "negharness-manifest.json"
_LOCK = threading.Lock()  # downloads finish on several threads; one writer at a time


def manifest_path(root: Path) -> Path:
    return root / MANIFEST


def read_manifest(root: Path) -> dict[str, Any]:
    """The manifest's entries by source name ({} when there is none); a damaged one is an error
    naming it: it is the record the later checks rest on."""
    path = manifest_path(root)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read the fetch manifest ({exc}); move it aside and run "
                        "`negharness fetch` again to re-check every file") from exc
    entries = data.get("sources") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise UserError(f"{path}: not a fetch manifest (no 'sources' object)")
    return entries


def record(root: Path, name: str, entry: dict[str, Any]) -> None:
    """Add or replace one source's entry (read, change, atomic write, under a lock)."""
    with _LOCK:
        entries = read_manifest(root)
        entries[name] = entry
        atomic_write_json(manifest_path(root), {"version": 1, "sources": dict(sorted(entries.items()))})


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def expected_sha256(root: Path, name: str, pinned: str | None) -> str | None:
    """The hash a source's file must have: the pin, else the first download's, else None (first time)."""
    if pinned:
        return pinned
    entry = read_manifest(root).get(name) or {}
    return entry.get("sha256")


def verify_files(root: Path, paths: Iterable[Path], hash_file: Callable[[Path], str | None] | None = None) -> None:
    """Each of ``paths`` that the manifest lists as a file must still have its recorded hash; a
    changed file is an error naming it, the two hashes and what to do. ``hash_file``: a run's
    memoised hasher (SHA-256 cut to a prefix: compared as a prefix), so an unchanged file of
    gigabytes is not read again on every run."""
    hash_file = hash_file or file_sha256
    files = {entry["file"]: entry for entry in read_manifest(root).values()
             if isinstance(entry, dict) and entry.get("file") and entry.get("sha256")}
    if not files:
        return
    for path in paths:
        rel = Path(os.path.relpath(path, root)).as_posix()  # string work: thousands of media paths
        entry = files.get(rel)
        if entry and path.is_file():
            got = hash_file(path)
            if got is not None and not entry["sha256"].startswith(got):
                raise UserError(f"{path}: SHA-256 {got[:16]}... differs from {entry['sha256'][:16]}... recorded when "
                                f"`negharness fetch` downloaded it from {entry.get('url', '?')}: the file changed "
                                f"since; move it aside and run `negharness fetch {entry.get('source', rel)}`")
