"""A run, planned once, as a value: `make_plan` turns a `RunRequest` into a frozen `RunPlan`, and every
door (`negharness run`, `negharness.run()`, the torch-free answer of a rerun) reads that value, never the
raw request again. So the same request gives the same refusal, record folder, label and reuse verdict
whichever door it came through (as MTEB's `evaluate` checks its cache once, in one place).

What the plan holds: the validated settings; device spec, data, cache and output folders; the model's
registry entry, the options it is built with (released weights as the checkpoint) and the options that
name it (its identity: never a machine's cache path); every task built, with its record path, config
hash, data hashes, the existing record and the verdict known before the model loads
(`negharness.engine.reuse.stale_reason`); and the tasks that failed alone while planned. What needs the
model (its fingerprint) is decided by `negharness.engine.fingerprints` and the run
(`negharness.engine.evaluate.run_evaluation`), on the plan.

Planning imports no torch for built-in tasks and models (a model's ``-M`` options are read from the
declaration its registration names, ``options=``; without one, naming them imports its factory's module).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.contracts.model_options import ModelOptions
from negharness.contracts.options import check_batch_size, declared_options
from negharness.contracts.precision import check_precision
from negharness.contracts.task import Task, TaskOptions
from negharness.discovery.lookup import PluginLookup
from negharness.discovery.registry import Entry
from negharness.engine.edit_context import refuse_precision
from negharness.engine.judging import JudgeChoice, is_judged, plan_judge
from negharness.engine.precheck import check_inputs, check_request, made_task, run_protocol
from negharness.engine.request import RunRequest, memo_path
from negharness.engine.stages import StageClock
from negharness.engine.reuse import data_hashes, model_sources, read_files, stale_reason, weights_named
from negharness.io.paths import cache_root, data_root, writable_folder
from negharness.records.results import ModelConfig, TaskRun, code_versions, read_record, record_path, refusal, \
    task_variant
from negharness.store.content import FileHasher


@dataclass(frozen=True)
class PlannedTask:
    """One task of a run, with everything its record's reuse is decided on before any model loads.
    ``verdict``: why the task runs again ("" for a first run), None while its record stands as far as
    is known without the model (its fingerprint, checked once it is known)."""

    entry: Entry
    task: Task
    path: Path
    config_hash: str
    config: dict[str, Any]  # the task's config, asked once (`Task.config`)
    task_run: TaskRun
    old: dict[str, Any] | None
    root: Path
    verdict: str | None


@dataclass(frozen=True)
class FailedTask:
    """A task whose input proved unusable while planned: it fails alone, named at its record path."""

    name: str
    path: Path
    error: UserError


@dataclass(frozen=True)
class RunPlan:
    """What `negharness run` will do, decided once from the request (see the module docstring)."""

    model: str
    model_entry: Entry
    protocol: str  # "embedding" or "editing": one run speaks one
    built_with: ModelOptions  # the options the model is built with (released weights as the checkpoint)
    model_cfg: ModelConfig  # the options that name the model: its record folder, row label and config hash
    sources: dict[str, str]  # content hashes of the files the model options name
    code: dict[str, Any]  # versions of the code that scores
    device: str  # the device as asked (checked; what torch finds is resolved when the run starts)
    precision: str
    batch_size: int
    workers: int | None
    limit: int | None
    seed: int
    log_samples: bool
    overwrite: bool
    use_cache: bool
    skip_broken_media: bool
    data_root: Path
    cache_root: Path
    output_dir: Path
    task_options: TaskOptions
    tasks: tuple[PlannedTask, ...]
    failed: tuple[FailedTask, ...]
    judge: JudgeChoice | None = None  # the judge of judged tasks (`negharness.engine.judging`)
    unjudged: tuple[str, ...] = ()  # judged tasks a glob matched, left out without --judge (`judged_by_glob`)
    # whether files the options name hold the weights (`negharness.engine.reuse.weights_named`): then the
    # fingerprint memo's key sees every byte of them (`negharness.engine.fingerprints`)
    names_weights: bool = False



def model_requests(host: Any, req: RunRequest, models: list[tuple[str, ModelOptions]]) -> list[RunRequest]:
    """One request a model, for a run of several (``--model a --model b``, ``negharness.run([a, b])``):
    each model's own options (written after its ``--model``) over those of ``req`` (written before the
    first ``--model``). A shared ``--arch``/``--pretrained``/``--checkpoint`` goes to every model that
    has none of its own; a shared ``-M`` key to every model that declares it (or hands its other
    options on, as a wrapper does): with one model, all of them (its binder refuses a key it lacks);
    a shared key no model takes is refused, never ignored."""
    shared = req.model_options
    if len(models) == 1:
        name, own = models[0]
        return [dataclasses.replace(req, model=name, model_options=_over(shared, own, dict(shared.extra)))]
    takers = {key: [n for n, _ in models if _takes(host, n, key)] for key in shared.extra}
    for key, names in takers.items():
        if not names:
            raise UserError(f"-M {key} (given before the first --model): none of the models "
                            f"{', '.join(n for n, _ in models)} takes it; write it after the --model it is for")
    return [dataclasses.replace(req, model=name, model_options=_over(
        shared, own, {k: v for k, v in shared.extra.items() if name in takers[k]})) for name, own in models]


def distinct_models(plans: list[RunPlan]) -> None:
    """Refuses two models of one run that are one model (the same name and the options that name it):
    both would write one record folder, the second answering from the first's records."""
    seen: dict[str, int] = {}
    for number, plan in enumerate(plans, 1):
        key = hash_json(plan.model_cfg.as_dict())
        if key in seen:
            raise UserError(f"--model {plan.model_cfg.label} is given twice (models {seen[key]} and {number} of the "
                            "run are one model, with one record folder): give it once")
        seen[key] = number


