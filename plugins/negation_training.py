"""Negation-aware fine-tuning: nT2VR's BNL and SNL, NegBench's CLIP + MCQ objective, and CLIP*.

One loop, four trainers that differ only in their recipe's loss terms:

- ``triplet`` (CLIP*): Eq. 2, triplet loss with the hardest in-batch negative, margin m0.
- ``bnl``: Eq. 7, + lambda_v * l_bcl(x+, q, q-) + lambda_q * l_bcl(q, x+, q-) (Eq. 5-6; the paper's
  lambda_2 for both by default, separate as in the authors' code). The authors detach the video
  embedding inside the auxiliary loss, so negation learning moves only the text tower:
  ``detach_video`` (default true).
- ``snl``: Eq. 4, + lambda_1 * l_tri(x+, q, q-).
- ``negbench``: alpha * L_CLIP (captions with true negations as positives) + (1 - alpha) * L_MCQ.

``-O bnl=true`` / ``-O negbench=true`` combine them. Defaults are the papers' (RMSprop, lr 1e-6
decayed x0.99 per epoch, batch 64, early stop after 2 epochs without a better validation MIR);
every one is an ``-O key=value`` option. A checkpoint per epoch (safetensors + JSON sidecar with the
recipe and validation history, optimizer state beside it); rerunning the same command resumes
from the last finished epoch and ends where an uninterrupted run would.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from negharness.atomic import atomic_write_json
from negharness.checkpoints import load_state_dict, save_safetensors
from negharness.errors import UserError
from negharness.metrics import Relevance, best_relevant_rank, retrieval_metrics
from negharness.hashing import hash_json
from negharness.paths import data_root
from negharness.runner import resolve_device
from negharness.train import TrainOptions

from negharness.plugins.losses import bcl, mcq_cross_entropy, multi_positive_infonce, soft_triplet, triplet_hardest
from negharness.plugins.negation_data import Stream, build_stream

FORMAT = "negharness-trained-v1"


@dataclass
class Recipe:
    trainer: str = "triplet"
    triplet: bool = True
    m0: float = 0.2
    bnl: bool = False
    lambda_v: float = 1e-3  # weight of l_bcl(x+, q, q-)
    lambda_q: float = 1e-3  # weight of l_bcl(q, x+, q-)
    m1: float = 0.1
    m2: float = 0.6
    m3: float = 0.1
    m4: float = 0.3
    detach_video: bool = True
    snl: bool = False
    lambda_1: float = 1e-3
    negbench: bool = False
    alpha: float = 0.5
    negbench_weight: float = 1.0
    lr: float = 1e-6
    lr_decay: float = 0.99
    batch_size: int = 64
    epochs: int = 10
    patience: int = 2
    accumulate: int = 1
    steps_per_epoch: int = 0  # 0: one pass over the training videos
    n_train: int = 6000
    n_val: int = 500
    world_seed: int = 0
    seed: int = 0

    @classmethod
    def from_options(cls, trainer: str, opts: TrainOptions) -> "Recipe":
        base = cls(trainer=trainer, bnl=trainer == "bnl", snl=trainer == "snl", negbench=trainer == "negbench",
                   triplet=trainer != "negbench", seed=opts.seed)
        changes: dict[str, Any] = {}
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for key, raw in opts.extra.items():
            if key not in fields or key == "trainer":
                raise UserError(f"-O {key}: not an option of trainer {trainer!r} (options: {', '.join(sorted(fields))})")
            kind = type(getattr(base, key))
            try:
                changes[key] = raw.lower() in ("1", "true", "yes") if kind is bool else kind(raw)
            except ValueError:
                raise UserError(f"-O {key}={raw}: expected {kind.__name__}") from None
        return dataclasses.replace(base, **changes)


# ---------------------------------------------------------------------------------------------------
class Loop:
    """Training state: model, optimizer, data streams, and the loss of one step."""

    def __init__(self, model: Any, recipe: Recipe, streams: list[Stream], val: Stream, device: torch.device) -> None:
        self.model, self.r, self.streams, self.val, self.device = model, recipe, streams, val, device
        self.net = model.modules()[0]
        self.opt = torch.optim.RMSprop(self.net.parameters(), lr=recipe.lr)

    def encode(self, stream: Stream, idx: np.ndarray) -> torch.Tensor:
        x = self.model.preprocess_batch(stream.pixels[idx], stream.kind).to(self.device)
        return self.model.encode_video(x) if stream.kind == "video" else self.model.encode_image(x)

    def stream_loss(self, s: Stream, rng: np.random.Generator) -> tuple[torch.Tensor, dict[str, float]]:
        r = self.r
        idx = np.sort(rng.choice(len(s.groups), min(r.batch_size, len(s.groups)), replace=False))
        k = [int(rng.integers(len(s.captions[i]))) for i in idx]
        x = self.encode(s, idx)
        groups = np.asarray(s.groups)[idx]
        positives = torch.from_numpy(groups[:, None] == groups[None, :]).to(self.device)
        parts: dict[str, torch.Tensor] = {}
        q = None
        if r.triplet or r.bnl or r.snl:
            q = self.model.encode_text([s.captions[i][j] for i, j in zip(idx, k)])
        if r.triplet:
            parts["triplet"] = triplet_hardest(q, x, positives, r.m0)
        if r.bnl or r.snl:
            rows = [n for n, (i, j) in enumerate(zip(idx, k)) if s.negated[i][j]]
            if rows:
                qn = self.model.encode_text([s.negated[idx[n]][k[n]] for n in rows])
                xv = x[rows].detach() if r.detach_video else x[rows]
                qp = q[rows]
                s_xq, s_xqn, s_qqn = (xv * qp).sum(1), (xv * qn).sum(1), (qp * qn).sum(1)
                if r.bnl:
                    parts["bcl_v"] = r.lambda_v * bcl(s_xq, s_xqn, r.m1, r.m2).mean()
                    parts["bcl_q"] = r.lambda_q * bcl(s_xq, s_qqn, r.m3, r.m4).mean()
                if r.snl:
                    parts["snl"] = r.lambda_1 * soft_triplet(s_xq, s_xqn, r.m1).mean()
        if r.negbench:
            scale = self.net.logit_scale.exp().clamp(max=100)
            tn = self.model.encode_text([s.true_negations[i][int(rng.integers(len(s.true_negations[i])))] for i in idx])
            options = self.model.encode_text([o for i in idx for o in s.mcq[i][0]]).view(len(idx), -1, tn.shape[1])
            correct = torch.tensor([s.mcq[i][1] for i in idx], device=self.device)
            l_clip = multi_positive_infonce(tn, x, torch.from_numpy(np.unique(groups, return_inverse=True)[1]).to(self.device), scale)
            parts["negbench"] = r.negbench_weight * (r.alpha * l_clip + (1 - r.alpha) * mcq_cross_entropy(x, options, correct, scale))
        total = sum(parts.values())
        return total, {k: float(v.detach()) for k, v in parts.items()}

    def step_loss(self, rng: np.random.Generator) -> tuple[torch.Tensor, dict[str, float]]:
        total, logs = 0.0, {}
        for s in self.streams:
            loss, parts = self.stream_loss(s, rng)
            total = total + loss
            logs.update({f"{s.kind}/{k}": v for k, v in parts.items()})
        return total, logs

    @torch.no_grad()
    def validate(self) -> float:
        """Original-caption MIR on the validation videos (items with identical facts all relevant)."""
        self.net.eval()
        x = torch.cat([self.encode(self.val, np.arange(lo, min(lo + 256, len(self.val.groups))))
                       for lo in range(0, len(self.val.groups), 256)])
        texts = [c for caps in self.val.captions for c in caps]
        q = torch.cat([self.model.encode_text(texts[lo:lo + 256]) for lo in range(0, len(texts), 256)])
        groups = [g for g, caps in zip(self.val.groups, self.val.captions) for _ in caps]
        ranks = best_relevant_rank((q @ x.t()).float().cpu(), Relevance.from_groups(groups, self.val.groups))
        self.net.train()
        return retrieval_metrics(ranks)["MIR"]


def _autocast(device: torch.device):
    """bf16 autocast on a GPU (as the papers train in mixed precision); plain fp32 on the CPU."""
    import contextlib

    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


# checkpoints -------------------------------------------------------------------------------------------
def _save_epoch(out: Path, epoch: int, loop: Loop, info: dict) -> None:
    save_safetensors(out / f"epoch-{epoch:03d}.safetensors", loop.net.state_dict())
    state = loop.opt.state_dict()
    tensors = {f"{p}.{name}": v for p, st in state["state"].items() for name, v in st.items() if torch.is_tensor(v)}
    save_safetensors(out / f"epoch-{epoch:03d}.optim.safetensors", tensors or {"empty": torch.zeros(1)})
    atomic_write_json(out / f"epoch-{epoch:03d}.json", {**info, "param_groups": [
        {k: v for k, v in g.items() if k != "params"} for g in state["param_groups"]]})


def _load_epoch(out: Path, epoch: int, loop: Loop) -> None:
    loop.net.load_state_dict(load_state_dict(out / f"epoch-{epoch:03d}.safetensors"))
    flat = load_state_dict(out / f"epoch-{epoch:03d}.optim.safetensors")
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, v in flat.items():
        if key == "empty":
            continue
        p, name = key.split(".", 1)
        state.setdefault(int(p), {})[name] = v
    groups = loop.opt.state_dict()["param_groups"]
    loop.opt.load_state_dict({"state": state, "param_groups": groups})


def _last_epoch(out: Path, recipe_hash: str) -> tuple[int, dict] | None:
    import json

    for sidecar in sorted(out.glob("epoch-[0-9]*.json"), reverse=True):
        info = json.loads(sidecar.read_text())
        if info.get("recipe_hash") != recipe_hash:
            raise UserError(f"{out}: holds checkpoints of another recipe ({sidecar.name}); use a new --out folder")
        return info["epoch"], info
    return None


# the trainer -------------------------------------------------------------------------------------------
def train(opts: TrainOptions, trainer: str) -> Path:
    recipe = Recipe.from_options(trainer, opts)
    if opts.task not in (None, "shapes", "shapes_train"):
        raise UserError(f"--task {opts.task}: training data available: 'shapes' (the embedded world's train split)")
    if not opts.model:
        raise UserError("--model: the model to fine-tune (e.g. shapes_clip)")
    model = opts.load_model(opts.model, opts.model_options)
    if not hasattr(model, "preprocess_cfg") or not model.modules():
        raise UserError(f"model {opts.model}: only open_clip models can be fine-tuned here")
    device = resolve_device(opts.device)
    model.to(device)
    root = Path(opts.data_root) if opts.data_root else data_root(None)[0]
    streams = [build_stream(recipe.world_seed, "train", kind, recipe.n_train, root) for kind in ("video", "image")]
    val = build_stream(recipe.world_seed, "val", "video", recipe.n_val, root)
    loop = Loop(model, recipe, streams, val, device)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    recipe_dict = {**dataclasses.asdict(recipe), "model": opts.model, "model_options": opts.model_options.as_dict()}
    # how long to train is not part of what is trained: a longer rerun resumes the same recipe
    recipe_hash = hash_json({k: v for k, v in recipe_dict.items() if k not in ("epochs", "patience")})
    history: list[dict] = []
    best, best_epoch, start_epoch = float("-inf"), -1, 0
    found = _last_epoch(out, recipe_hash)
    if found:
        epoch, info = found
        _load_epoch(out, epoch, loop)
        history, best, best_epoch, start_epoch = info["history"], info["best_mir"], info["best_epoch"], epoch + 1
    else:
        # the starting point's MIR is recorded for reference; the best epoch is chosen among trained ones
        history.append({"epoch": -1, "val_MIR": loop.validate()})
    steps = recipe.steps_per_epoch or max(1, recipe.n_train // recipe.batch_size)
    bar = opts.progress.add_task("training", total=(recipe.epochs - start_epoch) * steps) if opts.progress else None
    loop.net.train()
    for epoch in range(start_epoch, recipe.epochs):
        if epoch - best_epoch > recipe.patience and best_epoch >= 0:
            break
        for g in loop.opt.param_groups:
            g["lr"] = recipe.lr * recipe.lr_decay ** epoch
        start, losses = time.perf_counter(), []
        for step in range(steps):
            rng = np.random.default_rng([recipe.seed, epoch, step])
            with _autocast(device):
                loss, logs = loop.step_loss(rng)
            (loss / recipe.accumulate).backward()
            if (step + 1) % recipe.accumulate == 0 or step == steps - 1:
                loop.opt.step()
                loop.opt.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
            if bar is not None:
                opts.progress.update(bar, advance=1, description=f"epoch {epoch} loss {np.mean(losses[-20:]):.4f}")
        mir = loop.validate()
        history.append({"epoch": epoch, "val_MIR": mir, "loss": float(np.mean(losses)),
                        "seconds": round(time.perf_counter() - start, 1)})
        if mir > best:
            best, best_epoch = mir, epoch
        _save_epoch(out, epoch, loop, {"format": FORMAT, "epoch": epoch, "recipe": recipe_dict,
                                       "recipe_hash": recipe_hash, "history": history, "best_mir": best,
                                       "best_epoch": best_epoch})
    if best_epoch < 0:
        raise UserError(f"{out}: no epoch was trained (epochs={recipe.epochs})")
    save_safetensors(out / "model.safetensors", load_state_dict(out / f"epoch-{best_epoch:03d}.safetensors"))
    atomic_write_json(out / "model.json", {"format": FORMAT, "base_model": opts.model,
                                           "base_options": opts.model_options.as_dict(), "recipe": recipe_dict,
                                           "history": history, "best_epoch": best_epoch, "best_val_MIR": best})
    return out


def bnl(opts: TrainOptions) -> Path:
    return train(opts, "bnl")


def snl(opts: TrainOptions) -> Path:
    return train(opts, "snl")


def negbench(opts: TrainOptions) -> Path:
    return train(opts, "negbench")


def triplet(opts: TrainOptions) -> Path:
    return train(opts, "triplet")
