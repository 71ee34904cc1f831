"""The loop at scale, on CPU: a run killed mid-epoch (with gradient accumulation) resumes to the same
weights as an uninterrupted one; DDP with 2 gloo processes equals 1 process; a run resumes on
another number of ranks; the sampler shards global batches so that ranks' shares make the batch."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from negharness.api import UserError
from negharness.api import ModelOptions
from negharness.api import TrainOptions
from negharness.io.checkpoints import load_state_dict
from negharness.plugins.negation_data import EpochBatches
from negharness.plugins.openclip_model import OpenClipModel
from negharness.plugins.training_run import train
from negharness.tasks.shapes.training import shapes
from negharness.testing import lookup

TINY_VIT = {"model_cfg": {"embed_dim": 32, "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16,
                                                           "head_width": 16},
                          "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}},
            "preprocess_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}}
RECIPE = {"epochs": "2", "steps_per_epoch": "4", "lr": "1e-5", "checkpoint_every": "1",
          "lambda_v": "1", "lambda_q": "1", "accumulate": "2"}
DATA = {"n_train": "48", "n_val": "24"}
HOLD_LOCK = ("import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
             "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(600)")


def _arch(tmp_path: Path) -> str:
    path = tmp_path / "tiny_vit.json"
    path.write_text(json.dumps(TINY_VIT))
    return str(path)


def _opts(tmp_path: Path, out: str, **kw) -> TrainOptions:
    arch = _arch(tmp_path)
    return TrainOptions(out=tmp_path / out, model="clip", model_options=ModelOptions(arch=arch), task="shapes",
                        task_extra=dict(DATA), device="cpu", extra=dict(RECIPE), workers=0,
                        batch_size=kw.pop("batch_size", 8),
                        plugins=lookup(model={"clip": lambda o: OpenClipModel.create("clip", o, default_pretrained=None)},
                                       trainset={"shapes": shapes}), **kw)


def _close(a: Path, b: Path, atol: float) -> float:
    x, y = load_state_dict(a / "model.safetensors"), load_state_dict(b / "model.safetensors")
    assert x.keys() == y.keys()
    worst = max(float((x[k].float() - y[k].float()).abs().max()) for k in x)
    assert worst <= atol, worst
    return worst


def test_killed_run_resumes_exactly(tmp_path):
    straight = train(_opts(tmp_path, "straight"), "bnl")
    for steps in (1, 3):  # killed after 1 and after 3 optimizer steps (mid-epoch, accumulating 2 micro-batches)
        train(_opts(tmp_path, "killed", max_steps=steps), "bnl")
        state = json.loads((tmp_path / "killed" / "checkpoint" / "state.json").read_text())
        assert state["global_step"] == steps
    resumed = train(_opts(tmp_path, "killed"), "bnl")
    _close(straight, resumed, 1e-6)
    a = json.loads((straight / "training.json").read_text())["history"]
    b = json.loads((resumed / "training.json").read_text())["history"]
    assert [h["epoch"] for h in a] == [h["epoch"] for h in b] == [-1, 0, 1]
    assert np.allclose([h["val_MIR"] for h in a], [h["val_MIR"] for h in b])
    # each epoch's loss is the mean over all its micro-batches, whether or not the run was resumed in it
    assert np.allclose([h.get("loss") or 0.0 for h in a], [h.get("loss") or 0.0 for h in b], rtol=1e-6)
    assert json.loads((straight / "training.json").read_text())["optimizer_steps"] == 4


def test_rerunning_a_finished_run_trains_nothing_and_rewrites_nothing(tmp_path):
    """A finished run rerun as it was (here stopped by --max-steps) says so and leaves every file as it
    was: it used to train one more step on each rerun (4, then 5). A run killed after its last
    checkpoint but before its outputs writes them from that checkpoint, without training."""
    lines: list[str] = []
    out = train(_opts(tmp_path, "short", max_steps=3, log=lines.append), "bnl")
    files = ("model.safetensors", "training.json", "model.json", "checkpoint/state.json")
    before = {f: (out / f).read_bytes() for f in files}
    lines.clear()
    assert train(_opts(tmp_path, "short", max_steps=3, log=lines.append), "bnl") == out
    assert {f: (out / f).read_bytes() for f in files} == before
    assert any("already finished" in line and "nothing to do" in line for line in lines), lines
    (out / "training.json").unlink()  # killed between the last checkpoint and the outputs
    train(_opts(tmp_path, "short", max_steps=3), "bnl")
    assert json.loads((out / "training.json").read_text())["optimizer_steps"] == 3
    assert (out / "model.safetensors").read_bytes() == before["model.safetensors"]
    assert json.loads((out / "checkpoint" / "state.json").read_text())["global_step"] == 3


@pytest.mark.skipif(sys.platform == "win32", reason="the flock lock; Windows has the O_EXCL fallback")
def test_one_writer_per_training_folder_and_a_killed_holder_leaves_it_free(tmp_path):
    """A second run on a folder another process writes is refused at once, naming the folder (two runs
    used to both report "wrote", one's checkpoint cleanup deleting the other's files); once the
    holder is killed (SIGKILL: no clean-up of its own), a run proceeds."""
    out = tmp_path / "busy"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(out / ".train.lock")], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(UserError, match=f"--out {out}: another training run is writing this folder"):
            train(_opts(tmp_path, "busy", max_steps=1), "bnl")
        assert not (out / "checkpoint").exists()  # refused before anything was written
    finally:
        holder.kill()
        holder.wait()
    assert holder.returncode == -signal.SIGKILL
    assert json.loads((train(_opts(tmp_path, "busy", max_steps=1), "bnl") / "training.json").read_text()
                      )["optimizer_steps"] == 1


def test_a_training_folder_keeps_its_architecture_config(tmp_path, monkeypatch):
    """A JSON --arch is copied into the folder and named relative to it: the folder loads from
    anywhere, and no path of the training machine is stored."""
    out = train(_opts(tmp_path, "moved", max_steps=1), "bnl")
    meta = json.loads((out / "model.json").read_text())
    assert meta["base_options"]["arch"] == "arch.json" and str(tmp_path) not in json.dumps(meta["base_options"])
    assert json.loads((out / "arch.json").read_text()) == TINY_VIT
    elsewhere = tmp_path / "elsewhere"
    out.rename(elsewhere)
    (tmp_path / "tiny_vit.json").unlink()  # the original config is gone
    monkeypatch.chdir(tmp_path)
    from negharness.plugins.trained_model import clip_bnl

    model = clip_bnl(ModelOptions(checkpoint=str(elsewhere), plugins=_opts(tmp_path, "x").plugins))
    assert model.encode_text(["a red circle"]).shape[-1] == TINY_VIT["model_cfg"]["embed_dim"]


def test_bf16_autocast_and_gradient_checkpointing_train(tmp_path):
    """The options run and move the weights; checkpointed activations give the fp32 run's weights."""
    plain = train(_opts(tmp_path, "plain", max_steps=1), "bnl")
    ckpt = _opts(tmp_path, "ckpt", max_steps=1)
    ckpt.extra["grad_checkpointing"] = "true"
    _close(plain, train(ckpt, "bnl"), 1e-6)
    half = _opts(tmp_path, "bf16", max_steps=1, precision="bf16")
    out = train(half, "bnl")
    rec = json.loads((out / "training.json").read_text())
    assert rec["recipe"]["precision"] == "bf16" and rec["optimizer_steps"] == 1
    moved = load_state_dict(out / "model.safetensors")
    torch.manual_seed(0)  # the loop seeds the initialisation with the run's seed (0)
    start = OpenClipModel.create("clip", ModelOptions(arch=_arch(tmp_path)), default_pretrained=None).model.state_dict()
    assert torch.equal(start["logit_scale"], moved["logit_scale"])  # bnl gives it no gradient
    assert any(not torch.equal(moved[k], start[k]) for k in moved)  # the bf16 step moved the weights


