"""negharness.api.context: the public face of `negharness.contracts.context` (the run context protocol:
what every protocol's context (embedding retrieval/MCQ, editing)).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from negharness.contracts.context import (
    Counters as Counters,
    EvalContext as EvalContext,
    RunContext as RunContext,
)

__all__ = [
    "Counters", "EvalContext", "RunContext",
]
