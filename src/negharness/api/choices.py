"""negharness.api.choices: the public face of `negharness.contracts.choices` (the choice protocol's data:
one medium, one true caption and one or more false ones per row).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from negharness.contracts.choices import (
    ChoiceSet as ChoiceSet,
    pad_scores as pad_scores,
)

__all__ = [
    "ChoiceSet", "pad_scores",
]
