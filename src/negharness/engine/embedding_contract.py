"""The model contract, checked where embeddings enter the host: each batch a model computes is a 2-D
table with the rows asked for, one dimension for all of a model's tables, finite and unit-norm, before
it reaches the cache (`negharness.engine.runner.CachedEvalContext` calls it; a cached row passed it
when it was computed). A violation is a `UserError` naming the model, its plugin and its weights.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from negharness.contracts.errors import UserError


@dataclass(frozen=True)
class ModelOrigin:
    """Which model a contract violation blames: its registered name, plugin and weights."""

    name: str
    plugin: str | None = None
    checkpoint: str | None = None

    def label(self) -> str:
        plugin = repr(self.plugin) if self.plugin else "not known"
        weights = self.checkpoint or "none given (the plugin's default weights)"
        return f"model {self.name!r} (plugin {plugin}, checkpoint {weights})"


def norm_tolerance(dtype: torch.dtype) -> float:
    """How far from 1 a row's L2 norm may be in the dtype the model returned: 1e-3 in fp32, a few
    units of the last place in bf16 (0.031) and fp16 (0.0039), whose rounding alone moves a norm that much."""
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
    return max(1e-3, 4 * eps)


_NORMALISED: set[str] = set()  # models already warned about in this process: the warning is said once


class EmbeddingContract:
    """The model contract, checked where embeddings enter the host (each batch the model computes,
    before it is cached; a cached row passed it when it was computed): a 2-D table with the rows asked
    for, one dimension for every batch, text and media alike (and the cache's), finite values, and
    unit L2 norm. Rows that are not unit-norm (a plugin returning raw features, e.g. Hugging Face's
    ``get_image_features``) are normalised here, with one warning naming the model, so scores are
    cosines as every task assumes; anything else is a `UserError` naming the model, its plugin and
    checkpoint, raised before the batch reaches the cache."""

    def __init__(self, origin: ModelOrigin) -> None:
        self.origin = origin
        self.dim: int | None = None

    def refuse(self, problem: str) -> UserError:
        return UserError(f"{self.origin.label()} broke the embedding contract: {problem}; no record is written")

    def expect_dim(self, dim: int, where: str) -> None:
        """Every table of one model shares one dimension: the first seen (computed or cached) sets it."""
        if self.dim is None:
            self.dim = dim
        elif dim != self.dim:
            raise self.refuse(f"{where} have dimension {dim}, but its other embeddings have {self.dim}")

    def checked(self, raw: Any, ids: Sequence[str], what: str) -> torch.Tensor:
        """One batch as the host keeps it, (len(ids), D) float32 on the CPU; ``ids`` name its rows."""
        if not isinstance(raw, torch.Tensor):
            raise self.refuse(f"encoding {len(ids)} {what}(s) returned {type(raw).__name__}, not a tensor")
        tolerance = norm_tolerance(raw.dtype)
        out = raw if raw.dtype == torch.float32 and raw.device.type == "cpu" else raw.float().cpu()
        if out.ndim != 2 or out.shape[0] != len(ids):
            raise self.refuse(f"encoding {len(ids)} {what}(s) returned shape {tuple(out.shape)}, not "
                              f"({len(ids)}, D)")
        self.expect_dim(out.shape[1], f"its {what} embeddings")
        norms = torch.linalg.vector_norm(out, dim=1)  # NaN or inf wherever a row holds one: one pass over the batch
        # the per-row tests in numpy (float32 as torch's): each torch call lets go of the GIL and waits to take
        # it back, up to a switch interval (5 ms) while a tokenizer or reader thread runs Python
        row_norms = (norms.detach() if norms.requires_grad else norms).numpy()
        finite = np.isfinite(row_norms)
        if not finite.all():
            bad = torch.from_numpy(~finite)
            raise self.refuse(f"non-finite embeddings (NaN or infinity) for {int(bad.sum())} {what}(s), e.g. "
                              + ", ".join(_shown(ids[i]) for i in bad.nonzero().flatten()[:3].tolist())
                              if not torch.isfinite(out[bad]).all() else f"{what} embeddings too large to normalise")
        off = np.abs(row_norms - 1) > tolerance
        return self._normalised(out, norms, torch.from_numpy(off), ids, what) if off.any() else out

    def _normalised(self, out: torch.Tensor, norms: torch.Tensor, off: torch.Tensor, ids: Sequence[str],
                    what: str) -> torch.Tensor:
        zero = norms <= 1e-12
        if zero.any():
            raise self.refuse(f"zero embeddings (no direction to score) for {int(zero.sum())} {what}(s), e.g. "
                              + ", ".join(_shown(ids[i]) for i in zero.nonzero().flatten()[:3].tolist()))
        fixed = out / norms.unsqueeze(1)
        label = self.origin.label()
        if label not in _NORMALISED:
            _NORMALISED.add(label)
            warnings.warn(f"{label} returns {what} embeddings that are not L2-normalised (norm "
                          f"{float(norms[off][0]):.4g}); the host normalises them, so every score is a cosine",
                          UserWarning, stacklevel=4)
        return fixed


def _shown(item: str) -> str:
    return repr(item if len(item) <= 60 else item[:57] + "...")
