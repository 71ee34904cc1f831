"""negharness.api.devices: Where and how a plugin runs: device, precision, distributed ranks, process priority.

A facade over the host modules that define these names (resolved on first use, so importing it
loads no torch); plugins import them from here, never from those modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from negharness.api.exports import resolver

_EXPORTS: dict[str, str] = {
    "resolve_device": "negharness.engine.runner",
    "lower_priority": "negharness.engine.runner",
    "distributed": "negharness.engine.distributed",
    "Dist": "negharness.engine.ranks",
    "gather_batch": "negharness.engine.distributed",
    "PRECISIONS": "negharness.api.precision",
    "PRECISION_NAMES": "negharness.api.precision",
    "resolve_precision": "negharness.api.precision",
    "autocast": "negharness.api.precision",
    "cpu_autocast_warning": "negharness.api.precision",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = resolver(__name__, _EXPORTS)

if TYPE_CHECKING:  # what type checkers and IDEs read; the same names as _EXPORTS
    from negharness.api.precision import PRECISION_NAMES, PRECISIONS, autocast, cpu_autocast_warning, resolve_precision
    from negharness.engine import distributed
    from negharness.engine.distributed import gather_batch
    from negharness.engine.ranks import Dist
    from negharness.engine.runner import lower_priority, resolve_device
