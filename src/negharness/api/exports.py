"""Lazy re-exports (PEP 562) for `negharness.api` and its facade sub-modules.

A facade names, for each public name, the host module that defines it; the name resolves on first
use, so importing a facade (or a plugin's registration module that imports one) loads neither
torch nor the module behind a name until that name is used.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Mapping


def resolver(facade: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the facade module named ``facade`` over ``exports``
    (public name -> defining module; the module itself where the name is a module)."""
    def getattr_(name: str) -> Any:
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
