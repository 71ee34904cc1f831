"""Each image file read once (issue 54): the CPU that hashing a file for its cache key and reading it for the
decoder cost together, with the bytes read for the key held for the decoder (`negharness.io.held_bytes`)
against the file read twice (hashed, then read again by the decoder's reader), alternated in one run.

Two threads as on the batched road: one hashes runs of `HASH_TASK` files (`FileHasher._digests`, no memo), the
other reads each hashed run as the decoder's readers do (`read_items`: the held bytes, else the file). CPU
seconds of both threads per file (``time.thread_time``); files are gpu_sim's COCO-like JPEGs (~40 KB), in
the page cache. The median of the rounds per road is printed (their least beside it), and the ratio.

Then the buffer a held file is read into (`negharness.io.held_bytes.fresh_buffer`), alternated against the
``bytearray`` it replaced: the seconds its making holds the GIL (a bytearray zeroes its memory as it is made,
and a held file's pages are fresh: they fault in there) and the thread's CPU per file, with ~1,500 files held
and a batch of 256 let go at a time, as the decoder takes them.

    python perf/bench_read_once.py [--files 4096] [--rounds 3] [--tiny]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_sim import write_images  # noqa: E402

from negharness.io.held_bytes import HeldBytes, fresh_buffer  # noqa: E402
from negharness.io.tensor_images import read_items  # noqa: E402
from negharness.io.unreadable import UnreadableMedia  # noqa: E402
from negharness.store.content import HASH_TASK, FileHasher, RACY_SECONDS  # noqa: E402


def one_road(paths: list[Path], once: bool) -> float:
    """CPU seconds per file of the hashing thread and the reading thread together."""
    names = [os.fspath(p) for p in paths]
    held = HeldBytes() if once else None
    hasher = FileHasher(None)
    hashed = [0]
    ready = threading.Condition()
    cpu: dict[str, float] = {}

    def hash_all() -> None:
        start = time.thread_time()
        for lo in range(0, len(names), HASH_TASK):
            while held is not None and held.pressed():  # the key stream's pacing (`KeyStream._wait_for_room`)
                held.wait(lambda: not held.pressed(), 0.01)
            hasher._digests(names[lo:lo + HASH_TASK], held, lo)
            with ready:
                hashed[0] = min(len(names), lo + HASH_TASK)
                ready.notify_all()
        cpu["hash"] = time.thread_time() - start

    def read_all() -> None:
        start = time.thread_time()
        done = 0
        while done < len(names):
            with ready:
                ready.wait_for(lambda: hashed[0] > done)
                upto = hashed[0]
            read_items(paths, range(done, upto), UnreadableMedia.of(False), held)
            done = upto
        cpu["read"] = time.thread_time() - start

    threads = [threading.Thread(target=hash_all), threading.Thread(target=read_all)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (cpu["hash"] + cpu["read"]) / len(names)


def buffers(paths: list[Path], make: Callable[[int], Any]) -> tuple[float, float]:
    """(GIL-held seconds making each file's buffer, CPU seconds per file) reading every file into a buffer
    of ``make``, ~1,500 held and 256 let go at a time."""
    held: list[Any] = []
    making = 0.0
    start = time.thread_time()
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            t0 = time.perf_counter()
            buf = make(size)  # under the GIL
            making += time.perf_counter() - t0
            os.readv(fd, [buf])  # the GIL let go
        finally:
            os.close(fd)
        held.append(buf)
        if len(held) > 1500:
            del held[:256]
    return making / len(paths), (time.thread_time() - start) / len(paths)


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tiny", action="store_true", help="128 files, one round")
    args = ap.parse_args(argv)
    if args.tiny:
        args.files, args.rounds = 128, 1
    with tempfile.TemporaryDirectory(prefix="read-once-") as tmp:
        paths = write_images(Path(tmp), args.files)
        time.sleep(RACY_SECONDS)  # settled files, as a data set's are (memoised like them; no memo here)
        got: dict[str, list[float]] = {"twice": [], "once": []}
        for r in range(args.rounds):
            for road in (("twice", "once") if r % 2 == 0 else ("once", "twice")):
                got[road].append(one_road(paths, road == "once"))
        made: dict[str, list[tuple[float, float]]] = {"bytearray": [], "fresh_buffer": []}
        for r in range(args.rounds):
            for name in (("bytearray", "fresh_buffer") if r % 2 == 0 else ("fresh_buffer", "bytearray")):
                made[name].append(buffers(paths, bytearray if name == "bytearray" else fresh_buffer))
    mid = {road: statistics.median(s) for road, s in got.items()}
    print(f"load {os.getloadavg()[0]:.1f}, {args.files:,} JPEGs, median of {args.rounds} alternated rounds")
    for road in ("twice", "once"):
        print(f"hash + read, file read {road}: {mid[road] * 1e6:.1f} us CPU per file (least {min(got[road]) * 1e6:.1f})")
    print(f"read once / read twice: {mid['once'] / mid['twice']:.2f}")
    for name, rows in made.items():
        gil, cpu = statistics.median(g for g, _ in rows), statistics.median(c for _, c in rows)
        mid[f"{name}_gil"], mid[f"{name}_cpu"] = gil, cpu
        print(f"a held file's buffer by {name}: {gil * 1e6:.1f} us of GIL making it, {cpu * 1e6:.1f} us CPU per file read")
    print(f"fresh_buffer / bytearray, GIL making it: {mid['fresh_buffer_gil'] / mid['bytearray_gil']:.2f}")
    return mid


if __name__ == "__main__":
    main()
