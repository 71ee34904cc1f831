"""NeIn's scores (Bui et al., section 4): removal, AUC-removal, retention, and image distances.

Denominators are the samples actually evaluated (the authors hard-coded 24,182).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from PIL import Image


def removal(target_scores: Sequence[float]) -> float:
    """Percent of samples where the negated object is no longer detected (its max confidence is 0)."""
    s = np.asarray(target_scores, dtype=np.float64)
    return float((s == 0).mean() * 100)


def auc_removal(target_scores: Sequence[float]) -> float:
    """100 * (1 - mean s), s = 0 when removed, else the detector's max confidence. The authors' area
    under the removal curve over confidence thresholds in [0, 1] reduces to this (tested)."""
    s = np.asarray(target_scores, dtype=np.float64)
    return float(100.0 * (1.0 - s.mean()))


def retention(kept_in_input: Sequence[set[str]], kept_in_output: Sequence[set[str]]) -> tuple[float, int]:
    """Mean over samples of |objects still detected in the output| / |caption objects detected in the
    input|, over samples whose input set is non-empty; also the number of samples left out as empty."""
    ratios, empty = [], 0
    for before, after in zip(kept_in_input, kept_in_output):
        if not before:
            empty += 1
            continue
        ratios.append(len(before & after) / len(before))
    return (float(np.mean(ratios) * 100) if ratios else float("nan")), empty


def pixel_distances(output: Image.Image, truth: Image.Image) -> tuple[float, float]:
    """L1 and L2 (mean absolute and mean squared error) in RGB scaled to [0, 1], the output resized
    to the ground truth's size (bicubic), as MagicBrush computes them."""
    from PIL import Image

    truth = truth.convert("RGB")
    out = output.convert("RGB")
    if out.size != truth.size:
        out = out.resize(truth.size, Image.Resampling.BICUBIC)
    a = np.asarray(out, dtype=np.float64) / 255.0
    b = np.asarray(truth, dtype=np.float64) / 255.0
    return float(np.abs(a - b).mean()), float(((a - b) ** 2).mean())
