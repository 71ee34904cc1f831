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


def triplet_hardest(text: torch.Tensor, media: torch.Tensor, positives: torch.Tensor, margin: float = 0.2) -> torch.Tensor:
    """nT2VR Eq. 2 (VSE++): for caption i and its media i, the hardest in-batch negative media x#
    (highest s(x, q) among media that are not positives of q), loss max(0, m0 + s(x#, q) - s(x+, q)).

    ``positives`` (B, B) marks media j relevant to caption i (identical facts count), so a twin of
    the true video is never used as a negative. Rows with no negative contribute 0."""
    sim = text @ media.t()
    pos = sim.diagonal()
    neg = sim.masked_fill(positives, float("-inf")).max(1).values
    valid = torch.isfinite(neg)
    loss = (margin + neg - pos).clamp_min(0)
    return torch.where(valid, loss, torch.zeros_like(loss)).mean()


def bcl(s_pos: torch.Tensor, s_neg: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """nT2VR's bidirectionally constrained loss (Eq. 5 / 6), per example:
    max(0, low + s_neg - s_pos) + max(0, -high - s_neg + s_pos). The first term pushes the soft
    negative below the positive by ``low``; the second stops pushing once the gap exceeds ``high``."""
    return (low + s_neg - s_pos).clamp_min(0) + (s_pos - s_neg - high).clamp_min(0)


def soft_triplet(s_pos: torch.Tensor, s_neg: torch.Tensor, margin: float) -> torch.Tensor:
    """nT2VR Eq. 3 (SNL): max(0, m1 + s(x+, q-) - s(x+, q)), no upper bound."""
    return (margin + s_neg - s_pos).clamp_min(0)


def mcq_cross_entropy(media: torch.Tensor, options: torch.Tensor, correct: torch.Tensor,
                      logit_scale: torch.Tensor | float) -> torch.Tensor:
    """NegBench's MCQ loss: cross-entropy over (normalised) option similarities scaled by the logit
    scale. ``media`` (B, D), ``options`` (B, K, D), ``correct`` (B,) option indices."""
    logits = logit_scale * torch.einsum("bd,bkd->bk", media, options)
    return F.cross_entropy(logits, correct)
