"""Resumable training state, written by rank 0 without pickles: weights and optimizer tensors in
safetensors, everything else (position, history, optimizer hyper-parameters, scaler, RNG) in JSON.

``<out>/checkpoint/`` holds the latest state (every N steps and at each epoch end); ``state.json``
is written last, so a crash mid-write leaves the previous complete checkpoint's JSON pointing at
files of the same step (each file carries its step in its name). ``<out>/best.safetensors`` holds
the weights of the best validation epoch so far.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from negharness.api import (
    UserError,
    atomic_write_json,
    load_state_dict,
    save_safetensors,
)


def _flat_optimizer(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    state = opt.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}
    for p, st in state["state"].items():
        for name, v in st.items():
            if torch.is_tensor(v):
                tensors[f"{p}.{name}"] = v.detach().cpu()
            else:
                scalars[f"{p}.{name}"] = v
    groups = [{k: v for k, v in g.items() if k != "params"} for g in state["param_groups"]]
    return tensors, {"scalars": scalars, "param_groups": groups}


def _restore_optimizer(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    state: dict[int, dict[str, Any]] = {}
    for key, v in tensors.items():
        if key == "empty":
            continue
        p, name = key.split(".", 1)
        state.setdefault(int(p), {})[name] = v
    for key, v in meta["scalars"].items():
        p, name = key.split(".", 1)
        state.setdefault(int(p), {})[name] = v
    current = opt.state_dict()["param_groups"]
    groups = [{**g, **saved, "params": g["params"]} for g, saved in zip(current, meta["param_groups"])]
    opt.load_state_dict({"state": state, "param_groups": groups})


def save(out: Path, net: torch.nn.Module, opt: torch.optim.Optimizer, scaler: Any, info: dict[str, Any]) -> None:
    """Everything a resumed run needs; ``info`` carries position, history and the recipe hash."""
    folder = out / "checkpoint"
    step = info["global_step"]
    save_safetensors(folder / f"model-{step:08d}.safetensors", {k: v.detach().cpu() for k, v in net.state_dict().items()})
    tensors, meta = _flat_optimizer(opt)
    tensors["rng.torch"] = torch.get_rng_state()
    save_safetensors(folder / f"optim-{step:08d}.safetensors", tensors or {"empty": torch.zeros(1)})
    meta["scaler"] = scaler.state_dict() if scaler is not None and scaler.is_enabled() else None
    atomic_write_json(folder / "state.json", {**info, "optimizer": meta})
    for old in folder.glob("*-*.safetensors"):  # earlier steps' files, now superseded
        if not old.stem.endswith(f"{step:08d}"):
            old.unlink(missing_ok=True)


def load(out: Path, recipe_hash: str) -> dict[str, Any] | None:
    path = out / "checkpoint" / "state.json"
    if not path.is_file():
        return None
    try:
        info = json.loads(path.read_text())
    except ValueError as exc:
        raise UserError(f"{path}: damaged checkpoint state ({exc}); delete the folder to start over") from exc
    if info.get("recipe_hash") != recipe_hash:
        raise UserError(f"{out}: holds checkpoints of another recipe or training set; use a new --out folder")
    return info


def restore(out: Path, info: dict[str, Any], net: torch.nn.Module, opt: torch.optim.Optimizer, scaler: Any) -> None:
    step = info["global_step"]
    net.load_state_dict(load_state_dict(out / "checkpoint" / f"model-{step:08d}.safetensors"))
    tensors = load_state_dict(out / "checkpoint" / f"optim-{step:08d}.safetensors")
    rng = tensors.pop("rng.torch", None)
    if rng is not None:
        torch.set_rng_state(rng.to(torch.uint8))
    _restore_optimizer(opt, tensors, info["optimizer"])
    if scaler is not None and info["optimizer"].get("scaler"):
        scaler.load_state_dict(info["optimizer"]["scaler"])


def save_best(out: Path, net: torch.nn.Module) -> None:
    save_safetensors(out / "best.safetensors", {k: v.detach().cpu() for k, v in net.state_dict().items()})
