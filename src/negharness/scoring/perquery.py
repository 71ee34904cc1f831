"""Per-query values: what every record keeps so it can be bootstrapped and compared without re-encoding.

A task returns ``TaskResult.per_query = {"ids": [...], "values": {metric: [...]}}``: one value per
query id for each metric it lists (e.g. R@K as 0/100 per query, MIR as 1/rank, accuracy as 0/100
per question). ``None`` marks an id a metric does not cover (acc_positive on a question whose
correct answer is negative, retention on a sample with nothing to retain); the metric is then the
mean over the ids it covers. The contract, checked for every run: that mean equals the task's
metric to 1e-9. A metric that is not a mean is checked where its values are kept under another
metric: ``MedR`` is the median of the ranks that ``MeanR`` keeps per query (its rule in the metric
catalogue, `negharness.scoring.catalog`); any other
metric without per-query values cannot be recomputed (`unverifiable`). The values go to a compact sidecar ``<record>.perquery.json`` (no top-k lists:
those stay behind ``--log-samples``); the record carries a 95% bootstrap interval per metric.

Clusters: queries about one image, video or source item are not independent. A task declares what
its cluster is (`Task.cluster`: "image", "video", ...; the default "row" makes each query its own
cluster) and gives one cluster id per query (``per_query["clusters"]``). The record keeps the
interval over clusters (``intervals``, what the leaderboard bolds by), the one over rows
(``intervals_rows``), a bootstrap standard error beside each (``standard_errors``,
``standard_errors_rows``) and the number of clusters (``interval_method.clusters``). A record
made before clusters has no ``interval_method.cluster``: its intervals are over rows and nothing
says whether its queries cluster (`clusters_known`).
"""

from __future__ import annotations

import functools
import json
import math
import operator
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from negharness.contracts.errors import UserError
from negharness.io.json_files import Folder, loads_unique, read_bounded_bytes
from negharness.scoring import catalog
from negharness.scoring.bootstrap import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bootstrap_estimates,
    n_clusters,
)
from negharness.scoring.catalog import lower_median  # noqa: F401  (MedR's rule, long read from here)
from negharness.io.atomic_files import atomic_write_text

SUFFIX = ".perquery.json"
TOLERANCE = 1e-9
LEVEL = 0.95
ROW = "row"  # the default cluster: each query its own
DEFAULT_CLUSTER_NOTE = "the task declares no cluster: each query is its own cluster"


class PerQueryError(UserError):
    """Per-query values that do not add up to the metrics they claim to give."""


def compact(value: Any) -> float | int | None:
    """A JSON-friendly value: None for missing/NaN, ints for whole numbers, else 12 significant digits
    (far inside the 1e-9 contract for metrics in [0, 100])."""
    if value is None:
        return None
    v = float(value)
    if v != v:
        return None
    if v.is_integer() and abs(v) < 2**53:
        return int(v)
    return float(f"{v:.12g}")


def per_query(ids: Sequence[Any], values: Mapping[str, Iterable[Any]],
              clusters: Sequence[Any] | None = None) -> dict[str, Any]:
    """The per-query block of a TaskResult, values compacted; ``clusters``: each query's cluster id
    (the image, video or source item it belongs to), for a task that declares a cluster."""
    out = {"ids": [str(i) for i in ids],
           "values": {k: [compact(x) for x in (v.tolist() if hasattr(v, "tolist") else v)] for k, v in values.items()}}
    return out if clusters is None else {**out, "clusters": [str(c) for c in clusters]}


def covered_mean(values: Sequence[float | None]) -> float:
    kept = [float(x) for x in values if x is not None and x == x]
    return math.fsum(kept) / len(kept) if kept else float("nan")


def derivation(metric: str, values: dict[str, Any]) -> tuple[str, Any] | None:
    """(source metric, function) recomputing ``metric`` from another metric's per-query values
    (``neg_MedR`` from ``neg_MeanR``), when those values are kept: the catalogue's rule."""
    return catalog.derivation(metric, values)


def unverifiable(per_query: dict[str, Any] | None, metrics: dict[str, Any]) -> list[str]:
    """The metrics that neither have per-query values nor follow from others' (the catalogue's derived metrics)."""
    values = (per_query or {}).get("values") or {}
    return [m for m in metrics if m not in values and derivation(m, values) is None]


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= TOLERANCE * max(1.0, abs(want))


def _nonfinite(vals: list[Any]) -> int | None:
    """Index of the first NaN/inf (JSON's NaN, Infinity), else None; None entries are "not covered"."""
    return next((i for i, x in enumerate(vals) if isinstance(x, float) and not math.isfinite(x)), None)


_not_none = functools.partial(operator.is_not, None)


