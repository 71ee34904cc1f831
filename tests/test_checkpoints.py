"""Released checkpoint layouts load their tensors safely: nT2VR's .pth.tar (pickled opt/config beside
the weights), NegBench's open_clip training files, CLIP4Clip's state dicts, zip and legacy formats.
A pickled reduction that would run a command is never run: refused by default, skipped and named with
NEGHARNESS_SKIP_PICKLE_CALLS=1; ignored objects are named; a "fine-tuned" file equal to its base model
is reported."""

import argparse
import json
import os

import numpy as np
import pytest
import torch

from negharness.api import installed_plugins
from negharness.api import UserError
from negharness.api import ModelOptions
from negharness.io.checkpoints import equals_base, read_checkpoint, strip_prefixes
from negharness.io.safe_unpickle import CallRefused, restricted_load
from negharness.plugins import openclip_model
from negharness.plugins.clip4clip import clip4clip
from negharness.plugins.finetuned_clip import negationclip, negclip, tripletclip
from negharness.plugins.openclip_model import OpenClipModel, clip
from negharness.plugins.openclip_weights import arch_of_state, no_random_init
from negharness.plugins.trained_model import FORMAT, clip_bnl

TINY_VIT = {"model_cfg": {"embed_dim": 32, "quick_gelu": True,
                          "vision_cfg": {"image_size": 32, "layers": 1, "width": 64, "patch_size": 16},
                          "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 1, "layers": 1}}}


class config:
    """Stands for the authors' config class, pickled by reference to a module a user does not have."""

    sample_frame = 8
    float16 = True


class RunsACommand:
    """Unpickling this with pickle.load would run a shell command that creates the marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    folder = tmp_path_factory.mktemp("src")
    cfg = folder / "tiny_vit.json"
    cfg.write_text(json.dumps(TINY_VIT))
    torch.manual_seed(3)
    return cfg, OpenClipModel.create("src", ModelOptions(arch=str(cfg)), default_pretrained=None)


def _embeddings(model):
    rng = np.random.default_rng(0)
    pixels = torch.stack([model.preprocess_image(i) for i in rng.integers(0, 255, size=(2, 32, 32, 3), dtype=np.uint8)])
    with torch.inference_mode():
        return model.encode_text(["a dog", "no cat in the room"]), model.encode_image(pixels)


def _nt2vr_file(path, state, marker=None, legacy=False, dtype=None):
    """As nT2VR's trainer.save_checkpoint writes it: torch.save of this dict (with ``marker``, a nested
    object whose unpickling would run a command)."""
    model = {f"clip_model.ClipModel.{k}": (v.to(dtype) if dtype else v) for k, v in state.items()}
    opt = argparse.Namespace(lr=1e-5, num_epochs=20, **({"runner": RunsACommand(marker)} if marker else {}))
    torch.save({"epoch": 4, "model": model, "best_perf": 0.404, "config": config(), "opt": opt,
                "optimizer": {"state": {}, "param_groups": [{"lr": 1e-5, "params": [0, 1]}]}},
               path, _use_new_zipfile_serialization=not legacy)
    return model


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_nt2vr_pth_tar_tensors_load_and_nothing_runs(source, tmp_path, legacy, monkeypatch):
    _, src = source
    marker = tmp_path / "MARKER"
    path = tmp_path / "model_best.pth.tar"
    written = _nt2vr_file(path, src.model.state_dict(), marker, legacy=legacy, dtype=torch.float16)
    with pytest.raises(UserError, match=f"would call {os.system.__module__}.system") as refused:
        read_checkpoint(path)
    assert str(path) in str(refused.value) and "NEGHARNESS_SKIP_PICKLE_CALLS=1" in str(refused.value)
    assert not marker.exists()
    monkeypatch.setenv("NEGHARNESS_SKIP_PICKLE_CALLS", "1")
    with pytest.warns(UserWarning, match="argparse.Namespace"):
        ckpt = read_checkpoint(path)
    assert not marker.exists()
    assert ckpt.wrapper == "model" and ckpt.stripped == ["clip_model.ClipModel."]
    assert set(ckpt.ignored) == {"argparse.Namespace", f"{__name__}.config", f"{os.system.__module__}.system"}
    assert ckpt.skipped == [f"{os.system.__module__}.system"]
    assert ckpt.notes()["skipped_calls"] == [f"{os.system.__module__}.system"]
    for key, value in written.items():
        got = ckpt.state[key[len("clip_model.ClipModel."):]]
        assert got.dtype == torch.float16 and torch.equal(got, value)


def test_restricted_reader_builds_stand_ins_only(tmp_path):
    marker = tmp_path / "MARKER"
    path = tmp_path / "f.pt"
    torch.save({"w": torch.arange(6.0).view(2, 3).t(), "p": torch.nn.Parameter(torch.ones(2)),
                "boom": RunsACommand(marker), "b": b"\x00\xff", "s": {1, 2}}, path)
    with pytest.raises(CallRefused, match="system"):
        restricted_load(path)
    out = restricted_load(path, skip_calls=True)
    assert not marker.exists() and out.skipped == [f"{os.system.__module__}.system"]
    assert torch.equal(out.obj["w"], torch.arange(6.0).view(2, 3).t()) and out.obj["w"].stride() == (1, 3)
    assert type(out.obj["p"]) is torch.Tensor and torch.equal(out.obj["p"], torch.ones(2))
    assert out.obj["b"] == b"\x00\xff" and out.obj["s"] == {1, 2}
    assert out.ignored == [f"{os.system.__module__}.system"] and "ignored" in repr(out.obj["boom"])


def test_clip_bnl_loads_a_released_nt2vr_file(source, tmp_path):
    cfg, src = source
    path = tmp_path / "model_best.pth.tar"
    _nt2vr_file(path, src.model.state_dict())
    with pytest.warns(UserWarning, match="ignored pickled objects"):
        model = clip_bnl(ModelOptions(arch=str(cfg), checkpoint=str(path)))
    for a, b in zip(_embeddings(src), _embeddings(model)):
        assert torch.equal(a, b)
    assert set(model.describe()["checkpoint_notes"]["ignored_objects"]) == {"argparse.Namespace", f"{__name__}.config"}
    assert model.name == "clip_bnl"


def test_negbench_open_clip_training_file(source, tmp_path):
    """NegBench's src/training/main.py: {"epoch", "name", "state_dict" (DDP "module." keys), "optimizer"}."""
    cfg, src = source
    path = tmp_path / "checkpoint.pt"
    torch.save({"epoch": 1, "name": "NegCLIP_CC12M_NegFull_ViT-B-32_lr1e-8_clw0.99_mlw0.01",
                "state_dict": {f"module.{k}": v for k, v in src.model.state_dict().items()},
                "optimizer": {"state": {0: {"exp_avg": torch.zeros(3)}}, "param_groups": []}}, path)
    ckpt = read_checkpoint(path)  # plain data: torch.load(weights_only=True) reads it, nothing ignored
    assert ckpt.ignored == [] and ckpt.wrapper == "state_dict" and ckpt.stripped == ["module."]
    model = negclip(ModelOptions(arch=str(cfg), checkpoint=str(path)))
    for a, b in zip(_embeddings(src), _embeddings(model)):
        assert torch.equal(a, b)
    assert "checkpoint_notes" not in model.describe()


def test_clip4clip_file_with_a_foreign_object(source, tmp_path):
    """CLIP4Clip's pytorch_model.bin.N keeps its "clip." keys for the plugin to split."""
    cfg, src = source
    path = tmp_path / "pytorch_model.bin.4"
    torch.save({**{f"clip.{k}": v for k, v in src.model.state_dict().items()}, "args": config()}, path)
    with pytest.warns(UserWarning, match="config"):
        model = clip4clip(ModelOptions(arch=str(cfg), checkpoint=str(path)))
    for a, b in zip(_embeddings(src), _embeddings(model)):
        assert torch.equal(a, b)
    assert model.describe()["checkpoint_notes"] == {"ignored_objects": [f"{__name__}.config"]}


def test_mismatch_names_file_and_keys(source, tmp_path):
    cfg, src = source
    state = dict(src.model.state_dict())
    state.pop("text_projection")
    state["visual.extra.weight"] = torch.zeros(1)
    path = tmp_path / "ckpt.pth.tar"
    _nt2vr_file(path, state)
    with pytest.warns(UserWarning), pytest.raises(UserError) as exc:
        clip_bnl(ModelOptions(arch=str(cfg), checkpoint=str(path)))
    msg = str(exc.value)
    assert str(path) in msg and "'text_projection'" in msg and "'visual.extra.weight'" in msg


def test_strip_prefixes_only_when_every_key_has_it():
    t = torch.zeros(1)
    assert strip_prefixes({"module.clip_model.ClipModel.a": t})[0].keys() == {"a"}
    assert strip_prefixes({"module.a": t, "b": t})[0].keys() == {"module.a", "b"}


def test_equals_base_at_the_checkpoint_precision():
    base = {"a": torch.randn(4, 4), "b": torch.randn(3)}
    assert equals_base({k: v.clone() for k, v in base.items()}, base)
    assert equals_base({k: v.half() for k, v in base.items()}, base)  # nT2VR saves fp16
    changed = {k: v.clone() for k, v in base.items()}
    changed["b"][0] += 1e-3
    assert not equals_base(changed, base)
    assert not equals_base({**base, "c": torch.zeros(1)}, base)
    assert not equals_base(base, None)


def test_released_file_equal_to_its_base_is_reported(source, tmp_path, monkeypatch):
    cfg, src = source
    path = tmp_path / "model_best.pth.tar"
    _nt2vr_file(path, src.model.state_dict())
    seen = []
    monkeypatch.setattr(openclip_model, "cached_pretrained_state",
                        lambda arch, tag: seen.append(tag) or {k: v.clone() for k, v in src.model.state_dict().items()})
    with pytest.warns(UserWarning) as caught:
        model = clip_bnl(ModelOptions(arch=str(cfg), checkpoint=str(path)))
    assert any("not fine-tuned" in str(w.message) for w in caught)
    assert seen == ["openai"]
    assert "not fine-tuned" in model.describe()["checkpoint_notes"]["note"]
    tuned = {k: v + 0.01 for k, v in src.model.state_dict().items()}
    _nt2vr_file(path, tuned)
    with pytest.warns(UserWarning, match="ignored pickled objects"):
        model = clip_bnl(ModelOptions(arch=str(cfg), checkpoint=str(path)))
    assert "note" not in model.describe()["checkpoint_notes"]


def test_trained_folder_equal_to_its_base_is_reported(tmp_path):
    """A `negharness train` folder whose weights are shapes_clip's unchanged."""
    from negharness.io.checkpoints import save_safetensors
    from negharness.plugins.shapes_clip import WEIGHTS

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "model.json").write_text(json.dumps({"format": FORMAT, "base_model": "shapes_clip", "base_options": {}}))
    state = read_checkpoint(WEIGHTS).state
    save_safetensors(folder / "model.safetensors", state)
    with pytest.warns(UserWarning, match="equal the base model shapes_clip"):
        model = clip_bnl(ModelOptions(checkpoint=str(folder), plugins=installed_plugins()))
    assert "not fine-tuned" in model.describe()["checkpoint_notes"]["note"]
    key = next(k for k, v in state.items() if v.is_floating_point())
    save_safetensors(folder / "model.safetensors", {**state, key: state[key] + 0.5})
    assert "checkpoint_notes" not in clip_bnl(ModelOptions(checkpoint=str(folder), plugins=installed_plugins())).describe()


