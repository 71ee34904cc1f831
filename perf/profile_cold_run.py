"""Where a cold `negharness run` spends its time: cProfile of the whole command, every thread.

Two runs, each a fresh process with an empty cache (``--cache-dir`` in a new folder):

* ``world``: ``negharness run --model shapes_clip --task 'shapes_*'`` on the embedded world (its data
  files generated once beforehand, outside the profile: a user's second run finds them);
* ``negbench``: ``negharness run --model clip --task negbench_retrieval_coco`` on the first
  ``--images`` rows of the real COCO Retrieval-Neg CSVs (``../shared/data/negbench``, or under
  ``$NEGHARNESS_SHARED``; generated rows in their layout when absent) with one generated 640x480
  stand-in JPEG per image path and a random-weight open_clip ViT-B-32 (seed 0) saved once to a
  safetensors file (``--arch`` + ``--checkpoint``).

The child process runs the command under `negharness.cli.profiling.CommandProfile` (what ``negharness
--profile FILE`` uses: a profiler in the main thread and in every thread started later, the decode
pool included) and writes their stats. Printed per run: the
top ``--top`` functions by own time (tottime) and by cumulative time, main thread and the decode threads
apart, each as seconds and as a share of the command's wall time (decode threads run beside the main
thread, so their shares add to it), and the load average; then the stage times the records keep
(`negharness.engine.stages`: start-up, plan, torch import, data, model import and build; per task forward,
embed, score, write) and the run's wall time over its encoding time (issue 44's target: at most 1.3x).
Profiling slows Python-heavy code more than
torch's C++ kernels: compare shares between runs, not seconds with an unprofiled run.

Run: python perf/profile_cold_run.py [--run world|negbench|both] [--images 200] [--top 10]
[--keep DIR: keep the .prof files] [--tiny: 8 world items, 4 images, a small ViT: a check of the script]
[--rounds N --baseline-src DIR: also N unprofiled cold runs of this tree and of another src/ folder,
alternating, with per-round ratios, load average and whether the metrics are equal] [--no-profile]
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RETRIEVAL = ("COCO_val_retrieval.csv", "COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv")
SHARED = Path(os.environ.get("NEGHARNESS_SHARED") or Path(__file__).resolve().parents[1] / ".." / "shared")
CSVS = SHARED / "data" / "negbench" / "negbench_eval_csvs" / "images"
TINY_VIT = {  # a ViT small enough for the --tiny check (the real profile uses open_clip's ViT-B-32)
    "embed_dim": 64, "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "patch_size": 16, "head_width": 32},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
}


# child: the profiled command ---------------------------------------------------------------------
def child(out: Path, argv: list[str]) -> None:
    """Run ``negharness <argv>`` in this process under `negharness.cli.profiling.CommandProfile` (the
    profiler ``--profile`` uses: one per thread); write main.prof, one ``threads-<group>.prof`` per
    thread-name group and ``wall.json``."""
    from negharness.cli.profiling import CommandProfile

    start = time.perf_counter()
    with CommandProfile() as profile:
        from negharness.cli.main import main

        code = main(argv)
    wall = time.perf_counter() - start
    for group, stats in profile.groups().items():
        stats.dump_stats(str(out / ("main.prof" if group == "main" else f"threads-{group}.prof")))
    (out / "wall.json").write_text(json.dumps({"wall_s": wall, "exit": code, "threads": len(profile.threads)}))


def stage_lines(out: Path, wall: float | None = None) -> list[str]:
    """The records' stage times (`negharness.engine.stages`), the run-wide ones once, and the whole
    run against its encoding: ``wall`` (the process's, measured outside it; else the last record's
    ``wall_s``) over the sum of the records' ``encode_s``."""
    from negharness.engine.stages import RUN_WIDE
    from negharness.records.results import iter_records

    timings = {rec["task"]["name"]: rec.get("timings") or {} for _, rec in iter_records(out)}
    if not timings:
        return ["(no records)"]
    first = next(iter(timings.values()))
    lines = ["run-wide: " + (", ".join(f"{s} {first[f'{s}_s']:.2f} s" for s in RUN_WIDE if f"{s}_s" in first)
                             or "no stage times (older code)")]
    for task, t in timings.items():
        own = ", ".join(f"{k[:-2]} {v:.2f}" for k, v in t.items() if k[:-2] not in RUN_WIDE and k != "wall_s")
        lines.append(f"{task}: {own}")
    encode = sum(t.get("encode_s", 0.0) for t in timings.values())
    wall = wall if wall is not None else max((t.get("wall_s", 0.0) for t in timings.values()), default=0.0)
    tasks = sum(t.get("total_s", 0.0) for t in timings.values())
    ratio = f"{wall / encode:.2f}x" if encode else "n/a"
    lines.append(f"wall {wall:.2f} s, tasks {tasks:.2f} s, encode {encode:.2f} s: wall/encode {ratio}, "
                 f"outside the tasks {wall - tasks:.2f} s")
    return lines


