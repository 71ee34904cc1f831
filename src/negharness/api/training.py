"""negharness.api.training: the public face of `negharness.contracts.training` (what a trainer plugin
receives, and what a training-set plugin gives).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from negharness.contracts.training import (
    Mcq as Mcq,
    TrainOptions as TrainOptions,
    TrainSetOptions as TrainSetOptions,
    TrainStream as TrainStream,
    TrainingSet as TrainingSet,
    named_trainset as named_trainset,
)

__all__ = [
    "Mcq", "TrainOptions", "TrainSetOptions", "TrainStream", "TrainingSet", "named_trainset",
]
