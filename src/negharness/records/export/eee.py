"""Every Eval Ever (schema 0.3.0): one aggregate record per negharness record, filed as its datastore
expects, ``data/<benchmark>/<developer>/<model>/<uuid>.json``.

A negharness run is an ``evaluation_run`` by a third party (negharness did not make the model); the
papers' numbers negharness ships (`negharness.records.published`) for the exported tasks are
``documentation``, one record per paper row, each number with where it was printed. A metric's 95%
interval is its ``uncertainty.confidence_interval`` (with the queries and bootstrap resamples), its
standard error ``uncertainty.standard_error`` where the record has one.

Every Eval Ever declares each metric's unit and bounds (``metric_unit``, ``min_score``, ``max_score``)
beside its direction, so a score keeps the record's number and unit (R@1 = 16.67 ``percent`` in [0, 100],
MIR a ``proportion`` in [0, 1], MeanR a ``rank`` from 1 up) as the papers print them; its interval and
standard error are in the same unit (`negharness.scoring.catalog.Scale`).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from negharness.records.export.common import ORG, Planned, PublishedOf, Run, out_path, safe_component, stable_uuid
from negharness.records.published import PublishedRow
from negharness.scoring.catalog import Scale

SCHEMA_VERSION = "0.3.0"
PUBLISHED_DEVELOPER = "paper-reported"  # the developer folder of a paper's row: the paper names no model id


def uncertainty(run: Run, metric: str) -> dict[str, Any] | None:
    iv = run.interval(metric)
    se = run.standard_error(metric)
    if iv is None and se is None:
        return None
    method = run.interval_method
    out: dict[str, Any] = {"num_samples": run.queries}
    if iv is not None:
        out["confidence_interval"] = {"lower": iv[0], "upper": iv[1], "confidence_level": float(method.get("level", 0.95)),
                                      "method": str(method.get("kind", "bootstrap"))}
    if isinstance(method.get("resamples"), int):
        out["num_bootstrap_samples"] = method["resamples"]
    if se is not None:
        out["standard_error"] = {"value": se, "method": "bootstrap"}
    return out


def bound(value: float) -> float | str:
    """A bound as EEE's strict JSON writes it: an infinite one is the string ``"Infinity"``."""
    return value if math.isfinite(value) else ("Infinity" if value > 0 else "-Infinity")


def metric_config(metric: str, lower_is_better: bool, task: str, scale: Scale) -> dict[str, Any]:
    return {"metric_id": f"negharness.{metric}", "metric_name": metric, "lower_is_better": lower_is_better,
            "evaluation_description": f"{metric} on negharness task {task}", "score_type": "continuous",
            "metric_unit": scale.unit, "min_score": bound(scale.low), "max_score": bound(scale.high)}


def source_data(run: Run) -> dict[str, Any]:
    task = run.rec["task"]
    details = {"data_revision": run.data_revision, "split": run.split, "task_version": str(task.get("version", "")),
               "citation": str(task.get("citation") or "")}
    return {"dataset_name": run.task, "source_type": "other", "additional_details": details}


def run_record(run: Run) -> dict[str, Any]:
    """One negharness record as an EEE evaluation run."""
    model = run.rec["model"]
    when = run.created
    results = []
    for metric, value in run.metrics.items():
        score: dict[str, Any] = {"score": value}
        if (u := uncertainty(run, metric)) is not None:
            score["uncertainty"] = u
        results.append({"evaluation_result_id": f"{run.task}/{metric}", "evaluation_name": run.task,
                        "source_data": source_data(run), "evaluation_timestamp": when.isoformat(),
                        "metric_config": metric_config(metric, not run.higher_is_better(metric), run.task,
                                                       run.unit(metric)),
                        "score_details": score})
    details = {"deployment_type": "self_deployed", "model_availability": "unknown",
               "label": str(model.get("label", "")), "plugin": str(model.get("plugin", "")),
               "fingerprint": str(model.get("fingerprint", "")), "revision": run.revision or "unknown",
               "options": json.dumps(model.get("options") or {}, sort_keys=True),
               "precision": str(((run.rec.get("config") or {}).get("model") or {}).get("precision", "fp32")),
               "device": str(run.rec.get("device") or "unknown")}
    version = (run.rec.get("versions") or {}).get("negharness") or "unknown"
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": f"{run.task}/{run.model_id}/{int(when.timestamp())}",
        "evaluation_timestamp": when.isoformat(),
        "retrieved_timestamp": str(int(when.timestamp())),
        "source_metadata": {"source_name": "negharness", "source_type": "evaluation_run",
                            "source_organization_name": ORG, "evaluator_relationship": "third_party"},
        "eval_library": {"name": "negharness", "version": str(version)},
        "model_info": {"name": str(model.get("label", run.model_dir)), "id": run.model_id, "developer": ORG,
                       "inference_platform": "local", "additional_details": details},
        "evaluation_results": results,
    }


