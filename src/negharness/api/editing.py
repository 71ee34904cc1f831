"""negharness.api.editing: the public face of `negharness.contracts.editing` (what editing plugins give the
host: an editor (image + instruction -> image) and a detector).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from negharness.contracts.editing import (
    Detection as Detection,
    Detector as Detector,
    Editor as Editor,
)

__all__ = [
    "Detection", "Detector", "Editor",
]
