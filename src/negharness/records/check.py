"""Result records as the leaderboard reads them: every file is either used or reported, never
silently skipped. A truncated file, a record of another schema version, a missing or mistyped field,
a NaN or infinite metric, main score or interval is an error naming the file and the field (the run that wrote it can be redone with --overwrite).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

from negharness.api.errors import UserError
from negharness.api.names import lookalikes, name_problem
from negharness.io.json_files import DuplicateKeyError, loads_unique, read_bounded_bytes
from negharness.records.results import SCHEMA_VERSION, RecordKey, nonfinite_fields, record_files, record_key
from negharness.scoring.catalog import renamed_record

FIX = "rerun that task with --overwrite, or move the file out of the results folder"
# field path -> accepted types; a "?" suffix marks a field that may be absent
FIELDS: dict[str, tuple[type, ...]] = {
    "model": (dict,), "model.label": (str,), "model.name?": (str,), "task": (dict,), "task.name": (str,),
    "task.family?": (str,), "task.leaderboard_metrics?": (list,), "metrics": (dict,), "main_score": (dict,),
    "main_score.name": (str,), "metric_info?": (dict,), "limited?": (bool,), "created_at?": (str,),
}


_FMT = re.compile(r"\.(\d{1,2})[f%]")  # the formats the board's cells are written with
MAX_PRECISION = 10


class RecordError(UserError):
    """A result record the leaderboard cannot use; the message names the file and the field."""


def checked_records(results_dir: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    records = [(path, load_checked(path)) for path in record_files(results_dir)]
    refuse_duplicates(records)
    yield from records


def refuse_duplicates(records: list[tuple[Path, dict[str, Any]]]) -> None:
    """Two records for one board cell (model label, task, variant), e.g. a copied model folder or a
    renamed old record beside the new one: the board would show whichever sorts later, so neither."""
    seen: dict[RecordKey, Path] = {}
    for path, rec in records:
        if rec.get("limited"):
            continue  # --limit runs never enter the board
        key = record_key(rec)
        if key in seen:
            variant = f", variant {key.variant!r}" if key.variant else ""
            raise RecordError(f"{path}: a second record for model {key.model!r}, task {key.task!r}{variant}; "
                              f"{seen[key]} is the first (the board shows one record per model and task: "
                              "move one of them out of the results folder)")
        seen[key] = path


def load_checked(path: Path) -> dict[str, Any]:
    """A record read as untrusted input: a regular file of bounded size inside the results folder
    (``<results>/<model>/<task>.json``), one key once per object, names without look-alike letters."""
    try:
        raw = read_bounded_bytes(Path(path), Path(path).parent.parent, f"{path}: cannot read result record")
    except UserError as exc:
        raise RecordError(f"{exc}; {FIX}") from None
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(raw) > 1 and (raw[0] == 0) != (raw[1] == 0)):
        raise RecordError(f"{path}: UTF-16 text (expected UTF-8); {FIX}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}); {FIX}") from None
    try:
        rec = loads_unique(text)
    except DuplicateKeyError as exc:  # json keeps the last: a metric written twice showed its second value
        raise RecordError(f"{path}: {exc}; {FIX}") from None
    except json.JSONDecodeError as exc:
        cut = " (truncated?)" if not text.rstrip().endswith("}") else ""
        raise RecordError(f"{path}:{exc.lineno}: not valid JSON{cut}: {exc.msg}; {FIX}") from None
    except RecursionError:
        raise RecordError(f"{path}: JSON nested too deep to be a result record; {FIX}") from None
    except ValueError as exc:  # an integer of thousands of digits (int max_str_digits)
        raise RecordError(f"{path}: a number too long to read ({str(exc).split(';')[0]}); {FIX}") from None
    if not isinstance(rec, dict):
        raise RecordError(f"{path}: a result record is a JSON object, not {type(rec).__name__}; {FIX}")
    version = rec.get("schema_version")
    if version != SCHEMA_VERSION:
        said = "no schema_version" if version is None else f"schema_version {version!r}"
        raise RecordError(f"{path}: {said}; this negharness reads schema_version {SCHEMA_VERSION} ({FIX}, "
                          "or use the negharness version that wrote it)")
    check_fields(rec, str(path))
    return renamed_record(rec)  # an old NegBench record's neg_R@K read as R-Neg@K (`catalog.RENAMED`)


def check_fields(rec: dict[str, Any], where: str) -> None:
    for spec, types in FIELDS.items():
        name = spec.rstrip("?")
        value, present = _get(rec, name)
        if not present:
            if spec.endswith("?"):
                continue
            raise RecordError(f"{where}: field {name!r} is missing; {FIX}")
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            raise RecordError(f"{where}: field {name!r} must be {' or '.join(t.__name__ for t in types)}, "
                              f"not {type(value).__name__} ({value!r:.40}); {FIX}")
    for key, value in rec["metrics"].items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise RecordError(f"{where}: field 'metrics.{key}' must be a number, not {type(value).__name__} "
                              f"({value!r:.40}); {FIX}")
    for field in ("model.name", "task.name"):  # a look-alike letter would be a second row or column, same look
        value, present = _get(rec, field)
        problem = name_problem(value) if present else None
        if problem:
            raise RecordError(f"{where}: field {field!r} {value!r:.60}: {problem}; {FIX}")
    odd = lookalikes(rec["model"]["label"])
    if odd:
        raise RecordError(f"{where}: field 'model.label' {rec['model']['label']!r:.60} holds look-alike "
                          f"character(s) {', '.join(odd[:3])}; {FIX}")
    bad = nonfinite_fields(rec)
    if bad:
        raise RecordError(f"{where}: {', '.join(bad[:3])}{' …' if len(bad) > 3 else ''}: not a finite number "
                          f"(NaN or infinity); {FIX}")
    for key, info in (rec.get("metric_info") or {}).items():
        if not isinstance(info, dict):
            raise RecordError(f"{where}: field 'metric_info.{key}' must be an object; {FIX}")
        fmt = info.get("fmt", ".3f")
        if not isinstance(fmt, str) or not _FMT.fullmatch(fmt) or int(_FMT.fullmatch(fmt)[1]) > MAX_PRECISION:
            raise RecordError(f"{where}: field 'metric_info.{key}.fmt' {fmt!r:.40} is not a number format the board "
                              f"uses ('.1f', '.3f', '.2%': precision 0 to {MAX_PRECISION}); {FIX}")


def _get(rec: dict[str, Any], dotted: str) -> tuple[Any, bool]:
    value: Any = rec
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None, False
        value = value[part]
    return value, True
