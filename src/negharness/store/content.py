"""Content hashes of media, the part of an embedding's cache key that says *which* pixels went in.

A file is hashed whole (SHA-256, which CPUs with SHA extensions run 2-3x faster than BLAKE2b:
measured in perf/bench_cache_integrity.py; 128 bits kept), so a replaced or edited file never matches an old
entry, and the same bytes reached through two tasks or two data roots share one. Rehashing every
file on every run would cost a full read, so a memo maps a file's stat identity (path, size,
mtime_ns, ctime_ns, inode, device) to its hash. ctime cannot be set by a user, so an in-place edit,
a copy over the file, a rename over it or a ``touch -d`` all miss the memo. Like git's index, a file
changed within the last seconds is hashed but not memoised (timestamps have coarse ticks on some
file systems). The memo is an append-only JSON-lines file; each line carries its own checksum and
a damaged or half-written line is ignored, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
import time
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePath
from typing import Any, Iterator, Sequence

import numpy as np

from negharness.contracts.errors import UserError
from negharness.io.held_bytes import HeldBytes, file_bytes
from negharness.io.paths import require_regular
from negharness.io.atomic_files import atomic_write_bytes

DIGEST_HEX = 32  # 128 bits of SHA-256: collisions out of reach for any dataset
CHUNK = 1 << 20
RACY_SECONDS = 2.0  # files changed more recently than this are not memoised
HASH_TASK = 64  # files one task of the hashing pool reads in a row (a task per file cost more than the file)
COMPACT_SLACK = 10_000  # memo lines beyond one per file before the memo is rewritten (~7 ms a run)


def hash_bytes(*parts: bytes | bytearray | memoryview) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
    return h.hexdigest()[:DIGEST_HEX]


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)


def hash_open_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a regular file's bytes (hashlib releases the GIL, so threads hash in parallel).
    A file up to `CHUNK` is read in one call of its size; a larger one (or one that grew since its
    size was read) through one reused buffer per thread (a fresh 1 MB buffer per file made hashing
    small files 2x slower, with threads)."""
    fd = os.open(path, _READ_FLAGS)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1) if size <= CHUNK else b""
        h = hashlib.sha256(data)
        if size > CHUNK or len(data) > size:
            with open(fd, "rb", buffering=0, closefd=False) as fh:
                buf = _thread_buffer()
                view = memoryview(buf)
                while n := fh.readinto(buf):
                    h.update(view[:n])
    finally:
        os.close(fd)
    return h.hexdigest()[:DIGEST_HEX]


def _hashes_kept(paths: Sequence[str], sizes: Sequence[int], held: HeldBytes | None,
                 positions: Sequence[int]) -> list[str | None]:
    """`hash_open_file`'s hashes of a run of files (None for one that cannot be read), the bytes of each left
    in ``held`` for the decoder where it has room (one read of the whole file into the buffer the decoder
    takes); a file with no room is hashed as before. The room is asked and the bytes offered once per run,
    under one lock each (twice a file cost ~4 us of GIL a file); room never filled is given back."""
    room = held.reserve_each(sizes) if held is not None else [False] * len(paths)
    offered: list[tuple[int, memoryview | None, int]] = []
    out: list[str | None] = []
    try:
        for path, size, position, kept in zip(paths, sizes, positions, room):
            try:
                if not kept:
                    out.append(hash_open_file(path))
                    continue
                data = file_bytes(path)
                offered.append((position, data, size))
                if data is None:  # gone or no longer a regular file since its stat: `hash_open_file`'s error
                    raise FileNotFoundError(path)
                out.append(hash_bytes(data))
            except OSError:
                out.append(None)
    finally:
        if held is not None:
            done = {position for position, _, _ in offered}
            offered += [(position, None, size) for position, size, kept in zip(positions, sizes, room)
                        if kept and position not in done]  # stopped early: their room back
            held.put_each(offered)
    return out


_local = threading.local()


def _thread_buffer() -> bytearray:
    if not hasattr(_local, "buffer"):
        _local.buffer = bytearray(CHUNK)
    buffer: bytearray = _local.buffer
    return buffer


def hash_array(item: Any) -> str:
    """Hash of an in-memory item (numpy array, PIL image or tensor): its bytes, dtype and shape."""
    if hasattr(item, "tobytes") and hasattr(item, "mode") and hasattr(item, "size"):  # PIL image
        return hash_bytes(f"pil:{item.mode}:{item.size}".encode(), item.tobytes())
    if hasattr(item, "detach"):  # torch tensor
        item = item.detach().cpu().numpy()
    arr = np.ascontiguousarray(np.asarray(item))
    return hash_bytes(f"nd:{arr.dtype.str}:{arr.shape}".encode(), arr.data.cast("B"))


