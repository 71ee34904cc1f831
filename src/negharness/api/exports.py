"""Renamed public names of `negharness.api` and its facades: each use of an old name warns, naming
the new one, and gives the same object."""

from __future__ import annotations

import importlib
from typing import Any


__all__ = ["RENAMED", "renamed"]

# public names that were renamed: old name -> (facade, new name); each use warns, naming the new one
RENAMED: dict[str, tuple[str, str]] = {
    "RETRIEVAL_METRICS": ("negharness.api.scoring", "TEXT_TO_MEDIA_METRICS"),  # 0.1: two constants had this name
}


def renamed(facade: str, name: str) -> Any:
    """The value of a renamed public name, with a DeprecationWarning naming the new spelling."""
    import warnings

    home, new = RENAMED[name]
    warnings.warn(f"{facade}.{name} was renamed {home}.{new}: import that (the old name goes in a later release)",
                  DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(home), new)