def test_ranks_shares_concatenate_to_the_one_process_batch():
    one = EpochBatches(40, 8, seed=3, stream_index=0)
    shares = [EpochBatches(40, 8, seed=3, stream_index=0, rank=r, world=2) for r in range(2)]
    for s in [one, *shares]:
        s.set_position(1, 2)
    for whole, a, b in zip(one, *shares):
        assert whole == a + b
    assert len(one) == 3
    with pytest.raises(ValueError):
        EpochBatches(40, 8, 0, 0, rank=0, world=3)


@pytest.mark.heavy  # tens of seconds: scheduled first (tests/conftest.py)
@pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                    reason="torch.distributed with gloo is not available")
def test_ddp_two_gloo_processes_equal_one_and_resume_on_another_world_size(cli, cli_subprocess, tmp_path):
    """The two-rank runs are launched through the console script; the one-process runs they are
    compared with run in this process (the same training, without a torch import each)."""
    arch = _arch(tmp_path)
    args = ["train", "--trainer", "bnl", "--model", "clip", "--arch", arch, "--task", "shapes", "--device", "cpu",
            "--workers", "0", "-T", "n_train=48", "-T", "n_val=24", "--batch-size", "8", "-O", "epochs=1",
            "-O", "lr=1e-5", "-O", "lambda_v=1", "-O", "lambda_q=1", "-O", "checkpoint_every=1"]
    env = {"OMP_NUM_THREADS": "1"}
    one = cli(*args, "--out", str(tmp_path / "one"), "--max-steps", "3", env=env)
    assert one.returncode == 0, one.stderr
    two = cli_subprocess(*args, "--out", str(tmp_path / "two"), "--max-steps", "3", "--nproc", "2", env=env)
    assert two.returncode == 0, two.stderr
    _close(tmp_path / "one", tmp_path / "two", 1e-4)
    rec = json.loads((tmp_path / "two" / "training.json").read_text())
    assert rec["world_size"] == 2 and rec["optimizer_steps"] == 3
    # killed on 2 ranks after 1 step, resumed on 1 process
    part = cli_subprocess(*args, "--out", str(tmp_path / "mixed"), "--max-steps", "1", "--nproc", "2", env=env)
    assert part.returncode == 0, part.stderr
    rest = cli(*args, "--out", str(tmp_path / "mixed"), "--max-steps", "3", env=env)
    assert rest.returncode == 0, rest.stderr
    _close(tmp_path / "one", tmp_path / "mixed", 1e-4)