class FileHasher:
    """Content hashes of files with a stat-keyed memo under ``memo_dir`` (None: no memo)."""

    def __init__(self, memo_dir: str | os.PathLike[str] | None) -> None:
        self.memo_path = None if memo_dir is None else Path(memo_dir) / "memo.jsonl"
        self._memo: dict[tuple[Any, ...], str] | None = None
        self._new: list[str] = []
        self._lock = threading.Lock()
        self.hashed = 0  # files read and hashed in this process (memo misses)
        self.memo_hits = 0

    # memo -----------------------------------------------------------------------------------
    def _load_memo(self) -> dict[tuple[Any, ...], str]:
        if self._memo is None:
            memo: dict[tuple[Any, ...], str] = {}
            if self.memo_path is not None and self.memo_path.is_file():
                try:
                    lines = self.memo_path.read_bytes().splitlines()
                except OSError:
                    lines = []
                for key, digest in _parse_lines(lines):
                    memo[key] = digest
                self._compact(lines, memo)
            self._memo = memo
        return self._memo

    def _compact(self, lines: list[bytes], memo: dict[tuple[Any, ...], str]) -> None:
        """Rewrite the memo with one line per file (its latest stat identity) once stale, damaged or
        old-format lines outnumber the live ones by `COMPACT_SLACK`: the memo is append-only, and every
        run reads it whole. Atomic (written beside, then renamed); a line another run appends meanwhile
        may be lost, which costs one rehash, never a wrong hash."""
        if self.memo_path is None or len(lines) <= COMPACT_SLACK:
            return  # the usual case, decided without a pass over the entries
        latest = {key[0]: (key, digest) for key, digest in memo.items()}
        if len(lines) <= len(latest) + COMPACT_SLACK:
            return
        body = "".join(_format_line(key, digest) for key, digest in latest.values())
        try:
            atomic_write_bytes(self.memo_path, body.encode())
        except OSError:
            pass  # a memo that cannot be rewritten is only slower to read

    def save(self) -> None:
        """Append the hashes learnt since the last save; one write, so concurrent runs do not interleave lines."""
        with self._lock:
            lines, self._new = self._new, []
        if not lines or self.memo_path is None:
            return
        try:
            self.memo_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.memo_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                os.write(fd, "".join(lines).encode())
            finally:
                os.close(fd)
        except OSError:
            pass  # a memo that cannot be written only means files are hashed again next time

    # hashing --------------------------------------------------------------------------------
    def _stat_key(self, path: str) -> tuple[Any, ...] | None:
        """The memo key of a regular file, or None (missing, unreadable, or not a regular file:
        a FIFO or a device is never opened, it could block the run)."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        path = path if os.path.isabs(path) else os.path.abspath(path)
        return (path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)

    def _digests(self, paths: Sequence[str], held: HeldBytes | None = None, first: int = 0) -> list[str | None]:
        """A run of files' hashes (one pool task): each file's stat looked up in the memo, else its bytes
        hashed and memoised unless it changed within the racy window; None for a file that cannot be read.
        ``held``: where a file's bytes, read to hash it, are left for its decoder while there is room (by
        position, ``first`` the first path's)."""
        memo = self._load_memo()
        keys = [self._stat_key(path) for path in paths]
        out = [None if key is None else memo.get(key) for key in keys]
        hits = sum(digest is not None for digest in out)
        todo = [(j, key) for j, (key, digest) in enumerate(zip(keys, out)) if key is not None and digest is None]
        found = _hashes_kept([paths[j] for j, _ in todo], [key[1] for _, key in todo], held,
                             [first + j for j, _ in todo])
        fresh: list[tuple[tuple[Any, ...], str]] = []
        hashed = 0
        settled = time.time() - RACY_SECONDS
        for (j, key), digest in zip(todo, found):
            out[j] = digest
            if digest is not None:
                hashed += 1
                if max(key[2], key[3]) / 1e9 < settled:
                    fresh.append((key, digest))
        lines = [_format_line(key, digest) for key, digest in fresh]
        with self._lock:
            self.hashed += hashed
            self.memo_hits += hits
            memo.update(fresh)
            self._new.extend(lines)
        return out

    def file(self, path: str | os.PathLike[str]) -> str | None:
        """Content hash of one file, or None when it is not a readable regular file (its decoder
        then reports it, naming the file; an unhashable item is never cached)."""
        return self.many([path], threads=1)[0]

    def required(self, path: str | os.PathLike[str], where: str = "") -> str:
        """The hash of a file a record depends on: anything but a readable regular file is an
        error naming it (and a FIFO is never opened)."""

        require_regular(path, where)
        digest = self.file(path)
        if digest is None:
            raise UserError(f"{where + ': ' if where else ''}cannot read {path}")
        return digest

    def tree(self, path: str | os.PathLike[str], where: str = "") -> str:
        """A file's hash, or a folder's: its regular files' relative names and hashes, hashed."""
        path = Path(path)
        if not path.is_dir():
            return self.required(path, where)
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return named_hash([(f.relative_to(path).as_posix(), self.required(f, where)) for f in files])

    def many(self, sources: Sequence[Any], threads: int | None = None) -> list[str | None]:
        """Hashes of many sources (a file, or a video's frame files: the hash of their hashes in
        order), in order. Memo hits cost a stat, misses a read; both off the calling thread, by a pool of
        threads that each take a run of `HASH_TASK` files (stats, reads and SHA-256 release the GIL, so
        they overlap, and a task per file cost more than the file); a set of one run is done here."""
        self._load_memo()
        single = [_is_path(s) for s in sources]
        flat = [[os.fspath(s)] if one else [os.fspath(p) for p in s] for s, one in zip(sources, single)]
        paths = list(dict.fromkeys(path for files in flat for path in files))
        tasks = [paths[lo:lo + HASH_TASK] for lo in range(0, len(paths), HASH_TASK)]
        threads = min(threads or min(8, os.cpu_count() or 1), len(tasks))
        if threads <= 1:
            found = self._digests(paths)
        else:
            with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="negharness-hash") as pool:
                found = [digest for part in pool.map(self._digests, tasks) for digest in part]
        digests = dict(zip(paths, found))
        self.save()
        return [digests[files[0]] if one else _combine([digests[p] for p in files])
                for one, files in zip(single, flat)]


    def runs(self, paths: Sequence[str | os.PathLike[str]], threads: int | None = None,
             held: HeldBytes | None = None) -> Iterator[list[str | None]]:
        """The hashes of ``paths`` (single files), a run of `HASH_TASK` at a time, in order, as a pool of
        threads makes them ahead of the caller: a caller can start on the first files' keys while the rest
        are hashed (`negharness.engine.streamed_keys`). With ``held`` the files read are left there for the
        decoder, and the pool keeps only two runs per thread ahead of the caller, so the caller's pace
        bounds how far ahead it reads. The memo is saved when the runs end or are closed."""
        self._load_memo()
        names = [os.fspath(p) for p in paths]
        tasks = [names[lo:lo + HASH_TASK] for lo in range(0, len(names), HASH_TASK)]
        workers = max(1, min(threads or min(8, os.cpu_count() or 1), len(tasks)))
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="negharness-hash")
        ahead = 2 * workers if held is not None else len(tasks)
        try:
            futures = deque(pool.submit(self._digests, tasks[k], held, k * HASH_TASK) for k in range(min(ahead, len(tasks))))
            submitted = len(futures)
            while futures:
                run = futures.popleft().result()
                if submitted < len(tasks):
                    futures.append(pool.submit(self._digests, tasks[submitted], held, submitted * HASH_TASK))
                    submitted += 1
                yield run
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            self.save()


