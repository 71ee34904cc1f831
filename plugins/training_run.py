"""The training loop: set-up (model, training set, DDP, optimizer), epochs of steps with resumable
checkpoints, validation and early stopping, progress, and the outputs (model + training record)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from negharness import distributed
from negharness.atomic import atomic_write_json
from negharness.checkpoints import load_state_dict, save_safetensors
from negharness.errors import UserError
from negharness.hashing import hash_json
from negharness.paths import data_root
from negharness.runner import resolve_device
from negharness.train import TrainingSet, TrainOptions, TrainSetOptions

from negharness.plugins import training_state
from negharness.plugins.negation_data import EpochBatches, ItemData, SampleData, collate, loader, sample_list
from negharness.plugins.negation_training import FORMAT, TRAINSET_KEYS, Recipe
from negharness.plugins.training_step import StepLoss, validation_mir

UNHASHED = ("epochs", "patience", "checkpoint_every", "log_every")  # how long / how often: not what is trained


def _autocast(device: torch.device, precision: str):
    """bf16/fp16 autocast where asked (auto: bf16 on a GPU, as the papers train in mixed precision)."""
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" else "fp32"
    if precision == "fp32":
        return contextlib.nullcontext
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return lambda: torch.autocast(device.type, dtype=dtype)


def _optimizer(recipe: Recipe, net: torch.nn.Module) -> torch.optim.Optimizer:
    params = [p for p in net.parameters() if p.requires_grad]
    if recipe.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=recipe.lr, weight_decay=recipe.weight_decay)
    return torch.optim.RMSprop(params, lr=recipe.lr, weight_decay=recipe.weight_decay)


def _load_trainset(opts: TrainOptions, d: distributed.Dist, model: Any) -> TrainingSet:
    load = opts.load_trainset
    if load is None:  # a caller that predates training-set plugins: the registry of the active host
        from negharness.plugin_manager import active_host

        load = lambda n, o: active_host().registry.create("trainset", n, o)  # noqa: E731
    extra = dict(opts.task_extra)
    extra.update({k: v for k, v in opts.extra.items() if k in TRAINSET_KEYS})
    root = Path(opts.data_root) if opts.data_root else data_root(None)[0]
    tso = TrainSetOptions(root, extra, opts.seed, getattr(model, "frame_sampling", None), opts.cache_dir)
    name = opts.task or "shapes"
    if not d.main:  # rank 0 builds derived files (soft negatives) once; the others read them
        distributed.barrier(d)
    ts = load(name, tso)
    if d.main:
        distributed.barrier(d)
    if opts.limit:
        ts.streams = [s.subset(range(min(opts.limit, len(s)))) for s in ts.streams]
        ts.val = ts.val.subset(range(min(opts.limit, len(ts.val)))) if ts.val is not None else None
    return ts


def _workers(opts: TrainOptions, d: distributed.Dist) -> int:
    if opts.workers is not None:
        return opts.workers
    return max(0, min(8, ((os.cpu_count() or 2) - 1) // max(1, d.world)))


def _versions() -> dict[str, str]:
    import negharness

    out = {"negharness": negharness.__version__, "torch": torch.__version__, "python": platform.python_version()}
    try:
        import open_clip

        out["open_clip"] = open_clip.__version__
    except (ImportError, AttributeError):
        pass
    return out


class Reporter:
    """Rich progress (loss, samples/s, ETA) on a terminal, a log line every few seconds elsewhere."""

    def __init__(self, opts: TrainOptions, total: int, every: float, main: bool) -> None:
        self.progress, self.log, self.every, self.total = (opts.progress if main else None), opts.log if main else None, every, total
        self.bar = self.progress.add_task("training", total=total) if self.progress is not None else None
        self.t0, self.last, self.done, self.samples = time.perf_counter(), 0.0, 0, 0

    def step(self, epoch: int, loss: float, samples: int) -> None:
        self.done += 1
        self.samples += samples
        now = time.perf_counter() - self.t0
        rate = self.samples / max(now, 1e-9)
        if self.bar is not None:
            self.progress.update(self.bar, advance=1, description=f"epoch {epoch} loss {loss:.4f} {rate:.1f} samples/s")
        if self.log is not None and (now - self.last >= self.every or self.done == self.total):
            eta = (self.total - self.done) * now / max(self.done, 1)
            self.log(f"epoch {epoch} step {self.done}/{self.total} loss {loss:.4f} {rate:.1f} samples/s "
                     f"elapsed {now:.0f}s eta {eta:.0f}s")
            self.last = now

    @property
    def rate(self) -> float:
        return self.samples / max(time.perf_counter() - self.t0, 1e-9)


def run(opts: TrainOptions, recipe: Recipe) -> Path:
    if not opts.model:
        raise UserError("--model: the model to fine-tune (e.g. shapes_clip, clip)")
    device = resolve_device(opts.device)
    d = distributed.init(device.type)
    device = distributed.device_for(d, device)
    if recipe.batch_size % d.world:
        raise UserError(f"-O batch_size={recipe.batch_size} does not split over {d.world} ranks")
    torch.manual_seed(recipe.seed)  # a randomly initialised model is the same on every rank and rerun
    model = opts.load_model(opts.model, opts.model_options)
    if not hasattr(model, "tokenizer") or not model.modules():
        raise UserError(f"model {opts.model}: only open_clip models can be fine-tuned here")
    model.to(device)
    net = model.modules()[0]
    if recipe.grad_checkpointing:
        net.set_grad_checkpointing(True)
    ts = _load_trainset(opts, d, model)
    try:
        return _train(opts, recipe, d, device, model, net, ts)
    finally:
        distributed.shutdown(d)


def _train(opts: TrainOptions, recipe: Recipe, d: distributed.Dist, device: torch.device, model: Any,
           net: torch.nn.Module, ts: TrainingSet) -> Path:
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    autocast = _autocast(device, recipe.precision)
    scaler = torch.amp.GradScaler(device.type, enabled=recipe.precision == "fp16" and device.type == "cuda")
    opt = _optimizer(recipe, net)
    ddp = torch.nn.parallel.DistributedDataParallel(net, find_unused_parameters=True) if d.active else net
    step_loss = StepLoss(model, ddp, recipe, d, device)
    workers = _workers(opts, d)
    preprocess = {s.name: (model.preprocess_video if s.kind == "video" else model.preprocess_image) for s in ts.streams}
    unit = ts.unit if recipe.unit == "auto" else recipe.unit
    datas = [SampleData(s, sample_list(s, unit), preprocess[s.name], recipe.seed, n) for n, s in enumerate(ts.streams)]
    samplers = [EpochBatches(len(x), recipe.batch_size, recipe.seed, n, d.rank, d.world) for n, x in enumerate(datas)]
    micro = min(s.per_epoch for s in samplers)
    micro = min(micro, recipe.steps_per_epoch) if recipe.steps_per_epoch else micro
    steps_per_epoch = -(-micro // recipe.accumulate)
    config = {**dataclasses.asdict(recipe), "model": opts.model, "model_options": opts.model_options.as_dict(),
              "trainset": ts.name, "trainset_options": dict(opts.task_extra), "limit": opts.limit,
              "unit_used": unit}
    recipe_hash = hash_json({**{k: v for k, v in config.items() if k not in UNHASHED}, "data": ts.data_hash})
    info = training_state.load(out, recipe_hash)
    history: list[dict] = []
    best, best_epoch, epoch0, micro0, gstep = float("-inf"), -1, 0, 0, 0
    if info:
        training_state.restore(out, info, net, opt, scaler)
        history, best, best_epoch = info["history"], info["best_mir"], info["best_epoch"]
        epoch0, micro0, gstep = info["epoch"], info["next_micro"], info["global_step"]
    elif ts.val is not None:  # the starting point's MIR, for reference; the best epoch is chosen among trained ones
        history.append({"epoch": -1, "val_MIR": _validate(model, net, ts, device, autocast, workers, d)})
    max_steps = opts.max_steps or 0
    total = (recipe.epochs - epoch0) * micro - micro0
    if max_steps:
        total = min(total, max(0, max_steps - gstep) * recipe.accumulate)
    report = Reporter(opts, max(total, 0), recipe.log_every, d.main)
    stopped = "epochs"
    net.train()
    for epoch in range(epoch0, recipe.epochs):
        if best_epoch >= 0 and epoch - best_epoch > recipe.patience:
            stopped = "early stop"
            break
        for g in opt.param_groups:
            g["lr"] = recipe.lr * recipe.lr_decay ** epoch
        start = micro0 if epoch == epoch0 else 0
        iters = []
        for data, sampler in zip(datas, samplers):
            data.epoch = epoch
            sampler.set_position(epoch, start)
            iters.append(iter(loader(data, sampler, workers)))
        losses, t0 = [], time.perf_counter()
        for m in range(start, micro):
            batches = [(s, next(it)) for s, it in zip(ts.streams, iters)]
            with autocast():
                loss, _ = step_loss(batches)
            scaler.scale(loss * distributed.loss_scale(d) / recipe.accumulate).backward()
            losses.append(float(loss.detach()))
            report.step(epoch, losses[-1], recipe.batch_size * len(batches))
            if (m + 1) % recipe.accumulate and m + 1 < micro:
                continue
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            gstep += 1
            end_of_epoch = m + 1 == micro
            if max_steps and gstep >= max_steps and not end_of_epoch:
                _checkpoint(out, d, net, opt, scaler, recipe_hash, epoch, m + 1, gstep, history, best, best_epoch)
                return _finish(out, opts, d, net, ts, config, history, best, best_epoch, gstep, report, "max_steps")
            if recipe.checkpoint_every and gstep % recipe.checkpoint_every == 0 and not end_of_epoch:
                _checkpoint(out, d, net, opt, scaler, recipe_hash, epoch, m + 1, gstep, history, best, best_epoch)
        del iters
        entry: dict[str, Any] = {"epoch": epoch, "loss": float(np.mean(losses)) if losses else None,
                                 "seconds": round(time.perf_counter() - t0, 1), "steps": gstep}
        if ts.val is not None:
            net.eval()
            entry["val_MIR"] = _validate(model, net, ts, device, autocast, workers, d)
            net.train()
            if entry["val_MIR"] > best:
                best, best_epoch = entry["val_MIR"], epoch
                if d.main:
                    training_state.save_best(out, net)
        history.append(entry)
        _checkpoint(out, d, net, opt, scaler, recipe_hash, epoch + 1, 0, gstep, history, best, best_epoch)
        if max_steps and gstep >= max_steps:
            return _finish(out, opts, d, net, ts, config, history, best, best_epoch, gstep, report, "max_steps")
    return _finish(out, opts, d, net, ts, config, history, best, best_epoch, gstep, report, stopped)


def _validate(model: Any, net: torch.nn.Module, ts: TrainingSet, device: torch.device, autocast: Any,
              workers: int, d: distributed.Dist) -> float:
    """Rank 0 scores the validation split; every rank gets its MIR (the early-stop decision is shared)."""
    mir = None
    if d.main:
        was = net.training
        net.eval()
        one = model.preprocess_video if ts.val.kind == "video" else model.preprocess_image
        data = ItemData(ts.val, one)
        dl = torch.utils.data.DataLoader(data, batch_size=64, num_workers=workers, collate_fn=collate)
        mir = validation_mir(model, ts.val, dl, device, autocast)
        net.train(was)
    return float(distributed.broadcast(d, mir))


def _checkpoint(out: Path, d: distributed.Dist, net: torch.nn.Module, opt: Any, scaler: Any, recipe_hash: str,
                epoch: int, next_micro: int, gstep: int, history: list, best: float, best_epoch: int) -> None:
    if d.main:
        training_state.save(out, net, opt, scaler, {
            "format": FORMAT, "recipe_hash": recipe_hash, "epoch": epoch, "next_micro": next_micro,
            "global_step": gstep, "history": history, "best_mir": best, "best_epoch": best_epoch})
    distributed.barrier(d)


def _finish(out: Path, opts: TrainOptions, d: distributed.Dist, net: torch.nn.Module, ts: TrainingSet, config: dict,
            history: list, best: float, best_epoch: int, gstep: int, report: Reporter, stopped: str) -> Path:
    """Rank 0 writes the model the evaluation loads (best validation epoch, else the last weights) and the record."""
    if d.main:
        best_file = out / "best.safetensors"
        state = load_state_dict(best_file) if best_epoch >= 0 and best_file.is_file() else \
            {k: v.detach().cpu() for k, v in net.state_dict().items()}
        save_safetensors(out / "model.safetensors", state)
        meta = {"format": FORMAT, "base_model": opts.model, "base_options": opts.model_options.as_dict(),
                "recipe": config, "history": history, "best_epoch": best_epoch,
                "best_val_MIR": best if best_epoch >= 0 else None}
        atomic_write_json(out / "model.json", meta)
        atomic_write_json(out / "training.json", {
            **meta, "versions": _versions(), "data_hash": ts.data_hash, "trainset_notes": ts.notes,
            "train_items": {s.name: len(s) for s in ts.streams}, "val_items": len(ts.val) if ts.val else 0,
            "world_size": d.world, "optimizer_steps": gstep, "stopped_by": stopped,
            "samples_per_second_this_run": round(report.rate, 2)})
    distributed.barrier(d)
    return out
