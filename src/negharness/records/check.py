"""The one reader of result records (`read_checked`), with one policy for reuse, the leaderboard,
export, compare and ``leaderboard --check``: nothing leaves the project that ``--check`` would
refuse. Every file is either used or reported, never silently skipped. A file over the size cap, a
truncated file, a record of another schema version, a missing or mistyped field, a NaN or infinite
metric, main score or interval is an error naming the file and the field; so is a record whose
metrics, main score or intervals are not what its per-query values give (`record_problems`). The
run that wrote it can be redone with --overwrite.

A record passes `record_problems` when it is of the current schema, holds no NaN or infinite
number, has its main score among its metrics, names its model's fingerprint, and has its per-query
sidecar beside it, consistent with its metrics (mean of the per-query values = the metric; a derived
metric as the metric catalogue, `negharness.scoring.catalog`, says: ``MedR`` = the median of the
ranks kept for ``MeanR``) and with its intervals over clusters and over rows, their standard errors
and its number of clusters (recomputed with the record's seed). A record made before clustered
intervals is refused: its intervals are over rows, and the board bolds by clustered ones. A
``--limit`` record is checked for its form only: it never enters the board.

The per-query check is remembered by content (`memo_key`): per record for a single read, in one
file per results folder for a board's pass (`checked_records`), which reads and checks thousands of
records in a process pool (`pooled_reads`, `Checker`) with the answers of one process.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import stat
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.contracts.names import lookalikes
from negharness.contracts.task import UNITS
from negharness.io.json_files import DuplicateKeyError, Folder, loads_unique, read_bounded_bytes
from negharness.io.paths import cache_root
from negharness.records.schema import (
    SCHEMA_VERSION,
    RecordKey,
    name_problems,
    nonfinite_fields,
    record_files,
    record_key,
)
from negharness.scoring import perquery
from negharness.scoring.catalog import renamed_record
from negharness.io.atomic_files import atomic_write
from negharness.version import __version__

FIX = "rerun that task with --overwrite, or move the file out of the results folder"
# field path -> accepted types; a "?" suffix marks a field that may be absent
FIELDS: dict[str, tuple[type, ...]] = {
    "model": (dict,), "model.label": (str,), "model.name?": (str,), "task": (dict,), "task.name": (str,),
    "task.family?": (str,), "task.leaderboard_metrics?": (list,), "metrics": (dict,), "main_score": (dict,),
    "main_score.name": (str,), "metric_info?": (dict,), "limited?": (bool,), "created_at?": (str,),
}


_FMT = re.compile(r"\.(\d{1,2})[f%]")  # the formats the board's cells are written with
MAX_PRECISION = 10


class RecordError(UserError):
    """A result record the project may not use; the message names the file and each problem
    (``lines``: one ``path: problem`` per problem, as ``--check`` lists them)."""

    def __init__(self, message: str, lines: list[str] | None = None) -> None:
        super().__init__(message)
        self.lines = lines or [message]

    def __reduce__(self) -> tuple[type[RecordError], tuple[str, list[str]]]:
        return type(self), (str(self), self.lines)  # from a pool's worker with its lines


def read_checked(path: Path, results_dir: Path | None = None, board: bool = True,
                 cache_dir: str | Path | None = None) -> dict[str, Any]:
    """A record, read and validated as ``leaderboard --check`` validates it (`load_checked`, then
    `record_problems` for a full run); else a `RecordError` naming the file and every problem. Its
    per-query file is read only from inside ``results_dir`` (default: the record's grandparent); the
    check's memo lives under the run's cache root (``cache_dir``: --cache-dir, see `memo_folder`).

    ``board=False`` is reuse's reading: the same checks, but a record whose task gave no per-query
    values (it names no per-query file) still answers a rerun of that task, which would give none
    again; it never reaches the board, export or compare, which read with ``board=True``."""
    rec = load_checked(path)
    if is_partial(rec):
        return rec
    problems = record_problems(Path(path), rec, results_dir, board, cache_dir)
    if problems:
        raise refused(path, problems)
    return rec


def refused(path: Path, problems: list[str]) -> RecordError:
    """The error that refuses the record at ``path`` for ``problems`` (each named with the file)."""
    return RecordError(f"{path}: {'; '.join(problems)}; {FIX}", [f"{path}: {p}" for p in problems])


@dataclass
class _Read:
    """One record file of a board's pass: what reading it gave, its per-query check answered later."""

    path: Path
    rec: dict[str, Any] | None = None
    error: RecordError | None = None  # refused as it was read (`load_checked`)
    problems: list[str] = field(default_factory=list)  # its form's problems (`form_problems`)
    key: str | None = None  # the memo key of its per-query check, when it has one


def checked_records(results_dir: Path, problems: list[str] | None = None,
                    cache_dir: str | Path | None = None) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every record under ``results_dir``, each checked as `read_checked` checks it: the first refused
    one (in file order) is an error, or, given a ``problems`` list (``--check``), each refused record's
    problems are added to it and the record left out.

    A board reads thousands of records, so their per-query checks are answered together: from the
    board's memo (`BoardMemo`, one file for the whole results folder, under ``cache_dir``'s cache root),
    else computed (`Checker`: in a process pool when there is much to compute) and remembered, the memo
    written once at the end. The answers are `read_checked`'s, whichever road (tested)."""
    memo = BoardMemo.of(memo_folder(cache_dir), Path(results_dir))
    top = Folder.of(Path(results_dir))  # resolved once, not twice a record
    paths = record_files(results_dir)
    reads = pooled_reads(paths, top, memo) if len(paths) >= POOL_MIN_RECORDS and pool_workers() > 1 else None
    if reads is None:
        with Checker(memo) as checker:
            reads = [_read_for_board(path, top, memo, checker) for path in paths]
    memo.save()
    records = []
    for read in reads:
        error = read.error
        found = read.problems + (memo.answer(read.key) if read.key is not None else [])
        if error is None and found:
            error = refused(read.path, found)
        if error is not None:
            if problems is None:
                raise error
            problems.extend(error.lines)
        elif read.rec is not None:
            records.append((read.path, read.rec))
    duplicates = duplicate_problems(records)
    if duplicates and problems is None:
        raise RecordError("; ".join(duplicates), duplicates)
    if duplicates and problems is not None:  # --check: every one listed; neither record of a cell reaches the tables
        problems.extend(duplicates)
        doubled = {record_key(rec) for path, rec in records if any(line.startswith(f"{path}: ") for line in duplicates)}
        records = [(p, r) for p, r in records if r.get("limited") or record_key(r) not in doubled]
    yield from records


