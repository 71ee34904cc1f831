"""The device a run encodes on, and what a record calls it: ``--device`` resolved against what torch
finds (what can be known without torch is refused first: `negharness.engine.precheck`), and the
device's name with its processor or GPU model, on which timings and float results depend."""

from __future__ import annotations

import platform
from pathlib import Path

import torch

from negharness.contracts.errors import UserError
from negharness.engine.precheck import DEVICES, check_device_spec


def resolve_device(spec: str) -> torch.device:
    """``auto`` picks CUDA when present; an explicit CUDA or MPS device that is absent is a clear
    error (what can be known without torch is refused first: `negharness.engine.precheck`)."""
    if check_device_spec(spec) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(spec)
    except RuntimeError as exc:
        raise UserError(f"--device {spec}: not a device (use {DEVICES})") from exc
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise UserError(f"--device {spec}: MPS is not available on this machine (use --device cpu)")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"--device {spec}: CUDA is not available on this machine (use --device cpu)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise UserError(f"--device {spec}: only {torch.cuda.device_count()} CUDA device(s) here")
    return device


def device_name(device: torch.device) -> str:
    """What a record says of the device: ``cuda:0 (NVIDIA H100 80GB HBM3)``, ``cpu (AMD EPYC 7B13)``,
    or ``cpu`` when the processor does not say its name; timings and float results depend on it."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    name = cpu_name() if device.type == "cpu" else None
    return f"{device} ({name})" if name else str(device)


def cpu_name() -> str | None:
    """The processor's model name (Linux /proc/cpuinfo, else `platform.processor`), None if unknown."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return " ".join(value.split())
    except OSError:
        pass
    return platform.processor().strip() or None
