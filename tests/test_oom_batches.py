"""CUDA out-of-memory while encoding: the batch is halved and retried, down to one item, and the
numbers are those of the run that had memory enough; the record says which batch size fitted.

No GPU here: a fake model raises `torch.cuda.OutOfMemoryError` (what PyTorch raises when an
allocation fails on a CUDA device) whenever it is handed more items than it "fits".
"""

from __future__ import annotations

from typing import Any, Sequence

import pytest
import torch

from negharness.api import ModelOptions, UserError
from negharness.engine.evaluate import RunRequest, evaluate_request
from negharness.testing import KeywordModel, host_with_models


class TightModel(KeywordModel):
    """`KeywordModel` on a device that holds only ``fits`` items at once; it counts its refusals."""

    def __init__(self, fits: int) -> None:
        super().__init__()
        self.fits = fits
        self.refused: list[int] = []

    def _room(self, n: int) -> None:
        if n > self.fits:
            self.refused.append(n)
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {n} items (fake)")

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        self._room(len(texts))
        return super().encode_text(texts)

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        self._room(pixels.shape[0])
        return super().encode_image(pixels)


def _run(tmp_path, name: str, fits: int) -> tuple[dict[str, Any], TightModel]:
    made: list[TightModel] = []

    def factory(options: ModelOptions) -> TightModel:
        made.append(TightModel(fits))
        return made[-1]

    req = RunRequest(model="tight", tasks=["shapes_t2i_original"], limit=40, batch_size=16, use_cache=False,
                     output_dir=str(tmp_path / name), device="cpu")
    outcome = evaluate_request(host_with_models({"tight": factory}), req)[0]
    return outcome.record, made[0]


def test_out_of_memory_halves_the_batch_and_the_numbers_stay(tmp_path):
    roomy, roomy_model = _run(tmp_path, "roomy", fits=1000)
    with pytest.warns(UserWarning, match="CUDA out of memory encoding 16 texts at once: retrying in batches of 8"):
        tight, tight_model = _run(tmp_path, "tight", fits=5)
    assert roomy_model.refused == [] and "batch_size_fitted" not in roomy["counts"]
    assert tight["metrics"] == roomy["metrics"]
    assert tight["counts"]["batch_size_fitted"] == {"text": 4, "image": 4}  # 16 -> 8 -> 4 fits under 5
    assert tight["config"]["batch_size"] == 16  # what was asked, beside what fitted
    assert tight_model.encoded == roomy_model.encoded  # each item encoded once, none twice
    assert tight_model.refused[:2] == [16, 8]  # halved once per failure; later batches start at the size that fitted
    assert max(tight_model.refused[2:], default=0) <= 16 and tight_model.refused.count(16) == 2  # texts, then images


def test_out_of_memory_on_one_item_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="CUDA out of memory encoding a single (image|text)"), pytest.warns(UserWarning):
        _run(tmp_path, "none", fits=0)
