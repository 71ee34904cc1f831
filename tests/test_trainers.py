"""Trainers: one step lowers the loss, resume equals an uninterrupted run, checkpoints round-trip,
bad checkpoints are refused, and the CLI trains a model that `run` then evaluates."""

import json
from pathlib import Path

import pytest
import torch

from negharness.api import installed_plugins
from negharness.api import UserError
from negharness.api import ModelOptions
from negharness.api import TrainOptions
from negharness.engine.distributed import Dist
from negharness.io.checkpoints import load_state_dict
from negharness.plugins.negation_data import SampleData, collate, sample_list
from negharness.plugins.negation_training import Recipe
from negharness.plugins.shapes_clip import shapes_clip
from negharness.plugins.trained_model import clip_bnl
from negharness.api import bind_declared
from negharness.plugins.training_run import TRAINERS, train
from negharness.plugins.training_step import StepLoss
from negharness.tasks.shapes.training import build_stream, shapes
from negharness.testing import lookup

TINY = {"epochs": "2", "steps_per_epoch": "2", "lr": "1e-4"}
DATA = {"n_train": "96", "n_val": "64"}  # -T: the shapes set's sizes


def _opts(out, trainer_extra=None, **kw):
    kw.setdefault("batch_size", 16)
    return TrainOptions(out=Path(out), model="shapes_clip", task="shapes", task_extra=dict(DATA), device="cpu",
                        workers=0, extra={**TINY, **(trainer_extra or {})},
                        plugins=lookup(model={"shapes_clip": shapes_clip}, trainset={"shapes": shapes}), **kw)


@pytest.mark.needs("nltk")
@pytest.mark.parametrize("trainer", ["triplet", "bnl", "snl", "snl_query", "negbench"])
def test_one_optimizer_step_lowers_the_loss_on_a_fixed_batch(trainer, tmp_path):
    torch.manual_seed(0)
    extra = {"lambda_v": "1.0", "lambda_q": "1.0", "lambda_1": "1.0"} if trainer.startswith(("bnl", "snl")) else {}
    recipe = _recipe(trainer, _opts(tmp_path, {"lr": "1e-6", **extra}))
    if trainer == "negbench":
        recipe.lr = 1e-6  # the paper's 1e-8 moves a tiny model too little to see in one step
    model = shapes_clip(ModelOptions())
    stream = build_stream(0, "train", "video", 96, tmp_path)
    data = SampleData(stream, sample_list(stream, "caption"), model.preprocess_video, 0, 0)
    batch = collate([data[j] for j in range(0, 96, 3)])
    net = model.modules()[0].train()
    step = StepLoss(model, net, recipe, Dist(), torch.device("cpu"))
    opt = torch.optim.RMSprop(net.parameters(), lr=recipe.lr)
    before, parts = step([(stream, batch)])
    expected = {"triplet": "video/triplet", "bnl": "video/bcl_v", "snl": "video/snl", "snl_query": "video/snl",
                "negbench": "video/negbench"}
    assert expected[trainer] in parts
    before.backward()
    opt.step()
    opt.zero_grad()
    after, _ = step([(stream, batch)])
    assert after.item() < before.item()


def _recipe(trainer, opts):
    """The recipe ``trainer`` runs with: its -O bound as the host binds them, before the trainer starts."""
    return Recipe.from_options(trainer, bind_declared(TRAINERS[trainer], opts, trainer))


def test_paper_defaults():
    nb = _recipe("negbench", TrainOptions(out=Path(".")))
    assert (nb.alpha, nb.lr, nb.optimizer) == (0.99, 1e-8, "adamw")
    snl = _recipe("snl_query", TrainOptions(out=Path(".")))
    assert snl.snl and snl.pivot == "query" and snl.lambda_1 == 1e-3
    bnl = _recipe("bnl", TrainOptions(out=Path(".")))
    assert (bnl.lr, bnl.lr_decay, bnl.batch_size, bnl.patience, bnl.optimizer) == (1e-6, 0.99, 64, 2, "rmsprop")
    # --precision / --batch-size are spelled as for `run`; the -O spelling says which flag to give
    flagged = _recipe("bnl", TrainOptions(out=Path("."), precision="bf16", batch_size=8, seed=3))
    assert (flagged.precision, flagged.batch_size, flagged.seed) == ("bf16", 8, 3)
    for key, flag in (("batch_size", "--batch-size"), ("precision", "--precision"), ("seed", "--seed"),
                      ("n_train", "-T n_train=N"), ("world_seed", "-T world_seed=N")):  # -O n_train was taken once
        with pytest.raises(UserError, match=f"-O {key}: give {flag}"):
            _recipe("bnl", TrainOptions(out=Path("."), extra={key: "8"}))
    with pytest.raises(UserError, match="--batch-size 0: must be at least 1"):
        _recipe("bnl", TrainOptions(out=Path("."), batch_size=0))
    with pytest.raises(UserError, match="-O pivot"):
        _recipe("snl", TrainOptions(out=Path("."), extra={"pivot": "text"}))


