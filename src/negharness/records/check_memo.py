"""The record check's answers, remembered by content: the per-query check
(`negharness.records.check.sidecar_problems`) recomputes 10,000 resamples per metric, about a second per record of 1,000 queries,
which every read (board, reuse, export, compare) would otherwise pay. A record memo holds one answer
(`read_memo`, `write_memo`; a run leaves one for each record it writes, `remember_written`); a board's
memo holds the answers of one pass over a results folder (`BoardMemo`). Both are keyed by everything
the answer depends on (`memo_key`) and read as untrusted files: a damaged, foreign or odd file reads
as no answer, and the check runs again.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.io.atomic_files import atomic_write
from negharness.io.paths import cache_root
from negharness.scoring import perquery
from negharness.version import __version__

# The per-query check, remembered. Recomputing 10,000 resamples per metric costs about a second per
# record of 1,000 queries, which every read (board, reuse, export, compare) would otherwise pay. The
# memo's key is everything the answer depends on (`memo_key`): the per-query file's bytes (SHA-256 of
# the bytes read, never their size or time), the record's fields the check reads (`MEMO_FIELDS`), and
# the code that checks (`code_version`). Nothing the record says about itself is trusted.
MEMO_FORMAT = "negharness-checked-record-v2"
MEMO_FOLDER = "checked_records"
MEMO_MAX_BYTES = 1 << 20  # a memo holds a few problem lines; anything larger is not one
# every field `check.sidecar_problems` reads: the file's name (named in its problems), the task (its name
# renames old metrics, its cluster and leaderboard metrics choose the intervals), the metrics the
# per-query means must give, the main score, how the intervals were made and what they are
MEMO_FIELDS = ("per_query_file", "task", "metrics", "main_score", "interval_method", "intervals",
               "intervals_rows", "standard_errors", "standard_errors_rows")
# the modules whose code decides the answer: the check, the memo's keys, the board's pass (which pairs
# each answer with its key), the per-query contract and intervals, the bootstrap, the metric catalogue
# (renames, MedR's rule) and the JSON reader
MEMO_CODE = ("negharness.records.check", "negharness.records.check_memo", "negharness.records.board_pass",
             "negharness.scoring.perquery", "negharness.scoring.bootstrap", "negharness.scoring.catalog",
             "negharness.io.json_files")


def memo_folder(cache_dir: str | Path | None = None) -> Path:
    """Where the check's memo lives: the run's own cache root (--cache-dir, else $NEGHARNESS_CACHE,
    else the default: `cache_root`, the one rule every cached thing follows)."""
    return cache_root(cache_dir) / MEMO_FOLDER


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """A digest of the checking code (`MEMO_CODE`'s sources), numpy's version (its random streams and
    quantiles) and negharness's: an edit to any of them makes every remembered answer lapse, with no
    version number to remember to bump."""
    parts = [__version__, np.__version__]
    for name in MEMO_CODE:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        try:
            parts.append(hashlib.sha256(Path(origin).read_bytes()).hexdigest() if origin else name)
        except OSError:
            parts.append(name)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def memo_key(rec: dict[str, Any], raw: bytes) -> str:
    """The memo's key: SHA-256 of the per-query bytes, the record's `MEMO_FIELDS` and `code_version`."""
    return hash_json({"format": MEMO_FORMAT, "code": code_version(), "per_query_sha256": hashlib.sha256(raw).hexdigest(),
                      "record": {name: rec.get(name) for name in MEMO_FIELDS}}, 64)


def memo_fields(rec: dict[str, Any]) -> dict[str, Any]:
    """The record's `MEMO_FIELDS` it has: all the per-query check may read (`check.sidecar_problems`)."""
    return {name: rec[name] for name in MEMO_FIELDS if name in rec}


def remember_written(path: Path, rec: dict[str, Any], cache_dir: str | Path | None = None) -> None:
    """After a run wrote ``rec`` at ``path`` with its per-query file: the check's answer for them, which is
    no problem, remembered under the check's own key (`memo_key`: those very bytes, the record's fields,
    this code). The run computed the record's intervals with `perquery.intervals` on the values the file
    now holds (JSON gives floats back exactly), as the check recomputes them; so the first board, export
    or compare after a run verifies each record by a hash instead of its bootstrap (tested: the answer
    equals a fresh check's). A file that cannot be read back leaves the memo to the check."""
    try:
        raw = perquery.sidecar_bytes(path, rec, None)
    except UserError:
        return
    if raw is not None:
        key = memo_key(rec, raw)
        write_memo(memo_folder(cache_dir) / f"{key}.json", key, [])


def read_memo(path: Path, key: str) -> list[str] | None:
    """The problems a memo file holds for ``key``, or None when it holds no sound answer: no file, a
    FIFO or device (opened without blocking, refused by its type), a folder, too large, not JSON,
    of another format or key (a copied or renamed file), or not a list of lines."""
    data = _read_json_quietly(path, MEMO_MAX_BYTES)
    if not isinstance(data, dict) or data.get("format") != MEMO_FORMAT or data.get("key") != key:
        return None
    found = data.get("problems")
    return found if isinstance(found, list) and all(isinstance(p, str) for p in found) else None


def write_memo(path: Path, key: str, problems: list[str]) -> None:
    """The answer written atomically (a temporary file renamed over whatever was there, a FIFO
    included); not fsync'd: a memo torn by a power cut fails `read_memo` and is recomputed, so a
    flush per record (most of a cold board's time) buys nothing. A folder that cannot be written
    just means the answer is not kept."""
    _write_quietly(path, json.dumps({"format": MEMO_FORMAT, "key": key, "problems": problems},
                                    ensure_ascii=False) + "\n")


# The board's memo: one file per results folder, read once at a pass's start and written once at its
# end (a file per record cost a board of 10,000 records about 5 s to write), holding the answers of the
# records that pass met, under the same keys as the record memos (`memo_key`). A board falls back on a
# record memo (what a run's `remember_written` or a single read left) before it computes.
BOARD_FORMAT = "negharness-checked-board-v1"
BOARD_PREFIX = "board-"  # never a 64-hex record memo's name
BOARD_MAX_BYTES = 256 << 20  # ~100 bytes an answer: far above a board of a million records


class BoardMemo:
    """The answers of one pass over a results folder (`negharness.records.board_pass.checked_records`): those its memo file
    (``path``) holds (``known``), record memos in ``folder``, and those computed during the pass
    (`put`); `save` writes the ones the pass used."""

    def __init__(self, folder: Path, path: Path | None, known: dict[str, list[str]]) -> None:
        self.folder, self.path, self.known = folder, path, known
        self.used: dict[str, list[str]] = {}

    @classmethod
    def of(cls, folder: Path, results_dir: Path) -> BoardMemo:
        """The memo of ``results_dir`` in ``folder`` (`board_memo_path`), read."""
        path = board_memo_path(folder, results_dir)
        return cls(folder, path, read_board_memo(path))

    def get(self, key: str) -> list[str] | None:
        """The remembered answer for ``key`` (the board's, else a record memo's), or None."""
        found = self.known.get(key)
        if found is None:
            found = read_memo(self.folder / f"{key}.json", key)
        if found is not None:
            self.used[key] = found
        return found

    def put(self, key: str, problems: list[str]) -> None:
        self.used[key] = problems

    def answer(self, key: str) -> list[str]:
        """The answer for ``key``, which this pass looked up or computed."""
        return self.used[key]

    def save(self) -> None:
        """The pass's answers written over the memo file (atomically) when they are not what it held:
        the answers of records no longer there are dropped."""
        if self.path is not None and self.used != self.known:
            _write_quietly(self.path, json.dumps({"format": BOARD_FORMAT, "answers": self.used},
                                                 ensure_ascii=False) + "\n")


def board_memo_path(folder: Path, results_dir: Path) -> Path:
    """The board memo of ``results_dir`` in ``folder``: the digest of its real path names the file."""
    where = os.fsencode(os.path.realpath(results_dir))
    return folder / f"{BOARD_PREFIX}{hashlib.sha256(where).hexdigest()[:32]}.json"


_BOARDS: dict[Path, tuple[tuple[int, int, int], dict[str, list[str]]]] = {}  # path -> (its stat, answers)


def board_answer(folder: Path, results_dir: Path, key: str) -> list[str] | None:
    """The answer for ``key`` that a board's pass over ``results_dir`` left, for a single read (reuse,
    `compare`) after a board: the memo file read once a process, again once it changed (a memo is
    replaced whole, so its inode, time or size changes); None when there is none."""
    path = board_memo_path(folder, results_dir)
    try:
        info = os.stat(path)
    except OSError:
        return None
    stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
    known = _BOARDS.get(path)
    if known is None or known[0] != stamp:
        if len(_BOARDS) >= 8:
            _BOARDS.clear()
        known = _BOARDS[path] = (stamp, read_board_memo(path))
    return known[1].get(key)


def read_board_memo(path: Path) -> dict[str, list[str]]:
    """The answers a board memo holds, {} when it is no sound memo (as `read_memo`: missing, not a
    regular file, too large, not JSON, another format); an answer that is not a list of lines is left out."""
    data = _read_json_quietly(path, BOARD_MAX_BYTES)
    if not isinstance(data, dict) or data.get("format") != BOARD_FORMAT or not isinstance(data.get("answers"), dict):
        return {}
    return {key: found for key, found in data["answers"].items()
            if isinstance(found, list) and all(isinstance(p, str) for p in found)}


def _read_json_quietly(path: Path, limit: int) -> Any:
    """The JSON in the regular file ``path`` of at most ``limit`` bytes, else None: never blocks (a
    FIFO is opened without blocking and refused by its type), never follows a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return None if size > limit else json.loads(b"".join(chunks))  # grown past the cap, or cut short
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)


def _write_quietly(path: Path, body: str) -> None:
    """``body`` written atomically (a temporary file renamed over whatever was there, a FIFO
    included); not fsync'd: a memo torn by a power cut reads as none and is recomputed, so a flush
    per record (most of a cold board's time once) buys nothing. A folder that cannot be written just
    means the answer is not kept."""
    def write(tmp: Path) -> None:
        tmp.write_text(body, encoding="utf-8")
    try:
        atomic_write(path, write)
    except OSError:
        pass