def _over(shared: ModelOptions, own: ModelOptions, shared_extra: dict[str, str]) -> ModelOptions:
    """A model's own options over the shared ones it takes."""
    return ModelOptions(own.arch or shared.arch, own.pretrained or shared.pretrained,
                        own.checkpoint or shared.checkpoint, {**shared_extra, **own.extra})


def _takes(host: Any, model: str, key: str) -> bool:
    """Whether the model a name registers declares ``key`` (or takes options it does not declare). A
    name registered as both a model and an editor takes what either declares: the tasks choose the kind
    when the request is planned, and that kind's binder refuses a key it lacks."""
    for kind in ("model", "editor"):
        if model in host.registry.names(kind):
            factory = host.registry.get(kind, model).declared()  # without torch where the registration names it
            specs = declared_options(factory)
            if specs is None or key in specs or bool(getattr(factory, "passes_rest", False)):
                return True
    return False


def check_settings(req: RunRequest) -> None:
    """The numbers and names of a request that make no sense whatever the plugins: one rule each, for
    every door (the CLI's argparse types them; a library call may pass anything)."""
    if req.limit is not None and (isinstance(req.limit, bool) or not isinstance(req.limit, int) or req.limit < 1):
        raise UserError(f"--limit {req.limit}: must be at least 1 (leave --limit out to use every item)")
    if req.workers is not None and (not isinstance(req.workers, int) or req.workers < 0):
        raise UserError(f"--workers {req.workers}: must be 0 (decode in this process) or more")
    if isinstance(req.batch_size, bool) or not isinstance(req.batch_size, int):
        raise UserError(f"--batch-size {req.batch_size!r}: must be a whole number, at least 1")
    check_batch_size(req.batch_size)
    if isinstance(req.seed, bool) or not isinstance(req.seed, int):
        raise UserError(f"--seed {req.seed!r}: must be a whole number")
    check_precision(req.precision)


def make_plan(host: Any, req: RunRequest) -> RunPlan:
    """The request checked and decided, everything at once (`planned`, for a caller that only needs the plan)."""
    return planned(host, req)[0]


def planned(host: Any, req: RunRequest, clock: StageClock | None = None) -> tuple[RunPlan, FileHasher]:
    """The request checked and decided, everything at once: settings, names, device, folders, the
    tasks and every missing input (one error naming each), the model's identity, each task's record
    and its verdict before the model loads. With the plan, the memoised file hasher over the run's
    cache that it hashed the inputs with (saved): the run hashes media through the same one, so a file
    the plan hashed is a stat there, and the memo is read once a model. ``clock``: planning is timed
    there as the ``data`` stage, for every door (the CLI, `negharness.run`, `evaluate_request`)."""
    with (clock or StageClock()).timed("data"):
        return _planned(host, req)


def _planned(host: Any, req: RunRequest) -> tuple[RunPlan, FileHasher]:
    check_settings(req)
    cache = cache_root(req.cache_dir)
    if req.use_cache:
        writable_folder(cache, _cache_option(req.cache_dir))
    root, source = data_root(req.data_root)
    entries = check_request(host, req, root, source)
    protocol = run_protocol(entries)
    model_entry = _model_entry(host, req.model, protocol, entries)
    if protocol == "editing":
        refuse_precision(req.precision)
    hasher = FileHasher(memo_path(cache))
    topts = TaskOptions(root, source, cache, req.seed, req.limit, dict(req.task_extra))
    tasks, left_out = check_inputs(host, req, entries, topts, hasher.file, model_entry)
    unjudged = tuple(t.name for t in left_out)
    if unjudged:  # said on every door (the CLI's terminal, a log, negharness.run), as a warning
        warnings.warn(f"left out, judged by a vision-language model (name one with --judge to run them): "
                      f"{', '.join(unjudged)}", UserWarning, stacklevel=3)
    judge = plan_judge(host, req.judge, req.judge_options, [task for _, task in tasks], hasher)  # in judged configs
    out_dir = writable_folder(req.output_dir, "--output-dir")
    built_with, identity = PluginLookup(host.registry, None, cache).identified(model_entry, req.model_options)
    model_cfg = ModelConfig(req.model, identity, req.precision)
    sources = model_sources(built_with, hasher)
    names_weights = weights_named(built_with, sources, declared_options(model_entry.declared()))
    code = code_versions(host.distributions())
    items, failed = [], []
    for entry, task in tasks:
        try:
            item = plan_task(entry, task, topts, model_cfg, out_dir, hasher)
        except UserError as exc:  # this task's input proved unusable: it fails alone
            failed.append(FailedTask(task.name, _failed_path(entry, task, topts, model_cfg, out_dir), exc))
            continue
        judged_by = judge.sources if judge is not None and is_judged(task) else None
        items.append(_with_verdict(item, stale_reason(item.old, item.config_hash, item.config, item.task_run.data,
                                                      sources, req.overwrite, code, judged_by)))
    hasher.save()
    plan = RunPlan(req.model, model_entry, protocol, built_with, model_cfg, sources, code, req.device, req.precision,
                   req.batch_size, req.workers, req.limit, req.seed, req.log_samples, req.overwrite, req.use_cache,
                   req.skip_broken_media, root, cache, out_dir, topts, tuple(items), tuple(failed), judge,
                   unjudged, names_weights)
    return plan, hasher


