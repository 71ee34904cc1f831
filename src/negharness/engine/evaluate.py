"""`negharness run` as a library call: resolve names, check data, load the model once, give each task
its protocol's context (`CachedEvalContext` or `EditContext`), build and write records. Orchestration
only: embedding lives in the runner, editing in `negharness.api.editing`, records in `negharness.records.results`.

Everything that can be checked before a model loads is checked first (names, device, output
folder, data files), so a typo costs milliseconds, not a model load. Whether an existing record
can stand in for a task is decided by `negharness.engine.reuse` (config, data hashes, model files, and
the model's fingerprint once it is loaded); a variant of a task's config (--limit, -T, --seed)
writes its own record beside the default one (`negharness.records.results.record_path`).
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negharness.contracts.errors import MissingDataError, UserError
from negharness.contracts.hashing import hash_json
from negharness.contracts.model import EmbeddingModel, ModelOptions
from negharness.contracts.options import check_batch_size
from negharness.contracts.precision import cpu_autocast_warning, resolve_precision
from negharness.contracts.task import (
    Task,
    TaskDefinitionError,
    TaskOptions,
    check_result,
)
from negharness.discovery.lookup import PluginLookup, identity_options
from negharness.discovery.manager import PluginHost
from negharness.discovery.registry import Entry
from negharness.engine.edit_context import EditContext, refuse_precision
from negharness.engine.plan import (
    RunOutcome,
    RunRequest,
    memo_path,
    task_entries,
    write_receipt,
)
from negharness.engine.reuse import (
    RANDOM_WEIGHTS,
    data_hashes,
    fingerprint_reason,
    model_revision,
    model_sources,
    read_files,
    stale_reason,
)
from negharness.engine.embedding_contract import ModelOrigin
from negharness.engine.precheck import check_request
from negharness.engine.runner import CachedEvalContext, RunSettings, device_name, resolve_device
from negharness.engine.stages import StageClock, stage_timings
from negharness.fetch.manifest import verify_files
from negharness.fetch.select import fetch_hint
from negharness.fetch.sources import SOURCES
from negharness.io.paths import (
    RootGuard,
    cache_root,
    data_root,
    is_symlink_loop,
    require_regular,
    writable_folder,
)
from negharness.records.results import (
    ModelConfig,
    RunInfo,
    TaskRun,
    build_record,
    code_versions,
    read_record,
    record_path,
    task_variant,
    write_sidecars,
)
from negharness.scoring import perquery
from negharness.store.atomic import atomic_write_json
from negharness.store.cache import EmbeddingCache
from negharness.store.content import FileHasher


@dataclass
class _Planned:
    """One task of a run, with what decides whether its existing record can be reused."""

    entry: Entry
    task: Task
    path: Path
    config_hash: str
    task_run: TaskRun
    old: dict[str, Any] | None
    root: Path


def run_library(model: str, tasks: list[str], arch: str | None, pretrained: str | None, checkpoint: str | None,
                model_args: dict[str, str], task_args: dict[str, str], settings: dict[str, Any]) -> list[RunOutcome]:
    """`negharness.run`: the request the CLI would build, on the host the CLI would make."""
    from negharness.discovery.manager import make_host  # lazy: the host is only needed for a library run

    known = {f.name for f in dataclasses.fields(RunRequest)} - {"model", "tasks", "model_options", "task_extra"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise UserError(f"negharness.run: unknown setting {unknown[0]!r} (settings: {', '.join(sorted(known))})")
    req = RunRequest(model, tasks, ModelOptions(arch, pretrained, checkpoint, model_args), task_args, **settings)
    return run_evaluation(make_host(), req)


def _check_data(tasks: list[Task], root: Path, source: str, hasher: FileHasher | None = None) -> None:
    required = {t.name: _required(t) for t in tasks}
    needing = [t for t in tasks if required[t.name]]
    if needing and not root.is_dir():
        names = ", ".join(t.name for t in needing)
        what = "is a file, not a folder" if root.exists() else "does not exist"
        raise MissingDataError(f"data root {root} (from {source}) {what}; tasks {names} read their files "
                               "from there. Pass --data-root DIR or set NEGHARNESS_DATA.")
    guard = RootGuard(root)
    for task in needing:
        files = [guard.check(p, f"task {task.name}") for p in required[task.name]]  # one rule, every task
        for p in files:  # a FIFO would hang the first read, a symlink loop "exists" not: refuse by cause
            if (p.exists() or is_symlink_loop(p)) and not p.is_dir():
                require_regular(p, f"task {task.name}")
        missing = [p for p in files if not p.exists()]
        if missing:
            shown = "\n  ".join(str(p) for p in missing[:5])
            more = f"\n  ... and {len(missing) - 5} more" if len(missing) > 5 else ""
            raise MissingDataError(f"task {task.name}: {len(missing)} file(s) missing under {root}:\n  {shown}{more}"
                                   + (f"\n{task.data_help}" if task.data_help else "") + _fetch_line(task.name))
        verify_files(root, files, hasher.file if hasher else None)  # what `negharness fetch` recorded, unchanged


def _required(task: Task) -> list[Path]:
    """The task's files; a task that names a missing file itself (a CSV's row) gets the fetch line too."""
    try:
        return list(task.required_files())
    except MissingDataError as exc:
        raise MissingDataError(f"{exc}{_fetch_line(task.name)}") from None


def _fetch_line(task: str) -> str:
    """The fetch command for a task's files and its download size, as a line to add to an error."""
    hint = fetch_hint(task, SOURCES)
    return f"\n{hint}" if hint else ""


