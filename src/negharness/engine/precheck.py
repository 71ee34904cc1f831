"""The mistakes in a `negharness run` request that are found without torch: asked first, so a typo
or a missing file costs the plugin host's start (about a second), not torch's import (10 s and 500 MB
on 2 cores).

`check_request`: names, ``-M`` options (against the declaration the model's registration names, in a
module without torch: `negharness.discovery.lookup.check_options`), device, data root, with the
registry and the file system only. `check_train_request`: the same for `negharness train`'s ``-O``, ``-M``
and ``-T``.
`check_inputs`: the run's tasks built (built-in task modules import no torch until a task runs) and
everything the run would read that is absent, all at once: each task's files and media, and the
model's weights (a named --checkpoint, released weights no program may fetch, hub weights not cached
while offline, a checkpoint the model needs). Whether CUDA or MPS is really there is checked right after torch loads
(`negharness.engine.devices.resolve_device`), before the model is built.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Sequence

from negharness.contracts.errors import MissingDataError, UserError
from negharness.contracts.model_options import ModelOptions
from negharness.contracts.options import refuse_unknown
from negharness.contracts.task import Task, TaskDefinitionError, TaskOptions
from negharness.contracts.training import TrainSetOptions
from negharness.discovery.lookup import check_options
from negharness.discovery.registry import Entry
from negharness.engine.judging import judged_by_glob
from negharness.engine.request import task_entries
from negharness.fetch import hub_models, manual
from negharness.fetch.manifest import verify_files
from negharness.fetch.select import fetch_hint
from negharness.fetch.sources import SOURCES
from negharness.fetch.weights import WEIGHTS, as_source, weights_for
from negharness.io.paths import RootGuard, cache_root, is_symlink_loop, require_regular

DEVICES = "auto, cpu, cuda, cuda:N or mps"
_DEVICE = re.compile(r"(auto|cpu|mps|cuda(:\d+)?)")
# where a CUDA (or ROCm, which torch also calls cuda) driver shows itself on Linux; none: no GPU torch could use
_GPU_DRIVER_FILES = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")
# files that can only be a local checkpoint (a hub id never ends so): named but absent is a mistake
_WEIGHTS_FILE = re.compile(r"\.(pt|pth|bin|safetensors|ckpt|tar)(\.\d+)?$")


def check_device_spec(spec: str) -> str:
    """``spec`` when it names a device negharness runs on, else a one-line error; and, where the
    machine says so without torch (Linux with no GPU driver, MPS off macOS), that it is absent."""
    if not _DEVICE.fullmatch(spec):
        raise UserError(f"--device {spec}: not a device (use {DEVICES})")
    if spec == "mps" and sys.platform != "darwin":
        raise UserError("--device mps: MPS (Apple's GPU) exists only on macOS (use --device cpu)")
    if spec.startswith("cuda") and _no_gpu_driver():
        raise UserError(f"--device {spec}: CUDA is not available on this machine: no GPU driver (use --device cpu)")
    return spec


def _no_gpu_driver() -> bool:
    """True only where it is certain: on Linux, none of the driver's files exist."""
    return sys.platform.startswith("linux") and not any(Path(p).exists() for p in _GPU_DRIVER_FILES)


def check_request(host: Any, req: Any, root: Path, source: str) -> list[Entry]:
    """Names, ``-M`` options, device and data root (``root``, chosen by ``source``) of a run request
    (`negharness.engine.request.RunRequest`), against the registry and the file system only: no plugin
    module is imported but the torch-free ones registrations name for their options (``options=``).
    Returns the tasks' entries."""
    entries = task_entries(host, req.tasks)
    if not any(req.model in host.registry.names(kind) for kind in ("model", "editor")):
        host.registry.get("model", req.model)  # unknown: the registry's error, with the close names
    kind = "model" if req.model in host.registry.names("model") else "editor"
    check_options(host.registry.get(kind, req.model), req.model_options, host.registry)
    check_device_spec(req.device)
    if root.exists() and not root.is_dir():
        raise UserError(f"data root {root} (from {source}) is a file, not a folder: pass --data-root DIR")
    return entries