def duplicate_problems(records: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    """Each second record for one board cell (model label, task, variant), e.g. a copied model folder or
    a renamed old record beside the new one: the board would show whichever sorts later, so neither.
    All of them, so ``--check`` lists every one at once."""
    seen: dict[RecordKey, Path] = {}
    found = []
    for path, rec in records:
        if rec.get("limited"):
            continue  # --limit runs never enter the board
        key = record_key(rec)
        if key in seen:
            variant = f", variant {key.variant!r}" if key.variant else ""
            found.append(f"{path}: a second record for model {key.model!r}, task {key.task!r}{variant}; "
                         f"{seen[key]} is the first (the board shows one record per model and task: "
                         "move one of them out of the results folder)")
        else:
            seen[key] = path
    return found


def load_checked(path: Path, results_dir: Path | Folder | None = None) -> dict[str, Any]:
    """A record read as untrusted input: a regular file of bounded size inside the results folder
    (``<results>/<model>/<task>.json``: ``results_dir``, else the record's grandparent), one key once
    per object, names without look-alike letters."""
    top = results_dir if results_dir is not None else Path(path).parent.parent
    try:
        raw = read_bounded_bytes(Path(path), top, f"{path}: cannot read result record")
    except UserError as exc:
        raise RecordError(f"{exc}; {FIX}") from None
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(raw) > 1 and (raw[0] == 0) != (raw[1] == 0)):
        raise RecordError(f"{path}: UTF-16 text (expected UTF-8); {FIX}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}); {FIX}") from None
    try:
        rec = loads_unique(text)
    except DuplicateKeyError as exc:  # json keeps the last: a metric written twice showed its second value
        raise RecordError(f"{path}: {exc}; {FIX}") from None
    except json.JSONDecodeError as exc:
        cut = " (truncated?)" if not text.rstrip().endswith("}") else ""
        raise RecordError(f"{path}:{exc.lineno}: not valid JSON{cut}: {exc.msg}; {FIX}") from None
    except RecursionError:
        raise RecordError(f"{path}: JSON nested too deep to be a result record; {FIX}") from None
    except ValueError as exc:  # an integer of thousands of digits (int max_str_digits)
        raise RecordError(f"{path}: a number too long to read ({str(exc).split(';')[0]}); {FIX}") from None
    if not isinstance(rec, dict):
        raise RecordError(f"{path}: a result record is a JSON object, not {type(rec).__name__}; {FIX}")
    version = rec.get("schema_version")
    if version != SCHEMA_VERSION:
        said = "no schema_version" if version is None else f"schema_version {version!r}"
        raise RecordError(f"{path}: {said}; this negharness reads schema_version {SCHEMA_VERSION} ({FIX}, "
                          "or use the negharness version that wrote it)")
    check_fields(rec, str(path))
    if bool(rec.get("limited")) != (rec.get("limit") is not None):  # one answer to "is this a --limit run?"
        raise RecordError(f"{path}: 'limited' is {rec.get('limited')!r} but 'limit' is {rec.get('limit')!r}: a --limit "
                          f"run has both, a full run neither; {FIX}")
    return renamed_record(rec)  # an old NegBench record's neg_R@K read as R-Neg@K (`catalog.RENAMED`)


