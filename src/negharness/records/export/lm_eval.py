"""lm-eval's aggregated results: ``<model_name_sanitized>/results_<date>.json``, one per model, as
lm-eval's EvaluationTracker writes it and its readers (``lm_eval.utils.get_results_filenames``,
``make_table``, the Hub's result cards) read it.

Per task: ``"<metric>,none"`` (lm-eval's key for a metric under no filter), ``"<metric>_stderr,none"``
where the record has a standard error (lm-eval's schema takes numbers only there, so a record
without one gives no key rather than a made-up value), ``n-samples`` {original, effective} (the
same: the board holds no --limit run), ``higher_is_better``, ``versions``, ``task_hashes`` (the
data and settings the numbers rest on) and ``configs`` (flat strings, as lm-eval's schema types them).

lm-eval keeps scores as shares of 1 (``make_table`` prints them with four decimals): a percent
(R@1 = 16.67) is written 0.1667 and its standard error in the same unit; a metric in another unit
(MIR, a rank) is the same number as in the record (`negharness.scoring.catalog.Scale`).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from negharness.contracts.hashing import hash_json
from negharness.records.export.common import Planned, PublishedOf, Run, out_path

FILTER = "none"  # lm-eval's filter key for a metric computed on the raw outputs


def sanitized(model_name: str) -> str:
    """lm-eval's folder name for a model (``sanitize_model_name``: path characters become ``__``)."""
    return re.sub(r"[\"<>:/|\\?*\[\]]+", "__", model_name)


def task_metrics(run: Run) -> dict[str, Any]:
    out: dict[str, Any] = {"name": run.task, "alias": run.task, "sample_len": run.queries}
    for metric, value in run.metrics.items():
        out[f"{metric},{FILTER}"] = run.per_one(metric, value)
        se = run.standard_error(metric)
        if se is not None:
            out[f"{metric}_stderr,{FILTER}"] = run.per_one(metric, se)
    return out


def task_config(run: Run) -> dict[str, str | bool | None]:
    task = run.rec["task"]
    return {"task": run.task, "task_alias": run.task, "tag": run.family, "test_split": run.split,
            "description": str(task.get("description") or ""), "citation": str(task.get("citation") or ""),
            "output_type": "negharness", "dataset_revision": run.data_revision,
            "negharness_config": json.dumps((run.rec.get("config") or {}).get("task") or {}, sort_keys=True)}


def results_file(runs: list[Run]) -> dict[str, Any]:
    """One model's records as one lm-eval results file."""
    newest = max(runs, key=lambda r: r.created)
    model = newest.rec["model"]
    method = newest.interval_method
    return {
        "results": {r.task: task_metrics(r) for r in runs},
        "group_subtasks": {r.task: [] for r in runs},
        "configs": {r.task: task_config(r) for r in runs},
        "versions": {r.task: str(r.rec["task"].get("version", "")) for r in runs},
        "n-shot": {r.task: 0 for r in runs},
        "higher_is_better": {r.task: {m: r.higher_is_better(m) for m in r.metrics} for r in runs},
        "n-samples": {r.task: {"original": r.queries, "effective": r.queries} for r in runs},
        "config": {"model": "negharness", "model_args": json.dumps(model.get("options") or {}, sort_keys=True),
                   **({"model_revision": newest.revision, "model_sha": newest.revision} if newest.revision else {}),
                   "batch_size": str((newest.rec.get("config") or {}).get("batch_size", "")),
                   "device": str(newest.rec.get("device") or ""), "limit": None,
                   "bootstrap_iters": int(method.get("resamples", 0)), "random_seed": int(newest.rec.get("seed", 0))},
        "task_hashes": {r.task: hash_json({"data": r.rec.get("data"), "config": (r.rec.get("config") or {}).get("task")},
                                          64) for r in runs},
        "model_source": "negharness",
        "model_name": newest.model_id,
        "model_name_sanitized": sanitized(newest.model_id),
        "date": newest.created.timestamp(),
        "total_evaluation_time_seconds": str(round(sum(float((r.rec.get("timings") or {}).get("total_s", 0.0))
                                                       for r in runs), 3)),
    }


def date_id(run: Run) -> str:
    """lm-eval's file date (``datetime.isoformat()`` with ``:`` as ``-``), here the newest record's."""
    return run.created.astimezone(_dt.timezone.utc).replace(tzinfo=None).isoformat().replace(":", "-")


def write(runs: list[Run], out: Path, published: PublishedOf) -> list[Planned]:
    models: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        models[run.model_id].append(run)
    files = []
    for model_id, group in sorted(models.items()):
        newest = max(group, key=lambda r: r.created)
        files.append(Planned(out_path(out, sanitized(model_id), f"results_{date_id(newest)}.json"),
                             results_file(group), newest.path))
    return files
