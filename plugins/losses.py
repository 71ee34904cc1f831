"""Training losses, as pure functions over normalised embeddings."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def multi_positive_infonce(text: torch.Tensor, media: torch.Tensor, groups: torch.Tensor,
                           logit_scale: torch.Tensor | float) -> torch.Tensor:
    """Symmetric CLIP loss where every pair in the same ``groups`` id counts as a positive.

    Items whose facts are identical are indistinguishable, so treating them as negatives (plain
    InfoNCE's one-hot target) would punish the model for being right. The target of each row is
    uniform over its positives.
    """
    logits = logit_scale * text @ media.t()
    positives = (groups[:, None] == groups[None, :]).float()
    target = positives / positives.sum(1, keepdim=True)
    t2m = -(target * F.log_softmax(logits, dim=1)).sum(1).mean()
    m2t = -(target * F.log_softmax(logits.t(), dim=1)).sum(1).mean()
    return (t2m + m2t) / 2
