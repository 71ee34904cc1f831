"""Result records: one JSON file per (model, task) run, written atomically, with what made it.

``results/<model label dir>/<task>.json``, plus ``<task>.samples.jsonl`` when samples are logged,
so a run can be re-scored without re-encoding.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from negharness.contracts.hashing import hash_json
from negharness.version import installed_version
from negharness.records.check import RecordError, read_checked
from negharness.records.schema import SCHEMA_VERSION, record_files  # both also imported from here
from negharness.scoring.perquery import write_sidecar
from negharness.io.atomic_files import atomic_write_json, atomic_write_text

@dataclass(frozen=True)
class ModelConfig:
    """What defines a leaderboard row: the model name, its options, the precision it ran in, and,
    for a model whose weights were drawn at random as it was built, which draw (its fingerprint)."""

    name: str
    options: dict[str, Any]
    precision: str = "fp32"
    draw: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "options": dict(sorted(self.options.items())), "precision": self.precision}
        return {**out, "random_weights": self.draw} if self.draw else out

    @property
    def is_default(self) -> bool:
        return not self.options and self.precision == "fp32" and not self.draw

    @property
    def label(self) -> str:
        """Human-readable row label: ``clip`` or ``clip (arch=ViT-L-14, bf16)``; a random draw
        says so (``clip (arch=cfg.json, random weights 1a2b3c4d)``)."""
        if self.is_default:
            return self.name
        parts = [f"{k}={v}" for k, v in sorted(self.options.items())]
        if self.precision != "fp32":
            parts.append(self.precision)
        if self.draw:
            parts.append(f"random weights {self.draw[:8]}")
        return f"{self.name} ({', '.join(parts)})"

    @property
    def dirname(self) -> str:
        return self.name if self.is_default else f"{self.name}@{hash_json(self.as_dict(), 8)}"


def task_variant(config: dict[str, Any], default: dict[str, Any]) -> dict[str, Any]:
    """The task settings of a run that differ from the task's default run (--limit, -T, --seed)."""
    return {k: v for k, v in sorted(config.items()) if k not in default or default[k] != v}


def variant_label(variant: dict[str, Any]) -> str:
    """``limit=100, n_items=50``; "" for the default run."""
    return ", ".join(f"{k}={v}" for k, v in sorted(variant.items()))


def variant_suffix(variant: dict[str, Any]) -> str:
    """How a variant's record is named beside the default one: ``.limit100`` for a --limit run,
    ``@<hash>`` of the other differing settings (``<task>.limit100@1a2b3c4d.json``)."""
    rest = {k: v for k, v in variant.items() if k != "limit"}
    limit = f".limit{variant['limit']}" if variant.get("limit") is not None else ""
    return limit + (f"@{hash_json(rest, 8)}" if rest else "")


def record_path(output_dir: Path, model: ModelConfig, task: str, variant: dict[str, Any] | None = None) -> Path:
    """``<model dir>/<task>.json`` for the task's default config; a variant goes beside it, never over it."""
    return Path(output_dir) / model.dirname / f"{task}{variant_suffix(variant or {})}.json"


def code_versions(plugin_distributions: dict[str, str]) -> dict[str, Any]:
    """The versions of the code that scores: what a record's reuse is checked against."""
    return {"negharness": installed_version("negharness"), "plugins": dict(sorted(plugin_distributions.items()))}


