"""How a plugin reaches other plugins: the `PluginSource` protocol (the run's lookup, or
`negharness.api.installed_plugins()` outside a run), in a module of its own so that the model and
training contracts need not import the run context that names them."""

from __future__ import annotations

from typing import Any, Protocol

from negharness.contracts.errors import UserError


class PluginSource(Protocol):
    """Plugins by kind and name: the run's `negharness.discovery.lookup.PluginLookup`."""

    def plugin(self, kind: str, name: str, options: Any = None) -> Any: ...

    def create(self, kind: str, name: str, options: Any) -> Any: ...


def require_plugins(plugins: PluginSource | None, who: str) -> PluginSource:
    """The lookup a wrapper needs; outside a run the caller passes one explicitly (no hidden global host)."""
    if plugins is None:
        raise UserError(f"{who} needs the run's plugins: called outside `negharness run`, pass "
                        "plugins=negharness.api.installed_plugins()")
    return plugins
