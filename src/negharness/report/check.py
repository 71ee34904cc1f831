"""`negharness leaderboard --check`: is the committed board what its records give, and is every
record one the board may show? Used by CI and for community results sent as pull requests.

A record passes when it is of the current schema, holds no NaN or infinite number, has its main
score among its metrics, names its model's fingerprint, and has its per-query sidecar beside it,
consistent with its metrics (mean of the per-query values = the metric; a derived metric as the
metric catalogue, `negharness.scoring.catalog`, says: ``MedR`` = the median of the ranks kept for
``MeanR``) and with its intervals over clusters and over rows, their standard errors and its number
of clusters (recomputed with the record's seed). A record made before clustered intervals is
refused: its intervals are over rows, and the board bolds by clustered ones. Metrics that nothing kept
lets the check recompute are listed (`unverifiable_metrics`), never passed over in silence.
A `negharness diagnose` result passes when it is of its schema and names the fingerprint the
records beside it name (else the model changed since: it is stale).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from negharness.api.errors import UserError
from negharness.records.check import RecordError, load_checked
from negharness.records.results import SCHEMA_VERSION, nonfinite_fields, record_files
from negharness.report import diagnosis_file
from negharness.scoring import perquery

REQUIRED = ("created_at", "model", "task", "metrics", "main_score", "config_hash")


def record_problems(path: Path, rec: Any, results_dir: Path | None = None) -> list[str]:
    """Why this record may not enter the board (empty when it may); its sidecar is read only from
    inside ``results_dir`` (default: the record's grandparent)."""
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
        return out + ["no per-query sidecar (per_query_file): its task returned no per-query values "
                      "(TaskResult.per_query, see the README's 'Writing a plugin'), or an older negharness "
                      "wrote it; rerun it with a task that returns them"]
    out += _interval_problems(rec, pq)
    return out


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


def invalid_records(results_dir: Path) -> list[str]:
    """'path: problem' for every JSON file under results_dir that is not a valid board record
    (``--limit`` runs are skipped: the board leaves them out, see `partial_records`)."""
    out = []
    for path in record_files(results_dir):
        try:
            rec = load_checked(path)  # untrusted input: bounded, one key once, no look-alike names
        except RecordError as exc:
            out.append(str(exc))
            continue
        if not is_partial(rec):
            out += [f"{path}: {p}" for p in record_problems(path, rec, results_dir)]
    return out


def partial_records(records: list[tuple[Path, dict[str, Any]]]) -> list[Path]:
    """The ``--limit`` records --check leaves aside, to say so."""
    return [path for path, rec in records if is_partial(rec)]


def unverifiable_metrics(records: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    """For --check: per task, the metrics its records hold that no per-query values recompute (a
    value edited there would pass unseen), with how many records hold them."""
    seen: dict[tuple[str, str], int] = {}
    for path, rec in records:
        if rec.get("limited"):
            continue
        try:
            pq = perquery.read_sidecar(path, rec)
        except UserError:
            continue  # a damaged sidecar is reported by invalid_records
        for metric in perquery.unverifiable(pq, rec.get("metrics") or {}):
            key = (str(rec["task"]["name"]), metric)
            seen[key] = seen.get(key, 0) + 1
    by_task: dict[str, list[str]] = {}
    for (task, metric), n in sorted(seen.items()):
        by_task.setdefault(task, []).append(f"{metric} ({n} record{'s' if n != 1 else ''})")
    return [f"{task}: {', '.join(metrics)}" for task, metrics in by_task.items()]


def stale_files(expected: dict[Path, str]) -> list[str]:
    """A short diff summary for every file whose content on disk differs from what it should be."""
    out = []
    for path, text in sorted(expected.items()):
        try:
            current = path.read_text(encoding="utf-8")
        except OSError:
            out.append(f"{path}: missing")
            continue
        if current == text:
            continue
        diff = [d for d in difflib.unified_diff(current.splitlines(), text.splitlines(), lineterm="", n=0)
                if d[:1] in "+-" and not d.startswith(("+++", "---"))]
        shown = "\n    ".join(d[:160] for d in diff[:6])
        out.append(f"{path}: stale ({len(diff)} changed line(s)):\n    {shown}")
    return out


def diagnosis_problems(results_dir: Path, records: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    """For --check: a diagnosis that is invalid, or whose model fingerprint differs from the one its
    folder's records name (the weights changed since it was made: rerun diagnose)."""
    prints: dict[Path, set[str]] = {}
    for path, rec in records:
        fp = str((rec.get("model") or {}).get("fingerprint") or "")
        if fp:
            prints.setdefault(Path(path).parent, set()).add(fp)
    out = []
    for path in diagnosis_file.diagnosis_files(results_dir):
        try:
            data = diagnosis_file.load(path)
        except diagnosis_file.DiagnosisError as exc:
            out.append(str(exc))
            continue
        other = prints.get(path.parent, set()) - {data["model"]["fingerprint"]}
        if other:
            out.append(f"{path}: stale: made with model fingerprint {data['model']['fingerprint']}, but the records "
                       f"beside it name {', '.join(sorted(other))} (rerun `negharness diagnose`)")
    return out
