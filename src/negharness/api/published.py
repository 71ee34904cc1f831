"""negharness.api.published: The papers' numbers a task ships beside its own, tied to the paper's
collection by content.

A facade over the host modules that define these names; plugins import them from here, never from
those modules (importing it loads what they load: torch, for most)."""

from __future__ import annotations

from negharness.records.published import (
    collection_digest as collection_digest,
    published_notes as published_notes,
    tables_beside as tables_beside,
)

__all__ = [
    "collection_digest", "published_notes", "tables_beside",
]
