"""Training losses against hand-worked values on tiny tensors."""

import pytest
import torch
import torch.nn.functional as F

from negharness.plugins.losses import (
    bcl,
    mcq_cross_entropy,
    multi_positive_infonce,
    soft_triplet,
    triplet_hardest,
)


def test_triplet_uses_the_hardest_negative_and_skips_twins():
    # unit vectors at chosen cosines: text i, media j; s = t @ m.T
    text = torch.eye(3)
    media = torch.tensor([[0.9, 0.5, 0.0], [0.3, 0.8, 0.0], [0.0, 0.1, 0.7]])
    sim = text @ media.t()  # row 0: pos 0.9, negatives 0.3, 0.0 ; row 1: pos 0.8, negs 0.5, 0.1 ; row 2: pos 0.7, negs 0.0, 0.0
    eye = torch.eye(3, dtype=torch.bool)
    got = triplet_hardest(text, media, eye, margin=0.2)
    want = (max(0, 0.2 + 0.3 - 0.9) + max(0, 0.2 + 0.5 - 0.8) + max(0, 0.2 + 0.0 - 0.7)) / 3
    assert got.item() == pytest.approx(want)
    assert sim[1, 0] == pytest.approx(0.5)
    twins = eye.clone()
    twins[1, 0] = True  # media 0 is also relevant to caption 1: its hardest negative becomes media 2 (0.1)
    got2 = triplet_hardest(text, media, twins, margin=0.2)
    want2 = (max(0, 0.2 + 0.3 - 0.9) + max(0, 0.2 + 0.1 - 0.8) + max(0, 0.2 - 0.7)) / 3
    assert got2.item() == pytest.approx(want2)


def test_bcl_pushes_below_the_lower_margin_and_stops_above_the_upper():
    s_pos = torch.tensor([0.8, 0.8, 0.8, 0.8])
    s_neg = torch.tensor([0.75, 0.65, 0.30, 0.05])  # gaps 0.05, 0.15, 0.5, 0.75
    got = bcl(s_pos, s_neg, low=0.1, high=0.6)
    assert got.tolist() == pytest.approx([0.05, 0.0, 0.0, 0.15])  # too close; fine; fine; pushed too far
    g = torch.tensor([0.5], requires_grad=True)
    bcl(torch.tensor([0.8]), g, 0.1, 0.6).sum().backward()
    assert g.grad.item() == 0.0  # gap 0.3 inside [0.1, 0.6]: no push either way
    assert soft_triplet(torch.tensor([0.8]), torch.tensor([0.05]), 0.1).item() == 0.0  # SNL has no upper bound
    assert soft_triplet(torch.tensor([0.8]), torch.tensor([0.75]), 0.1).item() == pytest.approx(0.05)


def test_mcq_cross_entropy_and_multi_positive_infonce_by_hand():
    media = torch.tensor([[1.0, 0.0]])
    options = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    got = mcq_cross_entropy(media, options, torch.tensor([0]), 10.0)
    assert got.item() == pytest.approx(-F.log_softmax(torch.tensor([10.0, 0.0]), 0)[0].item())
    t = torch.eye(2)
    same = multi_positive_infonce(t, t, torch.tensor([0, 0]), 1.0)  # both are positives of each other
    assert same.item() == pytest.approx(-(0.5 * F.log_softmax(torch.tensor([1.0, 0.0]), 0)).sum().item())