def _plain_mean(vals: list[Any]) -> float | None:
    """`covered_mean` of values that are all numbers or None, none of them NaN or infinite, in C
    loops (a board's check reads millions of values); None for anything else (text, a list, a
    number too large for a float), which the element-by-element road then names. A NaN or infinity
    makes the exact sum non-finite (or fail), so a finite sum says every value is finite; the sum
    is `covered_mean`'s, number for number (``math.fsum`` converts each value as ``float`` does)."""
    kept = list(filter(_not_none, vals))
    try:
        total = math.fsum(kept)
    except (TypeError, OverflowError, ValueError):
        return None
    if not math.isfinite(total):
        return None
    return total / len(kept) if kept else float("nan")


def _number(x: Any) -> bool:
    """A value `covered_mean` can take (what ``float`` takes)."""
    try:
        float(x)
    except (TypeError, ValueError, OverflowError):
        return False
    return True


def _value_problem(name: str, vals: Any, ids: list[Any], metrics: dict[str, Any]) -> str | None:
    """Why one metric's per-query values break the contract, or None."""
    if name not in metrics:
        return f"{name!r} has per-query values but is not a metric of the run"
    if not isinstance(vals, list) or len(vals) != len(ids):
        return f"{name!r} has {len(vals) if isinstance(vals, list) else '?'} values for {len(ids)} ids"
    mean = _plain_mean(vals)
    if mean is None:
        at = _nonfinite(vals)
        if at is not None:
            return f"{name!r}: per-query value {vals[at]!r} for id {ids[at]!r} is not a finite number"
        try:
            mean = covered_mean(vals)
        except (TypeError, ValueError, OverflowError):  # a list, a word, a number too large for a float
            at = next((i for i, x in enumerate(vals) if x is not None and not _number(x)), None)
            if at is None:
                return f"{name!r}: the per-query values' sum is too large for a float"
            return f"{name!r}: per-query value {str(vals[at])[:40]!r} for id {ids[at]!r} is not a number"
    if not _close(mean, float(metrics[name])):
        return f"{name!r}: mean of per-query values {mean!r} != metric {metrics[name]!r}"
    return None


def problems(per_query: Any, metrics: dict[str, float]) -> list[str]:
    """What breaks the contract (empty when it holds)."""
    if not isinstance(per_query, dict) or not isinstance(per_query.get("ids"), list) \
            or not isinstance(per_query.get("values"), dict):
        return ["per_query must be {'ids': [...], 'values': {metric: [...]}}"]
    ids, out = per_query["ids"], []
    if len(set(ids)) != len(ids):
        out.append("query ids are not unique")
    clusters = per_query.get("clusters")
    if clusters is not None and (not isinstance(clusters, list) or len(clusters) != len(ids)
                                 or not all(isinstance(c, str) and c for c in clusters)):
        out.append(f"clusters must be one non-empty cluster id (text) per query id ({len(ids)})")
    broken: set[str] = set()
    for name, vals in per_query["values"].items():
        found = _value_problem(name, vals, ids, metrics)
        if found:
            out.append(found)
            broken.add(name)
    for name, want in metrics.items():
        rule = derivation(name, per_query["values"])
        if rule is None or rule[0] in broken or not isinstance(want, (int, float)):
            continue  # nothing to recompute it from, or its source is already reported
        got = rule[1](per_query["values"][rule[0]])
        if not _close(got, float(want)):
            out.append(f"{name!r}: {rule[1].__name__.replace('_', ' ')} of the {rule[0]!r} per-query values "
                       f"{got!r} != metric {want!r}")
    return out


def check(task_name: str, plugin: str, per_query: Any, metrics: dict[str, float], cluster: str = ROW) -> None:
    """Refuse a run whose per-query values disagree with its metrics, or whose cluster ids disagree
    with the cluster its task declares: intervals would be wrong."""
    found = problems(per_query, metrics)
    has = isinstance(per_query, dict) and per_query.get("clusters") is not None
    if cluster != ROW and not has:
        found.append(f"the task declares cluster {cluster!r} but gives no cluster ids (per_query['clusters'])")
    if cluster == ROW and has:
        found.append("per_query has cluster ids but the task declares no cluster (Task.cluster)")
    if found:
        raise PerQueryError(f"task {task_name!r} from plugin {plugin!r}: per-query values break the contract: "
                            + "; ".join(found[:3]))


def interval_metrics(record: dict[str, Any], per_query: dict[str, Any]) -> list[str]:
    """Leaderboard metrics and the main score that have per-query values, in declared order."""
    wanted = list(record["task"].get("leaderboard_metrics") or []) + [record["main_score"]["name"]]
    return [m for m in dict.fromkeys(wanted) if m in per_query["values"]]


def record_cluster(record: dict[str, Any]) -> str:
    """The cluster a record's task declared (``task.cluster``; "row" when it declares none)."""
    return str((record.get("task") or {}).get("cluster") or ROW)


def clusters_known(record: dict[str, Any]) -> bool:
    """Whether the record says how its intervals treat clusters (records made before clusters do not:
    their intervals are over rows, whatever the task's queries share)."""
    method = record.get("interval_method")
    return isinstance(method, dict) and isinstance(method.get("cluster"), str) and "clusters" in method


