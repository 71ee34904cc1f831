"""Nothing silent (issue 24, items 3-6): inputs a user could hand the CLI that used to pass quietly or
fail without a cause are refused by name, in one line, with exit 2. Each case runs the CLI in a
subprocess the way a user would."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
import torch

TINY_VIT = {"model_cfg": {"embed_dim": 32, "quick_gelu": True,
                          "vision_cfg": {"image_size": 32, "layers": 1, "width": 64, "patch_size": 16},
                          "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 1, "layers": 1}}}


def one_error_line(res, code: int, *needles: str) -> str:
    """The run exits ``code`` with one `error:` line (the last) holding every needle, no traceback."""
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, res.stderr
    tail = res.stderr[res.stderr.index("error:"):].strip()
    assert "\n" not in tail, tail
    for n in needles:
        assert n in tail, tail
    return tail


# item 3: checkpoints ---------------------------------------------------------------------------------
class RunsACommand:
    """Unpickling this with pickle.load would run a shell command that creates the marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny open_clip architecture (JSON) and its randomly initialised weights."""
    from negharness.contracts.model import ModelOptions
    from negharness.plugins.openclip_model import OpenClipModel

    folder = tmp_path_factory.mktemp("tiny")
    cfg = folder / "tiny_vit.json"
    cfg.write_text(json.dumps(TINY_VIT))
    torch.manual_seed(5)
    model = OpenClipModel.create("src", ModelOptions(arch=str(cfg)), default_pretrained=None)
    return cfg, {k: v.clone() for k, v in model.model.state_dict().items()}


def _run_clip(cli, cfg: Path, ckpt: Path, env=None):
    return cli("run", "--model", "clip", "--arch", str(cfg), "--checkpoint", str(ckpt),
               "--task", "shapes_t2i_original", "--limit", "4", env=env)


def test_checkpoint_with_other_shapes_is_one_line_naming_file_tensors_and_shapes(cli, tmp_path, tiny):
    cfg, state = tiny
    bad = dict(state)
    bad["text_projection"] = torch.zeros(32, 16)
    bad["visual.proj"] = torch.zeros(64, 8)
    path = tmp_path / "other_shapes.pt"
    torch.save({"epoch": 1, "state_dict": {f"module.{k}": v for k, v in bad.items()}}, path)
    line = one_error_line(_run_clip(cli, cfg, path), 2, "other_shapes.pt", "2 tensor(s) of another shape",
                          "text_projection: checkpoint [32, 16], model [32, 32]",
                          "visual.proj: checkpoint [64, 8], model [64, 32]")
    assert "size mismatch" not in line and "plugin" not in line


def test_pickle_that_would_call_a_command_is_refused_unless_calls_are_skipped(cli, tmp_path, tiny):
    cfg, state = tiny
    marker = tmp_path / "MARKER"
    path = tmp_path / "model_best.pth.tar"
    opt = argparse.Namespace(lr=1e-5, nested={"runner": [RunsACommand(marker)]})
    torch.save({"epoch": 4, "model": state, "opt": opt}, path)
    one_error_line(_run_clip(cli, cfg, path), 2, "model_best.pth.tar", f"would call {os.system.__module__}.system",
                   "nothing was run", "NEGHARNESS_SKIP_PICKLE_CALLS=1")
    assert not marker.exists() and not list(tmp_path.rglob("shapes_t2i_original*.json"))
    ok = _run_clip(cli, cfg, path, env={"NEGHARNESS_SKIP_PICKLE_CALLS": "1"})
    assert ok.returncode == 0, ok.stderr
    assert not marker.exists()
    assert f"skipped calls to {os.system.__module__}.system" in ok.stderr
    (record,) = tmp_path.rglob("shapes_t2i_original*[0-9a-f].json")
    notes = json.loads(record.read_text())["model"]["describe"]["checkpoint_notes"]
    assert notes["skipped_calls"] == [f"{os.system.__module__}.system"]


def test_data_objects_in_a_pickle_are_read_as_stand_ins(tmp_path, tiny):
    """Config objects (NEWOBJ), protocol-0/1 objects (copyreg._reconstructor), numpy scalars and a
    torch.device are data, not calls: read without the skip option."""
    import numpy as np

    from negharness.io.checkpoints import read_checkpoint

    _, state = tiny
    for protocol in (1, 2, 4):  # 1: copyreg._reconstructor; 2 (torch's default), 4: NEWOBJ
        path = tmp_path / f"p{protocol}.pt"
        torch.save({"model": state, "opt": argparse.Namespace(lr=1e-5), "best_perf": np.float64(0.404),
                    "device": torch.device("cpu")}, path, pickle_protocol=protocol)
        with pytest.warns(UserWarning, match="argparse.Namespace"):
            ckpt = read_checkpoint(path)
        assert set(ckpt.ignored) == {"argparse.Namespace", f"{np.float64(0).__reduce__()[0].__module__}.scalar",
                                     "numpy.dtype", "torch.device"}, protocol
        assert ckpt.skipped == [] and ckpt.state.keys() == state.keys(), protocol
        assert all(torch.equal(ckpt.state[k], v) for k, v in state.items())
