"""The negation-training experiment on the embedded world (issue #7): not a test, a study.

From the same tiny CLIP (shapes_clip), seed and data, fine-tune several ways, evaluate each on the
original, negated and composed query sets of a 2,000-video test split and on the world's MCQ, over
several seeds, with bootstrap intervals and paired intervals against CLIP*. The intervals are the
records' own routines on the records' own clusters: each query's value is read from its record's
per-query file, averaged over seeds (seeds of one query are not independent queries), and the
clusters its task declares (the video a query is about) are resampled with the records' resamples
and seed (`bootstrap_estimates`, `paired_test`), so a one-seed row's interval is its record's.
Run: python perf/exp_negation_training.py [--seeds 0 1 2] [--out runs/exp]
Writes runs/exp/results/ (records) and prints the table; `negharness leaderboard --results-dir
runs/exp/results --out ...` renders the records.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from negharness.api import ModelOptions
from negharness.api import TrainOptions
from negharness.discovery.lookup import PluginLookup
from negharness.discovery.manager import make_host
from negharness.engine.evaluate import RunRequest, evaluate_request
from negharness.records.board_pass import checked_records
from negharness.records.check import read_checked
from negharness.scoring.bootstrap import bootstrap_estimates, paired_test, seed_means
from negharness.scoring.perquery import LEVEL, cluster_ids, clusters_known, read_sidecar

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


def per_query(record_path: Path, rec: dict | None = None) -> dict[str, np.ndarray]:
    """A record's per-query values by metric (its per-query file), and under "query" and "clusters"
    each value's query and cluster id, under "method" the record's (resamples, seed): the table
    resamples what the record's intervals resample. A record made before clusters is refused."""
    if rec is None:
        rec = read_checked(Path(record_path), Path(record_path).parent.parent)
    pq = read_sidecar(Path(record_path), rec)
    if pq is None or not clusters_known(rec):
        raise ValueError(f"{record_path}: no per-query values with clusters (a record made before them): rerun it")
    method = rec["interval_method"]
    values = {m: np.array([np.nan if x is None else x for x in v], dtype=np.float64) for m, v in pq["values"].items()}
    return {"query": np.array(pq["ids"]), "clusters": np.array(cluster_ids(pq)),
            "method": np.array([int(method["resamples"]), int(method["seed"])]), **values}


def evaluate(host, model: str, checkpoint: str | None, out: Path) -> dict[str, dict[str, np.ndarray]]:
    req = RunRequest(model=model, model_options=ModelOptions(checkpoint=checkpoint), tasks=TASKS,
                     task_extra={"n_items": TEST_ITEMS}, output_dir=str(out), log_samples=True, overwrite=True,
                     device="auto")
    outcomes = evaluate_request(host, req)
    failed = [f"{o.task}: {o.error}" for o in outcomes if o.error]
    if failed:  # a task that failed alone has no record of this run (its path may hold an older one)
        raise SystemExit(f"{model}: " + "; ".join(failed))
    return {o.task: per_query(o.path, o.record) for o in outcomes}


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
    """Per-query values back from the records' per-query files, grouped by recipe (checkpoint folder):
    the records as the project reads them (`checked_records`: each checked as `leaderboard --check` does;
    a glob over the folder also caught the per-query files beside them)."""
    runs: dict[tuple[str, str], dict] = {}
    for rec_path, rec in checked_records(results_dir):
        if not rec["task"]["name"].startswith("shapes_"):
            continue
        ckpt = rec["model"]["options"].get("checkpoint")
        name, seed = (Path(ckpt).name.rsplit("-s", 1) if ckpt else ("shapes_clip (no fine-tuning)", "0"))
        runs.setdefault((name, seed), {})[rec["task"]["name"]] = per_query(rec_path, rec)
    out: dict[str, list[dict]] = {}
    for (name, _), values in sorted(runs.items(), key=lambda kv: (list(RECIPES).index(kv[0][0])
                                                                   if kv[0][0] in RECIPES else -1, kv[0][1])):
        out.setdefault(name, []).append(values)
    return out


def write_table(args, results: dict[str, list[dict]]) -> None:
    table = report(results)
    print(table)
    if args.table:
        from negharness.io.atomic_files import atomic_write_text

        atomic_write_text(args.table, HEADER.format(seeds=len(args.seeds), items=TEST_ITEMS) + table)


HEADER = """# Negation training on the embedded world

Generated by `python perf/exp_negation_training.py --table leaderboard/negation_training.md`.
Each recipe fine-tunes shapes_clip ({seeds} seeds; lr 1e-5, up to 4 epochs, early stopping on
validation MIR) and is evaluated on a {items}-video test split. Cells: mean over queries and seeds
[95% bootstrap interval]; for the fine-tuned recipes also the paired difference to CLIP* [interval].
Intervals resample what the records' intervals resample (the video a query is about, where its task
says so; the records' resamples and seed), each query's value its mean over the seeds.

"""


def seed_averaged(runs: list[dict], task: str, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(queries, each query's value averaged over the runs' seeds); every seed must score the same
    queries in the same clusters with the same bootstrap settings, which the fixed test split
    guarantees (checked)."""
    first = runs[0][task]
    for r in runs[1:]:
        if any(not np.array_equal(r[task][k], first[k]) for k in ("query", "clusters", "method")):
            raise ValueError(f"{task}: the seeds scored different queries (or clusters); cannot average them per query")
    return first["query"], seed_means([r[task][metric] for r in runs])


def seed_interval(runs: list[dict], task: str, metric: str) -> tuple[float, float, float]:
    """Mean and 95% bootstrap interval over the records' clusters (values averaged over seeds): the
    routine and settings of the records' own ``intervals``."""
    _, v = seed_averaged(runs, task, metric)
    n, seed = (int(x) for x in runs[0][task]["method"])
    found = bootstrap_estimates({metric: v}, n, seed, LEVEL, list(runs[0][task]["clusters"]))[metric]
    return float(np.nanmean(v)), found.lo, found.hi


def paired_cell(base: list[dict], runs: list[dict], task: str, metric: str) -> str:
    """The paired difference to ``base`` over the records' clusters (`paired_test`, as `compare`)."""
    keys, v = seed_averaged(runs, task, metric)
    base_keys, b = seed_averaged(base, task, metric)
    if any(not np.array_equal(base[0][task][k], runs[0][task][k]) for k in ("query", "clusters", "method")):
        raise ValueError(f"{task}: the recipe and clip_star scored different queries (or clusters)")
    n, seed = (int(x) for x in runs[0][task]["method"])
    res = paired_test(b, v, n, seed, LEVEL, clusters=list(runs[0][task]["clusters"]))
    return f" Δ{res.diff:+.3f} [{res.lo:+.3f}, {res.hi:+.3f}]"


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
                cell += paired_cell(base, runs, task, metric)
            cells.append(cell)
        lines.append(f"| {name} | {len(runs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