NEGATIONCLIP_ARCHS = ("ViT-B-32", "ViT-B-16", "ViT-L-14", "ViT-L-14-336")


def _gelu_config(folder):
    """The tiny ViT's config without its QuickGELU line: an architecture that runs plain GELU."""
    cfg = folder / "tiny_vit_gelu.json"
    cfg.write_text(json.dumps({"model_cfg": {k: v for k, v in TINY_VIT["model_cfg"].items() if k != "quick_gelu"}}))
    return cfg


def test_negationclip_bare_openai_state_dict_runs_quickgelu(source, tmp_path):
    """NegationCLIP's src/clip_finetune.py: ``torch.save(model.state_dict(), path)`` of OpenAI's clip model,
    a bare state dict in OpenAI's layout (the tiny QuickGELU ViT's keys are the same names)."""
    _, src = source
    path = tmp_path / "best_model_epoch_3.pth"
    torch.save(src.model.state_dict(), path)
    ckpt = read_checkpoint(path)
    assert ckpt.openai_format and ckpt.wrapper is None and ckpt.stripped == []
    gelu_arch = str(_gelu_config(tmp_path))
    model = negationclip(ModelOptions(arch=gelu_arch, checkpoint=str(path)))
    assert model.describe()["quick_gelu"] is True and model.name == "negationclip"
    for a, b in zip(_embeddings(src), _embeddings(model)):
        assert torch.equal(a, b)
    plain = clip(ModelOptions(arch=gelu_arch, checkpoint=str(path)))  # a JSON config is the user's word: GELU
    assert not torch.allclose(_embeddings(src)[0], _embeddings(plain)[0])