# parent: inputs, launches, tables ------------------------------------------------------------------
def write_retrieval_rows(source: Path, target: Path, rows: int) -> None:
    """The CSV the task reads: the real file's first ``rows`` rows, or generated rows in its layout."""
    if source.is_file():
        with source.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            lines = [next(reader)] + [r for _, r in zip(range(rows), reader)]
    else:
        negated = "negated" in source.name
        lines = [["positive_objects", "negative_objects", "filepath", "image_id", "captions"]] + [
            ["['dog']", "['cat']", f"data/coco/images/val2017/{i:012d}.jpg", str(i),
             repr([f"A dog {'and no cat ' if negated else ''}on a sofa number {i}.", f"A brown dog lying down {i}."])]
            for i in range(rows)]
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(lines)


def stand_in_images(root: Path, csv_path: Path) -> int:
    """One 640x480 JPEG per distinct image path of the CSV (smooth colour fields plus a little noise,
    so decoding costs about what a photograph's does, unlike pure noise)."""
    import numpy as np
    from PIL import Image

    from negharness.tasks.negbench.data import map_media_path

    with csv_path.open(newline="", encoding="utf-8") as f:
        paths = list(dict.fromkeys(map_media_path(row["filepath"], root) for row in csv.DictReader(f)))
    rng = np.random.default_rng(0)
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        small = Image.fromarray(rng.integers(0, 255, (12, 16, 3), dtype=np.uint8)).resize((640, 480), Image.BILINEAR)
        noisy = np.asarray(small).astype(np.int16) + rng.integers(-12, 12, (480, 640, 3))
        Image.fromarray(noisy.clip(0, 255).astype(np.uint8)).save(p, quality=90)
    return len(paths)


def random_vit(folder: Path, tiny: bool) -> list[str]:
    """open_clip's ViT-B-32 config (or a tiny one) with seed-0 random weights, written once."""
    import open_clip
    import torch
    from safetensors.torch import save_file

    configs = Path(open_clip.__file__).parent / "model_configs"
    cfg = TINY_VIT if tiny else json.loads((configs / "ViT-B-32.json").read_text())
    (folder / "vit.json").write_text(json.dumps(cfg))
    torch.manual_seed(0)
    model = open_clip.model.CLIP(**cfg)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / "random.safetensors"))
    return ["--model", "clip", "--arch", str(folder / "vit.json"), "--checkpoint", str(folder / "random.safetensors")]


def launch(work: Path, argv: list[str], env: dict[str, str]) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(work), "--", *argv]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        sys.exit(f"profiled run failed ({' '.join(argv)}):\n{out.stderr[-3000:]}")
    info = json.loads((work / "wall.json").read_text())
    if info["exit"]:
        sys.exit(f"negharness {' '.join(argv)} exited {info['exit']}:\n{out.stderr[-3000:]}")
    return info


def _label(func: tuple[str, int, str]) -> str:
    path, line, name = func
    if path == "~":
        return name  # a built-in: {method 'decode' of 'ImagingDecoder' objects}
    parts = Path(path).parts
    short = "/".join(parts[parts.index("negharness"):]) if "negharness" in parts else "/".join(parts[-2:])
    return f"{short}:{line}({name})"


def top(stats: pstats.Stats, key: str, n: int) -> list[tuple[str, float, float, int]]:
    """The ``n`` functions with the most ``key`` time ("tottime" or "cumtime"): (label, tottime, cumtime, calls)."""
    rows = [(_label(func), tt, ct, nc) for func, (_cc, nc, tt, ct, _callers) in stats.stats.items()]  # type: ignore[attr-defined]
    rows.sort(key=lambda r: r[1] if key == "tottime" else r[2], reverse=True)
    return rows[:n]


def print_tables(title: str, work: Path, info: dict, n: int) -> None:
    wall = info["wall_s"]
    print(f"\n== {title}: wall {wall:.2f} s under the profiler; threads started {info['threads']}")
    for prof in sorted(work.glob("*.prof"), key=lambda p: (p.name != "main.prof", p.name)):
        stats = pstats.Stats(str(prof))
        total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
        print(f"-- {prof.stem}: {total:.2f} s of own time in Python-visible calls ({100 * total / wall:.0f}% of wall)")
        for key in ("tottime", "cumtime"):
            print(f"   top {n} by {key}:  {'tottime s':>9} {'cumtime s':>9} {'% wall':>7} {'calls':>8}  function")
            for label, tt, ct, nc in top(stats, key, n):
                share = 100 * (tt if key == "tottime" else ct) / wall
                print(f"   {'':17}{tt:>9.3f} {ct:>9.3f} {share:>6.1f}% {nc:>8}  {label}")


