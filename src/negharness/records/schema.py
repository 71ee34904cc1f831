"""What a result record is, for every reader and writer: its schema version, its identity (the
board cell it fills), the numbers it must never hold, and which files in a results folder are records.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negharness.contracts.names import name_problem

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RecordKey:
    """A record's identity, the one that reuse, `compare`, the leaderboard and ``--check`` all use:
    the model's label (its name, options, precision and, for random weights, the draw) and the task
    with its variant (--seed, -T, --limit). Two records with one key measure the same thing."""

    model: str
    task: str
    variant: str = ""

    @property
    def task_cell(self) -> str:
        """``task`` for the task's default run, ``task [seed=1]`` for a variant: a table of its own."""
        return f"{self.task} [{self.variant}]" if self.variant else self.task

    def __str__(self) -> str:
        return f"model {self.model!r}, task {self.task_cell!r}"


def record_key(rec: dict[str, Any]) -> RecordKey:
    return RecordKey(str(rec["model"]["label"]), str(rec["task"]["name"]), str(rec.get("variant_label") or ""))


# the record fields that are names: a look-alike letter would make a second board row or column of the
# same look, and `negharness export` builds folder and file names from them (MTEB's ``<revision>/<task>.json``),
# so each is a plain name (`negharness.contracts.names`), never a path such as ``../../elsewhere``
NAME_FIELDS = ("model.name", "task.name", "model.revision")
NULLABLE = frozenset({"model.revision"})  # null: a record made before revisions, or weights nothing names


def name_problems(rec: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """(field, value, why) for each of `NAME_FIELDS` the record holds that is not a plain name."""
    out = []
    for field in NAME_FIELDS:
        holder, key = field.split(".")
        found = rec.get(holder)
        if not isinstance(found, dict) or key not in found or (found[key] is None and field in NULLABLE):
            continue
        problem = name_problem(found[key])
        if problem:
            out.append((field, found[key], problem))
    return out


def _bad_number(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def nonfinite_fields(rec: dict[str, Any]) -> list[str]:
    """``metrics.MIR = nan``-style names of the numbers a record must not hold: NaN or infinity
    (JSON's NaN/Infinity, or 1e999) in its metrics, main score or intervals. Python's json reads
    them without complaint; a board would show "nan ±0.250"."""
    if _all_finite(rec):
        return []
    out = [f"metrics.{k} = {v!r}" for k, v in (rec.get("metrics") or {}).items() if _bad_number(v)] \
        if isinstance(rec.get("metrics"), dict) else []
    main = rec.get("main_score")
    if isinstance(main, dict) and _bad_number(main.get("value")):
        out.append(f"main_score.value = {main['value']!r}")
    for field in INTERVAL_FIELDS:
        found = rec.get(field)
        for k, iv in (found.items() if isinstance(found, dict) else ()):
            if (isinstance(iv, list) and any(_bad_number(v) for v in iv)) or _bad_number(iv):
                out.append(f"{field}.{k} = {iv!r}")
    return out


def _all_finite(rec: dict[str, Any]) -> bool:
    """Whether the numbers `nonfinite_fields` looks at are all finite numbers, by one exact sum (a NaN
    or infinity makes it non-finite or fail): a board asks for each of thousands of records. False
    when anything there is not a number either; `nonfinite_fields` then looks one by one."""
    metrics, main = rec.get("metrics"), rec.get("main_score")
    values = list(metrics.values()) if isinstance(metrics, dict) else []
    values.append(main.get("value", 0) if isinstance(main, dict) else 0)
    for name in INTERVAL_FIELDS:
        found = rec.get(name)
        for iv in (found.values() if isinstance(found, dict) else ()):
            if type(iv) is list:
                values.extend(iv)
            else:
                values.append(iv)
    try:
        return math.isfinite(math.fsum(values))
    except (TypeError, OverflowError, ValueError):
        return False


# the intervals over clusters and over rows and their standard errors (`negharness.scoring.perquery`)
INTERVAL_FIELDS = ("intervals", "standard_errors", "intervals_rows", "standard_errors_rows")


SIDECAR_SUFFIXES = (".perquery.json", ".diagnosis.json")  # per-query values; `negharness diagnose` results


def record_files(results_dir: Path) -> list[Path]:
    """The record files under ``results_dir`` (``<model>/<task>.json``), not the sidecars beside them,
    in `Path` order (sorted by their parts, as ``Path`` compares: 20,000 paths compared pairwise as
    Paths cost a board of 10,000 records a second)."""
    found = [p for p in Path(results_dir).glob("*/*.json") if not p.name.endswith(SIDECAR_SUFFIXES)]
    return sorted(found, key=lambda p: [os.path.normcase(part) for part in p.parts])
