"""negharness.api.plugin_source: the public face of `negharness.contracts.plugin_source` (how a plugin
reaches other plugins: the `PluginSource` protocol (the run's lookup, or).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from negharness.contracts.plugin_source import (
    PluginSource as PluginSource,
    require_plugins as require_plugins,
)

__all__ = [
    "PluginSource", "require_plugins",
]