def _env(src: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env["PYTHONPATH"] = os.pathsep.join([str(src), env["PYTHONPATH"]]) if env.get("PYTHONPATH") else str(src)
    return env


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def timed_rounds(label: str, args: list[str], root: Path, trees: dict[str, Path], rounds: int) -> None:
    """Unprofiled cold runs (a fresh cache each), the source trees alternating in order round by round;
    per round each tree's wall time, the ratio to the first tree, the load average, and whether the
    metrics are equal to the first tree's."""
    from negharness.records.results import iter_records

    names = list(trees)
    walls: dict[str, list[float]] = {n: [] for n in names}
    listed = ", ".join(f"{n}={p}" for n, p in trees.items())
    print(f"\n== {label}: unprofiled cold runs, {rounds} round(s), trees {listed}")
    for r in range(rounds):
        metrics: dict[str, dict] = {}
        for name in names if r % 2 == 0 else names[::-1]:
            work = root / f"timed-{label}-{name}-{r}"
            cmd = [sys.executable, "-m", "negharness.cli", *args, "--cache-dir", str(work / "cache"),
                   "--output-dir", str(work / "out")]
            start = time.perf_counter()
            subprocess.run(cmd, env=_env(trees[name]), capture_output=True, check=True)
            walls[name].append(time.perf_counter() - start)
            metrics[name] = {p.stem: rec["metrics"] for p, rec in iter_records(work / "out")}
            for line in stage_lines(work / "out", walls[name][-1]):
                print(f"   {name}: {line}")
        base = names[0]
        cells = ", ".join(f"{n} {walls[n][-1]:.2f} s" + (f" ({walls[n][-1] / walls[base][-1]:.2f}x {base}'s, metrics "
                                                          f"{'equal' if metrics[n] == metrics[base] else 'DIFFER'})"
                                                          if n != base else "") for n in names)
        print(f"round {r + 1}: {cells}; load {_load()}")


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        child(Path(argv[1]), argv[3:])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", choices=("world", "negbench", "both"), default="both")
    ap.add_argument("--images", type=int, default=200, help="Retrieval-Neg rows (one image each)")
    ap.add_argument("--csvs", type=Path, default=CSVS, help="folder of the NegBench image CSVs")
    ap.add_argument("--batch-size", type=int, default=None, help="passed to negharness run (default: its own)")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--keep", type=Path, help="keep the profiles (and the inputs) in this folder")
    ap.add_argument("--tiny", action="store_true", help="8 world items, 4 images, a tiny ViT: a check of the script")
    ap.add_argument("--no-profile", action="store_true", help="only the timed rounds")
    ap.add_argument("--rounds", type=int, default=0, help="unprofiled cold runs per tree, interleaved")
    ap.add_argument("--baseline-src", type=Path, help="another src/ folder (e.g. `git archive` of an older commit) "
                                                     "timed against this one in --rounds")
    opts = ap.parse_args(argv)
    images = 4 if opts.tiny else opts.images
    ours = Path(__file__).resolve().parents[1] / "src"
    env = _env(ours)
    trees = {"this": ours, **({"baseline": opts.baseline_src.resolve()} if opts.baseline_src else {})}
    common = ["--device", "cpu"] + (["--batch-size", str(opts.batch_size)] if opts.batch_size else [])
    with tempfile.TemporaryDirectory() as tmp:
        root = opts.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%H%M%S")
        print(f"{os.cpu_count()} cores; load average before: {_load()}")
        runs: list[tuple[str, str, list[str]]] = []  # (label, title, arguments without cache and output)
        if opts.run in ("world", "both"):
            data = root / "world-data"
            args = ["run", "--model", "shapes_clip", "--task", "shapes_*", *common, "--data-root", str(data)]
            args += ["--limit", "8"] if opts.tiny else []
            # the world's files are made once, outside the profile, as a user's second run finds them
            subprocess.run([sys.executable, "-m", "negharness.cli", *args, "--cache-dir", str(root / "warm-cache"),
                            "--output-dir", str(root / "warm-out")], env=env, capture_output=True, check=True)
            runs.append(("world", "world: run --model shapes_clip --task 'shapes_*'", args))
        if opts.run in ("negbench", "both"):
            data = root / "negbench-data"
            for name in RETRIEVAL:
                write_retrieval_rows(opts.csvs / name, data / "negbench" / name, images)
            real = all((opts.csvs / name).is_file() for name in RETRIEVAL)
            print(f"captions: {'the real CSVs in' if real else 'generated rows (no CSVs in'} {opts.csvs}")
            made = stand_in_images(data, data / "negbench" / RETRIEVAL[0])
            model = random_vit(root, opts.tiny)
            with (data / "negbench" / RETRIEVAL[1]).open(newline="", encoding="utf-8") as f:
                texts = sum(len(ast.literal_eval(r["captions"])) for r in csv.DictReader(f))
            title = (f"negbench_retrieval_coco: {made} stand-in images, {texts} negated captions (as many originals), "
                     f"{'tiny ViT' if opts.tiny else 'random ViT-B-32'}")
            runs.append(("negbench", title,
                         ["run", *model, "--task", "negbench_retrieval_coco", *common, "--data-root", str(data)]))
        for label, title, args in runs:
            if not opts.no_profile:
                work = root / f"{label}-{stamp}"
                info = launch(work, [*args, "--cache-dir", str(work / "cache"), "--output-dir", str(work / "out")], env)
                print_tables(title, work, info, opts.top)
                print("-- stage times from the records (under the profiler):")
                for line in stage_lines(work / "out"):
                    print(f"   {line}")
            if opts.rounds:
                timed_rounds(label, args, root, trees, opts.rounds)
        print(f"\nload average after: {_load()}")


if __name__ == "__main__":
    main()
