"""Renamed public names of `negharness.api` and its facades (each use of an old name warns, naming
the new one, and gives the same object), and the run-time door of the facades a task module imports
(`on_first_use`)."""

from __future__ import annotations

import dis
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


def _homes(module: Any) -> dict[str, tuple[str, str]]:
    """Each exported name of ``module`` -> (module it is imported from, name there): its ``from X
    import a as b`` statements whose bound name is in its ``__all__``, read from the compiled code
    that its loader gives (from source or from a .pyc alone, so an install without sources works)."""
    code = module.__spec__.loader.get_code(module.__name__)
    exported, homes = set(module.__all__), {}
    home, real = "", ""
    for ins in dis.get_instructions(code):
        if ins.opname == "IMPORT_NAME":
            home = str(ins.argval)
        elif ins.opname == "IMPORT_FROM":
            real = str(ins.argval)
        elif ins.opname == "STORE_NAME" and real:
            if ins.argval in exported:
                homes[str(ins.argval)] = (home, real)
            real = ""
    return homes


def on_first_use(facade: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` of a facade whose names live in modules that import torch (`scoring`,
    `media`): a task module imports the facade at its top, and the run's checks (names, data, weights)
    still answer before torch loads. The names are those of the facade's ``if TYPE_CHECKING:`` imports
    (`_homes`: the one list, which type checkers read as plain imports); each is imported on first
    use and kept in the facade."""
    module = sys.modules[facade]
    homes = _homes(module)
    homeless = sorted(set(module.__all__) - set(homes) - set(vars(module)))
    if homeless:  # a name listed with no `from X import name as name` of its own: say so now, not at first use
        raise ImportError(f"{facade}: {', '.join(homeless)} listed in __all__ but imported nowhere in it")

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
