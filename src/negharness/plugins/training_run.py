"""The training loop: set-up (model, training set, DDP, optimizer), epochs of steps with resumable
checkpoints, validation and early stopping, progress, and the outputs (model + training record)."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, ContextManager

import numpy as np
import torch

from negharness.api import TrainOptions, TrainSetOptions, TrainStream, TrainingSet, UserError, __version__
from negharness.api.checkpoints import load_state_dict, save_safetensors
from negharness.api.devices import autocast, cpu_autocast_warning, distributed, resolve_device
from negharness.api.files import atomic_write_json, atomic_write_text, data_root, hash_json
from negharness.plugins import training_state
from negharness.plugins.negation_data import (
    EpochBatches,
    ItemData,
    SampleData,
    collate,
    loader,
    sample_list,
)
from negharness.plugins.negation_training import (
    DECLARED,
    FORMAT,
    Recipe,
)
from negharness.plugins.training_step import StepLoss, validation_mir

ARCH_FILE = "arch.json"  # a JSON --arch, copied into the output folder by content
UNHASHED = ("epochs", "patience", "checkpoint_every", "log_every")  # how long / how often: not what is trained


def _autocast(device: torch.device, precision: str) -> Callable[[], ContextManager[None]]:
    """bf16/fp16 autocast where asked (auto: bf16 on a GPU, as the papers train in mixed precision)."""
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" else "fp32"
    if note := cpu_autocast_warning(device, precision):
        warnings.warn(note, UserWarning, stacklevel=2)
    return lambda: autocast(device, precision)


def _optimizer(recipe: Recipe, net: torch.nn.Module) -> torch.optim.Optimizer:
    params = [p for p in net.parameters() if p.requires_grad]
    if recipe.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=recipe.lr, weight_decay=recipe.weight_decay)
    return torch.optim.RMSprop(params, lr=recipe.lr, weight_decay=recipe.weight_decay)


def _load_trainset(opts: TrainOptions, d: distributed.Dist, model: Any) -> TrainingSet:
    root = Path(opts.data_root) if opts.data_root else data_root(None)[0]
    tso = TrainSetOptions(root, dict(opts.task_extra), opts.seed, getattr(model, "frame_sampling", None), opts.cache_dir)
    name = opts.trainset
    if not d.main:  # rank 0 builds derived files (soft negatives) once; the others read them
        distributed.barrier(d)
    ts = opts.load_trainset(name, tso)
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

    out = {"negharness": __version__, "torch": torch.__version__, "python": platform.python_version()}
    try:
        import open_clip

        out["open_clip"] = open_clip.__version__
    except (ImportError, AttributeError):
        pass
    return out


def say(opts: TrainOptions, line: str) -> None:
    """One line to the user: the log where no progress bar shows, else the progress bar's console."""
    if opts.log is not None:
        opts.log(line)
    elif opts.progress is not None:
        opts.progress.console.print(line)
    else:
        print(line, file=sys.stderr)


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
        if self.bar is not None and self.progress is not None:  # a bar only where there is a progress display
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
    try:
        with training_state.one_writer(Path(opts.out), d.main):  # before anything loads: a second run stops at once
            return _run(opts, opts.model, recipe, d, distributed.device_for(d, device))
    finally:
        distributed.shutdown(d)


def _run(opts: TrainOptions, model_name: str, recipe: Recipe, d: distributed.Dist, device: torch.device) -> Path:
    """The run of ``model_name`` (the --model `run` checked was given)."""
    if recipe.batch_size % d.world:
        raise UserError(f"-O batch_size={recipe.batch_size} does not split over {d.world} ranks")
    torch.manual_seed(recipe.seed)  # a randomly initialised model is the same on every rank and rerun
    model = opts.load_model(model_name, opts.model_options)
    if not hasattr(model, "tokenizer") or not model.modules():
        raise UserError(f"model {model_name}: only open_clip models can be fine-tuned here")
    model.to(device)
    net = model.modules()[0]
    if recipe.grad_checkpointing:
        net.set_grad_checkpointing(True)
    ts = _load_trainset(opts, d, model)
    return Run(opts, recipe, d, device, model, net, ts).run()


@dataclasses.dataclass
class Position:
    """Where training stands: what a checkpoint records besides weights and optimizer state."""

    epoch: int = 0
    next_micro: int = 0  # the next micro-batch of ``epoch`` (always at an optimizer-step boundary)
    global_step: int = 0  # optimizer steps so far
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # per epoch: its loss, val_MIR, ...
    best_mir: float = float("-inf")
    best_epoch: int = -1
    epoch_losses: list[float] = dataclasses.field(default_factory=list)  # this epoch's micro-batch losses so far:
    # a run resumed mid-epoch reports the whole epoch's mean loss, as an uninterrupted one does


