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
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from .atomic import atomic_write_json, atomic_write_text
from .hashing import hash_json

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ModelConfig:
    """What defines a leaderboard row: the model name, its options, and the precision it ran in."""

    name: str
    options: dict[str, Any]
    precision: str = "fp32"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "options": dict(sorted(self.options.items())), "precision": self.precision}

    @property
    def is_default(self) -> bool:
        return not self.options and self.precision == "fp32"

    @property
    def label(self) -> str:
        """Human-readable row label: ``clip`` or ``clip (arch=ViT-L-14, bf16)``."""
        if self.is_default:
            return self.name
        parts = [f"{k}={v}" for k, v in sorted(self.options.items())]
        if self.precision != "fp32":
            parts.append(self.precision)
        return f"{self.name} ({', '.join(parts)})"

    @property
    def dirname(self) -> str:
        return self.name if self.is_default else f"{self.name}@{hash_json(self.as_dict(), 8)}"


def record_path(output_dir: Path, model: ModelConfig, task: str) -> Path:
    return Path(output_dir) / model.dirname / f"{task}.json"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def environment_versions(plugin_distributions: dict[str, str]) -> dict[str, Any]:
    return {
        "negharness": _version("negharness"),
        "torch": _version("torch"),
        "open_clip": _version("open_clip_torch"),
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


def build_record(run: RunInfo, task: Any, task_plugin: str, result: Any, config_hash: str,
                 timings: dict[str, float], counts: dict[str, Any], skipped_media: dict[str, list[str]]) -> dict[str, Any]:
    """The one record layout for every protocol (embedding retrieval/MCQ and editing alike)."""
    m = run.model
    return {
        "schema_version": SCHEMA_VERSION,
        "created_at": now_iso(),
        "model": {"name": m.name, "label": m.label, "options": m.options, "plugin": run.model_plugin,
                  "fingerprint": run.fingerprint, "describe": run.describe},
        "task": {"name": task.name, "family": task.family, "version": task.version, "plugin": task_plugin,
                 "description": task.description, "leaderboard_metrics": list(task.leaderboard_metrics),
                 "citation": task.citation},
        "metrics": result.metrics,
        "metric_info": {k: {"higher_is_better": v.higher_is_better, "fmt": v.fmt}
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
        "skipped_media": {k: v[:20] for k, v in skipped_media.items()},
    }


def write_record(path: Path, record: dict[str, Any], samples: list[dict[str, Any]] | None = None,
                 per_query: dict[str, Any] | None = None) -> Path:
    """Samples and per-query values first, record last: a record on disk always has its samples and
    per-query files complete beside it."""
    if per_query is not None:
        from .perquery import write_sidecar

        record = {**record, "per_query_file": write_sidecar(path, per_query).name}
    if samples is not None:
        lines = "".join(json.dumps(s, sort_keys=True, ensure_ascii=False) + "\n" for s in samples)
        atomic_write_text(path.with_suffix(".samples.jsonl"), lines)
        record = {**record, "samples_file": path.with_suffix(".samples.jsonl").name}
    return atomic_write_json(path, record)


def read_record(path: Path) -> dict[str, Any] | None:
    """A record, or None when the file is unreadable or of another schema."""
    try:
        rec = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(rec, dict) or rec.get("schema_version") != SCHEMA_VERSION:
        return None
    return rec


def iter_records(results_dir: Path) -> Iterable[tuple[Path, dict[str, Any]]]:
    for path in sorted(Path(results_dir).glob("*/*.json")):
        if path.name.endswith(".perquery.json"):  # a record's per-query sidecar, not a record
            continue
        rec = read_record(path)
        if rec is not None:
            yield path, rec