def check_train_request(registry: Any, trainer: str, opts: Any) -> None:
    """`negharness train`'s options (a `TrainOptions`) before torch: the trainer's ``-O`` and the model's
    ``-M`` against the declarations their registrations name (modules without torch), and the training
    set's ``-T`` (``--task``, else the default one, `TrainOptions.trainset`, for a trainer registered with
    ``reads_trainset=True``) against its factory (training-set modules import no torch); ``--task`` or
    ``-T`` for a trainer registered with ``reads_trainset=False`` would be ignored, so it is refused."""
    entry = registry.get("trainer", trainer)
    check_options(entry, opts, registry)
    if opts.model:
        check_options(registry.get("model", opts.model), opts.model_options, registry)
    reads = entry.meta.get("reads_trainset")
    if reads is False and (opts.task or opts.task_extra):
        given = f"--task {opts.task}" if opts.task else f"-T {next(iter(opts.task_extra))}"
        raise UserError(f"{given}: trainer {trainer!r} reads no training set; leave --task and -T out")
    if (opts.task or reads) and opts.trainset in registry.names("trainset"):
        check_options(registry.get("trainset", opts.trainset), TrainSetOptions(Path("."), dict(opts.task_extra)),
                      registry, load=True)


# the run's inputs --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Missing:
    """One absent input: a phrase for the error's first line, and the lines that say where to get it."""

    summary: str
    details: str = ""
    data: bool = True  # under the data root (so --data-root may be the fix), else the model's weights


def check_inputs(host: Any, req: Any, entries: list[Entry], options: TaskOptions,
                 hash_file: Callable[[Path], str | None] | None = None,
                 model_entry: Entry | None = None) -> tuple[list[tuple[Entry, Task]], list[Task]]:
    """The run's tasks, built with ``options`` (the plan's roots and settings), less the judged ones a glob
    matched without ``--judge`` (`judged_by_glob`: returned second, left out); their -T keys owned; every
    absent input (data and weights) named in one error; then the fetched files unchanged (``hash_file``:
    the run's memoised hasher). ``model_entry``: the model the tasks' protocol takes (the plan's)."""
    tasks, left_out = judged_by_glob([(e, made_task(e, options)) for e in entries], req.tasks, req.judge)
    check_task_options(req.task_extra, [t for _, t in tasks], left_out)
    root, source = options.data_root, options.data_root_source
    cache = options.cache_dir if options.cache_dir is not None else cache_root()
    check_data([t for _, t in tasks], root, source, hash_file, weights_problems(host, req, cache, model_entry))
    return tasks, left_out


def run_protocol(entries: list[Entry]) -> str:
    """"editing" when the tasks edit images, else "embedding"; one run speaks one protocol."""
    editing = {e.name: "edit" in getattr(e.load(), "modalities", ()) for e in entries}
    if len(set(editing.values())) > 1:
        edit = ", ".join(n for n, v in editing.items() if v)
        other = ", ".join(n for n, v in editing.items() if not v)
        raise UserError(f"editing tasks ({edit}) and embedding tasks ({other}) take different models: "
                        "run them separately")
    return "editing" if any(editing.values()) else "embedding"


def check_data(tasks: list[Task], root: Path, source: str, hash_file: Callable[[Path], str | None] | None = None,
               also: list[Missing] | None = None) -> None:
    """Every file the tasks require, present under the data root (with ``also``, the weights' absences,
    in the same error), and each one `negharness fetch` recorded still as it fetched it."""
    required = {t.name: _required(t) for t in tasks}
    problems = data_problems(tasks, required, root) + (also or [])
    if problems:
        raise MissingDataError(missing_message(problems, root, source))
    for files in required.values():
        if isinstance(files, list):
            verify_files(root, files, hash_file)  # what `negharness fetch` recorded, unchanged


