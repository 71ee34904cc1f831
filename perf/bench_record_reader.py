"""What the one record reader (`negharness.records.check.read_checked`) costs against the structural
read the board, export and reuse made on fc4bba0 (`load_checked`: bounded, schema, fields).

Writes --records fake records (--queries queries in clusters of 5, three metrics, intervals of 10,000
resamples as `negharness run` writes them, with per-query sidecars), then times, best of --rounds:

  load       `load_checked` of every record (the baseline: what fc4bba0's board and export read)
  cold       `read_checked` with an empty cache: every metric and interval recomputed, as `--check` does
  warm       `read_checked` again: the interval check remembered under the cache root by content

Run: python perf/bench_record_reader.py [--records 10] [--queries 1000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from negharness.records.check import load_checked, read_checked
from negharness.records.fake import write_fake_record
from negharness.records.results import ModelConfig, record_files


def write_records(root: Path, n: int, queries: int) -> list[Path]:
    rng = np.random.default_rng(0)
    clusters = [f"c{i // 5}" for i in range(queries)]
    for m in range(n):
        hits = (rng.random(queries) < rng.uniform(0.2, 0.9)) * 100.0
        write_fake_record(root, ModelConfig(f"model{m:03d}", {}), "t",
                          {"R@1": hits, "R@10": np.maximum(hits, hits[::-1]), "MIR": 1.0 / rng.integers(1, 50, queries)},
                          resamples=10_000, clusters=clusters)
    return record_files(root)


def timed(rounds: int, fn, before=None) -> float:
    best = float("inf")
    for _ in range(rounds):
        if before is not None:
            before()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=10)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        os.environ["NEGHARNESS_CACHE"] = str(cache)
        paths = write_records(Path(tmp) / "results", args.records, args.queries)
        load = timed(args.rounds, lambda: [load_checked(p) for p in paths])
        cold = timed(args.rounds, lambda: [read_checked(p) for p in paths],
                     before=lambda: shutil.rmtree(cache, ignore_errors=True))
        warm = timed(args.rounds, lambda: [read_checked(p) for p in paths])
    print(f"{len(paths)} records of {args.queries} queries, 3 metrics, 10,000 resamples")
    print(f"{'step':6} {'wall s':>8} {'per record ms':>14} {'x load':>8}")
    for name, t in (("load", load), ("cold", cold), ("warm", warm)):
        print(f"{name:6} {t:8.3f} {1000 * t / len(paths):14.1f} {t / load:8.1f}")


if __name__ == "__main__":
    main()