def check_fields(rec: dict[str, Any], where: str) -> None:
    for spec, types in FIELDS.items():
        name = spec.rstrip("?")
        value, present = _get(rec, name)
        if not present:
            if spec.endswith("?"):
                continue
            raise RecordError(f"{where}: field {name!r} is missing; {FIX}")
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            raise RecordError(f"{where}: field {name!r} must be {' or '.join(t.__name__ for t in types)}, "
                              f"not {type(value).__name__} ({value!r:.40}); {FIX}")
    for key, value in rec["metrics"].items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise RecordError(f"{where}: field 'metrics.{key}' must be a number, not {type(value).__name__} "
                              f"({value!r:.40}); {FIX}")
    for field, value, problem in name_problems(rec):  # a second row of the same look; a path out of export's OUT
        raise RecordError(f"{where}: field {field!r} {value!r:.60}: {problem}; {FIX}")
    odd = lookalikes(rec["model"]["label"])
    if odd:
        raise RecordError(f"{where}: field 'model.label' {rec['model']['label']!r:.60} holds look-alike "
                          f"character(s) {', '.join(odd[:3])}; {FIX}")
    bad = nonfinite_fields(rec)
    if bad:
        raise RecordError(f"{where}: {', '.join(bad[:3])}{' …' if len(bad) > 3 else ''}: not a finite number "
                          f"(NaN or infinity); {FIX}")
    for key, info in (rec.get("metric_info") or {}).items():
        if not isinstance(info, dict):
            raise RecordError(f"{where}: field 'metric_info.{key}' must be an object; {FIX}")
        fmt = info.get("fmt", ".3f")
        match = _FMT.fullmatch(fmt) if isinstance(fmt, str) else None
        if match is None or int(match[1]) > MAX_PRECISION:
            raise RecordError(f"{where}: field 'metric_info.{key}.fmt' {fmt!r:.40} is not a number format the board "
                              f"uses ('.1f', '.3f', '.2%': precision 0 to {MAX_PRECISION}); {FIX}")
        if "unit" in info and info["unit"] not in UNITS:
            raise RecordError(f"{where}: field 'metric_info.{key}.unit' {info['unit']!r:.40} must be one of "
                              f"{', '.join(UNITS)}; {FIX}")