def _paper_unit(run: Run, metric: str) -> Scale:
    """The unit of a paper's number (`Run.paper_unit`; `write` left out those of no known unit)."""
    scale = run.paper_unit(metric)
    if scale is None:
        raise ValueError(f"{run.path}: metric {metric!r} has no unit in the metric catalogue")
    return scale


def paper_record(rows: Sequence[PublishedRow], run: Run) -> dict[str, Any]:
    """One paper row's numbers for one task as EEE documentation (``run``: the task's exported record,
    for the metrics' direction and unit and the data's name)."""
    first = rows[0]
    model_id = f"{PUBLISHED_DEVELOPER}/{safe_component(first.row)}"
    results = [{"evaluation_result_id": f"{r.task}/{r.metric}", "evaluation_name": r.task,
                "source_data": {"dataset_name": r.task, "source_type": "other",
                                "additional_details": {"paper": r.paper, "table": r.table}},
                "metric_config": metric_config(r.metric, not run.higher_is_better(r.metric), r.task,
                                               _paper_unit(run, r.metric)),
                "score_details": {"score": r.value, "details": {"printed": r.printed, "source": r.source,
                                                                **({"note": r.note} if r.note else {})}}}
               for r in rows]
    details = {"deployment_type": "unknown", "model_availability": "unknown", "paper_row": first.row,
               **({"negharness_model": first.model} if first.model else {}),
               **({"arch": first.arch} if first.arch else {}),
               **({"pretrained": "|".join(first.pretrained)} if first.pretrained else {})}
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": f"{first.task}/{model_id}/{safe_component(first.paper)}/{safe_component(first.table)}",
        "retrieved_timestamp": str(int(run.created.timestamp())),
        "source_metadata": {"source_name": f"{first.paper}, {first.table}", "source_type": "documentation",
                            "source_organization_name": first.paper, "evaluator_relationship": "other"},
        "eval_library": {"name": "unknown", "version": "unknown"},
        "model_info": {"name": first.row, "id": model_id, "additional_details": details},
        "evaluation_results": results,
    }


def _path(out: Path, benchmark: str, model_id: str, key: str) -> Path:
    developer, model = model_id.split("/", 1)
    return out_path(out, "data", benchmark, developer, model, f"{stable_uuid(key)}.json")


def write(runs: list[Run], out: Path, published: PublishedOf) -> list[Planned]:
    """``out`` is the datastore's root (the folder holding ``data/``)."""
    files = [Planned(_path(out, r.family, r.model_id, f"{r.model_id}/{r.task}"), run_record(r), r.path) for r in runs]
    by_task = {r.task: r for r in sorted(runs, key=lambda r: r.created)}  # the newest record of each task
    for task, run in sorted(by_task.items()):
        rows: dict[tuple[str, str, str], list[PublishedRow]] = defaultdict(list)
        for row in published(task):
            if run.paper_unit(row.metric) is not None:  # a number of no known unit is left out, as a record's is
                rows[(row.paper, row.table, row.row)].append(row)
        for (paper, table, label), group in rows.items():
            record = paper_record(group, run)
            key = f"{paper}/{table}/{label}/{task}"
            files.append(Planned(_path(out, run.family, record["model_info"]["id"], key), record,
                                 f"{group[0].file}:{group[0].line}"))
    return files
