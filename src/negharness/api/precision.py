"""negharness.api.precision: the public face of `negharness.contracts.precision` (precision names and the
one autocast rule, for encoders, scorers, trainers and editors alike).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from negharness.contracts.precision import (
    PRECISION_NAMES as PRECISION_NAMES,
    autocast as autocast,
    cpu_autocast_warning as cpu_autocast_warning,
    resolve_precision as resolve_precision,
)

__all__ = [
    "PRECISIONS", "PRECISION_NAMES", "autocast", "cpu_autocast_warning", "resolve_precision",
]

if TYPE_CHECKING:
    from negharness.contracts.precision import PRECISIONS as PRECISIONS
else:
    def __getattr__(name: str) -> Any:
        """``PRECISIONS`` imports torch: built when first asked, as in `negharness.contracts.precision`."""
        if name == "PRECISIONS":
            from negharness.contracts import precision  # lazy: the table's dtypes import torch

            return precision.PRECISIONS
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
