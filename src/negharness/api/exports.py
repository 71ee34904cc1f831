"""Lazy re-exports (PEP 562) for `negharness.api` and its facade sub-modules.

A facade names, for each public name, the host module that defines it; the name resolves on first
use, so importing a facade (or a plugin's registration module that imports one) loads neither
torch nor the module behind a name until that name is used.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Mapping


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


def resolver(facade: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the facade module named ``facade`` over ``exports``
    (public name -> defining module; the module itself where the name is a module)."""
    def getattr_(name: str) -> Any:
        if name in RENAMED and name not in exports:
            return renamed(facade, name)
        module_name = exports.get(name)
        if module_name is None:
            raise AttributeError(f"module {facade!r} has no attribute {name!r}")
        module = importlib.import_module(module_name)
        value = module if module.__name__.rsplit(".", 1)[-1] == name else getattr(module, name)
        setattr(sys.modules[facade], name, value)
        return value

    def dir_() -> list[str]:
        return sorted(exports)

    return getattr_, dir_
