"""Whether a planned run's records all stand, decided once for every door, and the model fingerprints
that let a rerun decide it without loading torch.

A record stands when the plan's verdict (config, data, model files, code: `negharness.engine.plan`)
lets it and the model's fingerprint is the record's (whether or not the options name a weights file:
one rule, `negharness.engine.reuse`). The fingerprint needs the model built (10-14 s of torch and
open_clip on 2 cores), so a run that built it remembers it here, keyed by everything the fingerprint is
computed from: the model's registry entry, the options that name it and those it was built with, the
content of every file those options name, the versions of negharness, its plugins and its dependencies,
and every file of the negharness package (its code and bundled weights, by size and modification time).
A model whose code no stamp sees (a third-party plugin, or a built-in wrapper around one) is never
remembered; nor is a draw of random weights (each build draws others).

`standing` is the one function that says "every record stands"; `negharness run` asks it before torch
loads and `run_evaluation` asks it first, so both doors (and `negharness.run()`) answer alike, for any
request whose every record stands (a subset of an earlier run's tasks, another order).
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.engine.plan import RunPlan
from negharness.engine.ranks import from_env
from negharness.engine.request import RunOutcome, with_failures
from negharness.engine.reuse import fingerprint_reason
from negharness.version import installed_version
from negharness.io.json_files import read_capped
from negharness.io.atomic_files import atomic_write_json

FOLDER = "model-fingerprints"  # under the run's cache root
PACKAGE = Path(__file__).resolve().parents[1]  # the negharness package folder
MAX_BYTES = 1 << 20  # a memo file is a few hundred bytes


def standing(host: Any, plan: RunPlan) -> list[RunOutcome] | None:
    """Every planned task's existing record, each reused, when every one stands, with the tasks that
    failed while planned (each an outcome with its error; all failed: their error, raised), so neither
    needs torch; None otherwise: the run decides, loading the model where it must. Devices other than
    the CPU are known only once torch loads, so a run on one always goes the run's way."""
    if any(t.verdict is not None for t in plan.tasks) or not (plan.tasks or plan.failed):
        return None
    if plan.device not in ("auto", "cpu") or from_env().active:
        return None
    if plan.tasks:  # (every task failed while planned: no record to check)
        fingerprint = recalled(host, plan)
        if fingerprint is None or any(fingerprint_reason(t.old or {}, fingerprint) for t in plan.tasks):
            return None
    return with_failures([RunOutcome(t.task.name, t.path, t.old, skipped=True) for t in plan.tasks],
                         {f.name: (f.path, f.error) for f in plan.failed})


def memo_key(host: Any, plan: RunPlan) -> dict[str, Any] | None:
    """Everything the model's fingerprint is computed from (see the module docstring); None where no
    stamp sees the model's code."""
    dependencies = _dependency_versions()
    named = [e for e in host.registry.entries("model") if e.name in plan.built_with.extra.values()]
    # --overwrite and the precision change no fingerprint (a model is built alike for each: the precision is in its
    # identity, so in the key); --no-cache keeps nothing under the cache root, this memo included
    if dependencies is None or not plan.use_cache \
            or not all(_is_builtin(host, e) for e in [plan.model_entry, *named]) or not _weights_in_key(plan, named):
        return None
    entry = plan.model_entry
    return {"model": [entry.kind, entry.name, entry.plugin, entry.target], "identity": plan.model_cfg.as_dict(),
            "built_with": plan.built_with.as_dict(), "sources": plan.sources, "code": plan.code,
            "dependencies": dependencies, "package": _package_stamp()}


def _memo_file(plan: RunPlan, key: dict[str, Any]) -> Path:
    return plan.cache_root / FOLDER / f"{hash_json(key)}.json"


def remember(host: Any, plan: RunPlan, fingerprint: str) -> None:
    """After the model was built: its fingerprint, for the next plan of the same model (nothing where
    no key serves; a failed write only costs the next rerun a model load)."""
    key = memo_key(host, plan)
    if key is None:
        return
    try:
        atomic_write_json(_memo_file(plan, key), {"key": key, "fingerprint": fingerprint})
    except OSError:
        pass


def recalled(host: Any, plan: RunPlan) -> str | None:
    """The fingerprint a run of this very model remembered, or None (no memo, another key, a damaged
    or non-regular file: the run builds the model and decides)."""
    key = memo_key(host, plan)
    if key is None:
        return None
    try:
        memo = json.loads(read_capped(_memo_file(plan, key), MAX_BYTES, "fingerprint memo"))
    except (UserError, OSError, ValueError, RecursionError):  # no memo, a damaged one, a FIFO: the run decides
        return None
    if not isinstance(memo, dict) or memo.get("key") != json.loads(json.dumps(key)):
        return None
    fingerprint = memo.get("fingerprint")
    return fingerprint if isinstance(fingerprint, str) else None


def _weights_in_key(plan: RunPlan, named: list[Any]) -> bool:
    """Whether the key sees every byte the fingerprint hashes: weights in the package (its stamp) or named
    by a file (``sources``), never weights a hub cache holds (its snapshot may move under the same
    options: the model is then built and its fingerprint checked). A wrapper (``weights="base"``) counts
    as the models it names."""
    if plan.names_weights:
        return True
    kinds = [plan.model_entry.meta.get("weights")] + [e.meta.get("weights") for e in named]
    wrapped = kinds[0] == "base" and bool(named)
    return all(k == "bundled" for k in (kinds[1:] if wrapped else kinds))


def _is_builtin(host: Any, entry: Any) -> bool:
    info = host.plugins.get(entry.plugin)
    return isinstance(entry.target, str) and info is not None and info.distribution == "negharness"


@functools.lru_cache(maxsize=1)
def _package_stamp() -> str:
    """Every file of the negharness package by path, size and modification time (a stat each): any
    edit to its code or bundled weights gives another stamp. Once per process."""
    seen = []
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            st = os.stat(os.path.join(folder, name))
            seen.append((os.path.relpath(os.path.join(folder, name), PACKAGE), st.st_size, st.st_mtime_ns))
    return hash_json(seen)


@functools.lru_cache(maxsize=1)
def _dependency_versions() -> dict[str, str | None] | None:
    """Versions of negharness's declared dependencies (torch, open_clip, numpy, ...); None when
    negharness runs from a folder without being installed (nothing says what it depends on)."""
    from importlib import metadata

    try:
        requires = metadata.requires("negharness") or []
    except metadata.PackageNotFoundError:
        return None
    # the optional ones too (transformers, diffusers): built-in plugins use them and their fingerprints follow them
    names = {re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0] for r in requires}
    return {n: installed_version(n) for n in sorted(names)}
