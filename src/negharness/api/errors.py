"""negharness.api.errors: the public face of `negharness.contracts.errors` (errors the CLI turns into one
clear line and a non-zero exit, without a traceback).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from negharness.contracts.errors import (
    DuplicateNameError as DuplicateNameError,
    MediaError as MediaError,
    MissingDataError as MissingDataError,
    PluginLoadError as PluginLoadError,
    UnknownNameError as UnknownNameError,
    UserError as UserError,
)

__all__ = [
    "DuplicateNameError", "MediaError", "MissingDataError",
    "PluginLoadError", "UnknownNameError", "UserError",
]
