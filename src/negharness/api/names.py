"""negharness.api.names: the public face of `negharness.contracts.names` (the one rule for names a user
types and a board shows (models, tasks, every registered kind)).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from negharness.contracts.names import (
    NAME as NAME,
    RULE as RULE,
    lookalikes as lookalikes,
    name_problem as name_problem,
)

__all__ = [
    "NAME", "RULE", "lookalikes", "name_problem",
]