def missing_message(problems: list[Missing], root: Path, source: str) -> str:
    """One line naming every absent input (and --data-root where data is missing), then the details."""
    head = "; ".join(p.summary for p in problems)
    if len(problems) > 1:
        head = f"{len(problems)} inputs missing: {head}"
    if any(p.data for p in problems):
        head += f"; data root: {root} (from {source}); pass --data-root DIR (or set NEGHARNESS_DATA) to read another"
    return "\n".join([head, *(p.details for p in problems if p.details)])


def data_problems(tasks: list[Task], required: dict[str, list[Path] | Missing], root: Path) -> list[Missing]:
    """Each task's absent files under the data root (one entry a task), or the data root itself."""
    problems = [r for r in required.values() if isinstance(r, Missing)]
    needing = [(t, files) for t in tasks if isinstance(files := required[t.name], list) and files]
    if needing and not root.is_dir():
        what = "is a file, not a folder" if root.exists() else "does not exist"
        names = ", ".join(t.name for t, _ in needing)
        return problems + [Missing(f"data root {root} {what} (tasks {names} read their files from there)",
                                   "\n".join(_where_to_get(t) for t, _ in needing))]
    guard = RootGuard(root)
    for task, named in needing:
        files = [guard.check(p, f"task {task.name}") for p in named]
        for p in files:  # a FIFO would hang the first read, a symlink loop "exists" not: refuse by cause
            if (p.exists() or is_symlink_loop(p)) and not p.is_dir():
                require_regular(p, f"task {task.name}")
        missing = [p for p in files if not p.exists()]
        if missing:
            shown = "\n  ".join(str(p) for p in missing[:5])
            more = f"\n  ... and {len(missing) - 5} more" if len(missing) > 5 else ""
            fetch = f" (`negharness fetch {task.name}`)" if fetch_line(task.name) else ""
            problems.append(Missing(f"task {task.name}: {len(missing)} file(s) missing under {root}{fetch}",
                                    f"task {task.name}:\n  {shown}{more}\n{_where_to_get(task)}".rstrip()))
    return problems


def _required(task: Task) -> list[Path] | Missing:
    """The task's files; a task that names a missing file itself (a CSV's row) gives its message."""
    try:
        return list(task.required_files())
    except MissingDataError as exc:
        first, _, rest = str(exc).partition("\n")
        return Missing(first, "\n".join(x for x in (rest, fetch_line(task.name)) if x))


def _where_to_get(task: Task) -> str:
    return "\n".join(x for x in (task.data_help or "", fetch_line(task.name)) if x)


def fetch_line(task: str) -> str:
    """The fetch command for a task's files and its download size, as a line for an error ("" if none)."""
    return fetch_hint(task, SOURCES)


def weights_problems(host: Any, req: Any, cache: Path, entry: Entry | None = None) -> list[Missing]:
    """The model's weights, where the file system says they are absent: a --checkpoint file that is
    not there, released weights no program may fetch and not yet put in the model cache, hub weights
    (an open_clip tag, a transformers id) not in the Hugging Face cache while downloads are off
    (`negharness.fetch.hub_models`: online, the loader downloads them as it always did), or no
    --checkpoint for a model whose registration says it needs one (``checkpoint="required"``). ``entry``:
    the model's registry entry as the plan chose it (by the tasks' protocol); without it, by name."""
    options, model = req.model_options, req.model
    if entry is None:
        entry = host.registry.get("model" if model in host.registry.names("model") else "editor", model)
    if (base := _wrapped(host, entry, options)) is not None:
        return weights_problems(host, base, cache)
    needs = entry.meta.get("checkpoint") == "required"
    if options.checkpoint:
        if not Path(options.checkpoint).expanduser().exists():
            if _WEIGHTS_FILE.search(options.checkpoint):
                return [Missing(f"--checkpoint {options.checkpoint}: no such file", data=False)]
            if needs:  # a folder (`negharness train --out DIR`), which a model that needs a checkpoint reads
                return [Missing(f"--checkpoint {options.checkpoint}: no such file or folder (model {model} "
                                "reads its weights there)", data=False)]
        return []
    released = weights_for(model, options.pretrained)
    if released is not None:
        src = as_source(model, released)
        if released.manual and not manual.in_place(src, cache):
            return [Missing(f"model {model}: its released weights {released.file} are not in the model cache "
                            f"and no program may fetch them (or pass --checkpoint PATH)",
                            f"model {model}: {manual.steps(src, cache)}", data=False)]
        return []
    hub_need = hub_models.needed(model, options.arch, options.pretrained, options.extra)
    if hub_need is not None and hub_models.missing(hub_need) and hub_models.offline():
        return [Missing(hub_models.refusal(model, hub_need), data=False)]
    if needs:
        tags = [f"--pretrained {tag}" for (name, tag) in WEIGHTS if name == model and tag]
        alt = f" (or {' or '.join(tags)}: the authors' released file)" if tags else ""
        return [Missing(f"model {model} needs --checkpoint PATH{alt}", data=False)]
    return []