def _protocol(entries: list[Entry]) -> str:
    """"editing" when the tasks edit images, else "embedding"; one run speaks one protocol."""
    editing = {e.name: "edit" in getattr(e.load(), "modalities", ()) for e in entries}
    if len(set(editing.values())) > 1:
        edit = ", ".join(n for n, v in editing.items() if v)
        other = ", ".join(n for n, v in editing.items() if not v)
        raise UserError(f"editing tasks ({edit}) and embedding tasks ({other}) take different models: "
                        "run them separately")
    return "editing" if any(editing.values()) else "embedding"


def run_evaluation(host: PluginHost, req: RunRequest, progress: Any = None, shards: Any = None,
                   clock: StageClock | None = None) -> list[RunOutcome]:
    """``shards``: this rank's `negharness.engine.sharding.ShardSession` under torchrun, else None.
    ``clock``: the process's stage times so far (the CLI's start-up and imports), which every record
    of the run repeats beside its own (`negharness.engine.stages`)."""
    clock = clock or StageClock()
    check_request(host, req)  # the CLI asked already, before torch; a library call asks here
    entries = task_entries(host, req.tasks)
    protocol = _protocol(entries)
    model_entry = host.registry.get("editor" if protocol == "editing" else "model", req.model)
    device = resolve_device(req.device)
    resolve_precision(req.precision)
    if protocol == "editing":
        refuse_precision(req.precision)
    if note := cpu_autocast_warning(device, req.precision):
        warnings.warn(note, UserWarning, stacklevel=2)
    check_batch_size(req.batch_size)
    out_dir = writable_folder(req.output_dir, "--output-dir")
    cache_dir = cache_root(req.cache_dir)  # resolved once: the memo, the embeddings and the tasks share it
    root, source = data_root(req.data_root)
    topts = TaskOptions(root, source, cache_dir, req.seed, req.limit, dict(req.task_extra))
    with clock.timed("data"):
        tasks = [(e, _made_task(e, topts)) for e in entries]
        _check_task_options(req.task_extra, [t for _, t in tasks])
        hasher = FileHasher(memo_path(cache_dir))
        _check_data([t for _, t in tasks], root, source, hasher)
    plugins = PluginLookup(host.registry, device, cache_dir)
    # released weights (negclip, ...) become the checkpoint before the records are planned on it
    req = dataclasses.replace(req, model_options=plugins.resolved(model_entry.kind, req.model, req.model_options))

    # one model, one folder and row: -M values bound to the factory's declared options, defaults dropped
    model_cfg = ModelConfig(req.model, identity_options(model_entry, req.model_options), req.precision)
    sources = model_sources(req.model_options, hasher)
    with clock.timed("data"):
        planned = [_plan(entry, task, topts, model_cfg, out_dir, root, hasher) for entry, task in tasks]
        hasher.save()
    todo, maybe = _split_by_reuse(planned, sources, req.overwrite, code_versions(host.distributions()))
    if not todo and (sources or not maybe):
        # the options name the weights and every record matches them: nothing to load
        return _kept(host, req, planned, [RunOutcome(i.task.name, i.path, i.old, skipped=True) for i in maybe],
                     shards)
    with clock.timed("model_import"):
        model_entry.load()
    with clock.timed("model_build"):
        model = plugins.create(model_entry.kind, req.model, req.model_options)
    fingerprint = _fingerprint(model)
    if getattr(model, "random_weights", False):
        if shards is not None:
            raise UserError(f"model {req.model}: its weights are drawn at random as it is built, so each torchrun "
                            "rank would draw others; save them once (--checkpoint FILE) and run on that")
        model_cfg = dataclasses.replace(model_cfg, draw=fingerprint)
        todo = _for_draw(todo + [_with_reason(i, RANDOM_WEIGHTS) for i in maybe], model_cfg, out_dir)
        maybe = []
        warnings.warn(f"model {req.model}: no checkpoint or pretrained tag names its weights, so they were drawn at "
                      f"random; this run is recorded as {model_cfg.label!r} and never reused", UserWarning, stacklevel=2)
    outcomes = []
    for item in maybe:  # the model is loaded: its fingerprint is checked against every record
        reason = fingerprint_reason(item.old, fingerprint)
        if reason is None:
            outcomes.append(RunOutcome(item.task.name, item.path, item.old, skipped=True))
        else:
            todo.append(_with_reason(item, reason))
    if not todo:
        return _kept(host, req, planned, outcomes, shards)
    if protocol == "embedding":
        _check_modalities(model, req.model, [i.task for i in todo])
    run = RunInfo(model_cfg, model_entry.plugin, fingerprint, model.describe(), host.distributions(),
                  device_name(device), req.batch_size, req.seed, req.limit, sources,
                  model_revision(model, sources))
    cache = EmbeddingCache(cache_dir, hasher=hasher) if req.use_cache and protocol == "embedding" else None
    settings = RunSettings(device, req.precision, req.batch_size, req.workers, req.skip_broken_media)
    editor_key = hash_json({"fingerprint": fingerprint, "model": model_cfg.as_dict(), "sources": sources,
                            "device": device.type})
    origin = ModelOrigin(req.model, model_entry.plugin, req.model_options.checkpoint or req.model_options.pretrained)
    for item in todo:
        entry, task, path = item.entry, item.task, item.path
        if protocol == "editing":
            ctx: Any = EditContext(model, plugins, path.with_suffix(".edits"), req.seed, device, editor_key,
                                   req.skip_broken_media)
        else:
            ctx = CachedEvalContext(model, settings, cache, progress, req.log_samples, plugins, req.seed, origin)
        start = time.perf_counter()
        if shards is not None and not shards.prefill(task, ctx):  # torchrun: all ranks encode, rank 0 goes on
            continue
        result = task.evaluate(ctx)
        check_result(task, result, entry.plugin)
        if result.per_query is not None:
            perquery.check(task.name, entry.plugin, result.per_query, result.metrics, task.cluster)
        counts = dict(ctx.counters)
        timings = _timings(time.perf_counter() - start, counts, clock, ctx)
        writing = time.perf_counter()
        rec = build_record(run, task, entry.plugin, result, item.config_hash, timings, counts, ctx.broken,
                           item.task_run)
        if result.per_query is not None:
            rec.update(perquery.intervals(rec, result.per_query))
        rec = write_sidecars(path, rec, result.samples if req.log_samples else None, result.per_query)
        wall = clock.wall()
        rec["timings"] = {**rec["timings"], **stage_timings({"write": time.perf_counter() - writing}),
                          **({"wall_s": round(wall, 3)} if wall is not None else {})}
        atomic_write_json(path, rec)
        outcomes.append(RunOutcome(task.name, path, rec, reason=item.task_run.rerun_reason))
    return _kept(host, req, planned, outcomes, shards)


