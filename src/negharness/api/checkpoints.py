"""negharness.api.checkpoints: Weights: reading checkpoints (pickles only through the restricted
unpickler), fitting and hashing them, hub loads.

A facade over the host modules that define these names; plugins import them from here, never from
those modules (importing it loads what they load: torch, for most)."""

from __future__ import annotations

from negharness.contracts.model import hash_processor as hash_processor
from negharness.contracts.model import hash_state_dict as hash_state_dict
from negharness.contracts.model import hash_tokenizer as hash_tokenizer
from negharness.io.checkpoints import (
    base_note as base_note,
    fit_state_dict as fit_state_dict,
    load_state_dict as load_state_dict,
    read_checkpoint as read_checkpoint,
    save_safetensors as save_safetensors,
)
from negharness.io.hub import load_or_explain as load_or_explain

__all__ = [
    "base_note", "fit_state_dict", "hash_processor", "hash_state_dict", "hash_tokenizer", "load_or_explain", "load_state_dict",
    "read_checkpoint", "save_safetensors",
]
