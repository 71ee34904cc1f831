"""What `negharness run` will do, known before torch loads: the request, its tasks and records, and,
when a receipt says every record stands, the answer itself.

Loading torch, open_clip and a model takes 10-14 s on 2 cores; a rerun whose records all stand
needs none of it. Whether a record stands is decided by `negharness.engine.reuse.stale_reason`, on
the task's config, the data files it reads now, the files the model options name now, the code
versions, and the model's fingerprint, which needs the model loaded. A *receipt*, written by
`run_evaluation` once every task of a request has a record (reused or new), carries what only the
code and the request decide, keyed by everything that decides it:

- the request (model and its options, task patterns and the tasks they matched, with their plugins,
  -T, --limit, --seed, precision, device, folders), the versions of negharness, its plugins and its
  dependencies, and every file of the negharness package (code and bundled weights, by size and
  modification time): what the task configs, the model's fingerprint and which files a task's
  options name are computed from;
- each record file (a SHA-256 of its bytes: the record whose fingerprint that run checked).

The next identical request then computes the rest now and asks `stale_reason`, as the run would:
the data files each task reads (its option files, hashed through the memo), the files the model
options name, the code versions. A task's files are listed without torch only where its class says
they are the option files alone (`reuse.files_known_from_options`); a run with any other task leaves
no receipt and goes the normal way, as does anything else the receipt cannot vouch for (a third-party
plugin, reduced precision, a GPU, --overwrite, --no-cache, torchrun).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Sequence

from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.contracts.model_options import ModelOptions
from negharness.discovery.manager import PluginHost
from negharness.discovery.registry import Entry
from negharness.engine.ranks import torchrun_env
from negharness.engine.reuse import (
    data_hashes,
    file_option_values,
    files_known_from_options,
    model_sources,
    named_files,
    stale_reason,
)
from negharness.io.paths import cache_root, data_root
from negharness.records.results import ModelConfig, code_versions, read_record, record_path
from negharness.store.atomic import atomic_write_json
from negharness.store.content import FileHasher

RECEIPTS = "run-receipts"  # folder under the cache root
PACKAGE = Path(__file__).resolve().parents[1]  # the negharness package folder
MAX_RECEIPT_BYTES = 4 << 20  # far above a receipt's size (a few hundred bytes a task)
# settings that never decide whether a record stands: a receipt holds across them
NOT_DECIDING = ("workers", "batch_size", "overwrite", "use_cache", "cache_dir")


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
    record: dict[str, Any] | None
    skipped: bool = False  # an existing record was reused
    reason: str | None = None  # why an existing record was not reused (None: first run or reused)
    error: str | None = None  # why the task failed alone (its input unusable: the error's message); record None


def task_entries(host: PluginHost, patterns: list[str]) -> list[Entry]:
    seen: dict[str, Entry] = {}
    for pattern in patterns:
        try:
            matched = host.registry.match("task", pattern)
        except UserError as exc:
            if "," not in pattern:
                raise
            each = " ".join(f"--task {p.strip()}" for p in pattern.split(",") if p.strip())
            raise UserError(f"{exc}; for several tasks, repeat --task: {each}") from None
        for entry in matched:
            seen.setdefault(entry.name, entry)
    return list(seen.values())


def memo_path(root: Path) -> Path | None:
    """The file-hash memo beside the embedding cache (None when that folder cannot be made)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return root / "content-hashes"  # shared with the embedding cache's media hashes


# the plan ------------------------------------------------------------------------------------------
def plan_head(req: RunRequest) -> str:
    """The request as given, said at once (before the plugin host loads)."""
    return (f"negharness run: model {req.model}, task {' '.join(req.tasks)}; device {req.device}, "
            f"precision {req.precision}, batch size {req.batch_size}")


def plan_lines(host: PluginHost, req: RunRequest, entries: list[Entry] | None = None) -> list[str]:
    """The tasks the patterns matched (``entries``, when the caller resolved them) and which already have
    a record (each reused if its inputs are unchanged): for the terminal, before anything heavy loads."""
    names = [e.name for e in (task_entries(host, req.tasks) if entries is None else entries)]
    lines = [f"tasks: {', '.join(names) or '(none match)'}"]
    # default runs without -M (whose folder binds them to the model's declared options): paths known now
    if req.limit is None and not req.task_extra and not req.model_options.extra and req.seed == 0 and names:
        model = ModelConfig(req.model, req.model_options.as_dict(), req.precision)
        folder = record_path(Path(req.output_dir), model, names[0]).parent
        found = [n for n in names if (folder / f"{n}.json").is_file()]
        lines.append(f"records in {folder}: {len(found)} of {len(names)} exist"
                     + (" (each reused if its inputs are unchanged)" if found else ""))
    return lines


# receipts ------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _package_stamp() -> str:
    """Every file of the negharness package by path, size and modification time (a stat each, 174
    files): any edit to its code or bundled weights gives another stamp. Once per process."""
    root = PACKAGE
    seen = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            st = os.stat(os.path.join(folder, name))
            seen.append((os.path.relpath(os.path.join(folder, name), root), st.st_size, st.st_mtime_ns))
    return hash_json(seen)