def _timings(total: float, counts: dict[str, Any], clock: StageClock, ctx: Any) -> dict[str, float]:
    """A task's ``timings``: its evaluation's total, the encoding loops' time, the run's stages and
    its own (`negharness.engine.stages`); ``score`` is the total less the task's embedding calls."""
    timings = {"total_s": round(total, 3)}
    if "encode_seconds" in counts:
        timings["encode_s"] = round(counts.pop("encode_seconds"), 3)
    own = ctx.stages.seconds() if isinstance(getattr(ctx, "stages", None), StageClock) else {}
    if "embed" in own:
        own["score"] = max(0.0, total - own["embed"])
    return {**timings, **stage_timings(clock.seconds(), own)}


def _kept(host: PluginHost, req: RunRequest, planned: list[_Planned], outcomes: list[RunOutcome],
          shards: Any) -> list[RunOutcome]:
    """The outcomes, once their receipt is written (`negharness.engine.plan`): the next identical
    request answers from these records without loading torch while nothing they rest on changes."""
    if shards is None:
        write_receipt(host, req, planned, outcomes)
    return outcomes


def _plan(entry: Entry, task: Task, options: TaskOptions, model_cfg: ModelConfig, out_dir: Path, root: Path,
          hasher: FileHasher) -> _Planned:
    """The task's variant (how its config differs from the task's default), record path, config
    hash and data hashes: everything reuse is decided on, before any model loads."""
    try:
        default = _made_task(entry, TaskOptions(options.data_root, options.data_root_source, options.cache_dir))
        default_config = default.config()
    except UserError:  # a task that cannot be built without options has no default run to protect
        default_config = {"name": task.name}
    variant = task_variant(task.config(), default_config)
    path = record_path(out_dir, model_cfg, task.name, variant)
    data = data_hashes(read_files(task), root, hasher, task.name)
    return _Planned(entry, task, path, config_hash(model_cfg, task), TaskRun(variant, data), read_record(path), root)


