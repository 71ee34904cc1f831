"""How long `negharness leaderboard` takes for 1,000 records (issue 16's goal: under 2 s).

Writes 1,000 fake records (100 models x 10 tasks: an original/negated/composed collection, an MCQ
task and six more retrieval tasks; 300 queries each, with per-query sidecars and intervals, as
`negharness run` writes them) and --diagnosed `negharness diagnose` results (2,113 captions each,
as for its ten default objects), then times, best of --rounds:

  read     reading and parsing the 1,000 records (the floor any board build pays; the baseline)
  markdown read + build the tables + the Markdown board (what `leaderboard` does without --html)
  html     read + tables + Markdown + the static page with its plots and PCA scatters (`leaderboard --html`)
  cli      `negharness leaderboard --html` end to end in a fresh process (imports included)

Run: python perf/bench_leaderboard.py [--models 100] [--diagnosed 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from negharness.records.fake import write_fake_record
from negharness.records.results import ModelConfig, iter_records
from negharness.report import diagnosis_file
from negharness.report.leaderboard import build_tables, to_markdown
from negharness.report.page import site_files

TASKS = ["bench_original", "bench_negated", "bench_composed", "bench_mcq"] + [f"bench_extra{i}" for i in range(6)]


def write_records(root: Path, models: int, queries: int = 300) -> int:
    rng = np.random.default_rng(0)
    n = 0
    for m in range(models):
        model = ModelConfig(f"model{m:03d}", {})
        for task in TASKS:
            hits = (rng.random(queries) < rng.uniform(0.2, 0.9)) * 100.0
            ranks = rng.integers(1, 50, size=queries)
            if task == "bench_negated":
                values = {"ΔMIR": 1.0 / ranks - 1.0 / rng.integers(1, 50, size=queries), "ΔR@1": hits - hits[::-1],
                          "neg_MIR": 1.0 / rng.integers(1, 50, size=queries)}
                board, main = ["ΔR@1", "ΔMIR"], "ΔMIR"
            elif task == "bench_mcq":
                values = {"accuracy": hits, "acc_positive": hits, "acc_negative": hits[::-1], "acc_hybrid": hits,
                          "chose_positive": hits, "chose_negative": 100 - hits, "chose_hybrid": hits * 0}
                board, main = ["accuracy", "acc_positive", "acc_negative", "acc_hybrid"], "accuracy"
            else:
                values = {"R@1": hits, "R@10": np.maximum(hits, hits[::-1]), "MIR": 1.0 / ranks}
                board, main = ["R@1", "R@10", "MIR"], "MIR"
            write_fake_record(root, model, task, values, leaderboard=board, main=main, fmt=".3f", resamples=50)
            n += 1
    return n


def write_diagnoses(root: Path, models: int, captions: int = 2113) -> None:
    """Fake diagnoses of the first ``models`` models: random 2-D points over the five families."""
    rng = np.random.default_rng(1)
    families = ("affirmation", "negation", "two_objects", "hybrid", "double_negation")
    for m in range(models):
        cfg = ModelConfig(f"model{m:03d}", {})
        rows = [(families[i % 5], f"object{i % 10}", f"caption {i} of object{i % 10}") for i in range(captions)]
        xy = [tuple(v) for v in rng.normal(size=(captions, 2)).tolist()]
        block = {"name": cfg.name, "label": cfg.label, "options": {}, "plugin": "bench", "fingerprint": "fake",
                 "describe": {}}
        summary = {"same_object_negation": 0.9, "different_objects": 0.8, "negation_gap": 0.1}
        diagnosis_file.write(diagnosis_file.diagnosis_path(root, cfg), diagnosis_file.build(
            block, [f"object{i}" for i in range(10)], rows, xy, (0.3, 0.2), summary, "2026-01-01T00:00:00+00:00", {}))


def best_of(rounds: int, fn) -> tuple[float, float]:
    """(wall, CPU) seconds of the fastest round; CPU counts this process and its children, so a
    machine shared with other jobs shows in wall time but not in CPU time."""
    best = (float("inf"), float("inf"))
    for _ in range(rounds):
        cpu0 = _cpu()
        start = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - start, _cpu() - cpu0))
    return best


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=100)
    ap.add_argument("--diagnosed", type=int, default=10, help="models with a `diagnose` result on the page")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "results"
        start = time.perf_counter()
        n = write_records(root, args.models)
        write_diagnoses(root, min(args.diagnosed, args.models))
        print(f"wrote {n} records and {min(args.diagnosed, args.models)} diagnoses in {time.perf_counter() - start:.1f} s")
        out = Path(tmp) / "leaderboard" / "README.md"
        site = Path(tmp) / "leaderboard" / "site"

        def markdown() -> None:
            to_markdown(build_tables(iter_records(root)), out)

        def page() -> None:
            records = list(iter_records(root))
            tables = build_tables(records)
            to_markdown(tables, out)
            site_files(tables, records, site, diagnoses=diagnosis_file.load_all(root))

        read = best_of(args.rounds, lambda: list(iter_records(root)))
        md = best_of(args.rounds, markdown)
        html = best_of(args.rounds, page)
        cli = best_of(args.rounds, lambda: subprocess.run(
            [sys.executable, "-m", "negharness.cli", "leaderboard", "--results-dir", str(root), "--out", str(out),
             "--html", str(site)], check=True, capture_output=True))
        size = (site / "index.html").stat().st_size
    print(f"{'step':10} {'wall s':>8} {'CPU s':>8} {'x read (wall)':>14}")
    for name, (wall, cpu) in (("read", read), ("markdown", md), ("html", html), ("cli", cli)):
        print(f"{name:10} {wall:8.3f} {cpu:8.3f} {wall / read[0]:14.2f}")
    print(f"page: {size / 1e6:.1f} MB")
    print(f"goal: leaderboard for {n} records under 2 s -> markdown {md[0]:.2f} s, with --html {html[0]:.2f} s, "
          f"CLI end to end {cli[0]:.2f} s (wall)")


if __name__ == "__main__":
    main()
