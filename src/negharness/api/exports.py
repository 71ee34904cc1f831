"""Renamed public names of `negharness.api` and its facades (each use of an old name warns, naming
the new one, and gives the same object), and the run-time door of the facades a task module imports
(`on_first_use`)."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path
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


def on_first_use(facade: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` of a facade whose names live in modules that import torch (`scoring`,
    `media`): a task module imports the facade at its top, and the run's checks (names, data, weights)
    still answer before torch loads. The names are those of the facade's ``if TYPE_CHECKING:`` imports,
    read from its source: the one list, which type checkers read as plain imports; each is imported on
    first use and kept in the facade."""
    module = sys.modules[facade]
    homes: dict[str, tuple[str, str]] = {}
    for stmt in ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8")).body:
        if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Name) and stmt.test.id == "TYPE_CHECKING":
            for node in stmt.body:
                if isinstance(node, ast.ImportFrom) and node.module:
                    homes.update({a.asname or a.name: (node.module, a.name) for a in node.names})

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
