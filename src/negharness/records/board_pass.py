"""A board's pass: every record under a results folder read and checked as the one reader
(`negharness.records.check.read_checked`) checks it, thousands at a time. Their per-query checks are
answered together: from the folder's board memo (`negharness.records.check_memo.BoardMemo`), else
computed, in a process pool once the work is worth it (`pooled_reads`: workers read and check parts of
the board; `Checker`: workers check while this process reads), with the answers of one process.
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from negharness.io.json_files import Folder
from negharness.records.check import RecordError, form_problems, is_partial, load_checked, refused, sidecar_problems
from negharness.records.check_memo import BoardMemo, memo_fields, memo_folder, memo_key
from negharness.records.schema import RecordKey, record_files, record_key

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
    """`sidecar_problems` of each job, in order: what a pool's worker runs."""
    return [sidecar_problems(Path(path), rec, raw) for path, rec, raw in jobs]


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