def _wrapped(host: Any, entry: Entry, options: Any) -> Any:
    """The request a wrapper (declared with ``takes_options(..., wraps=OPTION)``, in the declaration its
    registration names: `boolean`, `steer`) hands its base: the model that option names, with the wrapper's
    weights options and every other ``-M`` (its factory passes them on); None for a model that wraps none
    by an option, or a base not registered (its factory names that)."""
    declared = entry.declared(load=False)
    key = getattr(declared, "wraps", None)
    key = key if isinstance(key, str) else None
    name = options.extra.get(key) if key else None
    if not name or name == entry.name or name not in host.registry.names("model"):
        return None
    rest = {k: v for k, v in options.extra.items() if k != key}
    return SimpleNamespace(model=name, model_options=ModelOptions(options.arch, options.pretrained, options.checkpoint,
                                                                 rest))


def made_task(entry: Entry, options: TaskOptions) -> Task:
    """The task object, its metadata validated: a mistake names the task and its plugin."""
    try:
        task = entry.load()(options)
    except TaskDefinitionError as exc:
        raise TaskDefinitionError(f"{exc} (plugin {entry.plugin!r})") from None
    except UserError:
        raise
    except Exception as exc:  # the task's factory raised: `blame_run` names the task, not the run's model
        exc.negharness_entry = entry  # type: ignore[attr-defined]
        raise
    if not isinstance(task, Task):
        raise UserError(f"task {entry.name!r} from plugin {entry.plugin!r}: its factory returned "
                        f"{type(task).__name__}, not a negharness.api.Task")
    if task.name != entry.name:  # it would run, be recorded (its record file) and reported under the other name
        raise TaskDefinitionError(f"task {entry.name!r} from plugin {entry.plugin!r}: its class "
                                  f"{type(task).__name__} says name = {task.name!r}; a task runs and is recorded "
                                  f"under the name it is registered with: set name = {entry.name!r} in the class")
    task.meta.validate(f"task {entry.name!r} from plugin {entry.plugin!r}")
    registered = entry.meta.get("family")
    if registered and registered != task.family:
        raise TaskDefinitionError(f"task {entry.name!r} from plugin {entry.plugin!r} was registered with family="
                                  f"{registered!r} but declares family {task.family!r}")
    return task


def check_task_options(raw: dict[str, str], tasks: list[Task], left_out: Sequence[Task] = ()) -> None:
    """Every -T key must be an option of at least one task of the run (a typo is never ignored); a key of a
    judged task the run leaves out (``left_out``) says so, naming --judge."""
    for key in raw:
        if any(key in t.task_options for t in tasks):
            continue
        owners = [t.name for t in left_out if key in t.task_options]
        if owners:
            raise UserError(f"-T {key}: an option of {', '.join(owners)}, which this run leaves out: it is judged "
                            "by a vision-language model; name one with --judge NAME to run it")
        names = ", ".join(repr(t.name) for t in tasks)
        refuse_unknown(key, {k: s for t in tasks for k, s in t.task_options.items()}, "-T",
                       f"{'task' if len(tasks) == 1 else 'tasks'} {names}")