def test_openai_state_dict_on_a_named_gelu_arch_is_refused_naming_the_file(source, tmp_path):
    """The open_clip #771 trap: a bare OpenAI-layout file with --arch ViT-B-16 (GELU) and nothing saying
    which activation is refused before anything is built; saying it lets the run go on (here to the
    shape check, the tiny file being no ViT-B-16)."""
    _, src = source
    path = tmp_path / "negationclip_vitb16.pth"
    torch.save(src.model.state_dict(), path)
    with pytest.raises(UserError, match="QuickGELU") as refused:
        clip(ModelOptions(arch="ViT-B-16", checkpoint=str(path)))
    assert str(path) in str(refused.value) and "-M quick_gelu=true" in str(refused.value)
    for said in ("true", "false"):
        with pytest.raises(UserError, match="does not fit ViT-B-16"):
            clip(ModelOptions(arch="ViT-B-16", checkpoint=str(path), extra={"quick_gelu": said}))
    with pytest.raises(UserError, match="does not fit ViT-B-16"):  # QuickGELU by default: no question
        negationclip(ModelOptions(arch="ViT-B-16", checkpoint=str(path)))
    wrapped = tmp_path / "checkpoint.pt"  # an open_clip training file: wrapped, module. keys, not OpenAI's layout
    torch.save({"epoch": 1, "state_dict": {f"module.{k}": v for k, v in src.model.state_dict().items()}}, wrapped)
    assert not read_checkpoint(wrapped).openai_format
    with pytest.raises(UserError, match="does not fit ViT-B-16"):
        clip(ModelOptions(arch="ViT-B-16", checkpoint=str(wrapped)))