def _is_path(source: Any) -> bool:
    """A source that is one file (a str or path), not a sequence of frame files."""
    return isinstance(source, (str, PurePath)) or isinstance(source, os.PathLike)


def named_hash(named: Sequence[tuple[str, str]]) -> str:
    """One hash of (name, hash) pairs in the given order."""
    return hash_bytes("\n".join(f"{n}\0{h}" for n, h in named).encode())


def _combine(parts: list[str | None]) -> str | None:
    """A video's frame files as one source: the hash of their hashes, None when one is unreadable."""
    known = [p for p in parts if p is not None]
    if not parts or len(known) < len(parts):
        return None
    return hash_bytes(b"seq", *(p.encode() for p in known))


def _line_check(body: bytes | memoryview) -> int:
    """A line's checksum: CRC-32 catches a torn, half-written or bit-flipped line at a fraction of a
    SHA's cost (every run reads the whole memo). Like the shards' checksums it guards against
    damage, not against someone who edits the cache on purpose."""
    return zlib.crc32(body)


def _format_line(key: tuple[Any, ...], digest: str) -> str:
    """One memo line: ``json.dumps([*key, digest], separators=(",", ":"))`` written out (a tenth of its
    time: the numbers are ints, the digest hex), after its checksum."""
    path, size, mtime, ctime, ino, dev = key
    if type(size) is int and type(mtime) is int and type(ctime) is int and type(ino) is int and type(dev) is int:
        body = f'[{json.dumps(path)},{size},{mtime},{ctime},{ino},{dev},"{digest}"]'
    else:  # not a stat key (a line read back from the memo holds whatever passed its checksum)
        body = json.dumps([*key, digest], separators=(",", ":"))
    return f"{_line_check(body.encode()):08x} {body}\n"


def _parse_lines(lines: list[bytes]) -> list[tuple[tuple[Any, ...], str]]:
    """The memo's sound entries: lines whose checksum matches (others are skipped), parsed in one
    JSON call; a line that passes its check but is not an entry is dropped alone."""
    bodies = []
    for line in lines:
        if line[8:9] != b" ":
            continue
        try:
            if int(line[:8], 16) == _line_check(memoryview(line)[9:]):
                bodies.append(line[9:])
        except ValueError:
            continue
    try:
        rows = json.loads(b"[" + b",".join(bodies) + b"]")
    except (ValueError, UnicodeDecodeError):
        rows = [_loads_or_none(b) for b in bodies]
    # [path, size, mtime_ns, ctime_ns, inode, device, digest]; a malformed row never matches a stat key
    return [(tuple(row[:6]), row[6]) for row in rows if type(row) is list and len(row) == 7]


def _loads_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
