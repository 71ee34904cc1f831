"""The text-only baseline and generative VLMs on choice tasks, with tiny random models built offline:
batched scores equal one-sequence-at-a-time log-likelihoods worked out directly, letters map back to
the task's option order, and both run end to end from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from choice_helpers import tiny_gpt2, tiny_llava, write_image

from negharness.api import ModelOptions
from negharness.io.media import MediaSet
from negharness.scoring.choices import ChoiceSet

CAPTIONS = ["a dog on grass", "a dog not on grass", "there is no cat", "there is a cat", "a cat", "a cat"]
WORDS = CAPTIONS + ["Describe the image in one sentence.", "Which caption describes the image?",
                    "Answer with the option's letter from the given choices directly.", "Is it red?", "yes", "no",
                    "A.", "B.", "C."]


def _images() -> MediaSet:
    imgs = [np.full((16, 16, 3), c, dtype=np.uint8) for c in ((255, 0, 0), (0, 0, 255))]
    return MediaSet("test/two", "image", ["red", "blue"], lambda i: imgs[i], cheap=True)


def _choices(questions=None) -> ChoiceSet:
    return ChoiceSet(_images(), [0, 1, 0], [CAPTIONS[0:2], CAPTIONS[2:4], CAPTIONS[4:6]], [0, 0, 0], questions)


def _loglik(lm, ids: list[int], start: int) -> float:
    logits = lm(input_ids=torch.tensor([ids])).logits[0]
    logp = torch.log_softmax(logits.float(), -1)
    return float(sum(logp[t - 1, ids[t]] for t in range(start, len(ids))) / (len(ids) - start))


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory) -> Path:
    return tiny_gpt2(tmp_path_factory.mktemp("gpt2"), WORDS)


@pytest.fixture(scope="module")
def llava_dir(tmp_path_factory) -> Path:
    return tiny_llava(tmp_path_factory.mktemp("llava"), WORDS)


def test_text_only_scores_are_caption_logliks_batched_or_not(gpt2_dir):
    from negharness.plugins.text_only import text_only

    model = text_only(ModelOptions(arch=str(gpt2_dir))).eval_mode()
    scores = model.score_choices(_choices(), 4, "fp32")
    tok = model.tokenizer
    with torch.inference_mode():
        for r, row in enumerate([CAPTIONS[0:2], CAPTIONS[2:4], CAPTIONS[4:6]]):
            for k, cap in enumerate(row):
                ids = [tok.bos_token_id] + tok(cap, add_special_tokens=False)["input_ids"]
                assert float(scores[r, k]) == pytest.approx(_loglik(model.lm, ids, 1), abs=1e-5)
    assert scores[2, 0] == scores[2, 1]  # the same caption twice: an exact tie, counted wrong
    again = model.score_choices(_choices(), 1, "fp32")
    assert torch.allclose(scores, again, atol=1e-5)
    asked = model.score_choices(_choices(["Is it red?"] * 3), 64, "fp32")
    ids = [tok.bos_token_id] + tok("Question: Is it red?\nAnswer: a dog on grass", add_special_tokens=False)["input_ids"]
    start = 1 + len(tok("Question: Is it red?\nAnswer:", add_special_tokens=False)["input_ids"])
    with torch.inference_mode():
        assert float(asked[0, 0]) == pytest.approx(_loglik(model.lm, ids, start), abs=1e-5)


def test_hf_vlm_loglik_equals_one_sequence_at_a_time(llava_dir):
    from negharness.plugins.hf_vlm import hf_vlm

    model = hf_vlm(ModelOptions(arch=str(llava_dir))).eval_mode()
    choices = _choices()
    scores = model.score_choices(choices, 3, "fp32")
    proc, tok = model.processor, model.processor.tokenizer
    with torch.inference_mode():
        for r, row in enumerate(choices.options):
            image = choices.media.load(choices.media_index[r])
            enc = proc(text=[model.chat(model.prompt)], images=[image], return_tensors="pt")
            head = enc["input_ids"][0].tolist()
            for k, cap in enumerate(row):
                ids = head + tok(cap, add_special_tokens=False)["input_ids"]
                logits = model.vlm(input_ids=torch.tensor([ids]), pixel_values=enc["pixel_values"]).logits[0]
                logp = torch.log_softmax(logits.float(), -1)
                want = float(sum(logp[t - 1, ids[t]] for t in range(len(head), len(ids))) / (len(ids) - len(head)))
                assert float(scores[r, k]) == pytest.approx(want, abs=1e-4)
    assert scores[2, 0] == scores[2, 1]
    assert scores[0, 0] != scores[1, 0]  # the image matters: different pictures, different scores


def test_hf_vlm_letter_scores_come_back_in_task_order(llava_dir):
    from negharness.plugins.hf_vlm import hf_vlm

    model = hf_vlm(ModelOptions(arch=str(llava_dir), extra={"scoring": "letter"})).eval_mode()
    choices = ChoiceSet(_images(), [0, 1], [CAPTIONS[0:3], CAPTIONS[2:4]], [0, 0], None)
    scores = model.score_choices(choices, 64, "fp32")
    proc, tok = model.processor, model.processor.tokenizer
    with torch.inference_mode():
        for r, row in enumerate(choices.options):
            order = model.letter_order(r, row)
            prompt = model.chat(model.letter_prompt(None, row, order))
            enc = proc(text=[prompt], images=[choices.media.load(choices.media_index[r])], return_tensors="pt")
            last = model.vlm(**enc).logits[0, -1]
            for j, k in enumerate(order):  # option k was shown as letter j
                assert float(scores[r, k]) == pytest.approx(float(last[tok.convert_tokens_to_ids("ABC"[j])]), abs=1e-4)
    assert sorted(model.letter_order(0, CAPTIONS[0:3])) == [0, 1, 2]


def test_generative_models_are_choice_scorers_not_encoders(llava_dir):
    """A generative model is a `ChoiceScorer`: it has no encode_* at all (the host refuses it on a task
    that embeds, naming it: tests/test_plugins.py), and its options are checked by name."""
    from negharness.api import ChoiceScorer, EmbeddingModel
    from negharness.api import UserError
    from negharness.plugins.hf_vlm import hf_vlm

    model = hf_vlm(ModelOptions(arch=str(llava_dir)))
    assert isinstance(model, ChoiceScorer) and not isinstance(model, EmbeddingModel)
    assert not hasattr(model, "encode_text")
    with pytest.raises(UserError, match="-M scoring=guess"):
        hf_vlm(ModelOptions(arch=str(llava_dir), extra={"scoring": "guess"}))
    with pytest.raises(UserError, match="needs --arch"):
        hf_vlm(ModelOptions())


def test_generative_and_blind_models_run_a_choice_task_from_the_cli(cli, tmp_path, llava_dir, gpt2_dir):
    write_image(tmp_path / "data/coco/val2017/000000000001.jpg", "red")
    (tmp_path / "data/sugarcrepe").mkdir(parents=True)
    for split in ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj"):
        (tmp_path / "data/sugarcrepe" / f"{split}.json").write_text(json.dumps(
            {"0": {"filename": "000000000001.jpg", "caption": "a dog on grass", "negative_caption": "a dog not on grass"},
             "1": {"filename": "000000000001.jpg", "caption": "a cat", "negative_caption": "a cat"}}))
    for args in (["--model", "hf_vlm", "--arch", str(llava_dir), "-M", "scoring=letter"],
                 ["--model", "text_only", "--arch", str(gpt2_dir)]):
        res = cli("run", *args, "--task", "sugarcrepe_*", "--data-root", str(tmp_path / "data"), "--log-samples",
                  "--batch-size", "3")
        assert res.returncode == 0, res.stderr
    for model in ("hf_vlm", "text_only"):
        folder = next((tmp_path / "results").glob(f"{model}*"))
        rec = json.loads((folder / "sugarcrepe_mean.json").read_text())
        # "a cat" vs "a cat" tests nothing: left out of every split and counted; row 0 alone is scored
        part = json.loads((folder / "sugarcrepe_swap_att.json").read_text())
        assert part["n_items"]["rows_identical"] == 1 and part["notes"]["identical"]["rows"] == 1
        assert rec["metrics"]["mean"] in (0.0, 100.0)
        assert rec["metrics"]["swap_att"] == rec["metrics"]["add_att"]  # same file, same score
        assert rec["main_score"]["name"] == "mean"
    res = cli("run", "--model", "hf_vlm", "--arch", str(llava_dir), "--task", "shapes_t2i_original")
    assert res.returncode == 2 and "no embeddings" in res.stderr


def test_hf_vlm_runs_qwen2_vl_with_padding_that_changes_nothing(tmp_path):
    """Qwen2-VL's M-RoPE positions and image_grid_thw survive the re-padding: a batch of three equals
    one sequence at a time, in both scoring modes."""
    from choice_helpers import tiny_qwen2vl

    from negharness.plugins.hf_vlm import hf_vlm

    folder = tiny_qwen2vl(tmp_path / "qwen", WORDS)
    imgs = [np.full((56, 56, 3), c, dtype=np.uint8) for c in ((255, 0, 0), (0, 0, 255))]
    media = MediaSet("test/qwen", "image", ["red", "blue"], lambda i: imgs[i], cheap=True)
    choices = ChoiceSet(media, [0, 1, 1], [CAPTIONS[0:2], CAPTIONS[2:4], CAPTIONS[0:3]], [0, 0, 0], None)
    for scoring in ("loglik", "letter"):
        model = hf_vlm(ModelOptions(arch=str(folder), extra={"scoring": scoring})).eval_mode()
        batched = model.score_choices(choices, 3, "fp32")
        single = model.score_choices(choices, 1, "fp32")
        assert torch.isfinite(batched[:, :2]).all() and torch.allclose(batched, single, atol=1e-4), scoring


@pytest.mark.parametrize("which", ["text_only", "hf_vlm"])
def test_a_folder_retrained_in_place_is_another_fingerprint(which, tmp_path):
    """A choice model's fingerprint held its config and parameter count: a folder retrained in place (same
    shapes, other weights) was the same model. Now the weights and the tokenizer are in it by content."""
    from negharness.plugins.hf_vlm import hf_vlm
    from negharness.plugins.text_only import text_only

    make, factory = (tiny_gpt2, text_only) if which == "text_only" else (tiny_llava, hf_vlm)
    folder = make(tmp_path / which, WORDS, seed=0)
    first = factory(ModelOptions(arch=str(folder))).fingerprint()
    assert factory(ModelOptions(arch=str(folder))).fingerprint() == first
    make(folder, WORDS, seed=1)
    assert factory(ModelOptions(arch=str(folder))).fingerprint() != first
