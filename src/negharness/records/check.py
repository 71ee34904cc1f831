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

The per-query check is remembered by content (`negharness.records.check_memo`): per record for a
single read, in one file per results folder for a board's pass (`negharness.records.board_pass`,
which reads and checks thousands of records in a process pool with the answers of one process).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError
from negharness.contracts.names import lookalikes
from negharness.contracts.task import UNITS
from negharness.io.json_files import DuplicateKeyError, Folder, loads_unique, read_bounded_bytes
from negharness.records.check_memo import board_answer, memo_fields, memo_folder, memo_key, read_memo, write_memo
from negharness.records.schema import SCHEMA_VERSION, name_problems, nonfinite_fields
from negharness.scoring import perquery
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
    """A result record the project may not use; the message names the file and each problem
    (``lines``: one ``path: problem`` per problem, as ``--check`` lists them)."""

    def __init__(self, message: str, lines: list[str] | None = None) -> None:
        super().__init__(message)
        self.lines = lines or [message]

    def __reduce__(self) -> tuple[type[RecordError], tuple[str, list[str]]]:
        return type(self), (str(self), self.lines)  # from a pool's worker with its lines


def read_checked(path: Path, results_dir: Path | None = None, board: bool = True,
                 cache_dir: str | Path | None = None) -> dict[str, Any]:
    """A record, read and validated as ``leaderboard --check`` validates it (`load_checked`, then
    `record_problems` for a full run); else a `RecordError` naming the file and every problem. Its
    per-query file is read only from inside ``results_dir`` (default: the record's grandparent); the
    check's memo lives under the run's cache root (``cache_dir``: --cache-dir, see `memo_folder`).

    ``board=False`` is reuse's reading: the same checks, but a record whose task gave no per-query
    values (it names no per-query file) still answers a rerun of that task, which would give none
    again; it never reaches the board, export or compare, which read with ``board=True``."""
    rec = load_checked(path)
    if is_partial(rec):
        return rec
    problems = record_problems(Path(path), rec, results_dir, board, cache_dir)
    if problems:
        raise refused(path, problems)
    return rec


def refused(path: Path, problems: list[str]) -> RecordError:
    """The error that refuses the record at ``path`` for ``problems`` (each named with the file)."""
    return RecordError(f"{path}: {'; '.join(problems)}; {FIX}", [f"{path}: {p}" for p in problems])


def load_checked(path: Path, results_dir: Path | Folder | None = None) -> dict[str, Any]:
    """A record read as untrusted input: a regular file of bounded size inside the results folder
    (``<results>/<model>/<task>.json``: ``results_dir``, else the record's grandparent), one key once
    per object, names without look-alike letters."""
    top = results_dir if results_dir is not None else Path(path).parent.parent
    try:
        raw = read_bounded_bytes(Path(path), top, f"{path}: cannot read result record")
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
        if "unit" in info and info["unit"] not in UNITS:
            raise RecordError(f"{where}: field 'metric_info.{key}.unit' {info['unit']!r:.40} must be one of "
                              f"{', '.join(UNITS)}; {FIX}")


def _get(rec: dict[str, Any], dotted: str) -> tuple[Any, bool]:
    value: Any = rec
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None, False
        value = value[part]
    return value, True


REQUIRED = ("created_at", "model", "task", "metrics", "main_score", "config_hash")


def record_problems(path: Path, rec: Any, results_dir: Path | None = None, board: bool = True,
                    cache_dir: str | Path | None = None) -> list[str]:
    """Why this record may not enter the board (empty when it may); its sidecar is read only from
    inside ``results_dir`` (default: the record's grandparent). ``board=False``: see `read_checked`;
    ``cache_dir``: where the per-query check is remembered (`memo_folder`)."""
    out, raw = form_problems(path, rec, results_dir, board)
    if raw is None:
        return out
    top = Path(results_dir) if results_dir is not None else Path(path).parent.parent
    return out + remembered_sidecar_problems(path, rec, raw, memo_folder(cache_dir), top)


def form_problems(path: Path, rec: Any, results_dir: Path | Folder | None = None,
                  board: bool = True) -> tuple[list[str], bytes | None]:
    """(the record's problems but its per-query check's, the per-query file's bytes for that check):
    None for the bytes when there is nothing more to check (`record_problems`' arguments)."""
    if not isinstance(rec, dict) or rec.get("schema_version") != SCHEMA_VERSION:
        return [f"not a result record of schema {SCHEMA_VERSION}"], None
    out = [f"no {k!r}" for k in REQUIRED if k not in rec]
    if out:
        return out, None
    out += [f"{name}: not a finite number (NaN or infinity)" for name in nonfinite_fields(rec)]
    out += _main_score_problems(rec)
    if not (rec["model"].get("fingerprint") or "").strip():
        out.append("no model fingerprint (model.fingerprint)")
    try:
        raw = perquery.sidecar_bytes(path, rec, results_dir)
    except UserError as exc:
        return out + [str(exc).removeprefix(f"{path}: ")], None
    if raw is None and board:  # (reuse reads a record of a task that gives no per-query values)
        out.append("no per-query sidecar (per_query_file): its task returned no per-query values "
                   "(TaskResult.per_query, see docs/guides/plugins.md), or an older negharness "
                   "wrote it; rerun it with a task that returns them")
    return out, raw


def sidecar_problems(path: Path, rec: dict[str, Any], raw: bytes) -> list[str]:
    """What the per-query file's bytes say against the record: values that do not give its metrics
    (`perquery.parse_sidecar`), intervals that are not what they give (`_interval_problems`). Path-free
    (the record's path is left off each problem), so an answer can be remembered by content. Given
    only the record's `MEMO_FIELDS` (`memo_fields`), on every road: the key holds all the check reads."""
    rec = memo_fields(rec)
    try:
        pq = perquery.parse_sidecar(path, rec, raw)
    except UserError as exc:
        return [str(exc).removeprefix(f"{path}: ")]
    return _interval_problems(rec, pq)


def remembered_sidecar_problems(path: Path, rec: dict[str, Any], raw: bytes, folder: Path,
                                results_dir: Path | None = None) -> list[str]:
    """`sidecar_problems`, remembered in ``folder`` under `memo_key`: a record memo, else the answer
    a board's pass over ``results_dir`` left (`board_answer`); a record memo that is missing,
    damaged, of another key or not a regular file is recomputed and written again (atomically)."""
    key = memo_key(rec, raw)
    memo = folder / f"{key}.json"
    found = read_memo(memo, key)
    if found is None and results_dir is not None:
        found = board_answer(folder, results_dir, key)
    if found is None:
        found = sidecar_problems(path, rec, raw)
        write_memo(memo, key, found)
    return found


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
