"""The negation-training experiment on the embedded world (issue #7): not a test, a study.

From the same tiny CLIP (shapes_clip), seed and data, fine-tune several ways, evaluate each on the
original, negated and composed query sets of a 2,000-video test split and on the world's MCQ, over
several seeds, with bootstrap intervals (queries resampled, seeds pooled) and paired intervals
against CLIP*. Run: python benchmarks/exp_negation_training.py [--seeds 0 1 2] [--out runs/exp]
Writes runs/exp/results/ (records) and prints the table; `negharness leaderboard --results-dir
runs/exp/results --out ...` renders the records.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from negharness.evaluate import RunRequest, run_evaluation
from negharness.metrics import bootstrap_ci, paired_bootstrap
from negharness.model import ModelOptions
from negharness.plugin_manager import make_host
from negharness.train import TrainOptions

COMMON = {"lr": "1e-5", "epochs": "4", "patience": "2"}
RECIPES = {
    "clip_star": ("triplet", {}),
    "bnl_paper": ("bnl", {}),  # lambda_2 = 1e-3 as the paper
    "bnl": ("bnl", {"lambda_v": "0.1", "lambda_q": "0.1"}),
    "negbench": ("negbench", {}),
    "bnl+negbench": ("bnl", {"lambda_v": "0.1", "lambda_q": "0.1", "negbench": "true"}),
}
TASKS = ["shapes_t2v_original", "shapes_t2v_negated", "shapes_t2v_composed", "shapes_mcq"]
TEST_ITEMS = "2000"


def per_query(samples_file: Path, task: str) -> dict[str, np.ndarray]:
    rows = [json.loads(line) for line in samples_file.read_text().splitlines()]
    if task == "shapes_mcq":
        return {"accuracy": np.array([100.0 * (r["chosen"] == r["correct"] and not r["tie"]) for r in rows])}
    ranks = np.array([r["rank"] for r in rows], dtype=np.float64)
    if task == "shapes_t2v_negated":
        orig = np.array([r["source_rank_original"] for r in rows], dtype=np.float64)
        return {"ΔMIR": 1 / orig - 1 / ranks}
    return {"MIR": 1 / ranks, "R@1": 100.0 * (ranks <= 1)}


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
    args = parser.parse_args()
    host = make_host()
    out = Path(args.out)
    load = lambda name, options: host.registry.get("model", name).load()(options)  # noqa: E731
    results: dict[str, list[dict]] = {"shapes_clip (no fine-tuning)": [evaluate(host, "shapes_clip", None, out / "results")]}
    for name in args.recipes:
        trainer, extra = RECIPES[name]
        for seed in args.seeds:
            folder = out / f"{name}-s{seed}"
            opts = TrainOptions(out=folder, model="shapes_clip", task="shapes", seed=seed, device="auto",
                                extra={**COMMON, **extra}, load_model=load)
            host.registry.get("trainer", trainer).load()(opts)
            results.setdefault(name, []).append(evaluate(host, "clip_bnl", str(folder), out / "results"))
            print(f"trained and evaluated {name} seed {seed}", flush=True)
    report(results)


def _pooled(runs: list[dict], task: str, metric: str) -> np.ndarray:
    return np.concatenate([r[task][metric] for r in runs])


def report(results: dict[str, list[dict]]) -> None:
    columns = [("shapes_t2v_original", "MIR"), ("shapes_t2v_negated", "ΔMIR"), ("shapes_t2v_composed", "MIR"),
               ("shapes_t2v_composed", "R@1"), ("shapes_mcq", "accuracy")]
    base = results.get("clip_star")
    print("| recipe | seeds | " + " | ".join(f"{t.replace('shapes_', '')} {m}" for t, m in columns) + " |")
    print("|---|---:|" + "---:|" * len(columns))
    for name, runs in results.items():
        cells = []
        for task, metric in columns:
            v = _pooled(runs, task, metric)
            lo, hi = bootstrap_ci(v)
            cell = f"{v.mean():.3f} [{lo:.3f}, {hi:.3f}]"
            if base is not None and name != "clip_star" and len(runs) == len(base):
                b = _pooled(base, task, metric)
                dlo, dhi, _ = paired_bootstrap(b, v)
                cell += f" Δ{v.mean() - b.mean():+.3f} [{dlo:+.3f}, {dhi:+.3f}]"
            cells.append(cell)
        print(f"| {name} | {len(runs)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