class Run:
    """One training run: the objects every phase needs, and the phases (epoch, validate, checkpoint, finish)."""

    def __init__(self, opts: TrainOptions, recipe: Recipe, d: distributed.Dist, device: torch.device, model: Any,
                 net: torch.nn.Module, ts: TrainingSet) -> None:
        self.opts, self.r, self.d, self.device, self.model, self.net, self.ts = opts, recipe, d, device, model, net, ts
        self.out = Path(opts.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.autocast = _autocast(device, recipe.precision)
        self.scaler = torch.amp.GradScaler(device.type, enabled=recipe.precision == "fp16" and device.type == "cuda")
        self.opt = _optimizer(recipe, net)
        ddp = torch.nn.parallel.DistributedDataParallel(net, find_unused_parameters=True) if d.active else net
        self.step_loss = StepLoss(model, ddp, recipe, d, device)
        self.workers = _workers(opts, d)
        unit = ts.unit if recipe.unit == "auto" else recipe.unit
        self.datas = [SampleData(s, sample_list(s, unit), model.preprocess_video if s.kind == "video" else
                                 model.preprocess_image, recipe.seed, n) for n, s in enumerate(ts.streams)]
        self.samplers = [EpochBatches(len(x), recipe.batch_size, recipe.seed, n, d.rank, d.world)
                         for n, x in enumerate(self.datas)]
        micro = min(s.per_epoch for s in self.samplers)  # one batch of every stream per step
        self.micro = min(micro, recipe.steps_per_epoch) if recipe.steps_per_epoch else micro
        self.config = {**dataclasses.asdict(recipe), "model": opts.model, "model_options": opts.model_options.as_dict(),
                       "trainset": ts.name, "trainset_options": dict(opts.task_extra), "limit": opts.limit,
                       "unit_used": unit}
        self.recipe_hash = hash_json({**{k: v for k, v in self.config.items() if k not in UNHASHED}, "data": ts.data_hash})
        self.max_steps = opts.max_steps or 0

    # phases ---------------------------------------------------------------------------------------------
    def resume(self) -> Position:
        info = training_state.load(self.out, self.recipe_hash)
        if info:
            training_state.restore(self.out, info, self.net, self.opt, self.scaler)
            return Position(info["epoch"], info["next_micro"], info["global_step"], info["history"], info["best_mir"],
                            info["best_epoch"], list(info.get("epoch_losses", [])))
        pos = Position()
        if self.ts.val is not None:  # the starting point's MIR, for reference; the best epoch is chosen among trained ones
            pos.history.append({"epoch": -1, "val_MIR": self.validate(self.ts.val)})
        return pos

    def run(self) -> Path:
        pos = self.resume()
        stopped = self.stopped(pos)
        if stopped and self.finished(pos):  # a rerun of a finished run: nothing to train, nothing to rewrite
            if self.d.main:
                say(self.opts, f"{self.out}: training already finished ({stopped}, {pos.global_step} optimizer "
                               "steps); nothing to do")
            return self.out
        total = (self.r.epochs - pos.epoch) * self.micro - pos.next_micro
        if self.max_steps:
            total = min(total, max(0, self.max_steps - pos.global_step) * self.r.accumulate)
        self.report = Reporter(self.opts, max(total, 0), self.r.log_every, self.d.main)
        self.net.train()
        while not stopped:
            if not self.epoch(pos):
                return self.finish(pos, "max_steps")
            stopped = self.stopped(pos)
        return self.finish(pos, stopped)

    def stopped(self, pos: Position) -> str | None:
        """Why training ends at ``pos`` (checked before every epoch, a resumed one included), else None."""
        if self.max_steps and pos.global_step >= self.max_steps:
            return "max_steps"
        if pos.epoch >= self.r.epochs:
            return "epochs"
        if pos.best_epoch >= 0 and pos.epoch - pos.best_epoch > self.r.patience:
            return "early stop"
        return None

    def finished(self, pos: Position) -> bool:
        """The outputs of a run stopped at ``pos`` are written (a run killed after its last checkpoint
        but before them is not finished: it writes them without training)."""
        try:
            record = json.loads((self.out / "training.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return (self.out / "model.safetensors").is_file() and record.get("optimizer_steps") == pos.global_step

    def epoch(self, pos: Position) -> bool:
        """Train the rest of ``pos.epoch``, validate, checkpoint; False when --max-steps stopped it mid-way."""
        r, epoch, start = self.r, pos.epoch, pos.next_micro
        for g in self.opt.param_groups:
            g["lr"] = r.lr * r.lr_decay ** epoch
        iters = []
        for data, sampler in zip(self.datas, self.samplers):
            data.epoch = epoch
            sampler.set_position(epoch, start)
            iters.append(iter(loader(data, sampler, self.workers)))
        losses, t0 = pos.epoch_losses if start else [], time.perf_counter()
        pos.epoch_losses = losses
        for m in range(start, self.micro):
            batches = [(s, next(it)) for s, it in zip(self.ts.streams, iters)]
            with self.autocast():
                loss, _ = self.step_loss(batches)
            self.scaler.scale(loss * distributed.loss_scale(self.d) / r.accumulate).backward()
            losses.append(float(loss.detach()))
            self.report.step(epoch, losses[-1], r.batch_size * len(batches))
            if (m + 1) % r.accumulate and m + 1 < self.micro:
                continue
            self.scaler.step(self.opt)
            self.scaler.update()
            self.opt.zero_grad(set_to_none=True)
            pos.global_step += 1
            pos.next_micro = m + 1
            if m + 1 == self.micro:
                break
            if self.max_steps and pos.global_step >= self.max_steps:
                self.checkpoint(pos)
                return False
            if r.checkpoint_every and pos.global_step % r.checkpoint_every == 0:
                self.checkpoint(pos)
        del iters
        entry: dict[str, Any] = {"epoch": epoch, "loss": float(np.mean(losses)) if losses else None,
                                 "seconds": round(time.perf_counter() - t0, 1), "steps": pos.global_step}
        if self.ts.val is not None:
            entry["val_MIR"] = self.validate(self.ts.val)
            if entry["val_MIR"] > pos.best_mir:
                pos.best_mir, pos.best_epoch = entry["val_MIR"], epoch
                if self.d.main:
                    training_state.save_best(self.out, self.net)
        pos.history.append(entry)
        pos.epoch, pos.next_micro, pos.epoch_losses = epoch + 1, 0, []
        self.checkpoint(pos)
        return True

    def validate(self, val: TrainStream) -> float:
        """Rank 0 scores the validation split ``val``; every rank gets its MIR (the early-stop decision is shared)."""
        mir = None
        if self.d.main:
            was = self.net.training
            self.net.eval()
            data = ItemData(val, self.model.preprocess_video if val.kind == "video" else self.model.preprocess_image)
            dl = torch.utils.data.DataLoader(data, batch_size=64, num_workers=self.workers, collate_fn=collate)
            mir = validation_mir(self.model, val, dl, self.device, self.autocast)
            self.net.train(was)
        return float(distributed.broadcast(self.d, mir))

    def checkpoint(self, pos: Position) -> None:
        if self.d.main:
            training_state.save(self.out, self.net, self.opt, self.scaler, {
                "format": FORMAT, "recipe_hash": self.recipe_hash, **dataclasses.asdict(pos)})
        distributed.barrier(self.d)

    def _base_options(self) -> dict[str, Any]:
        """The base model's options as the folder keeps them: an architecture given as a JSON file is
        copied in (``arch.json``) and named relative to the folder, so the folder loads from anywhere
        and no path of the training machine leaks into labels."""
        options = self.opts.model_options.as_dict()
        arch = options.get("arch")
        if isinstance(arch, str) and arch.endswith(".json") and Path(arch).is_file():
            atomic_write_text(self.out / ARCH_FILE, Path(arch).read_text(encoding="utf-8"))
            options["arch"] = ARCH_FILE
        return options

    def finish(self, pos: Position, stopped: str) -> Path:
        """Rank 0 writes the model the evaluation loads (best validation epoch, else the last weights) and the record."""
        out, ts = self.out, self.ts
        if self.d.main:
            best_file = out / "best.safetensors"
            state = load_state_dict(best_file) if pos.best_epoch >= 0 and best_file.is_file() else \
                {k: v.detach().cpu() for k, v in self.net.state_dict().items()}
            save_safetensors(out / "model.safetensors", state)
            meta = {"format": FORMAT, "base_model": self.opts.model, "base_options": self._base_options(),
                    "recipe": self.config, "history": pos.history, "best_epoch": pos.best_epoch,
                    "best_val_MIR": pos.best_mir if pos.best_epoch >= 0 else None}
            atomic_write_json(out / "model.json", meta)
            atomic_write_json(out / "training.json", {
                **meta, "versions": _versions(), "data_hash": ts.data_hash, "trainset_notes": ts.notes,
                "train_items": {s.name: len(s) for s in ts.streams}, "val_items": len(ts.val) if ts.val else 0,
                "world_size": self.d.world, "optimizer_steps": pos.global_step, "stopped_by": stopped,
                "samples_per_second_this_run": round(self.report.rate, 2)})
        distributed.barrier(self.d)
        return out


def _trainer(name: str) -> Any:
    """The factory of trainer ``name``: its recipe's fields are its ``-O`` options, stated once."""
    def factory(opts: TrainOptions) -> Path:
        return run(opts, Recipe.from_options(name, opts))

    factory.__name__ = name
    return DECLARED[name](factory)


TRAINERS = {name: _trainer(name) for name in ("bnl", "snl", "snl_query", "negbench", "triplet")}
bnl, snl, snl_query, negbench, triplet = TRAINERS.values()


def train(opts: TrainOptions, trainer: str) -> Any:
    """Train with the built-in ``trainer`` (its ``-O`` bound as the host binds them)."""
    return TRAINERS[trainer](opts)
