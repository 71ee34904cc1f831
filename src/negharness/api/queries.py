"""negharness.api.queries: the public face of `negharness.contracts.queries` (the query-builder contract: a
caption file in, negated / composed query files out).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from negharness.contracts.queries import (
    QueryBuild as QueryBuild,
    QueryBuildOptions as QueryBuildOptions,
)

__all__ = [
    "QueryBuild", "QueryBuildOptions",
]