def cluster_ids(per_query: dict[str, Any]) -> list[str]:
    """Each query's cluster id; a query without one is its own cluster (its id)."""
    return list(per_query.get("clusters") or per_query["ids"])


def _fields(found: dict[str, Any], suffix: str) -> dict[str, Any]:
    return {f"intervals{suffix}": {m: [compact(iv.lo), compact(iv.hi)] for m, iv in found.items()},
            f"standard_errors{suffix}": {m: compact(iv.se) for m, iv in found.items()}}


def intervals(record: dict[str, Any], per_query: dict[str, Any], n: int = BOOTSTRAP_RESAMPLES,
              seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """The record fields: ``intervals`` {metric: [lo, hi]} over clusters and ``standard_errors``;
    the same over rows (``*_rows``); and how they were made (``interval_method``, with the cluster
    and the number of clusters)."""
    names = interval_metrics(record, per_query)
    values = {m: per_query["values"][m] for m in names}
    rows = bootstrap_estimates(values, n, seed, LEVEL, per_query["ids"])
    cluster = record_cluster(record)
    clustered = rows if per_query.get("clusters") is None else \
        bootstrap_estimates(values, n, seed, LEVEL, per_query["clusters"])
    method = {"kind": "percentile bootstrap over clusters", "level": LEVEL, "resamples": n, "seed": seed,
              "queries": len(per_query["ids"]), "cluster": cluster,
              "clusters": n_clusters(cluster_ids(per_query), len(per_query["ids"]))}
    if cluster == ROW:
        method["cluster_note"] = DEFAULT_CLUSTER_NOTE
    return {**_fields(clustered, ""), **_fields(rows, "_rows"), "interval_method": method}


def sidecar_path(record_path: Path) -> Path:
    return Path(record_path).with_suffix(SUFFIX)


def write_sidecar(record_path: Path, per_query: dict[str, Any]) -> Path:
    """One line per metric keeps the file diff-friendly and small."""
    path = sidecar_path(record_path)
    body = {"ids": per_query["ids"], "values": per_query["values"]}
    if per_query.get("clusters") is not None:
        body["clusters"] = per_query["clusters"]
    atomic_write_text(path, json.dumps(body, ensure_ascii=False, separators=(",", ":"), sort_keys=True) + "\n")
    return path


def read_sidecar(record_path: Path, record: dict[str, Any], results_dir: Path | None = None) -> dict[str, Any] | None:
    """The per-query values a record names, or None when it names none; a named but unreadable
    file is an error naming the record (`sidecar_bytes`, then `parse_sidecar`)."""
    raw = sidecar_bytes(record_path, record, results_dir)
    return None if raw is None else parse_sidecar(record_path, record, raw)


def sidecar_bytes(record_path: Path, record: dict[str, Any], results_dir: Path | Folder | None = None) -> bytes | None:
    """The bytes of the per-query file a record names, or None when it names none. Records are
    untrusted input (contributed ones too): the file must be a regular file of bounded size inside the
    results folder (``<results>/<model>/<task>.json``: the record's grandparent unless given), never
    ``/dev/zero`` or a file elsewhere. Apart from `parse_sidecar` so that a reader can digest the
    bytes it read (the record checker's memo) before deciding whether to parse them."""
    name = record.get("per_query_file")
    if not name:
        return None
    if not isinstance(name, str) or "\0" in name:
        raise PerQueryError(f"{record_path}: per_query_file {name!r} cannot be read: not a file name")
    top = results_dir if results_dir is not None else Path(record_path).parent.parent
    try:
        return read_bounded_bytes(Path(record_path).parent / name, top, _unreadable(record_path, name))
    except UserError as exc:
        raise PerQueryError(str(exc)) from None


def _unreadable(record_path: Path, name: Any) -> str:
    return f"{record_path}: per_query_file {name!r} cannot be read"


def parse_sidecar(record_path: Path, record: dict[str, Any], raw: bytes) -> dict[str, Any]:
    """The per-query values in ``raw`` (the bytes `sidecar_bytes` read), checked against the record's
    metrics (`problems`); else a `PerQueryError` naming the record. Depends on nothing but ``raw`` and
    the record's ``per_query_file``, ``task.name`` and ``metrics``."""
    name = record.get("per_query_file")
    where = _unreadable(record_path, name)
    try:
        data: dict[str, Any] = loads_unique(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise PerQueryError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    except (ValueError, RecursionError) as exc:
        raise PerQueryError(f"{where}: {exc}") from None
    task = (record.get("task") or {}).get("name")
    if isinstance(data, dict) and isinstance(data.get("values"), dict) and isinstance(task, str):
        data["values"] = catalog.renamed_keys(data["values"], task)  # as the record's (`catalog.renamed_record`)
    found = problems(data, {k: v for k, v in record.get("metrics", {}).items()})
    if found:
        raise PerQueryError(f"{record_path}: per_query_file {name!r}: " + "; ".join(found[:3]))
    return data
