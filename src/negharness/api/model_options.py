"""negharness.api.model_options: the public face of `negharness.contracts.model_options` (`ModelOptions`,
the options every model plugin understands, in a module of its own without torch:).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from negharness.contracts.model_options import ModelOptions as ModelOptions

__all__ = [
    "ModelOptions",
]