@pytest.mark.parametrize("arch", NEGATIONCLIP_ARCHS)
def test_negationclip_architecture_is_read_from_the_file_shapes(arch):
    import open_clip

    with torch.device("meta"), no_random_init():  # shapes only, nothing allocated
        state = open_clip.model.CLIP(**open_clip.get_model_config(arch)).state_dict()
    assert arch_of_state(state, NEGATIONCLIP_ARCHS, "f.pth") == arch


def test_negationclip_file_of_no_released_shape_needs_arch(source, tmp_path):
    _, src = source
    path = tmp_path / "odd.pth"
    torch.save(src.model.state_dict(), path)
    with pytest.raises(UserError, match="none of ViT-B-32, ViT-B-16, ViT-L-14, ViT-L-14-336; pass --arch") as exc:
        negationclip(ModelOptions(checkpoint=str(path)))
    assert str(path) in str(exc.value) and "vision_width 64" in str(exc.value)
    with pytest.raises(UserError, match="needs --checkpoint PATH"):
        negationclip(ModelOptions())


def test_tripletclip_open_clip_checkpoint_loads_gelu(tmp_path):
    """TripletCLIP's src/openclip train.py: open_clip.create_model_and_transforms(model_name, pretrained=None,
    precision="bf16") trained from scratch (GELU), saved as {"model_state_dict", "optimizer_state_dict",
    "epoch"} to epoch-N.ckpt."""
    cfg = _gelu_config(tmp_path)
    torch.manual_seed(5)
    src = OpenClipModel.create("src", ModelOptions(arch=str(cfg)), default_pretrained=None)
    trained = {k: v.to(torch.bfloat16) for k, v in src.model.state_dict().items()}
    opt = torch.optim.AdamW(src.model.parameters(), lr=5e-5)
    src.model(torch.zeros(1, 3, 32, 32), torch.zeros(1, 77, dtype=torch.long))[0].sum().backward()
    opt.step()
    path = tmp_path / "epoch-5.ckpt"
    torch.save({"model_state_dict": trained, "optimizer_state_dict": opt.state_dict(), "epoch": 5}, path)
    ckpt = read_checkpoint(path)
    assert ckpt.wrapper == "model_state_dict" and not ckpt.openai_format and ckpt.ignored == []
    model = tripletclip(ModelOptions(arch=str(cfg), checkpoint=str(path)))
    assert model.describe()["quick_gelu"] is False and model.name == "tripletclip"
    src.model.load_state_dict({k: v.float() for k, v in trained.items()})
    for a, b in zip(_embeddings(src), _embeddings(model)):
        assert torch.equal(a, b)
