"""The mistakes in a `negharness run` request that are found without torch: asked first, so a typo
costs the plugin host's start (about a second), not torch's import (10 s and 500 MB on 2 cores).

What needs torch is checked right after it loads, before the model is built
(`negharness.engine.runner.resolve_device`: whether CUDA or MPS is really there; the tasks' data
files, which need the tasks' modules, and they import torch).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError
from negharness.engine.plan import task_entries
from negharness.io.paths import data_root

DEVICES = "auto, cpu, cuda, cuda:N or mps"
_DEVICE = re.compile(r"(auto|cpu|mps|cuda(:\d+)?)")
# where a CUDA (or ROCm, which torch also calls cuda) driver shows itself on Linux; none: no GPU torch could use
_GPU_DRIVER_FILES = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")
# files that can only be a local checkpoint (a hub id never ends so): named but absent is a mistake
_WEIGHTS_FILE = re.compile(r"\.(pt|pth|bin|safetensors|ckpt|tar)(\.\d+)?$")


def check_device_spec(spec: str) -> str:
    """``spec`` when it names a device negharness runs on, else a one-line error; and, where the
    machine says so without torch (Linux with no GPU driver, MPS off macOS), that it is absent."""
    if not _DEVICE.fullmatch(spec):
        raise UserError(f"--device {spec}: not a device (use {DEVICES})")
    if spec == "mps" and sys.platform != "darwin":
        raise UserError("--device mps: MPS (Apple's GPU) exists only on macOS (use --device cpu)")
    if spec.startswith("cuda") and _no_gpu_driver():
        raise UserError(f"--device {spec}: CUDA is not available on this machine: no GPU driver (use --device cpu)")
    return spec


def _no_gpu_driver() -> bool:
    """True only where it is certain: on Linux, none of the driver's files exist."""
    return sys.platform.startswith("linux") and not any(Path(p).exists() for p in _GPU_DRIVER_FILES)


def check_request(host: Any, req: Any) -> None:
    """Names, device, data root and named weights files of a run request (`negharness.engine.plan.RunRequest`),
    against the registry and the file system only: no plugin module is imported."""
    task_entries(host, req.tasks)
    if not any(req.model in host.registry.names(kind) for kind in ("model", "editor")):
        host.registry.get("model", req.model)  # unknown: the registry's error, with the close names
    check_device_spec(req.device)
    root, source = data_root(req.data_root)
    if root.exists() and not root.is_dir():
        raise UserError(f"data root {root} (from {source}) is a file, not a folder: pass --data-root DIR")
    checkpoint = req.model_options.checkpoint
    if checkpoint and _WEIGHTS_FILE.search(checkpoint) and not Path(checkpoint).expanduser().exists():
        raise UserError(f"--checkpoint {checkpoint}: no such file")
