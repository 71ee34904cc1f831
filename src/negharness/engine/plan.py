"""What `negharness run` will do, known before torch loads: the request, its tasks and records, and,
when a receipt says every record stands, the answer itself.

Loading torch, open_clip and a model takes 10-14 s on 2 cores; a rerun whose records all stand
needs none of it. But whether a record stands (`negharness.engine.reuse`) is decided on the task's
config and data files and the model's fingerprint, which need the task's and model's code, and so
torch. A *receipt* carries that decision from the run that made it: written by `run_evaluation`
once every task of a request has a record (reused or new), keyed by everything the decision rests
on, it lets the next identical request answer from the records when all of these are unchanged:

- the request (model and its options, task patterns and the tasks they matched, with their plugins,
  -T, --limit, --seed, precision, device, folders), the versions of negharness, its plugins and its
  dependencies, and every file of the negharness package (code and bundled weights, by size and
  modification time): what the task configs and the fingerprint are computed from;
- the files the model options name and the task's data files (content hashes, through the memo);
- each record file (a SHA-256 of its bytes), none drawn from random weights.

Anything else (a third-party plugin, reduced precision, a GPU, --overwrite, --no-cache, torchrun)
goes the normal way, which loads what it needs and decides as always.
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

from negharness.api.errors import UserError
from negharness.api.hashing import hash_json
from negharness.api.model_options import ModelOptions
from negharness.cli.process import torchrun_env
from negharness.discovery.manager import PluginHost
from negharness.discovery.registry import Entry
from negharness.engine.reuse import data_hashes, model_sources
from negharness.io.paths import cache_root, data_root
from negharness.records.results import ModelConfig, code_versions, read_record, record_path
from negharness.store.atomic import atomic_write_json
from negharness.store.content import FileHasher

RECEIPTS = "run-receipts"  # folder under the cache root
PACKAGE = Path(__file__).resolve().parents[1]  # the negharness package folder
MAX_RECEIPT_BYTES = 4 << 20  # a receipt lists data files by path; NeIn's 48,000 images fit
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


def plan_lines(host: PluginHost, req: RunRequest) -> list[str]:
    """The tasks the patterns matched and which already have a record (each reused if its inputs
    are unchanged): for the terminal, before anything heavy loads."""
    names = [e.name for e in task_entries(host, req.tasks)]
    lines = [f"tasks: {', '.join(names) or '(none match)'}"]
    if req.limit is None and not req.task_extra and req.seed == 0 and names:  # default runs: paths known now
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
    if dependencies is None or not entries or model is None or not all(_is_builtin(host, e) for e in [model, *entries]):
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


def write_receipt(host: PluginHost, req: RunRequest, sources: dict[str, str], planned: Sequence[Any],
                  outcomes: Sequence[RunOutcome]) -> None:
    """After a run in which every task has its record: what the next identical request needs to
    answer from them. ``planned``: the run's tasks with their record paths and data files."""
    by_path = {o.path: o for o in outcomes}
    try:
        key = receipt_key(host, req)
        if key is None or len(by_path) != len(planned):
            return
        tasks = []
        for item in planned:
            outcome = by_path.get(item.path)
            rec = outcome.record if outcome else None
            if rec is None or (rec.get("model") or {}).get("random_weights"):
                return  # a draw of random weights stands for nothing
            tasks.append({"task": item.task.name, "record": str(item.path), "sha256": _sha256(item.path),
                          "files": [str(p) for p in item.files], "root": str(item.root),
                          "required": [str(p) for p in item.task.required_files()]})
        atomic_write_json(_receipt_path(req, key), {"key": key, "sources": sources, "tasks": tasks})
    except OSError:  # a receipt only saves time: the run's records are what counts
        pass


def answer_from_receipt(host: PluginHost, req: RunRequest) -> list[RunOutcome] | None:
    """The run's outcomes read from its records, every one reused, without torch; None (go the
    normal way, which decides and reports) unless the receipt of this very request holds."""
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
        if model_sources(req.model_options, hasher) != receipt["sources"]:
            return None
        outcomes = [_standing(task, hasher) for task in receipt["tasks"]]
    except (UserError, OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None  # no receipt, one this code cannot read, or a data file gone: the normal way decides and says
    return None if any(o is None for o in outcomes) else outcomes  # type: ignore[return-value]


def _standing(task: dict[str, Any], hasher: FileHasher) -> RunOutcome | None:
    """The task's record when it is the receipt's, byte for byte, and its data files are unchanged."""
    path = Path(task["record"])
    if not path.is_file() or _sha256(path) != task["sha256"]:
        return None
    rec = read_record(path)
    if rec is None or (rec.get("model") or {}).get("random_weights") or rec["task"]["name"] != task["task"]:
        return None
    if not all(Path(p).exists() for p in task["required"]):
        return None
    data = data_hashes([Path(p) for p in task["files"]], Path(task["root"]), hasher, task["task"])
    if data["digest"] != (rec.get("data") or {}).get("digest"):
        return None
    return RunOutcome(task["task"], path, rec, skipped=True)