@pytest.mark.needs("nltk")
def test_resume_equals_an_uninterrupted_run(tmp_path):
    straight = train(_opts(tmp_path / "a"), "bnl")
    first = train(_opts(tmp_path / "b", {"epochs": "1"}), "bnl")  # "interrupted" after one epoch
    resumed = train(_opts(tmp_path / "b"), "bnl")                  # the same command, finishing the job
    a, b = load_state_dict(straight / "model.safetensors"), load_state_dict(resumed / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ha = json.loads((straight / "model.json").read_text())["history"]
    hb = json.loads((resumed / "model.json").read_text())["history"]
    assert [h["val_MIR"] for h in ha] == [h["val_MIR"] for h in hb]
    assert first == resumed
    with pytest.raises(UserError, match="another recipe"):
        train(_opts(tmp_path / "b", {"m2": "0.5"}), "bnl")


@pytest.mark.needs("nltk")
def test_trained_folder_round_trips_and_bad_checkpoints_are_refused(tmp_path):
    out = train(_opts(tmp_path / "run"), "triplet")
    model = clip_bnl(ModelOptions(checkpoint=str(out), plugins=installed_plugins()))
    saved = load_state_dict(out / "model.safetensors")
    state = model.model.state_dict()
    assert all(torch.equal(state[k].to(saved[k].dtype), saved[k]) for k in saved)
    assert model.name == "clip_bnl"
    (tmp_path / "junk").mkdir()
    with pytest.raises(UserError, match="model.json"):
        clip_bnl(ModelOptions(checkpoint=str(tmp_path / "junk")))
    (tmp_path / "junk" / "model.json").write_text('{"format": "something-else"}')
    with pytest.raises(UserError, match="not a negharness training output"):
        clip_bnl(ModelOptions(checkpoint=str(tmp_path / "junk")))
    (out / "model.safetensors").write_bytes(b"corrupt")
    with pytest.raises(UserError, match="safetensors"):
        clip_bnl(ModelOptions(checkpoint=str(out), plugins=installed_plugins()))
    with pytest.raises(UserError, match="-O colour"):
        train(_opts(tmp_path / "x", {"colour": "red"}), "bnl")


@pytest.mark.needs("nltk")
def test_train_then_run_from_the_cli(cli, tmp_path):
    args = ["train", "--trainer", "bnl", "--model", "shapes_clip", "--task", "shapes", "--out", str(tmp_path / "clip_bnl")]
    for k, v in TINY.items():
        args += ["-O", f"{k}={v}"]
    for k, v in DATA.items():
        args += ["-T", f"{k}={v}"]
    res = cli(*args)
    assert res.returncode == 0, res.stderr
    ran = cli("run", "--model", "clip_bnl", "--checkpoint", str(tmp_path / "clip_bnl"), "--task", "shapes_t2v_original",
              "--limit", "50")
    assert ran.returncode == 0, ran.stderr
    assert "clip_bnl" in ran.stdout
    bad = cli("train", "--trainer", "bnl", "--model", "shapes_clip", "--task", "msrvtt", "--out", str(tmp_path / "x"),
              "--workers", "0")
    assert bad.returncode == 2 and "--task msrvtt" in bad.stderr


def test_shapes_pretrain_declares_its_o_options_and_refuses_an_unknown_one():
    """Its -O keys used to be read one by one with their defaults restated, and a misspelt key
    (``-O stepz=10``) was silently ignored: the run trained 300 steps."""
    from pathlib import Path

    from negharness.api import TrainOptions, UserError
    from negharness.api import declared_options
    from negharness.plugins.shapes_pretrain import _recipe, train

    assert declared_options(train)["steps"].default == 300
    assert _recipe(bind_declared(train, TrainOptions(out=Path("x"), extra={"steps": "7"}), "shapes_pretrain"))["steps"] == 7
    with pytest.raises(UserError, match=r"-O stepz: not an option of trainer 'shapes_pretrain'; did you mean steps"):
        bind_declared(train, TrainOptions(out=Path("x"), extra={"stepz": "10"}), "shapes_pretrain")
