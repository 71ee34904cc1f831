"""N identical `negharness run` commands started together on one cache, against one run alone (issue 24, item 8).

Goal: the N runs share the work through the cache's claims (`negharness.store.claims`): together
they encode each item about once (encodings / one run's ~1.0, where each encoding everything would
give N), the cache holds no duplicate rows, and every record equals the lone run's metrics.
Reported: the sum of the runs' encodings (from their records' counts) over the lone run's, the wall
time from launch to the last exit against the lone run's (process start, imports and model load in),
the cache's size on disk, and the rows stored against the distinct ids; and the same N runs each on
its own cache (nothing shared: what N runs cost without claims). Each launch starts from empty caches. Model: a random-weight open_clip config (``--config``, ViT-S-32 by default) saved once
as safetensors, so every process loads identical weights; ``--model shapes_clip`` runs the embedded
default instead. Task: the embedded world's ``shapes_t2i_original`` (500 images, 1,500 captions).
Run: python perf/bench_concurrent_runs.py [--runs 4] [--config ViT-S-32] (``--tiny``: shapes_clip,
2 runs, 64 items, a check of the script only: the runs on caches of their own are skipped, their figures
printed as nan)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from negharness.records.results import iter_records
from negharness.store.shards import read_shard
from negharness.testing import random_open_clip

TASK = "shapes_t2i_original"


def launch(model: list[str], caches: list[Path], outs: list[Path], extra: list[str]) -> float:
    """Start one process per output folder at once (on one cache, or one each); the wall time until the last exits."""
    start = time.perf_counter()
    caches = caches * len(outs) if len(caches) == 1 else caches
    procs = [subprocess.Popen([sys.executable, "-m", "negharness.cli", "run", *model, "--task", TASK, "--device", "cpu",
                               "--cache-dir", str(cache), "--output-dir", str(out), *extra],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for cache, out in zip(caches, outs)]
    for proc in procs:
        if proc.wait() != 0:
            sys.exit(proc.stderr.read().decode()[-2000:])
    return time.perf_counter() - start


def record(out: Path) -> dict:
    found = [rec for path, rec in iter_records(out) if path.stem.split(".")[0] == TASK]
    if len(found) != 1:
        sys.exit(f"{len(found)} records of {TASK} under {out}")
    return found[0]


def encodings(rec: dict) -> int:
    return rec["counts"]["media_encoded"] + rec["counts"]["texts_encoded"]


def disk(cache: Path) -> tuple[int, int, int]:
    """(bytes of shard files, rows stored, distinct ids) in the cache."""
    size = rows = 0
    ids: set[str] = set()
    for shard in cache.rglob("shard-*.safetensors"):
        size += shard.stat().st_size
        keys, _ = read_shard(shard)
        rows += len(keys)
        ids.update(keys)
    return size, rows, len(ids)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--config", default="ViT-S-32", help="open_clip model config with random weights")
    parser.add_argument("--model", default=None, help="a registered model instead (e.g. shapes_clip)")
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args(argv)
    extra = ["--limit", "64"] if args.tiny else []
    runs = 2 if args.tiny else args.runs
    tmp = Path(tempfile.mkdtemp(prefix="concurrent-runs-"))
    model = ["--model", args.model or "shapes_clip"] if (args.model or args.tiny) else random_open_clip(tmp, args.config)
    print(f"{' '.join(model[:2])} ({args.model or ('shapes_clip' if args.tiny else args.config + ', random weights')}), "
          f"task {TASK}{' --limit 64' if args.tiny else ''}; {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}",
          flush=True)
    lone_wall = launch(model, [tmp / "lone-cache"], [tmp / "lone"], extra)
    lone = record(tmp / "lone")
    lone_size, lone_rows, _ = disk(tmp / "lone-cache")
    apart = [tmp / f"apart{i}" for i in range(runs)]  # the same N runs, each on its own cache: nothing shared
    if args.tiny:  # a check of the script: the shared cache's figures only (two processes less, ~25 s on 2 cores)
        apart_wall, apart_total = float("nan"), runs * encodings(lone)
    else:
        apart_wall = launch(model, [tmp / f"apart-cache{i}" for i in range(runs)], apart, extra)
        apart_total = sum(encodings(record(out)) for out in apart)
    outs = [tmp / f"run{i}" for i in range(runs)]
    wall = launch(model, [tmp / "shared-cache"], outs, extra)
    recs = [record(out) for out in outs]
    size, rows, distinct = disk(tmp / "shared-cache")
    total = sum(encodings(r) for r in recs)
    worst = max(abs(r["metrics"][k] - v) for r in recs for k, v in lone["metrics"].items())
    print(f"one run alone: {encodings(lone)} encodings, {lone_wall:.1f} s, {lone_size / 1e6:.2f} MB ({lone_rows} rows)")
    print(f"{runs} runs on {runs} caches (nothing shared): {apart_total} encodings = {apart_total / encodings(lone):.2f}x; "
          f"wall {apart_wall:.1f} s = {apart_wall / lone_wall:.2f}x")
    print(f"{runs} runs together: {total} encodings = {total / encodings(lone):.2f}x one run's "
          f"(per run: {', '.join(str(encodings(r)) for r in recs)}); wall {wall:.1f} s = {wall / lone_wall:.2f}x; "
          f"disk {size / 1e6:.2f} MB = {size / lone_size:.2f}x; rows {rows} for {distinct} distinct ids "
          f"({rows - distinct} duplicates); wall against nothing shared {wall / apart_wall:.2f}x; "
          f"largest metric difference from the lone run's {worst:.1e}; "
          f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
