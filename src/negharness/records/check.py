"""The one reader of result records (`read_checked`), with one policy for reuse, the leaderboard,
export, compare and ``leaderboard --check``: nothing leaves the project that ``--check`` would
refuse. Every file is either used or reported, never silently skipped. A file over the size cap, a
truncated file, a record of another schema version, a missing or mistyped field, a NaN or infinite
metric, main score or interval is an error naming the file and the field; so is a record whose
metrics, main score or intervals are not what its per-query values give (`record_problems`). The
run that wrote it can be redone with --overwrite.

A record passes `record_problems` when it is of the current schema, holds no NaN or infinite
number, has its main score among its metrics, names its model's fingerprint, and has its per-query
sidecar beside it, consistent with its metrics (mean of the per-query values = the metric; a derived
metric as the metric catalogue, `negharness.scoring.catalog`, says: ``MedR`` = the median of the
ranks kept for ``MeanR``) and with its intervals over clusters and over rows, their standard errors
and its number of clusters (recomputed with the record's seed). A record made before clustered
intervals is refused: its intervals are over rows, and the board bolds by clustered ones. A
``--limit`` record is checked for its form only: it never enters the board.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.contracts.names import lookalikes
from negharness.io.json_files import DuplicateKeyError, loads_unique, read_bounded_bytes
from negharness.io.paths import cache_root
from negharness.records.schema import (
    SCHEMA_VERSION,
    RecordKey,
    name_problems,
    nonfinite_fields,
    record_files,
    record_key,
)
from negharness.scoring import perquery
from negharness.scoring.catalog import renamed_record
from negharness.store.atomic import cached_json
from negharness.version import __version__

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
    """A result record the project may not use; the message names the file and each problem
    (``lines``: one ``path: problem`` per problem, as ``--check`` lists them)."""

    def __init__(self, message: str, lines: list[str] | None = None) -> None:
        super().__init__(message)
        self.lines = lines or [message]


def read_checked(path: Path, results_dir: Path | None = None, board: bool = True) -> dict[str, Any]:
    """A record, read and validated as ``leaderboard --check`` validates it (`load_checked`, then
    `record_problems` for a full run); else a `RecordError` naming the file and every problem. Its
    per-query file is read only from inside ``results_dir`` (default: the record's grandparent).

    ``board=False`` is reuse's reading: the same checks, but a record whose task gave no per-query
    values (it names no per-query file) still answers a rerun of that task, which would give none
    again; it never reaches the board, export or compare, which read with ``board=True``."""
    rec = load_checked(path)
    if is_partial(rec):
        return rec
    problems = record_problems(Path(path), rec, results_dir, board)
    if problems:
        raise RecordError(f"{path}: {'; '.join(problems)}; {FIX}", [f"{path}: {p}" for p in problems])
    return rec


def checked_records(results_dir: Path, problems: list[str] | None = None) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every record under ``results_dir``, each through `read_checked`: the first refused one is an
    error, or, given a ``problems`` list (``--check``), each refused record's problems are added to
    it and the record left out."""
    records = []
    for path in record_files(results_dir):
        try:
            records.append((path, read_checked(path, results_dir)))
        except RecordError as exc:
            if problems is None:
                raise
            problems.extend(exc.lines)
    duplicates = duplicate_problems(records)
    if duplicates and problems is None:
        raise RecordError("; ".join(duplicates), duplicates)
    if duplicates and problems is not None:  # --check: every one listed; neither record of a cell reaches the tables
        problems.extend(duplicates)
        doubled = {record_key(rec) for path, rec in records if any(line.startswith(f"{path}: ") for line in duplicates)}
        records = [(p, r) for p, r in records if r.get("limited") or record_key(r) not in doubled]
    yield from records


def duplicate_problems(records: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    """Each second record for one board cell (model label, task, variant), e.g. a copied model folder or
    a renamed old record beside the new one: the board would show whichever sorts later, so neither.
    All of them, so ``--check`` lists every one at once."""
    seen: dict[RecordKey, Path] = {}
    found = []
    for path, rec in records:
        if rec.get("limited"):
            continue  # --limit runs never enter the board
        key = record_key(rec)
        if key in seen:
            variant = f", variant {key.variant!r}" if key.variant else ""
            found.append(f"{path}: a second record for model {key.model!r}, task {key.task!r}{variant}; "
                         f"{seen[key]} is the first (the board shows one record per model and task: "
                         "move one of them out of the results folder)")
        else:
            seen[key] = path
    return found


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
    if bool(rec.get("limited")) != (rec.get("limit") is not None):  # one answer to "is this a --limit run?"
        raise RecordError(f"{path}: 'limited' is {rec.get('limited')!r} but 'limit' is {rec.get('limit')!r}: a --limit "
                          f"run has both, a full run neither; {FIX}")
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
    for field, value, problem in name_problems(rec):  # a second row of the same look; a path out of export's OUT
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
        match = _FMT.fullmatch(fmt) if isinstance(fmt, str) else None
        if match is None or int(match[1]) > MAX_PRECISION:
            raise RecordError(f"{where}: field 'metric_info.{key}.fmt' {fmt!r:.40} is not a number format the board "
                              f"uses ('.1f', '.3f', '.2%': precision 0 to {MAX_PRECISION}); {FIX}")


def _get(rec: dict[str, Any], dotted: str) -> tuple[Any, bool]:
    value: Any = rec
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None, False
        value = value[part]
    return value, True


REQUIRED = ("created_at", "model", "task", "metrics", "main_score", "config_hash")


def record_problems(path: Path, rec: Any, results_dir: Path | None = None, board: bool = True) -> list[str]:
    """Why this record may not enter the board (empty when it may); its sidecar is read only from
    inside ``results_dir`` (default: the record's grandparent). ``board=False``: see `read_checked`."""
    if not isinstance(rec, dict) or rec.get("schema_version") != SCHEMA_VERSION:
        return [f"not a result record of schema {SCHEMA_VERSION}"]
    out = [f"no {k!r}" for k in REQUIRED if k not in rec]
    if out:
        return out
    out += [f"{field}: not a finite number (NaN or infinity)" for field in nonfinite_fields(rec)]
    out += _main_score_problems(rec)
    if not (rec["model"].get("fingerprint") or "").strip():
        out.append("no model fingerprint (model.fingerprint)")
    try:
        pq = perquery.read_sidecar(path, rec, results_dir)
    except UserError as exc:
        return out + [str(exc).removeprefix(f"{path}: ")]
    if pq is None:
        if not board and not rec.get("per_query_file"):
            return out
        return out + ["no per-query sidecar (per_query_file): its task returned no per-query values "
                      "(TaskResult.per_query, see the README's 'Writing a plugin'), or an older negharness "
                      "wrote it; rerun it with a task that returns them"]
    out += _remembered_interval_problems(rec, pq)
    return out


INTERVAL_CHECK = "record-intervals-v1"  # change it when `_interval_problems` changes: remembered answers then lapse


def _remembered_interval_problems(rec: dict[str, Any], pq: dict[str, Any]) -> list[str]:
    """`_interval_problems`, remembered under the cache root by the content of the record and its
    per-query values (and this code's version): recomputing 10,000 resamples per metric costs about a
    second per record of 1,000 queries, which every read (board, reuse, export) would otherwise pay."""
    key = hash_json({"check": INTERVAL_CHECK, "negharness": __version__, "record": rec, "per_query": pq}, 32)
    found = cached_json(cache_root() / "checked_records" / f"{key}.json", lambda: _interval_problems(rec, pq))
    if isinstance(found, list) and all(isinstance(p, str) for p in found):
        return found
    return _interval_problems(rec, pq)  # a damaged memo is never trusted


def _main_score_problems(rec: dict[str, Any]) -> list[str]:
    """A main score the record's metrics do not hold (a name spelt two ways once gave ``value: null``)."""
    main = rec["main_score"] if isinstance(rec["main_score"], dict) else {}
    name, value = main.get("name"), main.get("value")
    metrics = rec["metrics"] if isinstance(rec["metrics"], dict) else {}
    if name not in metrics:
        return [f"main score {name!r} is not among the record's metrics ({', '.join(map(str, metrics))})"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != metrics[name]:
        return [f"main score {name!r} is {value!r}, not its metric's value {metrics[name]!r}"]
    return []


BEFORE_CLUSTERS = ("made before clustered intervals (no interval_method.cluster): its intervals are over rows, "
                   "which is too narrow where queries share an image or video; rerun it with --overwrite")


def _interval_problems(rec: dict[str, Any], pq: dict[str, Any]) -> list[str]:
    method = rec.get("interval_method") or {}
    if not perquery.clusters_known(rec):
        return [BEFORE_CLUSTERS]
    if (perquery.record_cluster(rec) != perquery.ROW) != (pq.get("clusters") is not None):
        return [f"task cluster {perquery.record_cluster(rec)!r} but the per-query file "
                f"{'lacks' if pq.get('clusters') is None else 'has'} cluster ids"]
    try:
        fresh = perquery.intervals(rec, pq, int(method.get("resamples", 0)), int(method.get("seed", 0)))
    except (ValueError, TypeError):
        return ["interval_method is missing or malformed"]
    out = []
    if method.get("clusters") != fresh["interval_method"]["clusters"]:
        out.append(f"interval_method.clusters {method.get('clusters')!r} is not the per-query file's "
                   f"{fresh['interval_method']['clusters']}")
    for field in ("intervals", "intervals_rows", "standard_errors", "standard_errors_rows"):
        stored = rec.get(field) or {}
        for metric, want in fresh[field].items():
            if not _same(stored.get(metric), want):
                name = "interval" if field.startswith("intervals") else "standard error"
                where = " over rows" if field.endswith("_rows") else ""
                out.append(f"{name}{where} of {metric!r} {stored.get(metric)} is not what its per-query values give "
                           f"({want})")
    return out


def _same(got: Any, want: Any) -> bool:
    """Stored and recomputed numbers (a bound pair or one number) agree to 1e-9."""
    got_l, want_l = (got, want) if isinstance(want, list) else ([got], [want])
    if not isinstance(got_l, list) or len(got_l) != len(want_l):
        return False
    return all(isinstance(g, (int, float)) and not isinstance(g, bool)
               and abs(float(g) - float(w)) <= 1e-9 * max(1.0, abs(float(w))) for g, w in zip(got_l, want_l))


def is_partial(rec: Any) -> bool:
    """A ``--limit`` run: kept beside the default record, never on the board, so never a problem."""
    return isinstance(rec, dict) and bool(rec.get("limited") or rec.get("limit") is not None)
