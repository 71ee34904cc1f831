"""Honest reuse: a finished record stands in for a run only when it measured the same thing.

Four things decide it, each recorded: the config hash (model name and options, task config), the
content hashes of the data files the task read (`Task.data_files`), the versions of the code that
scored it (negharness and the plugin distributions: a release that fixes a metric reruns), and the
model's fingerprint.
The fingerprint is only known once the model is loaded, and loading costs seconds to minutes; so
the decision is made in two steps:

1. Before loading: config and data hashes, and the content hashes of every file the model options
   name (``--checkpoint``, a ``--pretrained`` file, an ``--arch`` config file, a ``-M`` value that is
   a path): a stat per file on a warm run (`negharness.store.content`). Any of them changed: a rerun,
   said without loading anything.
2. Then the fingerprint, always, one rule for every record whether or not the model loads for another
   task: the one a run of this very model remembered (`negharness.engine.fingerprints`: keyed by the
   files above, the code and the dependencies), else the loaded model's. A file's hash is no stand-in
   for it: the fingerprint holds what the code builds from the files too (open_clip's preprocessing,
   a processor's settings).

A rerun says why, in the run summary and in the record (``rerun_reason``).

`stale_reason` is the one decision, on inputs computed now: the plan (`negharness.engine.plan`) asks
it for every task before any model loads, whichever door the request came through; the fingerprint
check once the model is known is `fingerprint_reason` (`negharness.engine.fingerprints.standing`, and
the run when it builds the model).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.contracts.names import name_problem
from negharness.io.paths import require_regular
from negharness.store.content import FileHasher, named_hash

RANDOM_WEIGHTS = "random weights: every load draws others, so no record of them stands for another"
LISTED_FILES = 64  # files named one by one in a record (data files come first); the rest only in the digest
WEIGHT_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors", ".ckpt")  # a --pretrained that names a file


def _name(path: Path, root: Path) -> str:
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return str(path)


def data_hashes(files: list[Path], root: Path, hasher: FileHasher, task: str) -> dict[str, Any]:
    """What a record keeps of the task's data: a digest of every file, the first few by name. Plain
    files are hashed in one batch (a stat each on a warm run: 6x faster than one call per file,
    which NeIn's 48,000 images would feel)."""
    where = f"task {task}"
    unique = list(dict.fromkeys(Path(p) for p in files))
    plain = [p for p in unique if not p.is_dir()]
    for p in plain:
        require_regular(p, where)  # before anything opens it: a FIFO would block the read
    digests = dict(zip(plain, hasher.many(plain)))
    named = []
    for p in unique:
        digest = digests[p] if p in digests else hasher.tree(p, where)
        if digest is None:
            raise UserError(f"{where}: cannot read {p}")
        named.append((_name(p, root), digest))
    return {"digest": named_hash(named), "n_files": len(named), "files": dict(named[:LISTED_FILES])}


def option_files(specs: dict[str, Any], values: dict[str, Any]) -> list[Path]:
    """The files and folders a task's options name where the option says its value may be one
    (``OptionSpec.data_file``: ``-T qrels=FILE``), those that exist now (an option file added later is
    then read: a rerun): data the numbers rest on, hashed with the task's."""
    named = [values.get(k) for k in sorted(specs) if specs[k].data_file]
    paths = [Path(os.path.expanduser(v)) for v in named if isinstance(v, str) and v]
    return [p for p in paths if p.exists()]


def read_files(task: Any) -> list[Path]:
    """Every file the task's numbers rest on, as it stands now: those its ``-T`` options name first
    (a record lists the first files by name, so a rerun names the changed one), then `Task.data_files`,
    which includes files read when present (nT2VR's ``negated_neginfo.txt``)."""
    files: list[Path] = option_files(task.task_options, task.opts) + task.data_files()
    return files


def model_sources(options: Any, hasher: FileHasher) -> dict[str, str]:
    """Content hashes of the files and folders the model options name, keyed by option (a ``--pretrained``
    written as a file is open_clip's weights file; a tag is none, whatever the folder holds: open_clip looks
    its tags up first, so ``./openai`` beside the run is no file for ``--pretrained openai``)."""
    pretrained = options.pretrained if file_like(options.pretrained) else None
    named = [("--arch", options.arch), ("--pretrained", pretrained), ("--checkpoint", options.checkpoint)]
    return named_sources(named + [(f"-M {k}", v) for k, v in sorted(options.extra.items())], hasher)


def file_like(value: Any) -> bool:
    """Whether a ``--pretrained`` value is written as a file (a folder in it, or a weights suffix), not a tag."""
    return isinstance(value, str) and ("/" in value or os.sep in value or value.endswith(WEIGHT_SUFFIXES))


def weights_named(options: Any, sources: dict[str, str], specs: Mapping[str, Any] | None) -> bool:
    """Whether files the model options name hold its weights: a ``--checkpoint``, a ``--pretrained`` file,
    or a file or folder an option names (``--arch FOLDER``, ``-M model=FOLDER``) while no ``--pretrained``
    tag fetches them from a hub. A data file (an option declared ``data_file``: ``-M pairs=FILE``) holds
    none: a wrapper naming one still takes its base's weights from wherever the base does."""
    if "--checkpoint" in sources or "--pretrained" in sources:
        return True
    data = {f"-M {key}" for key, spec in (specs or {}).items() if getattr(spec, "data_file", False)}
    return not options.pretrained and any(option not in data for option in sources)


def judge_sources(options: dict[str, str], hub_options: set[str], hasher: FileHasher) -> dict[str, str]:
    """What a judge's ``-J`` options name, keyed by option: a file's or folder's content hash, or, for an
    option the judge declares ``data_file`` (``hub_options``: a model id or folder, not the name of a model
    served elsewhere), the commit a hub id's local snapshot is at (``hub:<commit>``: what a loader given the
    id reads offline). A judged record's reuse compares them (`stale_reason`): nothing else sees a judge
    retrained in place without loading it."""
    from negharness.fetch.hub_models import is_hub_id, snapshot_folder  # lazy: the judges' road only

    out = named_sources([(f"-J {k}", v) for k, v in sorted(options.items())], hasher)
    for key, value in sorted(options.items()):
        option = f"-J {key}"
        if option not in out and key in hub_options and isinstance(value, str) and is_hub_id(value):
            snapshot = snapshot_folder(value)
            if snapshot is not None and snapshot.is_dir():
                out[option] = f"hub:{snapshot.name}"
    return out


def named_sources(named: list[tuple[str, Any]], hasher: FileHasher) -> dict[str, str]:
    """Content hashes of the option values that name an existing file or folder, keyed by option."""
    out = {}
    for option, value in named:
        if not value or not isinstance(value, str):
            continue
        path = Path(os.path.expanduser(value))
        if path.is_file() or path.is_dir():
            out[option] = hasher.tree(path, option)
    return out


def model_revision(model: Any, sources: dict[str, str]) -> str | None:
    """The revision of the weights, recorded apart from the fingerprint (which hashes `describe()`):
    the content hash of --checkpoint, else the revision the plugin declares (a hub commit), else a
    Hugging Face model's hub commit (``config._commit_hash``), else the hash of a file or folder a
    -M option names (``-M model=FOLDER``); None when nothing names the weights."""
    if sources.get("--checkpoint"):
        return sources["--checkpoint"]
    declared = getattr(model, "revision", None)
    if isinstance(declared, str) and declared:
        return plain_revision(declared)
    for module in _held_modules(model):
        commit = getattr(getattr(module, "config", None), "_commit_hash", None)
        if isinstance(commit, str) and commit:
            return plain_revision(commit)
    named = [v for k, v in sorted(sources.items()) if k.startswith("-M ")]
    return named[0] if named else None


def plain_revision(revision: str) -> str:
    """A revision a plugin or a hub config declares, as a record may hold it (a plain name: exporters make
    file names of it and the checked reader refuses a path): ``refs/pr/3`` is ``refs-pr-3``; one with
    nothing plain left is named by its hash."""
    if name_problem(revision) is None:
        return revision
    plain = re.sub(r"[^A-Za-z0-9_.-]+", "-", revision).lstrip("_.-")[:128]
    return plain if name_problem(plain) is None else f"rev-{hash_json(revision, 16)}"


def _held_modules(model: Any) -> list[Any]:
    """The model's torch modules; none when the plugin cannot name them (its own error comes later)."""
    try:
        return list(model.modules())
    except Exception:  # noqa: BLE001 - a plugin's modules() that refuses: no hub commit to read
        return []


def _data_reason(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    if old.get("digest") == new["digest"]:
        return None
    before, after = old.get("files") or {}, new["files"]
    for name, digest in after.items():
        if name not in before and len(before) < LISTED_FILES:
            return f"data file {name} added"
        if name in before and before[name] != digest:
            return f"data file {name} changed"
    gone = [n for n in before if n not in after and len(after) < LISTED_FILES]
    if gone:
        return f"data file {gone[0]} no longer read"
    return f"data files changed ({new['n_files']} read, was {old.get('n_files', '?')})"


def stale_reason(old: dict[str, Any] | None, config_hash: str, task_config: dict[str, Any],
                 data: dict[str, Any], sources: dict[str, str], overwrite: bool,
                 code: dict[str, Any], judge: dict[str, str] | None = None) -> str | None:
    """Why ``old`` cannot stand in for this run (None: it can, as far as is known without the model).
    A missing record gives "" (a first run, nothing to explain). ``judge``: a judged task's judge sources
    (`judge_sources`), None for a task no judge scores."""
    if old is None:
        return ""
    if overwrite:
        return "--overwrite"
    if (old.get("model") or {}).get("random_weights"):
        return RANDOM_WEIGHTS
    if old.get("config_hash") != config_hash:
        old_task = (old.get("config") or {}).get("task")
        return "task config changed" if old_task != task_config else "model config changed"
    if "data" not in old:
        return "the record has no data hashes (written by an older negharness)"
    reason = _data_reason(old["data"], data) or code_reason(old.get("versions"), code)
    if reason:
        return reason
    old_sources = (old.get("model") or {}).get("sources")
    if old_sources is None:
        return "the record has no model file hashes (written by an older negharness)"
    if (option := _changed(old_sources, sources)) is not None:
        return f"{'model weights' if option == '--checkpoint' else f'model file ({option})'} changed"
    return None if judge is None else _judge_reason(old.get("judge"), judge)


def _changed(was: dict[str, Any], now: dict[str, str]) -> str | None:
    """The first option (in order) whose named files' hash differs between two runs, or None."""
    return next((o for o in sorted(set(was) | set(now)) if was.get(o) != now.get(o)), None)


def _judge_reason(was: Any, sources: dict[str, str]) -> str | None:
    """Why a judged record's judge is not this run's, by what its options name (files, hub snapshots)."""
    old_sources = was.get("sources") if isinstance(was, dict) else None
    if not isinstance(old_sources, dict):
        return "the record has no judge file hashes (written by an older negharness)"
    option = _changed(old_sources, sources)
    return None if option is None else f"judge files ({option}) changed"


def code_reason(was: dict[str, Any] | None, now: dict[str, Any]) -> str | None:
    """Why code versions forbid reuse: negharness itself, or a plugin distribution both runs had,
    at another version. A plugin installed since is no reason (it did not score the old record)."""
    if not isinstance(was, dict):
        return "the record has no code versions (written by an older negharness)"
    if was.get("negharness") != now.get("negharness"):
        return f"negharness {was.get('negharness')} -> {now.get('negharness')}"
    old_plugins = was.get("plugins") or {}
    for dist, version in sorted((now.get("plugins") or {}).items()):
        if dist in old_plugins and old_plugins[dist] != version:
            return f"plugin {dist} {old_plugins[dist]} -> {version}"
    return None


def fingerprint_reason(old: dict[str, Any], fingerprint: str) -> str | None:
    was = (old.get("model") or {}).get("fingerprint")
    return None if was == fingerprint else f"model weights changed (fingerprint {was} -> {fingerprint})"
