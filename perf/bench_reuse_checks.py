"""What honest reuse and the data-root checks cost before any model loads (issue 13 items 2 and 7).

Every run hashes the files its tasks read (`negharness.store.content`) and checks that every media path
read from a data file stays under the data root (`negharness.io.paths.RootGuard`). Stand-in files are
written here: ``--images`` files of ``--image-kb`` KB (COCO val2017 JPEGs average ~160 KB) and
``--videos`` files of ``--video-kb`` KB (MSR-VTT clips average ~1.5 MB; the default writes less to
spare the disk, and the cold rate in MB/s scales). Printed: the cold hash (first run: every byte
read, page cache warm, so this is the CPU cost, not the disk's), the warm hash (a rerun: one stat
per file, the memo loaded from and saved to disk), and the root check per path; each with its
ratio to a plain ``os.stat`` of every file measured in the same run.

Run: python perf/bench_reuse_checks.py [--images 5000] [--videos 3000] [--image-kb 160] [--video-kb 256]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from negharness.io.paths import RootGuard
from negharness.store.content import FileHasher


def _write(folder: Path, n: int, kb: int, ext: str) -> list[Path]:
    folder.mkdir(parents=True)
    block = os.urandom(kb * 1024)
    paths = []
    for i in range(n):
        p = folder / f"{i:06d}{ext}"
        p.write_bytes(block[i % 97:] + block[: i % 97])  # distinct content, same size
        paths.append(p)
    return paths


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench(paths: list[Path], root: Path, memo: Path, label: str) -> None:
    size_mb = sum(p.stat().st_size for p in paths) / 2**20
    stat_s = _timed(lambda: [os.stat(p) for p in paths])

    def cold() -> None:
        h = FileHasher(memo)
        h.many(paths)
        h.save()

    def warm() -> None:
        h = FileHasher(memo)
        h.many(paths)
        h.save()

    cold_s = _timed(cold)
    warm_s = _timed(warm)
    guard_s = _timed(lambda: [RootGuard(root).check(p, "bench") for p in paths[:1]] +
                     [g.check(p, "bench") for g in [RootGuard(root)] for p in paths])
    print(f"{label}: {len(paths)} files, {size_mb:.0f} MB")
    print(f"  plain stat        {stat_s * 1e3:8.1f} ms")
    print(f"  cold hash         {cold_s * 1e3:8.1f} ms  ({size_mb / cold_s:.0f} MB/s; {cold_s / stat_s:.0f}x stat)")
    print(f"  warm hash (memo)  {warm_s * 1e3:8.1f} ms  ({warm_s / stat_s:.1f}x stat, {warm_s / len(paths) * 1e6:.0f} us/file)")
    print(f"  root check        {guard_s * 1e3:8.1f} ms  ({guard_s / stat_s:.1f}x stat)")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=5000)
    ap.add_argument("--videos", type=int, default=3000)
    ap.add_argument("--image-kb", type=int, default=160)
    ap.add_argument("--video-kb", type=int, default=256)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        images = _write(root / "images", args.images, args.image_kb, ".jpg")
        bench(images, root, root / "memo-images.json", "images")
        for p in images:
            p.unlink()
        videos = _write(root / "videos", args.videos, args.video_kb, ".mp4")
        bench(videos, root, root / "memo-videos.json", "videos")


if __name__ == "__main__":
    main()
