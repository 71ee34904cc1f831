"""`negharness leaderboard --check`: is the committed board what its records give, and is every
record one the board may show? Used by CI and for community results sent as pull requests.

What makes a record valid is the one reader's (`negharness.records.check.read_checked`), which reuse,
the board, export and compare use too. Metrics that nothing kept lets the check recompute are
listed (`unverifiable_metrics`), never passed over in silence. A `negharness diagnose` result passes
when it is of its schema and names the fingerprint the records beside it name (else the model
changed since: it is stale).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError
from negharness.records.board_pass import checked_records  # noqa: F401  (long imported from here)
from negharness.records.check import is_partial, record_problems  # noqa: F401  (long imported from here)
from negharness.report import diagnosis_file
from negharness.scoring import perquery

def invalid_records(results_dir: Path) -> list[str]:
    """'path: problem' for every JSON file under results_dir that is not a valid board record, as the
    one reader (`negharness.records.check.read_checked`) finds it; ``--limit`` runs are checked for
    their form only: the board leaves them out (`partial_records`)."""
    out: list[str] = []
    list(checked_records(results_dir, out))
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
