"""Resumable training state, written by rank 0 without pickles: weights and optimizer tensors in
safetensors, everything else (position, history, optimizer hyper-parameters, scaler, RNG) in JSON.

``<out>/checkpoint/`` holds the latest state (every N steps and at each epoch end); ``state.json``
is written last, so a crash mid-write leaves the previous complete checkpoint's JSON pointing at
files of the same step (each file carries its step in its name). ``<out>/best.safetensors`` holds
the weights of the best validation epoch so far. ``<out>/.train.lock`` keeps one run writing the
folder at a time (`one_writer`).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Iterator

try:
    import fcntl
except ImportError:  # Windows: no flock; see `one_writer`
    fcntl = None  # type: ignore[assignment]

import torch

from negharness.api import UserError
from negharness.api.checkpoints import load_state_dict, save_safetensors
from negharness.api.files import atomic_write_json


LOCK_FILE = ".train.lock"


def _busy(out: Path) -> UserError:
    return UserError(f"--out {out}: another training run is writing this folder (it holds {out / LOCK_FILE}); "
                     "wait for it to end or give another --out folder")


@contextlib.contextmanager
def one_writer(out: Path, main: bool = True) -> Iterator[None]:
    """Hold ``<out>/.train.lock`` for the whole run (rank 0; the other ranks write nothing): a second
    run on the folder is refused at once, not left to overwrite the first's files or delete its
    checkpoints. The lock is an ``flock``, which the kernel drops when the holder dies (``kill -9``
    included), so a killed run never leaves the folder locked. Without ``fcntl`` (Windows) the lock is
    the file itself, created exclusively and removed at the end: a killed run leaves it behind, and the
    error names it to delete."""
    if not main:
        yield
        return
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_FILE
    if fcntl is None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise UserError(f"{_busy(out)} (if no run is alive, delete {path})") from None
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
            os.close(fd)
            yield
        finally:
            path.unlink(missing_ok=True)
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(out) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())  # who holds it, for a person looking
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


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
        info: dict[str, Any] = json.loads(path.read_text())  # written by `save` (checked below by its recipe hash)
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