def config_hash(model_cfg: ModelConfig, task: Task) -> str:
    """The hash a record's reuse compares first: the model's config and the task's."""
    return hash_json({"model": model_cfg.as_dict(), "task": task.config()})


def _split_by_reuse(planned: list[_Planned], sources: dict[str, str], overwrite: bool,
                    code: dict[str, Any]) -> tuple[list, list]:
    """(to run, each with why; reusable as far as is known before the model loads)."""
    todo, maybe = [], []
    for item in planned:
        reason = stale_reason(item.old, item.config_hash, item.task.config(), item.task_run.data, sources, overwrite,
                              code)
        if reason is None:
            maybe.append(item)
        else:
            todo.append(_with_reason(item, reason or None))
    return todo, maybe


def _for_draw(items: list[_Planned], model_cfg: ModelConfig, out_dir: Path) -> list[_Planned]:
    """A random-weight draw's records: their own folder and config hash (the draw is in the model config)."""
    return [dataclasses.replace(i, path=record_path(out_dir, model_cfg, i.task.name, i.task_run.variant),
                                config_hash=config_hash(model_cfg, i.task)) for i in items]


def _with_reason(item: _Planned, reason: str | None) -> _Planned:
    return dataclasses.replace(item, task_run=dataclasses.replace(item.task_run, rerun_reason=reason))


def _made_task(entry: Entry, options: TaskOptions) -> Task:
    """The task object, its metadata validated: a mistake names the task and its plugin."""
    try:
        task = entry.load()(options)
    except TaskDefinitionError as exc:
        raise TaskDefinitionError(f"{exc} (plugin {entry.plugin!r})") from None
    if not isinstance(task, Task):
        raise UserError(f"task {entry.name!r} from plugin {entry.plugin!r}: its factory returned "
                        f"{type(task).__name__}, not a negharness.api.task.Task")
    task.meta.validate(f"task {entry.name!r} from plugin {entry.plugin!r}")
    registered = entry.meta.get("family")
    if registered and registered != task.family:
        raise TaskDefinitionError(f"task {entry.name!r} from plugin {entry.plugin!r} was registered with family="
                                  f"{registered!r} but declares family {task.family!r}")
    return task


def _check_task_options(raw: dict[str, str], tasks: list[Task]) -> None:
    """Every -T key must be an option of at least one task of the run (a typo is never ignored)."""
    for key in raw:
        if not any(key in t.task_options for t in tasks):
            takes = sorted({k for t in tasks for k in t.task_options})
            names = ", ".join(t.name for t in tasks)
            raise UserError(f"-T {key}: not an option of {'task ' if len(tasks) == 1 else 'tasks '}{names} "
                            f"(they take: {', '.join(takes) or 'none'})")


def _fingerprint(model: Any) -> str:
    """Embedding models hash what changes an embedding; an editor, what changes an edit."""
    return model.fingerprint() if hasattr(model, "fingerprint") else hash_json(model.describe())


def _check_modalities(model: EmbeddingModel, name: str, tasks: list[Task]) -> None:
    for task in tasks:
        lacking = set(task.modalities) - set(model.modalities)
        if lacking:
            raise UserError(f"model {name} cannot encode {', '.join(sorted(lacking))}, which task {task.name} needs")
