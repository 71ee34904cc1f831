"""negharness.api.devices: Where and how a plugin runs: device, precision, distributed ranks, process
priority.

A facade over the host modules that define these names; plugins import them from here, never from
those modules (importing it loads what they load: torch, for most)."""

from __future__ import annotations

from negharness.contracts.precision import (
    PRECISIONS as PRECISIONS,
    PRECISION_NAMES as PRECISION_NAMES,
    autocast as autocast,
    cpu_autocast_warning as cpu_autocast_warning,
    resolve_precision as resolve_precision,
)
from negharness.engine import distributed as distributed
from negharness.engine.distributed import gather_batch as gather_batch
from negharness.engine.ranks import Dist as Dist
from negharness.engine.devices import resolve_device as resolve_device
from negharness.engine.media_batches import lower_priority as lower_priority

__all__ = [
    "Dist", "PRECISIONS", "PRECISION_NAMES", "autocast", "cpu_autocast_warning", "distributed",
    "gather_batch", "lower_priority", "resolve_device", "resolve_precision",
]
