"""The negation-training experiment on the embedded world (issue #7): not a test, a study.

From the same tiny CLIP (shapes_clip), seed and data, fine-tune several ways, evaluate each on the
original, negated and composed query sets of a 2,000-video test split and on the world's MCQ, over
several seeds, with bootstrap intervals and paired intervals against CLIP*: queries are resampled,
each query's value the mean over seeds (seeds of one query are not independent queries). Run: python perf/exp_negation_training.py [--seeds 0 1 2] [--out runs/exp]
Writes runs/exp/results/ (records) and prints the table; `negharness leaderboard --results-dir
runs/exp/results --out ...` renders the records.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from negharness.api.model import ModelOptions
from negharness.api.training import TrainOptions
from negharness.discovery.lookup import PluginLookup
from negharness.discovery.manager import make_host
from negharness.engine.evaluate import RunRequest, run_evaluation
from negharness.scoring.bootstrap import bootstrap_ci, paired_bootstrap, seed_means

COMMON = {"lr": "1e-5", "epochs": "4", "patience": "2"}
RECIPES = {
    "clip_star": ("triplet", {}),
    "bnl_paper": ("bnl", {}),  # lambda_2 = 1e-3 as the paper
    "bnl": ("bnl", {"lambda_v": "0.1", "lambda_q": "0.1"}),
    "negbench": ("negbench", {}),
    "bnl+negbench": ("bnl", {"lambda_v": "0.1", "lambda_q": "0.1", "negbench": "true"}),
    "negbench+triplet": ("negbench", {"triplet": "true"}),  # NegBench's objective on top of the primary loss
}
TASKS = ["shapes_t2v_original", "shapes_t2v_negated", "shapes_t2v_composed", "shapes_mcq"]
TEST_ITEMS = "2000"


def per_query(samples_file: Path, task: str) -> dict[str, np.ndarray]:
    """Per-query metric values, and under "query" each value's query (to line seeds up)."""
    rows = [json.loads(line) for line in samples_file.read_text().splitlines()]
    if task == "shapes_mcq":
        return {"query": np.array([f"{r['row']}:{r['media']}" for r in rows]),
                "accuracy": np.array([100.0 * (r["chosen"] == r["correct"] and not r["tie"]) for r in rows])}
    ranks = np.array([r["rank"] for r in rows], dtype=np.float64)
    keys = np.array([r["id"] for r in rows])
    if task == "shapes_t2v_negated":
        orig = np.array([r["source_rank_original"] for r in rows], dtype=np.float64)
        return {"query": keys, "ΔMIR": 1 / orig - 1 / ranks}
    return {"query": keys, "MIR": 1 / ranks, "R@1": 100.0 * (ranks <= 1)}


def evaluate(host, model: str, checkpoint: str | None, out: Path) -> dict[str, dict[str, np.ndarray]]:
    req = RunRequest(model=model, model_options=ModelOptions(checkpoint=checkpoint), tasks=TASKS,
                     task_extra={"n_items": TEST_ITEMS}, output_dir=str(out), log_samples=True, overwrite=True,
                     device="auto")
    values: dict[str, dict[str, np.ndarray]] = {}
    for o in run_evaluation(host, req):
        values[o.task] = per_query(o.path.with_suffix(".samples.jsonl"), o.task)
    return values


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default="runs/exp")
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES))
    parser.add_argument("--table", help="also write the table (Markdown) to this file")
    parser.add_argument("--report-only", action="store_true", help="rebuild the table from the saved samples")
    args = parser.parse_args()
    if args.report_only:
        return write_table(args, collect(Path(args.out) / "results"))
    host = make_host()
    out = Path(args.out)
    plugins = PluginLookup(host.registry)
    results: dict[str, list[dict]] = {"shapes_clip (no fine-tuning)": [evaluate(host, "shapes_clip", None, out / "results")]}
    for name in args.recipes:
        trainer, extra = RECIPES[name]
        for seed in args.seeds:
            folder = out / f"{name}-s{seed}"
            opts = TrainOptions(out=folder, model="shapes_clip", task="shapes", seed=seed, device="auto",
                                extra={**COMMON, **extra}, plugins=plugins)
            host.registry.create("trainer", trainer, opts)
            results.setdefault(name, []).append(evaluate(host, "clip_bnl", str(folder), out / "results"))
            print(f"trained and evaluated {name} seed {seed}", flush=True)
    write_table(args, results)


