"""Generative models on MCQ tasks end to end, as NegBench's Appendix A evaluates VLMs: `text_only`
(caption likelihood, no image) and `hf_vlm` (likelihood given the image) on the embedded world's
`shapes_mcq` and on a NegBench COCO MCQ file, through the CLI a user runs. No image is embedded first."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from choice_helpers import tiny_gpt2, tiny_llava

WORDS = ["this image shows a red circle", "this image does not show a blue square", "a picture"]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lms")
    return {"text_only": tiny_gpt2(root / "gpt2", WORDS), "hf_vlm": tiny_llava(root / "llava", WORDS)}


def _record(out: Path, task: str) -> dict:
    (path,) = [p for p in out.glob(f"*/{task}*.json") if not p.name.endswith(".perquery.json")]
    return json.loads(path.read_text())


@pytest.mark.parametrize("model", ["text_only", "hf_vlm"])
def test_generative_model_on_the_world_mcq(cli, tmp_path, models, model):
    res = cli("run", "--model", model, "--arch", str(models[model]), "--task", "shapes_mcq", "--limit", "12",
              "--output-dir", str(tmp_path / "res"))
    assert res.returncode == 0, res.stderr
    rec = _record(tmp_path / "res", "shapes_mcq")
    assert rec["n_items"]["questions"] == 12 and 0.0 <= rec["metrics"]["accuracy"] <= 100.0
    assert rec["counts"]["media_encoded"] == 0 and rec["counts"]["texts_encoded"] == 0  # it read them itself


@pytest.mark.parametrize("model", ["text_only", "hf_vlm"])
def test_generative_model_on_a_negbench_mcq_file(cli, tmp_path, models, model):
    from PIL import Image

    root = tmp_path / "data"
    (root / "negbench").mkdir(parents=True)
    rows = []
    for i, colour in enumerate([(255, 0, 0), (0, 0, 255), (0, 255, 0)], 1):
        name = f"{i:012d}.jpg"
        (root / "coco" / "val2017").mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((16, 16, 3), colour, dtype=np.uint8)).save(root / "coco" / "val2017" / name)
        rows.append([f"data/coco/images/val2017/{name}", i % 4, "this image shows a red circle",
                     "this image does not show a blue square", "a picture", "this image shows a picture",
                     "negative"])
    with open(root / "negbench" / "COCO_val_mcq_llama3.1_rephrased.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["image_path", "correct_answer", "caption_0", "caption_1", "caption_2", "caption_3",
                    "correct_answer_template"])
        w.writerows(rows)
    res = cli("run", "--model", model, "--arch", str(models[model]), "--task", "negbench_mcq_coco",
              "--data-root", str(root), "--output-dir", str(tmp_path / "res"))
    assert res.returncode == 0, res.stderr
    rec = _record(tmp_path / "res", "negbench_mcq_coco")
    assert rec["n_items"]["questions"] == 3 and 0.0 <= rec["metrics"]["accuracy"] <= 100.0


def test_hf_vlm_scores_a_video_mcq_as_evenly_spaced_frames(cli, tmp_path, models):
    """NegBench's MSR-VTT MCQ (issue 46 item 7: it was refused, "cannot encode video"): each video is
    shown as -M frames= images in one turn; frames=1 and frames=4 are different runs, told apart."""
    pytest.importorskip("av", reason="the generated MSR-VTT clips are written with PyAV")
    from relations_data import MCQ_ROWS, negbench_mcq

    root = negbench_mcq("negbench_mcq_msrvtt").build(tmp_path / "data")
    scored: list[str] = []
    for frames in ("4", "1"):
        res = cli("run", "--model", "hf_vlm", "--arch", str(models["hf_vlm"]), "--task", "negbench_mcq_msrvtt",
                  "-M", f"frames={frames}", "--data-root", str(root), "--output-dir", str(tmp_path / f"res{frames}"))
        assert res.returncode == 0, res.stderr
        rec = _record(tmp_path / f"res{frames}", "negbench_mcq_msrvtt")
        assert rec["n_items"]["questions"] == len(MCQ_ROWS) and 0.0 <= rec["metrics"]["accuracy"] <= 100.0
        assert rec["model"]["fingerprint"] != (scored[-1] if scored else None)
        scored.append(rec["model"]["fingerprint"])


def test_a_video_becomes_evenly_spaced_pictures_and_the_prompt_one_image_token_each(models):
    from negharness.api import ModelOptions
    from negharness.plugins.hf_vlm import as_pictures, evenly_spaced, hf_vlm

    assert evenly_spaced(12, 4) == [0, 4, 7, 11] and evenly_spaced(3, 4) == [0, 1, 2] and evenly_spaced(9, 1) == [0]
    clip = np.stack([np.full((16, 16, 3), t * 20, dtype=np.uint8) for t in range(12)])
    pictures = as_pictures(clip, 4)
    assert [np.asarray(p)[0, 0, 0] for p in pictures] == [0, 80, 140, 220]
    model = hf_vlm(ModelOptions(arch=str(models["hf_vlm"]), extra={"frames": "4"}))
    assert model.chat("which?", 4).count("<image>") == 4 and "video_frames" not in model.describe()  # the default: image runs keep their fingerprint