def _get(rec: dict[str, Any], dotted: str) -> tuple[Any, bool]:
    value: Any = rec
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None, False
        value = value[part]
    return value, True


REQUIRED = ("created_at", "model", "task", "metrics", "main_score", "config_hash")


def record_problems(path: Path, rec: Any, results_dir: Path | None = None, board: bool = True,
                    cache_dir: str | Path | None = None) -> list[str]:
    """Why this record may not enter the board (empty when it may); its sidecar is read only from
    inside ``results_dir`` (default: the record's grandparent). ``board=False``: see `read_checked`;
    ``cache_dir``: where the per-query check is remembered (`memo_folder`)."""
    out, raw = form_problems(path, rec, results_dir, board)
    if raw is None:
        return out
    top = Path(results_dir) if results_dir is not None else Path(path).parent.parent
    return out + remembered_sidecar_problems(path, rec, raw, memo_folder(cache_dir), top)


def form_problems(path: Path, rec: Any, results_dir: Path | Folder | None = None,
                  board: bool = True) -> tuple[list[str], bytes | None]:
    """(the record's problems but its per-query check's, the per-query file's bytes for that check):
    None for the bytes when there is nothing more to check (`record_problems`' arguments)."""
    if not isinstance(rec, dict) or rec.get("schema_version") != SCHEMA_VERSION:
        return [f"not a result record of schema {SCHEMA_VERSION}"], None
    out = [f"no {k!r}" for k in REQUIRED if k not in rec]
    if out:
        return out, None
    out += [f"{name}: not a finite number (NaN or infinity)" for name in nonfinite_fields(rec)]
    out += _main_score_problems(rec)
    if not (rec["model"].get("fingerprint") or "").strip():
        out.append("no model fingerprint (model.fingerprint)")
    try:
        raw = perquery.sidecar_bytes(path, rec, results_dir)
    except UserError as exc:
        return out + [str(exc).removeprefix(f"{path}: ")], None
    if raw is None and board:  # (reuse reads a record of a task that gives no per-query values)
        out.append("no per-query sidecar (per_query_file): its task returned no per-query values "
                   "(TaskResult.per_query, see docs/guides/plugins.md), or an older negharness "
                   "wrote it; rerun it with a task that returns them")
    return out, raw


def _read_for_board(path: Path, results_dir: Folder, memo: BoardMemo, checker: Checker) -> _Read:
    """``path`` read and checked as `read_checked` does, its per-query check looked up in ``memo``
    or handed to ``checker`` (answered into ``memo`` before the pass ends)."""
    try:
        rec = load_checked(path, results_dir)
    except RecordError as exc:
        return _Read(path, error=exc)
    if is_partial(rec):
        return _Read(path, rec)
    out, raw = form_problems(path, rec, results_dir)
    read = _Read(path, rec, problems=out)
    if raw is not None:
        read.key = memo_key(rec, raw)
        if memo.get(read.key) is None:
            checker.add(read.key, path, rec, raw)
    return read


def _sidecar_problems(path: Path, rec: dict[str, Any], raw: bytes) -> list[str]:
    """What the per-query file's bytes say against the record: values that do not give its metrics
    (`perquery.parse_sidecar`), intervals that are not what they give (`_interval_problems`). Path-free
    (the record's path is left off each problem), so an answer can be remembered by content. Given
    only the record's `MEMO_FIELDS` (`memo_fields`), on every road: the key holds all the check reads."""
    rec = memo_fields(rec)
    try:
        pq = perquery.parse_sidecar(path, rec, raw)
    except UserError as exc:
        return [str(exc).removeprefix(f"{path}: ")]
    return _interval_problems(rec, pq)


