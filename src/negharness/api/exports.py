"""Renamed public names of `negharness.api` and its facades (each use of an old name warns, naming
the new one, and gives the same object), and the run-time door of the facades a task module imports
(`on_first_use`)."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


__all__ = ["RENAMED", "on_first_use", "renamed"]

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


def on_first_use(facade: str, homes: dict[str, tuple[str, str]]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of a facade whose names live in modules that import torch (`scoring`,
    `media`): a task module imports the facade at its top, and the run's checks (names, data, weights)
    still answer before torch loads. ``homes``: the facade's literal table, name -> (module, name there),
    equal to its ``if TYPE_CHECKING:`` imports (which type checkers read; a test keeps them equal); each
    name is imported on first use and kept in the facade."""
    module = sys.modules[facade]
    homeless = sorted(set(module.__all__) - set(homes) - set(vars(module)))
    if homeless:  # a name listed with no home of its own: say so now, not at first use
        raise ImportError(f"{facade}: {', '.join(homeless)} listed in __all__ but has no home in its table")

    def attribute(name: str) -> Any:
        if name in RENAMED:
            return renamed(facade, name)
        if name not in homes:
            raise AttributeError(f"module {facade!r} has no attribute {name!r}")
        home, real = homes[name]
        value = getattr(importlib.import_module(home), real)
        setattr(module, name, value)
        return value

    return attribute