def _model_entry(host: Any, model: str, protocol: str, entries: list[Entry]) -> Entry:
    """The registry entry of the model the tasks' protocol takes: an editor for editing tasks, else a model;
    a name registered only as the other kind is named as such, with the kind these tasks take."""
    kind, other = ("editor", "model") if protocol == "editing" else ("model", "editor")
    if model not in host.registry.names(kind) and model in host.registry.names(other):
        tasks = ", ".join(e.name for e in entries[:3]) + (" ..." if len(entries) > 3 else "")
        raise UserError(f"{model} is {'an' if other == 'editor' else 'a'} {other}, and task(s) {tasks} take "
                        f"{'an' if kind == 'editor' else 'a'} {kind} (`negharness list` shows the {kind}s)")
    entry: Entry = host.registry.get(kind, model)
    return entry


def _with_verdict(item: PlannedTask, reason: str | None) -> PlannedTask:
    """``item`` with `stale_reason`'s verdict; a first run's record says nothing (no reason), one beside
    a record that was refused says why that record was not read."""
    if reason is None:
        return dataclasses.replace(item, verdict=None)
    why = reason or refusal(item.path)
    return dataclasses.replace(item, verdict=why or "", task_run=dataclasses.replace(item.task_run, rerun_reason=why))


def _cache_option(explicit: str | None) -> str:
    import os

    return "--cache-dir" if explicit else ("$NEGHARNESS_CACHE" if os.environ.get("NEGHARNESS_CACHE") else "cache folder")


def plan_task(entry: Entry, task: Task, options: TaskOptions, model_cfg: ModelConfig, out_dir: Path,
              hasher: FileHasher) -> PlannedTask:
    """The task's variant (how its config differs from the task's default), record path, config hash
    and data hashes: everything reuse is decided on, before any model loads. The task's config is asked
    once (a task may hash its files to say it)."""
    config = task.config()
    variant = _variant(entry, config, options)
    path = record_path(out_dir, model_cfg, task.name, variant)
    data = data_hashes(read_files(task), options.data_root, hasher, task.name)
    return PlannedTask(entry, task, path, config_hash(model_cfg, config), config, TaskRun(variant, data),
                       read_record(path, options.cache_dir), options.data_root, "")


def _variant(entry: Entry, config: dict[str, Any], options: TaskOptions) -> dict[str, Any]:
    """How a task's ``config`` differs from its default run's (--limit, -T, --seed): its record's name."""
    try:
        default = made_task(entry, TaskOptions(options.data_root, options.data_root_source, options.cache_dir))
        default_config = default.config()
    except UserError:  # a task that cannot be built without options has no default run to protect
        default_config = {"name": config.get("name")}
    return task_variant(config, default_config)


def _failed_path(entry: Entry, task: Task, options: TaskOptions, model_cfg: ModelConfig, out_dir: Path) -> Path:
    """Where a task that failed while planned would have its record: its variant's path, or, when its config
    itself failed (the failure being named), the default run's."""
    try:
        variant = _variant(entry, task.config(), options)
    except UserError:
        variant = {}
    return record_path(out_dir, model_cfg, task.name, variant)


def config_hash(model_cfg: ModelConfig, task_config: dict[str, Any]) -> str:
    """The hash a record's reuse compares first: the model's config and the task's (`Task.config`)."""
    return hash_json({"model": model_cfg.as_dict(), "task": task_config})


def plan_lines(plan: RunPlan) -> list[str]:
    """The tasks the plan holds, where their records go and which already stand as far as is known before
    the model loads: for the terminal, before anything heavy loads."""
    names = [t.task.name for t in plan.tasks] + [f.name for f in plan.failed]
    lines = [f"tasks: {', '.join(names) or '(none match)'}"]
    folders = sorted({str(t.path.parent) for t in plan.tasks})
    if folders:
        found = sum(t.path.is_file() for t in plan.tasks)
        standing = sum(t.verdict is None for t in plan.tasks)
        lines.append(f"records in {', '.join(folders)}: {found} of {len(plan.tasks)} exist"
                     + (f", {standing} unchanged" if found else ""))
    return lines
