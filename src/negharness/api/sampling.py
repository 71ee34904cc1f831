"""negharness.api.sampling: the public face of `negharness.contracts.sampling` (how a video becomes frames:
a value every model, task and cache key agrees on (no decoder here)).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from negharness.contracts.sampling import (
    FrameSampling as FrameSampling,
    sampling_problem as sampling_problem,
)

__all__ = [
    "FrameSampling", "sampling_problem",
]
