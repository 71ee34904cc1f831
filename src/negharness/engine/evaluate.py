"""`negharness run` executed on its plan: load the model once (when a record needs it), give each task its
protocol's context (`CachedEvalContext` or `EditContext`), build and write records. Orchestration only:
the plan (`negharness.engine.plan`) decided everything that needs no model; embedding lives in the
runner, editing in `negharness.api`, records in `negharness.records.results`.

Whether an existing record can stand in for a task was decided by the plan as far as no model is
needed (config, data hashes, model files); here the model's fingerprint is checked against each
record once it is loaded, every record alike (`negharness.engine.fingerprints.standing` answers first,
from a remembered fingerprint, as for the CLI).
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.contracts.model import EmbeddingModel
from negharness.contracts.precision import cpu_autocast_warning, resolve_precision
from negharness.contracts.task import Task, check_result
from negharness.discovery.lookup import PluginLookup
from negharness.discovery.manager import PluginHost
from negharness.engine.edit_context import EditContext
from negharness.engine.embedding_contract import ModelOrigin
from negharness.engine.fingerprints import remember, standing
from negharness.engine.judging import JudgeOptions, JudgeSession, is_judged, sourced
from negharness.engine.plan import PlannedTask, RunPlan, config_hash, planned
from negharness.engine.request import RunOutcome, RunRequest, memo_path, with_failures
from negharness.engine.reuse import RANDOM_WEIGHTS, fingerprint_reason, model_revision
from negharness.engine.devices import device_name, resolve_device
from negharness.engine.runner import CachedEvalContext, RunSettings
from negharness.engine.stages import StageClock, stage_timings
from negharness.records.check_memo import remember_written
from negharness.records.results import RunInfo, build_record, record_path, write_sidecars
from negharness.scoring import perquery
from negharness.io.atomic_files import atomic_write_json
from negharness.store.cache import EmbeddingCache, settle_merges
from negharness.store.content import FileHasher

__all__ = ["RunOutcome", "RunPlan", "RunRequest", "evaluate_request", "execute", "run_evaluation"]


def evaluate_request(host: PluginHost, req: RunRequest, progress: Any = None,
                     clock: StageClock | None = None) -> list[RunOutcome]:
    """A request planned (`planned`) and run: what a caller holding a raw request (a test, a perf script,
    `negharness fire`) calls."""
    clock = clock or StageClock()
    plan, hasher = planned(host, req, clock)
    return run_evaluation(host, plan, progress, None, clock, hasher)


def run_evaluation(host: PluginHost, plan: RunPlan, progress: Any = None, shards: Any = None,
                   clock: StageClock | None = None, hasher: FileHasher | None = None) -> list[RunOutcome]:
    """The plan executed, or answered from its records where every one stands (`standing`, asked
    first, as the CLI asks it before torch). ``shards``: this rank's
    `negharness.engine.sharding.ShardSession` under torchrun, else None. ``clock``: the process's stage
    times so far (the CLI's start-up and imports), which every record of the run repeats beside its own
    (`negharness.engine.stages`). ``hasher``: the memoised file hasher the plan was made with
    (`negharness.engine.plan.planned`; the embedding cache hashes media through it)."""
    if shards is None and (kept := standing(host, plan)) is not None:
        return kept  # every record stands: nothing to load
    return execute(host, plan, progress, shards, clock, hasher)


def execute(host: PluginHost, plan: RunPlan, progress: Any = None, shards: Any = None,
            clock: StageClock | None = None, hasher: FileHasher | None = None) -> list[RunOutcome]:
    """The plan executed, for a caller that asked `standing` already (the CLI, before torch): the model
    loaded when a record needs it, each task run or its record kept (see `run_evaluation`)."""
    clock = clock or StageClock()
    hasher = hasher or FileHasher(memo_path(plan.cache_root))
    device = resolve_device(shards.device if shards is not None else plan.device)
    resolve_precision(plan.precision)
    if note := cpu_autocast_warning(device, plan.precision):
        warnings.warn(note, UserWarning, stacklevel=2)
    failed: dict[str, tuple[Path, UserError]] = {f.name: (f.path, f.error) for f in plan.failed}
    todo = [t for t in plan.tasks if t.verdict is not None]
    maybe = [t for t in plan.tasks if t.verdict is None]
    if not todo and not maybe:  # every task failed while planned
        return with_failures([], failed)
    plugins = PluginLookup(host.registry, device, plan.cache_root)
    with clock.timed("model_import"):
        plan.model_entry.load()
    with clock.timed("model_build"):
        model = plugins.create(plan.model_entry.kind, plan.model, plan.built_with)
    fingerprint = _fingerprint(model)
    model_cfg = plan.model_cfg
    if getattr(model, "random_weights", False):
        if shards is not None:
            raise UserError(f"model {plan.model}: its weights are drawn at random as it is built, so each torchrun "
                            "rank would draw others; save them once (--checkpoint FILE) and run on that")
        model_cfg = dataclasses.replace(model_cfg, draw=fingerprint)
        todo = _for_draw(todo + [_with_reason(i, RANDOM_WEIGHTS) for i in maybe], model_cfg, plan.output_dir)
        maybe = []
        warnings.warn(f"model {plan.model}: no checkpoint or pretrained tag names its weights, so they were drawn at "
                      f"random; this run is recorded as {model_cfg.label!r} and never reused", UserWarning, stacklevel=2)
    elif shards is None:
        remember(host, plan, fingerprint)
    outcomes = []
    for item in maybe:  # the model is loaded: its fingerprint is checked against every record
        reason = fingerprint_reason(item.old or {}, fingerprint)
        if reason is None:
            outcomes.append(RunOutcome(item.task.name, item.path, item.old, skipped=True))
        else:
            todo.append(_with_reason(item, reason))
    if not todo:
        return with_failures(outcomes, failed)
    if plan.protocol == "embedding":
        for item in todo:  # a task the model cannot encode fails alone; the others run
            if why := _lacking(model, plan.model, item.task):
                failed[item.task.name] = (item.path, UserError(why))
        todo = [i for i in todo if i.task.name not in failed]
    run = RunInfo(model_cfg, plan.model_entry.plugin, fingerprint, model.describe(), host.distributions(),
                  device_name(device), plan.batch_size, plan.seed, plan.limit, plan.sources,
                  model_revision(model, plan.sources))
    cache = EmbeddingCache(plan.cache_root, hasher=hasher) if plan.use_cache and plan.protocol == "embedding" else None
    settings = RunSettings(device, plan.precision, plan.batch_size, plan.workers, plan.skip_broken_media)
    editor_key = hash_json({"fingerprint": fingerprint, "model": model_cfg.as_dict(), "sources": plan.sources,
                            "device": device.type})
    origin = ModelOrigin(plan.model, plan.model_entry.plugin, plan.built_with.checkpoint or plan.built_with.pretrained)
    judge: list[JudgeSession] = []  # built by the first judged task that runs, then shared
    for item in todo:
        if plan.protocol == "editing":
            ctx: Any = EditContext(model, plugins, item.path.with_suffix(".edits"), plan.seed, device, editor_key,
                                   plan.skip_broken_media)
        else:
            ctx = CachedEvalContext(model, settings, cache, progress, plan.log_samples, plugins, plan.seed, origin)
        asks = (lambda c: _judge_session(plan, plugins, hasher, judge, c.counters)) if is_judged(item.task) else None
        try:
            outcome = _run_task(item, ctx, run, plan.log_samples, clock, shards, plan.cache_root, asks)
        except UserError as exc:  # this task's input (an empty query file): it fails alone, named
            if shards is not None:  # torchrun: one rank's shard may fail alone, and ranks must stay in step
                raise
            failed[item.task.name] = (item.path, exc)
            continue
        if outcome is not None:
            outcomes.append(outcome)
    settle_merges()  # the cache's merges ran beside the later tasks; a run that fails halfway lets them end at exit
    return with_failures(outcomes, failed)


def _judge_session(plan: RunPlan, plugins: PluginLookup, hasher: FileHasher, made: list[JudgeSession],
                   counters: Any) -> JudgeSession:
    """The run's judge (the plan named it: `negharness.engine.judging.plan_judge`), built once, counting
    into this task's ``counters`` (its record's ``judge_asked`` and ``judge_cached``)."""
    if plan.judge is None:  # the plan refuses a judged task without a judge; a hand-made plan may not
        raise UserError("a judged task needs a judge: give --judge NAME")
    if not made:
        built = plugins.create("judge", plan.judge.name, JudgeOptions(extra=dict(plan.judge.options)))
        choice = sourced(plan.judge, plugins.registry.get("judge", plan.judge.name), hasher)  # as loaded
        made.append(JudgeSession(built, choice, plan.cache_root, plan.use_cache, hasher.file))
    for key in ("judge_asked", "judge_cached"):  # a record says 0 rather than nothing
        counters[key] = counters.get(key, 0)
    made[0].counters = counters
    return made[0]


def _run_task(item: PlannedTask, ctx: Any, run: RunInfo, log_samples: bool, clock: StageClock,
              shards: Any, cache_root: Path, judge: Callable[[Any], JudgeSession] | None = None
              ) -> RunOutcome | None:
    """One task evaluated, its record built and written; None on a torchrun rank that only encodes.
    ``judge``: a judged task's judge, made for ``ctx`` once the task is to be scored here (under torchrun,
    after pass 1 and on rank 0 alone: the other ranks never load it, and pass 1 runs without it)."""
    entry, task, path = item.entry, item.task, item.path
    start = time.perf_counter()
    if shards is not None and not shards.prefill(task, ctx):  # torchrun: all ranks encode, rank 0 goes on
        return None
    if judge is not None:
        ctx.judge = judge(ctx)
    result = task.evaluate(ctx)
    check_result(task, result, entry.plugin)
    if result.per_query is not None:
        perquery.check(task.name, entry.plugin, result.per_query, result.metrics, task.cluster)
    counts = dict(ctx.counters)
    timings = _timings(time.perf_counter() - start, counts, clock, ctx)
    writing = time.perf_counter()
    rec = build_record(run, task, entry.plugin, result, item.config_hash, timings, counts, ctx.broken,
                       item.task_run)
    if judge is not None:  # its files and hub snapshot, as loaded: the record's reuse compares them
        rec["judge"] = ctx.judge.choice.record()
    if result.per_query is not None:
        rec.update(perquery.intervals(rec, result.per_query))
    rec = write_sidecars(path, rec, result.samples if log_samples else None, result.per_query)
    wall = clock.wall()
    rec["timings"] = {**rec["timings"], **stage_timings({"write": time.perf_counter() - writing}),
                      **({"wall_s": round(wall, 3)} if wall is not None else {})}
    atomic_write_json(path, rec)
    if result.per_query is not None:
        remember_written(path, rec, cache_root)  # the check's answer, known now: the next board hashes, no bootstrap
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


def _for_draw(items: list[PlannedTask], model_cfg: Any, out_dir: Path) -> list[PlannedTask]:
    """A random-weight draw's records: their own folder and config hash (the draw is in the model config)."""
    return [dataclasses.replace(i, path=record_path(out_dir, model_cfg, i.task.name, i.task_run.variant),
                                config_hash=config_hash(model_cfg, i.config)) for i in items]


def _with_reason(item: PlannedTask, reason: str | None) -> PlannedTask:
    return dataclasses.replace(item, task_run=dataclasses.replace(item.task_run, rerun_reason=reason))


def _fingerprint(model: Any) -> str:
    """Embedding models hash what changes an embedding; an editor, what changes an edit."""
    return model.fingerprint() if hasattr(model, "fingerprint") else hash_json(model.describe())


def _lacking(model: EmbeddingModel, name: str, task: Task) -> str:
    """Why ``model`` cannot run ``task`` ("" when it can): the modalities it cannot encode."""
    lacking = set(task.modalities) - set(model.modalities)
    return f"model {name} cannot encode {', '.join(sorted(lacking))}, which task {task.name} needs" if lacking else ""