# The per-query check, remembered. Recomputing 10,000 resamples per metric costs about a second per
# record of 1,000 queries, which every read (board, reuse, export, compare) would otherwise pay. The
# memo's key is everything the answer depends on (`memo_key`): the per-query file's bytes (SHA-256 of
# the bytes read, never their size or time), the record's fields the check reads (`MEMO_FIELDS`), and
# the code that checks (`code_version`). Nothing the record says about itself is trusted.
MEMO_FORMAT = "negharness-checked-record-v2"
MEMO_FOLDER = "checked_records"
MEMO_MAX_BYTES = 1 << 20  # a memo holds a few problem lines; anything larger is not one
# every field `_sidecar_problems` reads: the file's name (named in its problems), the task (its name
# renames old metrics, its cluster and leaderboard metrics choose the intervals), the metrics the
# per-query means must give, the main score, how the intervals were made and what they are
MEMO_FIELDS = ("per_query_file", "task", "metrics", "main_score", "interval_method", "intervals",
               "intervals_rows", "standard_errors", "standard_errors_rows")
# the modules whose code decides the answer: the check, the per-query contract and intervals, the
# bootstrap, the metric catalogue (renames, MedR's rule) and the JSON reader
MEMO_CODE = ("negharness.records.check", "negharness.scoring.perquery", "negharness.scoring.bootstrap",
             "negharness.scoring.catalog", "negharness.io.json_files")


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
    """The record's `MEMO_FIELDS` it has: all the per-query check may read (`_sidecar_problems`)."""
    return {name: rec[name] for name in MEMO_FIELDS if name in rec}


def remembered_sidecar_problems(path: Path, rec: dict[str, Any], raw: bytes, folder: Path,
                                results_dir: Path | None = None) -> list[str]:
    """`_sidecar_problems`, remembered in ``folder`` under `memo_key`: a record memo, else the answer
    a board's pass over ``results_dir`` left (`board_answer`); a record memo that is missing,
    damaged, of another key or not a regular file is recomputed and written again (atomically)."""
    key = memo_key(rec, raw)
    memo = folder / f"{key}.json"
    found = read_memo(memo, key)
    if found is None and results_dir is not None:
        found = board_answer(folder, results_dir, key)
    if found is None:
        found = _sidecar_problems(path, rec, raw)
        write_memo(memo, key, found)
    return found


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
    """The answers of one pass over a results folder (`checked_records`): those its memo file
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


# Many records: read and checked in a process pool. A cold board of 10,000 records spent most of its
# time computing per-query checks one record at a time, a warm one reading and hashing; a few records
# (a run's reuse, a small board) stay in this process, where starting workers would cost more than
# it saves, unless their checks are much work (`Checker`).
POOL_WORKERS = 2
POOL_MIN_RECORDS = 2000  # records a board reads in a pool, each part read and checked by a worker (starting
# workers costs tens of ms where they fork, about a second where they start afresh: macOS, Windows)
PART_RECORDS = 50  # the fewest records a worker reads at a time
POOL_MIN_WORK = 5 * 10**8  # per-query bytes x resamples to compute (about 0.5 to 1.5 s in one process)
PART_JOBS = 64  # records a worker checks at a time: parts small enough to share out evenly
HELD_BYTES = 32 << 20  # per-query bytes held while waiting to be checked: memory bounded, whatever the board

Job = tuple[str, dict[str, Any], bytes]  # (record path, the record's `MEMO_FIELDS`, its per-query bytes)


def pool_workers() -> int:
    """The processes a pool may use: `POOL_WORKERS`, at most the CPUs this process may run on."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(POOL_WORKERS, usable)


def _work(job: Job) -> int:
    """The cost of checking a record, roughly: its per-query bytes times its resamples."""
    method = job[1].get("interval_method")
    resamples = method.get("resamples") if isinstance(method, dict) else None
    return len(job[2]) * (resamples if isinstance(resamples, int) and resamples > 0 else 1)


def answer_jobs(jobs: list[Job]) -> list[list[str]]:
    """`_sidecar_problems` of each job, in order: what a pool's worker runs."""
    return [_sidecar_problems(Path(path), rec, raw) for path, rec, raw in jobs]


@dataclass
class _Part:
    keys: list[str]
    jobs: list[Job]
    size: int
    future: Future[list[list[str]]] | None = None


