"""negharness.api.checkpoints: Weights: reading checkpoints (pickles only through the restricted unpickler), fitting and hashing them, hub loads.

A facade over the host modules that define these names (resolved on first use, so importing it
loads no torch); plugins import them from here, never from those modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from negharness.api.exports import resolver

_EXPORTS: dict[str, str] = {
    "base_note": "negharness.io.checkpoints",
    "fit_state_dict": "negharness.io.checkpoints",
    "load_state_dict": "negharness.io.checkpoints",
    "read_checkpoint": "negharness.io.checkpoints",
    "save_safetensors": "negharness.io.checkpoints",
    "hash_state_dict": "negharness.api.model",
    "load_or_explain": "negharness.io.hub",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = resolver(__name__, _EXPORTS)

if TYPE_CHECKING:  # what type checkers and IDEs read; the same names as _EXPORTS
    from negharness.api.model import hash_state_dict
    from negharness.io.checkpoints import (
        base_note,
        fit_state_dict,
        load_state_dict,
        read_checkpoint,
        save_safetensors,
    )
    from negharness.io.hub import load_or_explain
