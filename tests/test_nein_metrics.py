"""NeIn's metrics against hand-worked values."""

import numpy as np
import pytest
from PIL import Image

from negharness.tasks.nein.metrics import (
    auc_removal,
    pixel_distances,
    removal,
    retention,
)


def test_removal_and_auc_by_hand():
    s = [0.0, 0.0, 0.5, 0.9]
    assert removal(s) == 50.0
    assert auc_removal(s) == pytest.approx(100 * (1 - 1.4 / 4))


def test_auc_removal_equals_the_area_under_the_removal_curve():
    """The authors' AUC: removal rate at threshold t (a sample counts as removed when its max
    confidence is below t), integrated over t in [0, 1]. It reduces to 100 * (1 - mean s)."""
    s = np.random.default_rng(0).random(200) * (np.random.default_rng(1).random(200) > 0.3)
    t = np.linspace(0, 1, 20001)
    curve = [(s < x).mean() for x in t]
    area = np.trapezoid(curve, t) * 100
    assert area == pytest.approx(auc_removal(s), abs=0.01)


def test_retention_ignores_empty_inputs_and_says_how_many():
    before = [{"dog", "car"}, set(), {"cup"}]
    after = [{"dog"}, {"cat"}, {"cup", "bowl"}]
    score, empty = retention(before, after)
    assert score == pytest.approx((0.5 + 1.0) / 2 * 100) and empty == 1


def test_pixel_distances_resize_output_to_truth():
    truth = Image.fromarray(np.zeros((4, 6, 3), dtype=np.uint8))
    out = Image.fromarray(np.full((8, 12, 3), 255, dtype=np.uint8))
    l1, l2 = pixel_distances(out, truth)
    assert l1 == pytest.approx(1.0) and l2 == pytest.approx(1.0)
    half = Image.fromarray(np.full((4, 6, 3), 51, dtype=np.uint8))
    l1, l2 = pixel_distances(half, truth)
    assert l1 == pytest.approx(0.2) and l2 == pytest.approx(0.04)
