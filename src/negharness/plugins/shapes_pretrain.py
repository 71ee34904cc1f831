"""Trains the embedded world's tiny CLIP from scratch: the recipe behind the bundled weights.

Symmetric contrastive loss where items with identical scene facts are all positives, on video and
image batches together, AdamW with a one-cycle schedule. Defaults reproduce the bundled file:
``negharness train --trainer shapes_pretrain --out plugins/weights/shapes_clip.safetensors``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from negharness.api import ModelOptions, TrainOptions
from negharness.api.checkpoints import save_safetensors
from negharness.api.devices import resolve_device
from negharness.api.files import atomic_write_json, data_root
from negharness.api import check_batch_size
from negharness.plugins import options as declared
from negharness.plugins.losses import multi_positive_infonce
from negharness.plugins.openclip_model import OpenClipModel
from negharness.plugins.shapes_clip import CONFIG
from negharness.world.media import load_world


def _recipe(opts: TrainOptions) -> dict[str, Any]:
    """The run's settings: ``-O`` as bound to its declaration (`negharness.plugins.options.SHAPES_PRETRAIN`),
    the seed and --batch-size."""
    return {"trainer": "shapes_pretrain", "seed": opts.seed, **opts.values,
            "batch_size": check_batch_size(opts.batch_size or 128)}


@declared.SHAPES_PRETRAIN
def train(opts: TrainOptions) -> Path:
    r = _recipe(opts)
    torch.manual_seed(r["seed"])
    device = resolve_device(opts.device)
    model = OpenClipModel.create("shapes_clip", ModelOptions(arch=str(CONFIG)), default_pretrained=None)
    model.to(device)
    root = data_root(opts.data_root)[0]
    videos = load_world(r["world_seed"], "train", "video", r["n_train"], root)
    images = load_world(r["world_seed"], "train", "image", r["n_train"], root)
    pix_v, pix_i = videos.pixels, images.pixels
    group_ids = {k: i for i, k in enumerate(sorted(set(videos.groups) | set(images.groups)))}
    g_v = torch.tensor([group_ids[k] for k in videos.groups])
    g_i = torch.tensor([group_ids[k] for k in images.groups])

    net = model.model.train()
    opt = torch.optim.AdamW(net.parameters(), lr=r["lr"], weight_decay=r["weight_decay"])
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=r["lr"], total_steps=r["steps"], pct_start=0.05)
    rng = np.random.default_rng(r["seed"])
    b = r["batch_size"]
    bar = opts.progress.add_task("training shapes_clip", total=r["steps"]) if opts.progress else None
    start, history = time.perf_counter(), []
    for step in range(r["steps"]):
        iv = np.sort(rng.choice(len(videos.ids), b, replace=False))
        ii = np.sort(rng.choice(len(images.ids), b, replace=False))
        caps = [videos.captions[i][rng.integers(len(videos.captions[i]))] for i in iv]
        caps += [images.captions[i][rng.integers(len(images.captions[i]))] for i in ii]
        ev = model.encode_video(model.preprocess_batch(pix_v[iv], "video").to(device))
        ei = model.encode_image(model.preprocess_batch(pix_i[ii], "image").to(device))
        et = model.encode_text(caps)
        scale = net.logit_scale.exp().clamp(max=100)
        loss = (multi_positive_infonce(et[:b], ev, g_v[iv].to(device), scale)
                + multi_positive_infonce(et[b:], ei, g_i[ii].to(device), scale))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        loss_value = float(loss.detach())
        history.append(round(loss_value, 4))
        if bar is not None:
            opts.progress.update(bar, advance=1, description=f"training shapes_clip (loss {loss_value:.3f})")
    net.eval()
    state = {k: v.half() for k, v in net.state_dict().items()}  # fp16 on disk: a few MB
    out = save_safetensors(opts.out, state, metadata={"recipe": r})
    atomic_write_json(Path(str(opts.out) + ".train.json"), {
        "recipe": r, "loss_every_25_steps": history[::25], "seconds": round(time.perf_counter() - start, 1)})
    return out
