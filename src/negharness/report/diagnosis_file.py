"""The result file of `negharness diagnose`: NegBench's Fig. 6 PCA picture as data, beside the records.

``<results dir>/<model dir>/diagnose.diagnosis.json`` (the model folder `run` writes that model's
records to; the ``.diagnosis.json`` suffix keeps it out of the records, as ``.perquery.json`` does)
holds the model as records name it (label, options, fingerprint), the objects, the 2-D PCA
coordinates of every caption with its template family and object, the variance each component
explains, and the summary numbers. The leaderboard page draws one scatter per file; ``--check``
validates them. Numpy/torch-free, so the leaderboard reads them without loading a model stack.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError
from negharness.io.json_files import DuplicateKeyError, loads_unique, read_bounded
from negharness.records.results import ModelConfig
from negharness.io.atomic_files import atomic_write_text

KIND = "negharness.diagnosis"
SCHEMA_VERSION = 1
SUFFIX = ".diagnosis.json"
FILE_NAME = "diagnose" + SUFFIX
SUMMARY_KEYS = ("same_object_negation", "different_objects", "negation_gap")
POINT_KEYS = ("family", "object", "caption", "x", "y")


class DiagnosisError(UserError):
    """A diagnosis file the leaderboard cannot use; the message names the file and the field."""


def diagnosis_path(results_dir: Path, model: ModelConfig) -> Path:
    return Path(results_dir) / model.dirname / FILE_NAME


def diagnosis_files(results_dir: Path) -> list[Path]:
    return sorted(Path(results_dir).glob(f"*/*{SUFFIX}"))


def build(model: dict[str, Any], objects: list[str], rows: list[tuple[str, str, str]], xy: list[tuple[float, float]],
          explained: tuple[float, float], summary: dict[str, float], created_at: str,
          versions: dict[str, Any]) -> dict[str, Any]:
    """The file's content; ``model`` as a record's ``model`` block (name, label, options, plugin,
    fingerprint, describe)."""
    return {
        "kind": KIND, "schema_version": SCHEMA_VERSION, "created_at": created_at, "model": model,
        "objects": list(objects), "summary": {k: float(summary[k]) for k in SUMMARY_KEYS} | {"n_captions": len(rows)},
        "pca": {"explained_variance_ratio": [float(explained[0]), float(explained[1])],
                "points": [{"family": f, "object": o, "caption": c, "x": round(float(x), 6), "y": round(float(y), 6)}
                           for (f, o, c), (x, y) in zip(rows, xy)]},
        "versions": versions,
    }


def write(path: Path, content: dict[str, Any]) -> Path:
    """Atomically; one point per line keeps the file readable and diffs small."""
    problems = check(content)
    if problems:
        raise DiagnosisError(f"{path}: refusing to write an invalid diagnosis: {problems[0]}")
    pca = content["pca"]
    head = {k: v for k, v in content.items() if k != "pca"}
    lines = ",\n".join(json.dumps(p, ensure_ascii=False, sort_keys=True) for p in pca["points"])
    text = (json.dumps(head, indent=2, sort_keys=True, ensure_ascii=False)[:-2]
            + ',\n  "pca": {"explained_variance_ratio": ' + json.dumps(pca["explained_variance_ratio"])
            + ', "points": [\n' + lines + "\n]}\n}\n")
    atomic_write_text(path, text)
    return Path(path)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check(data: Any) -> list[str]:
    """What makes this not a diagnosis the page can draw (empty when it is one)."""
    if not isinstance(data, dict) or data.get("kind") != KIND:
        return [f"not a diagnosis file (kind {KIND!r})"]
    if data.get("schema_version") != SCHEMA_VERSION:
        return [f"schema_version {data.get('schema_version')!r}; this negharness reads {SCHEMA_VERSION} "
                "(rerun `negharness diagnose`)"]
    model, out = data.get("model"), []
    if not isinstance(model, dict) or not isinstance(model.get("label"), str):
        out.append("model.label: missing or not a string")
    elif not str(model.get("fingerprint") or "").strip():
        out.append("model.fingerprint: missing (rerun `negharness diagnose`)")
    summary = data.get("summary")
    if not isinstance(summary, dict) or not all(_num(summary.get(k)) for k in SUMMARY_KEYS):
        out.append(f"summary: needs numbers {', '.join(SUMMARY_KEYS)}")
    pca = data.get("pca")
    if not isinstance(pca, dict):
        return out + ["pca: missing"]
    ev = pca.get("explained_variance_ratio")
    if not (isinstance(ev, list) and len(ev) == 2 and all(_num(v) and 0 <= v <= 1 for v in ev)):
        out.append("pca.explained_variance_ratio: needs two numbers in [0, 1]")
    points = pca.get("points")
    if not isinstance(points, list) or not points:
        return out + ["pca.points: needs a non-empty list"]
    for i, p in enumerate(points):
        bad = _point_problem(p)
        if bad:
            return out + [f"pca.points[{i}]: {bad}"]
    if isinstance(summary, dict) and summary.get("n_captions") != len(points):
        out.append(f"summary.n_captions {summary.get('n_captions')!r} != {len(points)} points")
    return out


def _point_problem(p: Any) -> str:
    if not isinstance(p, dict) or set(POINT_KEYS) - set(p):
        return f"needs keys {', '.join(POINT_KEYS)}"
    if not all(isinstance(p[k], str) for k in POINT_KEYS[:3]):
        return "family, object and caption must be strings"
    if not (_num(p["x"]) and _num(p["y"])):
        return "x and y must be finite numbers"
    return ""


def load(path: Path) -> dict[str, Any]:
    """A checked diagnosis, or one error naming the file and what is wrong."""
    try:  # untrusted input, as records are: bounded, a regular file inside the results folder, no key twice
        data = loads_unique(read_bounded(Path(path), Path(path).parent.parent, f"{path}: cannot read diagnosis"))
    except UserError as exc:
        raise DiagnosisError(str(exc)) from None
    except DuplicateKeyError as exc:
        raise DiagnosisError(f"{path}: {exc} (rerun `negharness diagnose`)") from None
    except json.JSONDecodeError as exc:
        raise DiagnosisError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg} (rerun `negharness diagnose`, "
                             "or move the file out of the results folder)") from None
    problems = check(data)
    if problems:
        raise DiagnosisError(f"{path}: invalid diagnosis: {'; '.join(problems[:3])}")
    checked: dict[str, Any] = data  # `check` accepts only a JSON object
    return checked


def load_all(results_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every diagnosis under results_dir, sorted by model label (then path)."""
    found = [(p, load(p)) for p in diagnosis_files(results_dir)]
    return sorted(found, key=lambda item: (item[1]["model"]["label"], str(item[0])))
