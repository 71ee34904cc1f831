"""`negharness run` as a library call: resolve names, check data, load the model once, run tasks, write records.

Everything that can be checked before a model loads is checked first (names, device, output
folder, data files), so a typo costs milliseconds, not a model load.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cache import EmbeddingCache
from .errors import MissingDataError, UserError
from .hashing import hash_json
from .model import EmbeddingModel, ModelOptions
from .paths import cache_root, data_root
from .plugin_manager import PluginHost, activated
from .registry import Entry
from .results import SCHEMA_VERSION, ModelConfig, environment_versions, now_iso, read_record, record_path, write_record
from .runner import EvalContext, RunSettings, resolve_device, resolve_precision
from .task import Task, TaskOptions


@dataclass
class RunRequest:
    model: str
    tasks: list[str]
    model_options: ModelOptions = field(default_factory=ModelOptions)
    task_extra: dict[str, str] = field(default_factory=dict)
    data_root: str | None = None
    device: str = "auto"
    precision: str = "fp32"
    batch_size: int = 64
    workers: int | None = None
    limit: int | None = None
    seed: int = 0
    output_dir: str = "results"
    log_samples: bool = False
    overwrite: bool = False
    cache_dir: str | None = None
    use_cache: bool = True
    skip_broken_media: bool = False


@dataclass
class RunOutcome:
    task: str
    path: Path
    record: dict[str, Any] | None  # None when skipped
    skipped: bool = False


def _task_entries(host: PluginHost, patterns: list[str]) -> list[Entry]:
    seen: dict[str, Entry] = {}
    for pattern in patterns:
        for entry in host.registry.match("task", pattern):
            seen.setdefault(entry.name, entry)
    return list(seen.values())


def _check_output_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".negharness-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UserError(f"--output-dir {path}: cannot write there ({exc.strerror or exc})") from exc


def _check_data(tasks: list[Task], root: Path, source: str) -> None:
    needing = [t for t in tasks if t.required_files()]
    if needing and not root.is_dir():
        names = ", ".join(t.name for t in needing)
        raise MissingDataError(f"data root {root} (from {source}) does not exist; tasks {names} read their files "
                               "from there. Pass --data-root DIR or set NEGHARNESS_DATA.")
    for task in needing:
        missing = [p for p in task.required_files() if not p.exists()]
        if missing:
            shown = "\n  ".join(str(p) for p in missing[:5])
            more = f"\n  ... and {len(missing) - 5} more" if len(missing) > 5 else ""
            raise MissingDataError(f"task {task.name}: {len(missing)} file(s) missing under {root}:\n  {shown}{more}"
                                   + (f"\n{task.data_help}" if task.data_help else ""))


@dataclass
class _Run:
    """What every record says of its run, whatever kind of task it was."""

    req: RunRequest
    model_cfg: ModelConfig
    model_entry: Entry
    fingerprint: str
    describe: dict[str, Any]
    host: PluginHost
    device: str


def _record(run: _Run, entry: Entry, task: Task, result: Any, config_hash: str, timings: dict[str, float],
            counts: dict[str, Any], **extra: Any) -> dict[str, Any]:
    req, m = run.req, run.model_cfg
    return {
        "schema_version": SCHEMA_VERSION,
        "created_at": now_iso(),
        "model": {"name": m.name, "label": m.label, "options": m.options, "plugin": run.model_entry.plugin,
                  "fingerprint": run.fingerprint, "describe": run.describe},
        "task": {"name": task.name, "family": task.family, "version": task.version, "plugin": entry.plugin,
                 "description": task.description, "leaderboard_metrics": list(task.leaderboard_metrics),
                 "citation": task.citation},
        "metrics": result.metrics,
        "metric_info": {k: {"higher_is_better": v.higher_is_better, "fmt": v.fmt}
                        for k, v in task.metric_info.items() if k in result.metrics},
        "main_score": {"name": task.main_score, "value": result.metrics.get(task.main_score)},
        "notes": result.notes,
        "n_items": result.n_items,
        "config": {"model": m.as_dict(), "task": task.config(), "batch_size": req.batch_size},
        "config_hash": config_hash,
        "seed": req.seed,
        "limited": req.limit is not None,
        "limit": req.limit,
        "device": run.device,
        "versions": environment_versions(run.host.distributions()),
        "timings": timings,
        "counts": counts,
        **extra,
    }


class EditContext:
    """What an editing task sees: the editor, where to write edits, and other plugins by name."""

    def __init__(self, editor: Any, host: PluginHost, artifacts: Path, seed: int, device: Any) -> None:
        from collections import Counter

        self.model, self.host, self.artifacts, self.seed, self.device = editor, host, artifacts, seed, device
        self.counters: Counter = Counter()
        self.notes: dict[str, Any] = {}
        self._loaded: dict[tuple[str, str], Any] = {}

    def load(self, kind: str, name: str) -> Any:
        """A detector or a retrieval model by registry name, loaded once per run."""
        if (kind, name) not in self._loaded:
            made = self.host.registry.create(kind, name, ModelOptions())
            if hasattr(made, "to") and kind == "model":
                made.to(self.device).eval_mode()
            self._loaded[(kind, name)] = made
        return self._loaded[(kind, name)]


def _editing_run(host: PluginHost, req: RunRequest, todo: list, model_cfg: ModelConfig, device: Any) -> list[RunOutcome]:
    entry = host.registry.get("editor", req.model)
    editor = entry.load()(req.model_options)
    if hasattr(editor, "to"):
        editor.to(device)
    run = _Run(req, model_cfg, entry, hash_json(editor.describe()), editor.describe(), host, str(device))
    outcomes = []
    for task_entry, task, path, chash in todo:
        ctx = EditContext(editor, host, path.with_suffix(".edits"), req.seed, device)
        start = time.perf_counter()
        result = task.evaluate(ctx)
        rec = _record(run, task_entry, task, result, chash, {"total_s": round(time.perf_counter() - start, 3)},
                      dict(ctx.counters))
        write_record(path, rec)
        outcomes.append(RunOutcome(task.name, path, rec))
    return outcomes


def run_evaluation(host: PluginHost, req: RunRequest, progress: Any = None) -> list[RunOutcome]:
    with activated(host):  # wrapper plugins (boolean, clip_bnl, ...) resolve names through this host
        return _run_evaluation(host, req, progress)


def _run_evaluation(host: PluginHost, req: RunRequest, progress: Any = None) -> list[RunOutcome]:
    entries = _task_entries(host, req.tasks)
    editing = {"edit" in getattr(e.load(), "modalities", ()) for e in entries}
    if len(editing) > 1:
        raise UserError("editing tasks (nein_*) and retrieval tasks cannot share one run: pass them separately")
    model_entry = host.registry.get("editor" if editing == {True} else "model", req.model)
    device = resolve_device(req.device)
    resolve_precision(req.precision)
    if req.batch_size < 1:
        raise UserError(f"--batch-size {req.batch_size}: must be at least 1")
    out_dir = Path(req.output_dir)
    _check_output_dir(out_dir)
    root, source = data_root(req.data_root)
    topts = TaskOptions(root, source, Path(req.cache_dir) if req.cache_dir else None, req.seed, req.limit,
                        dict(req.task_extra))
    tasks = [(e, e.load()(topts)) for e in entries]
    _check_data([t for _, t in tasks], root, source)

    model_cfg = ModelConfig(req.model, req.model_options.as_dict(), req.precision)
    outcomes: list[RunOutcome] = []
    todo = []
    for entry, task in tasks:
        path = record_path(out_dir, model_cfg, task.name)
        chash = hash_json({"model": model_cfg.as_dict(), "task": task.config()})
        old = read_record(path)
        if old is not None and old.get("config_hash") == chash and not req.overwrite:
            outcomes.append(RunOutcome(task.name, path, old, skipped=True))
        else:
            todo.append((entry, task, path, chash))
    if not todo:
        return outcomes
    if editing == {True}:
        return outcomes + _editing_run(host, req, todo, model_cfg, device)

    model: EmbeddingModel = model_entry.load()(req.model_options)
    for _, task, _, _ in todo:
        lacking = set(task.modalities) - set(model.modalities)
        if lacking:
            raise UserError(f"model {req.model} cannot encode {', '.join(sorted(lacking))}, which task {task.name} needs")
    model.to(device).eval_mode()
    cache = EmbeddingCache(cache_root(req.cache_dir)) if req.use_cache else None
    settings = RunSettings(device, req.precision, req.batch_size, req.workers, req.skip_broken_media)
    run = _Run(req, model_cfg, model_entry, model.fingerprint(), model.describe(), host, str(device))
    for entry, task, path, chash in todo:
        ctx = EvalContext(model, settings, cache, progress, req.log_samples)
        start = time.perf_counter()
        result = task.evaluate(ctx)
        c = ctx.counters
        rec = _record(run, entry, task, result, chash,
                      {"total_s": round(time.perf_counter() - start, 3), "encode_s": round(c.encode_seconds, 3)},
                      {"texts_encoded": c.texts_encoded, "texts_cached": c.texts_cached, "media_encoded": c.media_encoded,
                       "media_cached": c.media_cached, "media_skipped": c.media_skipped},
                      skipped_media={k: v[:20] for k, v in ctx.broken.items()})
        write_record(path, rec, result.samples if req.log_samples else None)
        outcomes.append(RunOutcome(task.name, path, rec))
    return outcomes