def environment_versions(plugin_distributions: dict[str, str]) -> dict[str, Any]:
    return {
        "negharness": installed_version("negharness"),
        "torch": installed_version("torch"),
        "open_clip": installed_version("open_clip_torch"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "plugins": dict(sorted(plugin_distributions.items())),
    }


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class RunInfo:
    """What every record says of its run, whatever the task's protocol."""

    model: ModelConfig
    model_plugin: str
    fingerprint: str
    describe: dict[str, Any]
    plugin_versions: dict[str, str]
    device: str
    batch_size: int
    seed: int
    limit: int | None
    model_sources: dict[str, str] | None = None  # content hashes of files the model options name
    model_revision: str | None = None  # the weights' revision (`negharness.engine.reuse.model_revision`)


@dataclass(frozen=True)
class TaskRun:
    """What a record says of the task side of one run: its variant, data hashes and why it (re)ran."""

    variant: dict[str, Any]
    data: dict[str, Any]
    rerun_reason: str | None = None


SKIPPED_LISTED = 5  # skipped media named in a record; the count covers all of them


def skipped_media_summary(broken: dict[str, list[str]]) -> tuple[int, dict[str, list[str]]]:
    """(how many distinct media were left out of scoring, the first few per collection)."""
    distinct = {k: list(dict.fromkeys(v)) for k, v in broken.items() if v}
    return sum(len(v) for v in distinct.values()), {k: v[:SKIPPED_LISTED] for k, v in sorted(distinct.items())}


def build_record(run: RunInfo, task: Any, task_plugin: str, result: Any, config_hash: str,
                 timings: dict[str, float], counts: dict[str, Any], skipped_media: dict[str, list[str]],
                 task_run: TaskRun | None = None) -> dict[str, Any]:
    """The one record layout for every protocol (embedding retrieval/MCQ and editing alike)."""
    m = run.model
    task_run = task_run or TaskRun({}, {})
    n_skipped, skipped = skipped_media_summary(skipped_media)
    return {
        "schema_version": SCHEMA_VERSION,
        "created_at": now_iso(),
        "model": {"name": m.name, "label": m.label, "options": m.options, "plugin": run.model_plugin,
                  "fingerprint": run.fingerprint, "revision": run.model_revision,
                  "describe": run.describe, "sources": run.model_sources or {},
                  **({"random_weights": True} if m.draw else {})},
        "task": {"name": task.name, "family": task.family, "version": task.version, "plugin": task_plugin,
                 "description": task.description, "leaderboard_metrics": list(task.leaderboard_metrics),
                 "citation": task.citation, "cluster": getattr(task, "cluster", "row")},
        "metrics": result.metrics,
        "metric_info": {k: {"higher_is_better": v.higher_is_better, "fmt": v.fmt, **({"unit": v.unit} if v.unit else {})}
                        for k, v in task.metric_info.items() if k in result.metrics},
        "main_score": {"name": task.main_score, "value": result.metrics.get(task.main_score)},
        "notes": result.notes,
        "n_items": result.n_items,
        "config": {"model": m.as_dict(), "task": task.config(), "batch_size": run.batch_size},
        "config_hash": config_hash,
        "seed": run.seed,
        "limited": run.limit is not None,
        "limit": run.limit,
        "device": run.device,
        "versions": environment_versions(run.plugin_versions),
        "timings": timings,
        "counts": counts,
        "variant": task_run.variant,
        "variant_label": variant_label(task_run.variant),
        "data": task_run.data,
        "rerun_reason": task_run.rerun_reason or None,
        "n_skipped_media": n_skipped,
        "skipped_media": skipped,
    }


def write_record(path: Path, record: dict[str, Any], samples: list[dict[str, Any]] | None = None,
                 per_query: dict[str, Any] | None = None) -> Path:
    """Samples and per-query values first, record last: a record on disk always has its samples and
    per-query files complete beside it."""
    return atomic_write_json(path, write_sidecars(path, record, samples, per_query))


def write_sidecars(path: Path, record: dict[str, Any], samples: list[dict[str, Any]] | None = None,
                   per_query: dict[str, Any] | None = None) -> dict[str, Any]:
    """The files beside the record at ``path``, written; returns the record naming them, for the
    caller to write last (`write_record`, or a run that times this first)."""
    if per_query is not None:
        record = {**record, "per_query_file": write_sidecar(path, per_query).name}
    if samples is not None:
        lines = "".join(json.dumps(s, sort_keys=True, ensure_ascii=False) + "\n" for s in samples)
        atomic_write_text(path.with_suffix(".samples.jsonl"), lines)
        record = {**record, "samples_file": path.with_suffix(".samples.jsonl").name}
    return record


def read_record(path: Path, cache_dir: str | Path | None = None) -> dict[str, Any] | None:
    """A record reuse may answer from, or None when the one reader (`negharness.records.check.read_checked`:
    bounded, its schema, consistent with its per-query values, as ``leaderboard --check`` validates)
    refuses it: the run is done again. ``cache_dir``: the --cache-dir the check is remembered under."""
    try:
        return read_checked(Path(path), board=False, cache_dir=cache_dir)
    except RecordError:
        return None


def refusal(path: Path) -> str | None:
    """Why the record at ``path`` was not read (`read_record` gave None), for the rerun to say; None when
    there is no record there (a first run)."""
    if not Path(path).is_file():
        return None
    try:
        read_checked(Path(path), board=False)
    except RecordError as exc:
        return f"the record there is refused ({exc.lines[0].removeprefix(f'{path}: ')[:200]})"
    return None


def iter_records(results_dir: Path, cache_dir: str | Path | None = None) -> Iterable[tuple[Path, dict[str, Any]]]:
    for path in record_files(results_dir):
        rec = read_record(path, cache_dir)
        if rec is not None:
            yield path, rec