def collect(results_dir: Path) -> dict[str, list[dict]]:
    """Per-query values back from the records' samples files, grouped by recipe (checkpoint folder)."""
    runs: dict[tuple[str, str], dict] = {}
    for rec_path in sorted(results_dir.glob("*/shapes_*.json")):
        rec = json.loads(rec_path.read_text())
        ckpt = rec["model"]["options"].get("checkpoint")
        name, seed = (Path(ckpt).name.rsplit("-s", 1) if ckpt else ("shapes_clip (no fine-tuning)", "0"))
        runs.setdefault((name, seed), {})[rec["task"]["name"]] = per_query(rec_path.with_suffix(".samples.jsonl"),
                                                                          rec["task"]["name"])
    out: dict[str, list[dict]] = {}
    for (name, _), values in sorted(runs.items(), key=lambda kv: (list(RECIPES).index(kv[0][0])
                                                                   if kv[0][0] in RECIPES else -1, kv[0][1])):
        out.setdefault(name, []).append(values)
    return out


def write_table(args, results: dict[str, list[dict]]) -> None:
    table = report(results)
    print(table)
    if args.table:
        from negharness.store.atomic import atomic_write_text

        atomic_write_text(args.table, HEADER.format(seeds=len(args.seeds), items=TEST_ITEMS) + table)


HEADER = """# Negation training on the embedded world

Generated by `python perf/exp_negation_training.py --table leaderboard/negation_training.md`.
Each recipe fine-tunes shapes_clip ({seeds} seeds; lr 1e-5, up to 4 epochs, early stopping on
validation MIR) and is evaluated on a {items}-video test split. Cells: mean over queries and seeds
[95% bootstrap interval]; for the fine-tuned recipes also the paired difference to CLIP* [interval].
Intervals resample queries, each query's value its mean over the seeds.

"""


def seed_averaged(runs: list[dict], task: str, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(queries, each query's value averaged over the runs' seeds); every seed must score the same
    queries, which the fixed test split guarantees (checked)."""
    keys = runs[0][task]["query"]
    for r in runs[1:]:
        if not np.array_equal(r[task]["query"], keys):
            raise ValueError(f"{task}: the seeds scored different queries; cannot average them per query")
    return keys, seed_means([r[task][metric] for r in runs])


def seed_interval(runs: list[dict], task: str, metric: str) -> tuple[float, float, float]:
    """Mean and 95% bootstrap interval, resampling queries (values averaged over seeds)."""
    _, v = seed_averaged(runs, task, metric)
    lo, hi = bootstrap_ci(v)
    return float(v.mean()), lo, hi


def report(results: dict[str, list[dict]]) -> str:
    columns = [("shapes_t2v_original", "MIR"), ("shapes_t2v_negated", "ΔMIR"), ("shapes_t2v_composed", "MIR"),
               ("shapes_t2v_composed", "R@1"), ("shapes_mcq", "accuracy")]
    base = results.get("clip_star")
    lines = ["| recipe | seeds | " + " | ".join(f"{t.replace('shapes_', '')} {m}" for t, m in columns) + " |",
             "|---|---:|" + "---:|" * len(columns)]
    for name, runs in results.items():
        cells = []
        for task, metric in columns:
            mean, lo, hi = seed_interval(runs, task, metric)
            cell = f"{mean:.3f} [{lo:.3f}, {hi:.3f}]"
            if base is not None and name in RECIPES and name != "clip_star":
                keys, v = seed_averaged(runs, task, metric)
                base_keys, b = seed_averaged(base, task, metric)
                if not np.array_equal(keys, base_keys):
                    raise ValueError(f"{task}: {name} and clip_star scored different queries")
                dlo, dhi, _ = paired_bootstrap(b, v)
                cell += f" Δ{v.mean() - b.mean():+.3f} [{dlo:+.3f}, {dhi:+.3f}]"
            cells.append(cell)
        lines.append(f"| {name} | {len(runs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
