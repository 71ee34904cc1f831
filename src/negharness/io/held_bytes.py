"""Files read once: the bytes read to hash a file for its cache key, held for its decoder.

An image set's first run read each file twice: whole for its content hash (`negharness.store.content`),
then again by the decoder's readers. Where the keys are resolved beside the loop
(`negharness.engine.streamed_keys`), the hasher offers what it read to a `HeldBytes`, by the item's
position; the reader of that position takes the bytes instead of opening the file, so what is decoded
is exactly what was hashed (the key names the bytes encoded, even if the file changes meanwhile). An item
that is not encoded (cached, equal to another, claimed by another run) has its bytes dropped at once.
Memory stays bounded: bytes are kept only while the holder has room (``limit``), a file that does not fit
is hashed as before and read again by its reader; the key stream waits for room before it hashes further
ahead (`pressed`). Torch-free (numpy only): the hasher's layer imports it.
"""

from __future__ import annotations

import os
import stat
import threading
from typing import Callable, Iterable, Sequence

import numpy as np

HELD_MOST = 256 << 20  # bytes held for the decoder at most: ~6,000 COCO JPEGs (~40 KB), ~25 batches of 256


class HeldBytes:
    """Bytes of files by item position, offered by the hasher and taken (once) by the decoder's readers."""

    def __init__(self, limit: int = HELD_MOST) -> None:
        self.limit = limit
        self.held = 0  # bytes reserved: held, or being read to be held
        self.taken = 0  # items whose reader found their bytes here (a figure for tests and perf)
        self._bytes: dict[int, memoryview] = {}
        self._closed = False
        self._changed = threading.Condition()

    def reserve(self, size: int) -> bool:
        """Room for a file of ``size`` bytes, counted at once (several hashing threads ask together); False
        when there is none, or the holder is closed: the caller then hashes without keeping the bytes."""
        return self.reserve_each([size])[0]

    def reserve_each(self, sizes: Sequence[int]) -> list[bool]:
        """`reserve` of each of ``sizes`` in turn, under one lock (a hashing thread asks for a run of files)."""
        with self._changed:
            room = []
            for size in sizes:
                fits = not self._closed and self.held + size <= self.limit
                self.held += size if fits else 0
                room.append(fits)
            return room

    def put(self, position: int, data: memoryview | None, reserved: int) -> None:
        """The bytes of ``position`` (its ``reserved`` room is settled to their length); None: the read
        failed, the room is given back."""
        self.put_each([(position, data, reserved)])

    def put_each(self, offered: Sequence[tuple[int, memoryview | None, int]]) -> None:
        """`put` of each (position, bytes, room reserved), under one lock and one wake-up."""
        with self._changed:
            for position, data, reserved in offered:
                self.held -= reserved
                if data is not None and not self._closed:
                    self._bytes[position] = data
                    self.held += len(data)
            self._changed.notify_all()

    def take(self, positions: Sequence[int]) -> list[memoryview | None]:
        """The bytes held for each of ``positions`` (handed over once), None where there are none: its
        reader reads the file. One call per reader task (a run of files), so one lock and one wake-up."""
        with self._changed:
            found = [self._bytes.pop(position, None) for position in positions]
            got = [data for data in found if data is not None]
            if got:
                self.held -= sum(map(len, got))
                self.taken += len(got)
                self._changed.notify_all()
            return found

    def drop(self, positions: Iterable[int]) -> None:
        """Forget the bytes of items that will not be decoded."""
        with self._changed:
            for position in positions:
                data = self._bytes.pop(position, None)
                if data is not None:
                    self.held -= len(data)
            self._changed.notify_all()

    def pressed(self) -> bool:
        """Half the room is used: the key stream hands on what it has and waits before hashing further."""
        return self.held * 2 >= self.limit

    def wait(self, ready: Callable[[], bool], timeout: float) -> None:
        """Until ``ready()`` holds, or bytes are taken or dropped, or ``timeout`` seconds pass."""
        with self._changed:
            self._changed.wait_for(ready, timeout)

    def poke(self) -> None:
        """Wake a `wait` (something ``ready`` reads changed elsewhere)."""
        with self._changed:
            self._changed.notify_all()

    def close(self) -> None:
        """Drop everything and keep nothing offered later (the set is done, or stopped)."""
        with self._changed:
            self._closed = True
            self.held -= sum(len(data) for data in self._bytes.values())  # reads in flight give theirs back in `put`
            self._bytes.clear()
            self._changed.notify_all()


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def file_bytes(path: str | os.PathLike[str]) -> memoryview | None:
    """A regular file's bytes, read straight into one writable buffer that the JPEG decoder then takes as a
    tensor without a copy (``read_bytes`` + ``bytearray`` + ``frombuffer`` cost 3x the reader's time: a copy,
    and pathlib's parsing); None for anything else (missing, not a regular file, an error), which the decoder's
    checked road then names. Opened without blocking (a FIFO is seen by ``fstat``, never waited on).

    The buffer is uninitialised memory (`fresh_buffer`), first touched by the read, outside the GIL."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        data = fresh_buffer(st.st_size)
        got = _read_into(fd, data)
        while got < len(data):  # a regular file gives all at once; a shorter read means it shrank meanwhile
            n = _read_into(fd, memoryview(data)[got:])
            if n == 0:  # a copy of its size: a view would keep the whole buffer, beyond what a holder counts
                short = fresh_buffer(got)
                short[:] = data[:got]
                return short
            got += n
        return data
    except OSError:
        return None
    finally:
        os.close(fd)


def fresh_buffer(size: int) -> memoryview:
    """``size`` writable bytes, not zeroed: a ``bytearray`` zeroes its memory as it is made, under the GIL,
    where a held file's fresh pages fault in (15 us of GIL a 40 KB JPEG against 2.4-4.4 us for this, on gpu_sim's
    files with ~1,500 held: perf/bench_read_once.py); here the kernel's read fills them, with the GIL let go.
    A numpy array's memory, seen as bytes (indexing gives ints, as a bytearray's)."""
    return np.empty(size, dtype=np.uint8).data


def _readinto_file(fd: int, view: memoryview) -> int:
    with open(fd, "rb", buffering=0, closefd=False) as fh:  # where there is no readv (Windows)
        return fh.readinto(view) or 0


def _readv(fd: int, view: memoryview) -> int:
    return os.readv(fd, [view])


_read_into = _readv if hasattr(os, "readv") else _readinto_file
