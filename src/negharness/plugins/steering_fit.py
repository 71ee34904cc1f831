"""Fitting the steering directions of `negharness.plugins.steering`: the pairs file, the per-layer
logistic regression, and the content-keyed cache of its result.

Transcribed from Sammani et al., "When Negation Is a Geometry Problem in Vision-Language Models"
(arXiv 2603.20554), code github.com/fawazsammani/negation-steering at 10011d97, ``steer.py``:

- pairs: ``data/train_data.json``, one JSON object {positive caption: negated caption} (steer.py:327-329);
- per layer, the end-of-text activation of every positive and negated caption (steer.py:125-166);
- the last 100 pairs held out, only to report accuracy (steer.py:59-61, 89-91);
- ``LogisticRegression(solver='lbfgs', max_iter=1000, fit_intercept=False)``, sklearn's default L2
  penalty with C = 1.0, on the raw activations (no scaling), labels positive = 0, negated = 1
  (steer.py:67-86);
- the direction: its coefficients over their norm + 1e-12 (steer.py:117), so it points to "negated".

sklearn is not a dependency: the same objective, ``sum_i log(1 + exp(-s_i w.x_i)) + ||w||^2 / (2 C)``
(s = -1 positive, +1 negated), is minimised here in float64 by torch's L-BFGS with a strong-Wolfe line
search, to a tighter tolerance than sklearn's ``max_iter=1000`` stop (the objective is strictly convex: one
minimiser; tests/test_steering.py compares with sklearn where it is installed).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from negharness.api import MissingDataError, UserError
from negharness.api.files import atomic_write_bytes, data_root, hash_json
from negharness.plugins import options as declared

# the authors' pairs as `negharness fetch` puts them under the data root (negharness.fetch.sources' row)
AUTHORS_PAIRS = "negation_steering/train_data.json"
FIT_C = 1.0  # sklearn's default inverse L2 strength (steer.py:80-84 sets none)
HOLDOUT = declared.HOLDOUT  # pairs at the end of the file kept out of the fit (steer.py:60)
FIT_VERSION = 1  # bump when the fit below changes what it returns: cached directions are then refitted


@dataclass(frozen=True)
class Pairs:
    """A pairs file as read: its captions in file order and the SHA-256 of its bytes."""

    path: Path
    positives: list[str]
    negated: list[str]
    sha256: str


def authors_pairs_path() -> Path:
    """Where the authors' pairs are read when no ``-M pairs`` is given: the data root's copy."""
    return data_root()[0] / AUTHORS_PAIRS


def read_pairs(path: Path, default: bool = False) -> Pairs:
    """The pairs of a JSON file {positive: negated, ...}; a missing file, bad JSON, a non-string or empty
    caption, a pair whose two captions are equal or a repeated positive is refused, naming file and entry."""
    if not path.is_file():
        if default:
            raise MissingDataError(f"model steer: the authors' pairs file is not at {path}: `negharness fetch "
                                   f"{AUTHORS_PAIRS}` downloads it (475 KB, SHA-256 pinned), or pass -M pairs=FILE")
        raise UserError(f"-M pairs={path}: no such file")
    raw = path.read_bytes()
    try:
        entries = json.loads(raw.decode("utf-8"), object_pairs_hook=list)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"-M pairs={path}: not a JSON file ({exc})") from None
    if not isinstance(entries, list) or not all(isinstance(e, tuple) for e in entries):
        raise UserError(f"-M pairs={path}: expected one JSON object {{\"positive caption\": \"negated caption\", ...}}")
    seen: set[str] = set()
    for k, (pos, neg) in enumerate(entries, 1):
        where = f"-M pairs={path}: entry {k} ({str(pos)[:60]!r})"
        if not isinstance(neg, str) or not pos.strip() or not neg.strip():
            raise UserError(f"{where}: both captions must be non-empty strings")
        if pos == neg:
            raise UserError(f"{where}: the negated caption equals the positive one")
        if pos in seen:
            raise UserError(f"{where}: this positive caption is already an earlier entry's")
        seen.add(pos)
    return Pairs(path, [p for p, _ in entries], [n for _, n in entries], hashlib.sha256(raw).hexdigest())


def fit_settings(holdout: int) -> dict[str, Any]:
    """What the fitted directions depend on besides the base model and the pairs (cache key, describe())."""
    return {"C": FIT_C, "holdout": holdout, "intercept": False, "version": FIT_VERSION}


def fitted_rows(n: int, holdout: int) -> int:
    """How many pairs the fit uses: all but the last ``holdout``; at least one, else refused."""
    if n - holdout < 1:
        raise UserError(f"-M holdout={holdout}: the pairs file has {n} pairs, none left to fit on (lower -M holdout)")
    return n - holdout


def logistic_weights(x: torch.Tensor, y: torch.Tensor, c: float = FIT_C) -> torch.Tensor:
    """(D,) weights of an L2-penalised logistic regression without intercept, labels ``y`` in {0, 1}:
    sklearn's objective (module docstring) divided by the row count, which keeps its minimiser and
    scales the gradient tolerance with the data. Runs with gradients on whatever the caller's mode (the
    first text a run embeds, under ``torch.inference_mode``, is what asks for the fit)."""
    with torch.inference_mode(False), torch.enable_grad():
        x64, sign = x.double().clone(), y.double().clone() * 2 - 1  # normal tensors, not inference ones
        w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([w], lr=1.0, max_iter=5000, tolerance_grad=1e-12, tolerance_change=1e-15,
                                history_size=20, line_search_fn="strong_wolfe")
        ridge = 0.5 / (c * len(x64))

        def closure() -> torch.Tensor:
            opt.zero_grad()
            loss = torch.nn.functional.softplus(-sign * (x64 @ w)).mean() + ridge * (w @ w)
            loss.backward()
            return loss

        opt.step(closure)
    return w.detach()


def unit_direction(w: torch.Tensor) -> torch.Tensor:
    """The coefficients as a unit vector, as the authors normalise them (steer.py:117)."""
    unit: torch.Tensor = w / (torch.linalg.norm(w) + 1e-12)
    return unit


def fit_directions(positive: list[torch.Tensor], negated: list[torch.Tensor], holdout: int
                   ) -> tuple[torch.Tensor, list[float | None]]:
    """(layers, D) unit directions, one per layer, from each layer's (N, D) end-of-text activations of the
    positive and negated captions (pair i in row i of both), fitted on all but the last ``holdout`` pairs;
    and each layer's accuracy on those held-out pairs (None when none are held out)."""
    cut = fitted_rows(len(positive[0]), holdout)
    labels = torch.cat([torch.zeros(cut), torch.ones(cut)])
    directions: list[torch.Tensor] = []
    accuracy: list[float | None] = []
    for pos, neg in zip(positive, negated):
        w = logistic_weights(torch.cat([pos[:cut], neg[:cut]]), labels)
        directions.append(unit_direction(w).float())
        if holdout:
            test = torch.cat([pos[cut:], neg[cut:]]).double()
            truth = torch.cat([torch.zeros(holdout), torch.ones(holdout)]).bool()
            accuracy.append(float(((test @ w > 0) == truth).double().mean()))
        else:
            accuracy.append(None)
    return torch.stack(directions), accuracy


