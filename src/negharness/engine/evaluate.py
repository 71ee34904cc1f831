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

from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.contracts.model import EmbeddingModel, ModelOptions
from negharness.contracts.options import check_batch_size
from negharness.contracts.precision import cpu_autocast_warning, resolve_precision
from negharness.contracts.task import (
    Task,
    TaskOptions,
    check_result,
)
from negharness.discovery.lookup import PluginLookup
from negharness.discovery.manager import PluginHost
from negharness.discovery.registry import Entry
from negharness.engine.edit_context import EditContext, refuse_precision
from negharness.engine.plan import (
    RunOutcome,
    RunRequest,
    memo_path,
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
from negharness.engine.precheck import CheckedRun, checked_run, made_task
from negharness.engine.runner import CachedEvalContext, RunSettings, device_name, resolve_device
from negharness.engine.stages import StageClock, stage_timings
from negharness.io.paths import (
    cache_root,
    data_root,
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
    refusal,
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


def run_evaluation(host: PluginHost, req: RunRequest, progress: Any = None, shards: Any = None,
                   clock: StageClock | None = None, checked: CheckedRun | None = None) -> list[RunOutcome]:
    """``shards``: this rank's `negharness.engine.sharding.ShardSession` under torchrun, else None.
    ``clock``: the process's stage times so far (the CLI's start-up and imports), which every record
    of the run repeats beside its own (`negharness.engine.stages`). ``checked``: the request as
    `negharness run` checked it before torch (`check_before_torch`); a library call checks it here."""
    clock = clock or StageClock()
    if checked is not None and checked.request != req:
        raise ValueError("run_evaluation: `checked` was made for another request")
    cache_dir = cache_root(req.cache_dir)  # resolved once: the memo, the embeddings and the tasks share it
    with clock.timed("data"):
        hasher = FileHasher(memo_path(cache_dir))
        checked = checked or checked_run(host, req, hasher.file)
    protocol, model_entry, tasks = checked.protocol, checked.model_entry, checked.tasks
    device = resolve_device(req.device)
    resolve_precision(req.precision)
    if protocol == "editing":
        refuse_precision(req.precision)
    if note := cpu_autocast_warning(device, req.precision):
        warnings.warn(note, UserWarning, stacklevel=2)
    check_batch_size(req.batch_size)
    out_dir = writable_folder(req.output_dir, "--output-dir")
    root, source = data_root(req.data_root)
    topts = TaskOptions(root, source, cache_dir, req.seed, req.limit, dict(req.task_extra))
    plugins = PluginLookup(host.registry, device, cache_dir)
    # released weights (negclip, ...) become the checkpoint before the records are planned on it; one
    # model, one folder and row: -M values bound to the factory's declared options, defaults dropped
    resolved, identity = plugins.identified(model_entry, req.model_options)
    req = dataclasses.replace(req, model_options=resolved)
    model_cfg = ModelConfig(req.model, identity, req.precision)
    sources = model_sources(req.model_options, hasher)
    failed: dict[str, tuple[Path, UserError]] = {}  # tasks whose input proved unusable: each fails alone
    with clock.timed("data"):
        planned = []
        for entry, task in tasks:
            try:
                planned.append(_plan(entry, task, topts, model_cfg, out_dir, root, hasher))
            except UserError as exc:
                failed[task.name] = (_failed_path(entry, task, topts, model_cfg, out_dir), exc)
        hasher.save()
    todo, maybe = _split_by_reuse(planned, sources, req.overwrite, code_versions(host.distributions()))
    if not todo and (sources or not maybe):
        # the options name the weights and every record matches them: nothing to load
        return _kept(host, req, planned, [RunOutcome(i.task.name, i.path, i.old, skipped=True) for i in maybe],
                     shards, failed)
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
        return _kept(host, req, planned, outcomes, shards, failed)
    if protocol == "embedding":
        for item in todo:  # a task the model cannot encode fails alone; the others run
            if why := _lacking(model, req.model, item.task):
                failed[item.task.name] = (item.path, UserError(why))
        todo = [i for i in todo if i.task.name not in failed]
    run = RunInfo(model_cfg, model_entry.plugin, fingerprint, model.describe(), host.distributions(),
                  device_name(device), req.batch_size, req.seed, req.limit, sources,
                  model_revision(model, sources))
    cache = EmbeddingCache(cache_dir, hasher=hasher) if req.use_cache and protocol == "embedding" else None
    settings = RunSettings(device, req.precision, req.batch_size, req.workers, req.skip_broken_media)
    editor_key = hash_json({"fingerprint": fingerprint, "model": model_cfg.as_dict(), "sources": sources,
                            "device": device.type})
    origin = ModelOrigin(req.model, model_entry.plugin, req.model_options.checkpoint or req.model_options.pretrained)
    for item in todo:
        if protocol == "editing":
            ctx: Any = EditContext(model, plugins, item.path.with_suffix(".edits"), req.seed, device, editor_key,
                                   req.skip_broken_media)
        else:
            ctx = CachedEvalContext(model, settings, cache, progress, req.log_samples, plugins, req.seed, origin)
        try:
            outcome = _run_task(item, ctx, run, req, clock, shards)
        except UserError as exc:  # this task's input (an empty query file): it fails alone, named
            if shards is not None:  # torchrun: one rank's shard may fail alone, and ranks must stay in step
                raise
            failed[item.task.name] = (item.path, exc)
            continue
        if outcome is not None:
            outcomes.append(outcome)
    return _kept(host, req, planned, outcomes, shards, failed)


def _run_task(item: _Planned, ctx: Any, run: RunInfo, req: RunRequest, clock: StageClock,
              shards: Any) -> RunOutcome | None:
    """One task evaluated, its record built and written; None on a torchrun rank that only encodes."""
    entry, task, path = item.entry, item.task, item.path
    start = time.perf_counter()
    if shards is not None and not shards.prefill(task, ctx):  # torchrun: all ranks encode, rank 0 goes on
        return None
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
    return RunOutcome(task.name, path, rec, reason=item.task_run.rerun_reason)


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
          shards: Any, failed: dict[str, tuple[Path, UserError]]) -> list[RunOutcome]:
    """The outcomes, once their receipt is written (`negharness.engine.plan`): the next identical
    request answers from these records without loading torch while nothing they rest on changes.
    A task that failed alone is an outcome with its error and no record (and no receipt is written);
    when no task stands, the run fails as one error, as a one-task run always did."""
    if failed and not outcomes:
        if len(failed) == 1:
            raise next(iter(failed.values()))[1]
        raise UserError(f"all {len(failed)} tasks failed: {', '.join(failed)}\n"  # each whole, as one alone is
                        + "\n".join(f"{name}: {str(exc) or type(exc).__name__}" for name, (_, exc) in failed.items()))
    outcomes = outcomes + [RunOutcome(name, path, None, error=str(exc) or type(exc).__name__)
                           for name, (path, exc) in failed.items()]
    if shards is None and not failed:
        write_receipt(host, req, planned, outcomes)
    return outcomes


def _plan(entry: Entry, task: Task, options: TaskOptions, model_cfg: ModelConfig, out_dir: Path, root: Path,
          hasher: FileHasher) -> _Planned:
    """The task's variant (how its config differs from the task's default), record path, config
    hash and data hashes: everything reuse is decided on, before any model loads."""
    variant = _variant(entry, task, options)
    path = record_path(out_dir, model_cfg, task.name, variant)
    data = data_hashes(read_files(task), root, hasher, task.name)
    return _Planned(entry, task, path, config_hash(model_cfg, task), TaskRun(variant, data), read_record(path), root)


def _variant(entry: Entry, task: Task, options: TaskOptions) -> dict[str, Any]:
    """How the task's config differs from its default run's (--limit, -T, --seed): its record's name."""
    try:
        default = made_task(entry, TaskOptions(options.data_root, options.data_root_source, options.cache_dir))
        default_config = default.config()
    except UserError:  # a task that cannot be built without options has no default run to protect
        default_config = {"name": task.name}
    return task_variant(task.config(), default_config)


def _failed_path(entry: Entry, task: Task, options: TaskOptions, model_cfg: ModelConfig, out_dir: Path) -> Path:
    """Where a task that failed while planned would have its record: its variant's path, or, when its config
    itself failed (the failure being named), the default run's."""
    try:
        variant = _variant(entry, task, options)
    except UserError:
        variant = {}
    return record_path(out_dir, model_cfg, task.name, variant)


def config_hash(model_cfg: ModelConfig, task: Task) -> str:
    """The hash a record's reuse compares first: the model's config and the task's."""
    return hash_json({"model": model_cfg.as_dict(), "task": task.config()})


def _split_by_reuse(planned: list[_Planned], sources: dict[str, str], overwrite: bool,
                    code: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """(to run, each with why; reusable as far as is known before the model loads)."""
    todo, maybe = [], []
    for item in planned:
        reason = stale_reason(item.old, item.config_hash, item.task.config(), item.task_run.data, sources, overwrite,
                              code)
        if reason is None:
            maybe.append(item)
        else:
            todo.append(_with_reason(item, reason or refusal(item.path)))
    return todo, maybe


def _for_draw(items: list[_Planned], model_cfg: ModelConfig, out_dir: Path) -> list[_Planned]:
    """A random-weight draw's records: their own folder and config hash (the draw is in the model config)."""
    return [dataclasses.replace(i, path=record_path(out_dir, model_cfg, i.task.name, i.task_run.variant),
                                config_hash=config_hash(model_cfg, i.task)) for i in items]


def _with_reason(item: _Planned, reason: str | None) -> _Planned:
    return dataclasses.replace(item, task_run=dataclasses.replace(item.task_run, rerun_reason=reason))


def _fingerprint(model: Any) -> str:
    """Embedding models hash what changes an embedding; an editor, what changes an edit."""
    return model.fingerprint() if hasattr(model, "fingerprint") else hash_json(model.describe())


def _lacking(model: EmbeddingModel, name: str, task: Task) -> str:
    """Why ``model`` cannot run ``task`` ("" when it can): the modalities it cannot encode."""
    lacking = set(task.modalities) - set(model.modalities)
    return f"model {name} cannot encode {', '.join(sorted(lacking))}, which task {task.name} needs" if lacking else ""