def pooled_reads(paths: list[Path], top: Folder, memo: BoardMemo) -> list[_Read] | None:
    """`_read_for_board` of each path, in order, by a pool's workers (`read_part`), each part's answers
    added to ``memo``; None when the pool cannot run (the caller reads in this process)."""
    workers = pool_workers()
    step = max(PART_RECORDS, -(-len(paths) // (workers * 8)))  # parts small enough to share out evenly
    parts = [paths[i:i + step] for i in range(0, len(paths), step)]
    pool = None
    try:
        pool = ProcessPoolExecutor(workers, initializer=_start_reader, initargs=(memo.folder, memo.known))
        done = list(pool.map(read_part, parts, [top] * len(parts)))
    except (OSError, BrokenProcessPool):  # no processes here (a sandbox), or a worker killed
        return None
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    reads = []
    for part_reads, used in done:
        reads.extend(part_reads)
        memo.used.update(used)
    return reads


_READER: tuple[Path, dict[str, list[str]]] | None = None  # a pool worker's memo folder and board memo


def _start_reader(folder: Path, known: dict[str, list[str]]) -> None:
    global _READER
    _READER = (folder, known)


def read_part(paths: list[Path], top: Folder) -> tuple[list[_Read], dict[str, list[str]]]:
    """What a pool's worker does with a part of a board (`pooled_reads`): each record read and checked
    as in one process (`_read_for_board`, its checks computed here), with the answers it used."""
    if _READER is None:
        raise RuntimeError("read_part runs in a worker that pooled_reads started")
    memo = BoardMemo(_READER[0], None, _READER[1])
    with Checker(memo, pooled=False) as checker:
        reads = [_read_for_board(path, top, memo, checker) for path in paths]
    return reads, memo.used


class Checker:
    """Computes the per-query checks a board's memo lacked (`add`) into it (`BoardMemo.put`): in this
    process, or (``pooled``: not in a pool's worker) once the work is worth it (`POOL_MIN_WORK`) in a
    process pool (`pool_workers`) that checks parts while this process reads on. The same answers
    either way (`answer_jobs`); this process's road when a pool cannot start or a worker dies. Use it
    as a context manager: every answer is in the memo when the ``with`` block ends without an error."""

    def __init__(self, memo: BoardMemo, pooled: bool = True) -> None:
        self.memo, self.pooled = memo, pooled
        self.parts: deque[_Part] = deque()  # waiting (not yet submitted: the last) or submitted
        self.held = 0  # per-query bytes in self.parts
        self.work = 0
        self.pool: ProcessPoolExecutor | None = None
        self.seen: set[str] = set()

    def __enter__(self) -> Checker:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        try:
            if kind is None:
                self._drain(0)
        finally:
            if self.pool is not None:
                self.pool.shutdown(cancel_futures=True)

    def add(self, key: str, path: Path, rec: dict[str, Any], raw: bytes) -> None:
        if key in self.seen:  # a copied record: one answer for both
            return
        self.seen.add(key)
        job = (str(path), memo_fields(rec), raw)
        if not self.parts or self.parts[-1].future is not None or len(self.parts[-1].jobs) >= PART_JOBS:
            self.parts.append(_Part([], [], 0))
        part = self.parts[-1]
        part.keys.append(key)
        part.jobs.append(job)
        part.size += len(raw)
        self.held += len(raw)
        self.work += _work(job)
        if self.pooled and self.pool is None and self.work >= POOL_MIN_WORK and pool_workers() > 1:
            self.pool = ProcessPoolExecutor(pool_workers())
        if self.pool is not None:  # every full part goes to the pool (all of them once it starts)
            for waiting in [p for p in self.parts if p.future is None and (p is not part or len(p.jobs) >= PART_JOBS)]:
                self._submit(waiting)
        if self.held > HELD_BYTES:
            self._drain(HELD_BYTES // 2)

    def _submit(self, part: _Part) -> None:
        try:
            part.future = self.pool.submit(answer_jobs, part.jobs) if self.pool is not None else None
        except (OSError, RuntimeError, BrokenProcessPool):  # the pool cannot run here (a sandbox)
            self._no_pool()

    def _drain(self, keep: int) -> None:
        """Answers the oldest parts (the last one too when ``keep`` is 0) until at most ``keep``
        per-query bytes are held."""
        while self.parts and (self.held > keep or keep == 0):
            part = self.parts[0]
            if part.future is None and self.pool is not None:
                self._submit(part)
            try:
                found = part.future.result() if part.future is not None else answer_jobs(part.jobs)
            except (OSError, BrokenProcessPool):  # a worker died (killed, out of memory): check here
                self._no_pool()
                found = answer_jobs(part.jobs)
            for key, answer in zip(part.keys, found):
                self.memo.put(key, answer)
            self.parts.popleft()
            self.held -= part.size

    def _no_pool(self) -> None:
        """This process's road from now on: the parts a pool held are checked here."""
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        self.pool = None
        for part in self.parts:
            part.future = None


def _main_score_problems(rec: dict[str, Any]) -> list[str]:
    """A main score the record's metrics do not hold (a name spelt two ways once gave ``value: null``)."""
    main = rec["main_score"] if isinstance(rec["main_score"], dict) else {}
    name, value = main.get("name"), main.get("value")
    metrics = rec["metrics"] if isinstance(rec["metrics"], dict) else {}
    if name not in metrics:
        return [f"main score {name!r} is not among the record's metrics ({', '.join(map(str, metrics))})"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != metrics[name]:
        return [f"main score {name!r} is {value!r}, not its metric's value {metrics[name]!r}"]
    return []


BEFORE_CLUSTERS = ("made before clustered intervals (no interval_method.cluster): its intervals are over rows, "
                   "which is too narrow where queries share an image or video; rerun it with --overwrite")


def _interval_problems(rec: dict[str, Any], pq: dict[str, Any]) -> list[str]:
    method = rec.get("interval_method") or {}
    if not perquery.clusters_known(rec):
        return [BEFORE_CLUSTERS]
    if (perquery.record_cluster(rec) != perquery.ROW) != (pq.get("clusters") is not None):
        return [f"task cluster {perquery.record_cluster(rec)!r} but the per-query file "
                f"{'lacks' if pq.get('clusters') is None else 'has'} cluster ids"]
    try:
        fresh = perquery.intervals(rec, pq, int(method.get("resamples", 0)), int(method.get("seed", 0)))
    except (ValueError, TypeError):
        return ["interval_method is missing or malformed"]
    out = []
    if method.get("clusters") != fresh["interval_method"]["clusters"]:
        out.append(f"interval_method.clusters {method.get('clusters')!r} is not the per-query file's "
                   f"{fresh['interval_method']['clusters']}")
    for field in ("intervals", "intervals_rows", "standard_errors", "standard_errors_rows"):
        stored = rec.get(field) or {}
        for metric, want in fresh[field].items():
            if not _same(stored.get(metric), want):
                name = "interval" if field.startswith("intervals") else "standard error"
                where = " over rows" if field.endswith("_rows") else ""
                out.append(f"{name}{where} of {metric!r} {stored.get(metric)} is not what its per-query values give "
                           f"({want})")
    return out


def _same(got: Any, want: Any) -> bool:
    """Stored and recomputed numbers (a bound pair or one number) agree to 1e-9."""
    got_l, want_l = (got, want) if isinstance(want, list) else ([got], [want])
    if not isinstance(got_l, list) or len(got_l) != len(want_l):
        return False
    return all(isinstance(g, (int, float)) and not isinstance(g, bool)
               and abs(float(g) - float(w)) <= 1e-9 * max(1.0, abs(float(w))) for g, w in zip(got_l, want_l))


def is_partial(rec: Any) -> bool:
    """A ``--limit`` run: kept beside the default record, never on the board, so never a problem."""
    return isinstance(rec, dict) and bool(rec.get("limited") or rec.get("limit") is not None)
