"""Precision names and the one autocast rule, for encoders, scorers, trainers and editors alike.

``fp32`` runs as is; ``bf16`` / ``fp16`` autocast on every device, the CPU included (torch supports
both there), so one flag means one thing for every model. On the CPU reduced precision changes the
numbers and is rarely faster for small batches: `cpu_autocast_warning` says so once per run.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator

from negharness.contracts.errors import UserError

if TYPE_CHECKING:
    import torch

# The one precision table: name -> torch dtype attribute. Every list of precisions (the CLI's
# --precision choices, trainers' and editors' and VLMs' options) reads `PRECISION_NAMES`, so none can
# offer a name `resolve_precision` refuses. Kept torch-free: the CLI's parser reads it at start-up.
_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
PRECISION_NAMES = tuple(_DTYPES)


def __getattr__(name: str) -> Any:
    """``PRECISIONS`` (name -> torch dtype), built from the table when first asked (it imports torch)."""
    if name == "PRECISIONS":
        import torch

        return {k: getattr(torch, v) for k, v in _DTYPES.items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_precision(name: str, option: str = "--precision") -> str:
    """``name`` when it names a precision negharness runs in, else an error naming the option (no torch)."""
    if name not in _DTYPES:
        raise UserError(f"{option} {name}: choose one of {', '.join(PRECISION_NAMES)}")
    return name


def resolve_precision(name: str, option: str = "--precision") -> "torch.dtype":
    """The dtype of a precision name; anything else is an error naming the option."""
    import torch

    check_precision(name, option)
    dtype: torch.dtype = getattr(torch, _DTYPES[name])
    return dtype


@contextlib.contextmanager
def autocast(device: "torch.device", precision: str) -> Iterator[None]:
    """Autocast to ``precision`` on ``device`` (no-op for fp32); callers add inference mode where they infer."""
    import torch

    dtype = resolve_precision(precision)
    if dtype == torch.float32:
        yield
    else:
        with torch.autocast(device.type, dtype=dtype):
            yield


def numbers_made(device: "torch.device", precision: str) -> dict[str, str]:
    """What of a device and a precision changes the numbers, for a cache key: the precision, and under
    autocast the device type too (CPU and CUDA autocast cast different ops to ``precision``, so their
    bf16 embeddings differ); at fp32 nothing autocasts and a device's rounding is not told apart."""
    return {"precision": precision} if precision == "fp32" else {"precision": precision, "autocast_on": device.type}


def cpu_autocast_warning(device: "torch.device", precision: str) -> str | None:
    """One line to show when reduced precision will run on the CPU, else None."""
    if device.type == "cpu" and precision != "fp32":
        return (f"--precision {precision} on the CPU: autocast runs in {precision} there too, so numbers differ "
                "from fp32 (and may be slower)")
    return None