@functools.lru_cache(maxsize=1)
def _dependency_versions() -> dict[str, str | None] | None:
    """Versions of negharness's declared dependencies (torch, open_clip, numpy, ...); None when
    negharness runs from a folder without being installed (nothing says what it depends on)."""
    from importlib import metadata

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    try:
        requires = metadata.requires("negharness") or []
    except metadata.PackageNotFoundError:
        return None
    names = {re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0] for r in requires if "extra ==" not in r}
    return {n: version(n) for n in sorted(names)}


def _is_builtin(host: PluginHost, entry: Entry) -> bool:
    info = host.plugins.get(entry.plugin)
    return isinstance(entry.target, str) and info is not None and info.distribution == "negharness"


def receipt_key(host: PluginHost, req: RunRequest) -> dict[str, Any] | None:
    """Everything a receipt's answer rests on besides file contents; None where no receipt serves
    (see the module docstring: the settings and plugins whose decision needs the normal way)."""
    if (req.overwrite or not req.use_cache or req.precision != "fp32" or req.device not in ("auto", "cpu")
            or req.log_samples or torchrun_env() is not None):
        return None
    entries, dependencies = task_entries(host, req.tasks), _dependency_versions()
    model = next((e for e in host.registry.entries("model") if e.name == req.model), None)
    # a model an -M value names (a wrapper's base: `boolean -M base=NAME`) is a plugin of the answer too
    named = [e for e in host.registry.entries("model") if e.name in req.model_options.extra.values()]
    if dependencies is None or not entries or model is None or \
            not all(_is_builtin(host, e) for e in [model, *named, *entries]):
        return None
    settings = {f.name: getattr(req, f.name) for f in fields(req) if f.name not in NOT_DECIDING}
    settings.update(model_options=req.model_options.as_dict(), output_dir=str(Path(req.output_dir).resolve()),
                    data_root=str(data_root(req.data_root)[0].resolve()))
    return {"request": settings, "model": [model.name, model.plugin, model.target],
            "tasks": [[e.name, e.plugin, e.target] for e in entries], "code": code_versions(host.distributions()),
            "dependencies": dependencies, "package": _package_stamp()}


def _receipt_path(req: RunRequest, key: dict[str, Any]) -> Path:
    return cache_root(req.cache_dir) / RECEIPTS / f"{hash_json(key)}.json"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_receipt(host: PluginHost, req: RunRequest, planned: Sequence[Any], outcomes: Sequence[RunOutcome]) -> None:
    """After a run in which every task has its record: what the next identical request needs, besides
    what it computes now, to decide as the run would. ``planned``: the run's tasks with their record
    paths and config hashes. No receipt where a task's files cannot be listed without its code."""
    by_path = {o.path: o for o in outcomes}
    try:
        key = receipt_key(host, req)
        if key is None or len(by_path) != len(planned):
            return
        tasks = []
        for item in planned:
            outcome = by_path.get(item.path)
            rec = outcome.record if outcome else None
            if rec is None or (rec.get("model") or {}).get("random_weights") or not files_known_from_options(item.task):
                return  # a draw of random weights stands for nothing; files known only by running the task's code
            tasks.append({"task": item.task.name, "record": str(item.path), "sha256": _sha256(item.path),
                          "root": str(item.root), "config_hash": item.config_hash, "config": item.task.config(),
                          "file_options": file_option_values(item.task.task_options, item.task.opts)})
        atomic_write_json(_receipt_path(req, key), {"key": key, "tasks": tasks})
    except OSError:  # a receipt only saves time: the run's records are what counts
        pass


def answer_from_receipt(host: PluginHost, req: RunRequest) -> list[RunOutcome] | None:
    """The run's outcomes read from its records, every one reused, without torch; None (go the
    normal way, which decides and reports) unless the receipt of this very request holds and
    `stale_reason`, on the inputs computed now, finds every record standing."""
    try:
        key = receipt_key(host, req)
        if key is None:
            return None
        path = _receipt_path(req, key)
        if path.stat().st_size > MAX_RECEIPT_BYTES:
            return None
        receipt = json.loads(path.read_text(encoding="utf-8"))
        if receipt.get("key") != json.loads(json.dumps(key)):
            return None
        hasher = FileHasher(memo_path(cache_root(req.cache_dir)))
        now = (model_sources(req.model_options, hasher), key["code"])  # the code versions now, in the key
        outcomes = [_standing(task, hasher, *now) for task in receipt["tasks"]]
    except (UserError, OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None  # no receipt, one this code cannot read, or a data file gone: the normal way decides and says
    standing = [o for o in outcomes if o is not None]
    return standing if len(standing) == len(outcomes) else None


def _standing(task: dict[str, Any], hasher: FileHasher, sources: dict[str, str],
              code: dict[str, Any]) -> RunOutcome | None:
    """The task's record when it is the receipt's, byte for byte, and `stale_reason` lets it stand on
    the files read now (those the task's options name: see `write_receipt`)."""
    path = Path(task["record"])
    if not path.is_file() or _sha256(path) != task["sha256"]:
        return None
    rec = read_record(path)
    if rec is None or rec["task"]["name"] != task["task"]:
        return None
    data = data_hashes(named_files(task["file_options"]), Path(task["root"]), hasher, task["task"])
    if stale_reason(rec, task["config_hash"], task["config"], data, sources, False, code) is not None:
        return None
    return RunOutcome(task["task"], path, rec, skipped=True)
