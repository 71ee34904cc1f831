"""negharness.api.published: The papers' numbers a task ships beside its own, tied to the paper's collection by content.

A facade over the host modules that define these names (resolved on first use, so importing it
loads no torch); plugins import them from here, never from those modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from negharness.api.exports import resolver

_EXPORTS: dict[str, str] = {
    "published_notes": "negharness.records.published",
    "collection_digest": "negharness.records.published",
    "tables_beside": "negharness.records.published",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = resolver(__name__, _EXPORTS)

if TYPE_CHECKING:  # what type checkers and IDEs read; the same names as _EXPORTS
    from negharness.records.published import collection_digest, published_notes, tables_beside
