"""Sharded evaluation: `negharness run` with 2 CPU ranks under torchrun (gloo) against 1 process,
on the same inputs, in the same run.

Inputs: the embedded world's original-caption tasks (500 videos, 500 images, their captions) with a
small random-weight ViT CLIP (64 px, patch 8, width 128, 4 vision / 3 text layers) saved once as a
safetensors checkpoint, so both launches load identical weights. Each launch starts from an empty
cache. Torch threads: the single process gets every core, each rank cores / ranks (OMP_NUM_THREADS).

Reported per launch: the command's wall time (process start, imports and model load in), and the
evaluation time the records give (sum of ``timings.total_s``: both passes for the sharded run).
The metrics of the two launches are compared too. Run: python perf/bench_sharded_eval.py
(``--repeats N``, ``--ranks R``, ``--limit N`` items per task; ``--tiny``: one repeat, 8 items, a check
of the script only).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASKS = ["shapes_t2v_original", "shapes_t2i_original"]
CONFIG = {
    "model_cfg": {
        "embed_dim": 128, "quick_gelu": False,
        "vision_cfg": {"image_size": 64, "layers": 4, "width": 128, "patch_size": 8, "head_width": 64},
        "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 128, "heads": 2, "layers": 3},
    },
    "preprocess_cfg": {"mean": [0.12, 0.12, 0.12], "std": [0.25, 0.25, 0.25]},
}


def make_model(folder: Path) -> tuple[Path, Path]:
    """A config file and random weights (seed 0) written once: every rank loads the same model."""
    import torch
    from safetensors.torch import save_file

    from negharness.api import ModelOptions
    from negharness.plugins.openclip_model import OpenClipModel

    cfg = folder / "bench_vit.json"
    cfg.write_text(json.dumps(CONFIG))
    torch.manual_seed(0)
    model = OpenClipModel.create("bench", ModelOptions(arch=str(cfg)), default_pretrained=None)
    weights = folder / "bench_vit.safetensors"
    save_file({k: v.contiguous() for k, v in model.model.state_dict().items()}, str(weights))
    return cfg, weights


def launch(ranks: int, args: list[str], threads: int, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the launched processes)."""
    cmd = [sys.executable, "-m", "negharness.cli", *args] if ranks == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
        "-m", "negharness.cli", *args]
    cpu0 = _children_cpu()
    start = time.perf_counter()
    out = subprocess.run(cmd, env={**env, "OMP_NUM_THREADS": str(threads)}, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if out.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return wall, _children_cpu() - cpu0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def records(folder: Path) -> dict[str, dict]:
    """The run's records by task, read as `negharness leaderboard` reads them (sidecars such as
    ``*.perquery.json`` are not records)."""
    from negharness.records.results import iter_records

    found = {path.stem: rec for path, rec in iter_records(folder)}
    if not found:
        sys.exit(f"no records under {folder}")
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--limit", type=int, help="cut each task to N items")
    parser.add_argument("--tiny", action="store_true", help="one repeat, 8 items per task, no warm-up launch")
    parser.add_argument("--data-root", help="where the embedded world is kept (default: a new temporary folder)")
    opts = parser.parse_args(argv)
    if opts.tiny:
        opts.repeats, opts.limit = 1, opts.limit or 8
    cores = os.cpu_count() or 1
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cfg, weights = make_model(root)
        env["NEGHARNESS_DATA"] = opts.data_root or str(root / "data")
        base = ["run", "--model", "clip", "--arch", str(cfg), "--checkpoint", str(weights), "--device", "cpu",
                "--batch-size", str(opts.batch_size)] + [a for t in TASKS for a in ("--task", t)]
        base += ["--limit", str(opts.limit)] if opts.limit else []
        # the world is generated (and the model's files hashed) once, outside the timings
        if not opts.tiny:
            launch(1, [*base, "--cache-dir", str(root / "warm"), "--output-dir", str(root / "warm-out")], cores, env)
        walls: dict[int, list[float]] = {1: [], opts.ranks: []}
        cpus: dict[int, list[float]] = {1: [], opts.ranks: []}
        evals: dict[int, list[float]] = {1: [], opts.ranks: []}
        last: dict[int, dict] = {}
        for rep in range(opts.repeats):
            for ranks in (1, opts.ranks) if rep % 2 == 0 else (opts.ranks, 1):  # alternate against drift
                tag = f"{ranks}r{rep}"
                args = [*base, "--cache-dir", str(root / f"c{tag}"), "--output-dir", str(root / f"o{tag}")]
                wall, cpu = launch(ranks, args, max(1, cores // ranks), env)
                walls[ranks].append(wall)
                cpus[ranks].append(cpu)
                last[ranks] = records(root / f"o{tag}")
                evals[ranks].append(sum(r["timings"]["total_s"] for r in last[ranks].values()))
    one, many = last[1], last[opts.ranks]
    worst = max(abs(one[t]["metrics"][k] - many[t]["metrics"][k]) for t in one for k in one[t]["metrics"])
    def shares(rec: dict) -> object:  # what each rank encoded (a one-process launch has no shares)
        counts = rec["counts"]
        return counts["sharded"]["media_encoded"] if "sharded" in counts else counts["media_encoded"]

    encoded = {t: (one[t]["counts"]["media_encoded"], shares(many[t])) for t in one}
    print(f"{cores} cores; {opts.repeats} repeats; tasks {', '.join(TASKS)}; batch {opts.batch_size}")
    print(f"{'launch':<22}{'wall s (median)':>18}{'evaluation s (median)':>24}{'CPU s (median)':>17}")
    for ranks in (1, opts.ranks):
        label = "1 process" if ranks == 1 else f"{ranks} ranks (torchrun)"
        print(f"{label:<22}{statistics.median(walls[ranks]):>18.2f}{statistics.median(evals[ranks]):>24.2f}"
              f"{statistics.median(cpus[ranks]):>17.2f}")
    print(f"speed-up, wall:       {statistics.median(walls[1]) / statistics.median(walls[opts.ranks]):.2f}x")
    print(f"speed-up, evaluation: {statistics.median(evals[1]) / statistics.median(evals[opts.ranks]):.2f}x")
    print(f"CPU seconds, {opts.ranks} ranks / 1 process: {statistics.median(cpus[opts.ranks]) / statistics.median(cpus[1]):.2f}"
          " (on a machine other jobs share, more processes also win a larger share of the cores)")
    print(f"largest metric difference: {worst:.2e}; media encoded (1 process, per rank): {encoded}")


if __name__ == "__main__":
    main()
