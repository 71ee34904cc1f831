"""Precision names and the one autocast rule, for encoders, scorers, trainers and editors alike.

``fp32`` runs as is; ``bf16`` / ``fp16`` autocast on every device, the CPU included (torch supports
both there), so one flag means one thing for every model. On the CPU reduced precision changes the
numbers and is rarely faster for small batches: `cpu_autocast_warning` says so once per run.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from negharness.api.errors import UserError

PRECISIONS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def resolve_precision(name: str, option: str = "--precision") -> torch.dtype:
    """The dtype of a precision name; anything else is an error naming the option."""
    if name not in PRECISIONS:
        raise UserError(f"{option} {name}: choose one of {', '.join(PRECISIONS)}")
    return PRECISIONS[name]


@contextlib.contextmanager
def autocast(device: torch.device, precision: str) -> Iterator[None]:
    """Autocast to ``precision`` on ``device`` (no-op for fp32); callers add inference mode where they infer."""
    dtype = resolve_precision(precision)
    if dtype == torch.float32:
        yield
    else:
        with torch.autocast(device.type, dtype=dtype):
            yield


def cpu_autocast_warning(device: torch.device, precision: str) -> str | None:
    """One line to show when reduced precision will run on the CPU, else None."""
    if device.type == "cpu" and precision != "fp32":
        return (f"--precision {precision} on the CPU: autocast runs in {precision} there too, so numbers differ "
                "from fp32 (and may be slower)")
    return None
