"""Fake result records with per-query values, shaped as `negharness run` writes them: for tests of
the leaderboard, `compare` and `--check`, and for the leaderboard benchmark (1,000 records)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from negharness.records.results import (
    ModelConfig,
    record_path,
    variant_label,
    write_record,
)
from negharness.records.schema import SCHEMA_VERSION
from negharness.scoring import perquery


def fake_record(model: ModelConfig, task: str, values: dict[str, Sequence[float | None]], ids: Sequence[str] | None = None,
                family: str = "fam", leaderboard: Sequence[str] | None = None, main: str | None = None,
                lower_is_better: Sequence[str] = (), fmt: str = ".1f", created: str = "2026-01-01T00:00:00+00:00",
                notes: dict[str, Any] | None = None, limit: int | None = None,
                resamples: int = 1000, variant: dict[str, Any] | None = None,
                clusters: Sequence[str] | None = None, cluster: str | None = None,
                unit: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(record, per-query block): metrics are the covered means of ``values``, intervals bootstrapped;
    with ``clusters`` (one id per query) the task declares ``cluster`` (default "image")."""
    n = len(next(iter(values.values())))
    pq = perquery.per_query(ids or [f"q{i}" for i in range(n)], values, clusters)
    metrics = {k: perquery.covered_mean(v) for k, v in pq["values"].items()}
    board = list(leaderboard or values)
    rec = {
        "schema_version": SCHEMA_VERSION, "created_at": created,
        "model": {"name": model.name, "label": model.label, "options": model.options, "plugin": "fake",
                  "fingerprint": f"fp-{model.dirname}"},
        "task": {"name": task, "family": family, "version": "1", "plugin": "fake", "leaderboard_metrics": board,
                 "cluster": (cluster or "image") if clusters is not None else perquery.ROW},
        "metrics": metrics,
        "metric_info": {k: {"higher_is_better": k not in lower_is_better, "fmt": fmt, **({"unit": unit} if unit else {})}
                        for k in metrics},
        "main_score": {"name": main or board[0], "value": metrics[main or board[0]]},
        "notes": dict(notes or {}), "n_items": {"queries": n}, "config_hash": "fake", "seed": 0,
        "limited": limit is not None, "limit": limit,
        "variant": dict(variant or {}), "variant_label": variant_label(variant or {}),
    }
    rec.update(perquery.intervals(rec, pq, n=resamples))
    return rec, pq


def write_fake_record(root: Path, model: ModelConfig, task: str, values: dict[str, Sequence[float | None]],
                      **kwargs: Any) -> Path:
    rec, pq = fake_record(model, task, values, **kwargs)
    path = record_path(Path(root), model, task, kwargs.get("variant"))
    write_record(path, rec, None, pq)
    return path
