"""negharness.api.model: the public face of `negharness.contracts.model` (what a retrieval model plugin
gives the host: normalised embeddings, preprocessing, a fingerprint).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from negharness.contracts.model import (
    ChoiceScorer as ChoiceScorer,
    EmbeddingModel as EmbeddingModel,
    ModelOptions as ModelOptions,
    ModelPlugin as ModelPlugin,
    array_to_tensor as array_to_tensor,
    as_encoder as as_encoder,
    hash_state_dict as hash_state_dict,
    held_modules as held_modules,
    jpeg_draft as jpeg_draft,
)

__all__ = [
    "ChoiceScorer", "EmbeddingModel", "ModelOptions", "ModelPlugin", "array_to_tensor", "as_encoder",
    "hash_state_dict", "held_modules", "jpeg_draft",
]
