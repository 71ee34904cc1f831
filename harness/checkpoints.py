"""Safe checkpoint loading and saving: safetensors, or torch.load(weights_only=True), never pickle.

Published checkpoints come wrapped in many ways (a ``state_dict`` key, DataParallel's ``module.``
prefix); `load_state_dict` unwraps the common ones so every model plugin reads them the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from .atomic import atomic_write
from .errors import UserError

_WRAPPER_KEYS = ("state_dict", "model_state_dict", "model", "module")


def _read_raw(path: Path) -> Any:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            return load_file(str(path))
        except Exception as exc:  # safetensors raises its own error types
            raise UserError(f"{path}: not a readable safetensors file ({exc})") from exc
    try:
        return torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise UserError(
            f"{path}: cannot be loaded safely (torch.load with weights_only=True failed: "
            f"{str(exc).splitlines()[0]}). negharness never unpickles arbitrary objects; convert the "
            "checkpoint to safetensors or a plain tensor state dict on a machine you trust."
        ) from exc


def unwrap_state_dict(raw: Any, path: Path | str = "<checkpoint>") -> dict[str, torch.Tensor]:
    """Find the tensor dict inside common wrappers and strip a DataParallel ``module.`` prefix."""
    obj = raw
    for _ in range(3):
        if isinstance(obj, dict) and not any(isinstance(v, torch.Tensor) for v in obj.values()):
            inner = next((obj[k] for k in _WRAPPER_KEYS if isinstance(obj.get(k), dict)), None)
            if inner is None:
                break
            obj = inner
    if not isinstance(obj, dict) or not obj or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise UserError(f"{path}: no tensor state dict found (top-level keys: {list(raw)[:8] if isinstance(raw, dict) else type(raw).__name__})")
    if all(k.startswith("module.") for k in obj):
        obj = {k[len("module."):]: v for k, v in obj.items()}
    return obj


def load_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    return unwrap_state_dict(_read_raw(path), path)


def save_safetensors(path: str | Path, state: dict[str, torch.Tensor], metadata: dict[str, Any] | None = None) -> Path:
    """Atomic safetensors write; ``metadata`` values are JSON-encoded into the file header."""
    from safetensors.torch import save_file

    tensors = {k: v.detach().cpu().contiguous() for k, v in state.items()}
    meta = {k: json.dumps(v) for k, v in (metadata or {}).items()}
    return atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=meta))
