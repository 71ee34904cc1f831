"""MTEB's results layout: ``<org>__<model>/<revision>/<Task>.json`` (a TaskResult) beside a
``model_meta.json`` (a ModelMeta), the folder `mteb.ResultCache` loads and the results repository holds.

A TaskResult keeps, per split, a list of score dicts each with ``main_score``, ``hf_subset`` and
``languages``; negharness' tasks are English and have one subset, ``default``. The record's other
metrics sit beside ``main_score`` under their own names, its 95% intervals under
``confidence_interval_95``, its standard errors under ``standard_error``. ``mteb_version`` is null:
MTEB did not compute these numbers.

MTEB keeps scores as shares of 1 and its board shows ``main_score`` x 100: a percent (R@1 = 16.67) is
written 0.1667, its interval and standard error alike; a metric in another unit (MIR, a rank) is the
same number as in the record (`negharness.scoring.catalog.Scale`).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from negharness.records.export.common import Planned, PublishedOf, Run, out_path

NO_REVISION = "no_revision_available"  # MTEB's own name for a model whose revision is unknown
LANGUAGES = ["eng-Latn"]


def task_result(run: Run) -> dict[str, Any]:
    """One record as an MTEB TaskResult."""
    main, value = run.main
    scores: dict[str, Any] = {"hf_subset": "default", "languages": LANGUAGES, "main_score": run.per_one(main, value),
                              **{m: run.per_one(m, v) for m, v in run.metrics.items()}, "n_queries": run.queries}
    intervals = {m: [run.per_one(m, x) for x in iv] for m in run.metrics if (iv := run.interval(m)) is not None}
    if intervals:
        scores["confidence_interval_95"] = intervals
    errors = {m: run.per_one(m, se) for m in run.metrics if (se := run.standard_error(m)) is not None}
    if errors:
        scores["standard_error"] = errors
    return {"dataset_revision": run.data_revision, "task_name": run.task, "mteb_version": None,
            "scores": {run.split: [scores]}, "evaluation_time": (run.rec.get("timings") or {}).get("total_s"),
            "kg_co2_emissions": None, "date": run.created.timestamp()}


def model_meta(runs: list[Run], revision: str) -> dict[str, Any]:
    """The ModelMeta of one model folder: what negharness knows, the rest null as MTEB allows."""
    counted = {k for r in runs for k in (r.rec.get("n_items") or {})}
    modalities = ["text"] + [m for m, k in (("image", "images"), ("video", "videos")) if k in counted]
    return {"name": runs[0].model_id, "revision": revision, "release_date": None, "languages": LANGUAGES,
            "n_parameters": None, "memory_usage_mb": None, "max_tokens": None, "embed_dim": None,
            "license": None, "open_weights": None, "public_training_code": None, "public_training_data": None,
            "framework": ["PyTorch"], "reference": None, "similarity_fn_name": "cosine", "use_instructions": False,
            "training_datasets": None, "modalities": modalities, "loader": None}


def write(runs: list[Run], out: Path, published: PublishedOf) -> list[Planned]:
    """``out`` is the results folder (``results/`` of MTEB's cache or results repository)."""
    folders: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for run in runs:
        folders[(run.model_id, run.revision or NO_REVISION)].append(run)
    files = []
    for (model_id, revision), group in sorted(folders.items()):
        model = model_id.replace("/", "__")
        files += [Planned(out_path(out, model, revision, f"{r.task}.json"), task_result(r), r.path) for r in group]
        files.append(Planned(out_path(out, model, revision, "model_meta.json"), model_meta(group, revision),
                             group[0].path))
    return files