def cache_path(root: Path, key: str) -> Path:
    return root / "steering" / f"{key}.safetensors"


def load_directions(path: Path, key: str, shape: tuple[int, int]) -> tuple[torch.Tensor, list[float | None]] | None:
    """Cached directions of ``key``, or None when absent, unreadable, of another key or another shape
    (then they are fitted again and the file replaced)."""
    if not path.is_file():
        return None
    from safetensors import SafetensorError
    from safetensors.torch import load

    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
        tensors = load(path.read_bytes())
        directions = tensors["directions"]
        accuracy = json.loads(meta["held_out_accuracy"])
    except (SafetensorError, OSError, KeyError, ValueError):
        return None
    if meta.get("key") != key or tuple(directions.shape) != shape:
        return None
    return directions, accuracy


def save_directions(path: Path, key: str, directions: torch.Tensor, accuracy: list[float | None],
                    described: dict[str, Any]) -> None:
    """Directions and what they were fitted from, as safetensors (atomic; no pickle)."""
    from safetensors.torch import save

    meta = {"key": key, "held_out_accuracy": json.dumps(accuracy), "fitted_from": json.dumps(described, sort_keys=True)}
    atomic_write_bytes(path, save({"directions": directions.contiguous().cpu()}, metadata=meta))


def cache_key(base_fingerprint: str, pairs_sha256: str, holdout: int) -> str:
    """One key per (base model, pairs content, fit settings)."""
    return hash_json({"base": base_fingerprint, "pairs": pairs_sha256, "fit": fit_settings(holdout)})
