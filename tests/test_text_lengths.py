"""Text towers on real token lengths: every model family gives its full-context embeddings (max abs
difference <= 1e-5) on captions of mixed lengths, with random weights from tiny configs; towers where
cutting the context is not exact keep the full context, and the cache key says which path ran."""

from __future__ import annotations

import ast
import csv
import json
import random

import pytest
import torch
import torch.nn.functional as F
from conftest import SHARED

from negharness.api import ModelOptions
from negharness.plugins.clip4clip import clip4clip
from negharness.plugins.finetuned_clip import conclip, negclip
from negharness.plugins.openclip_model import OpenClipModel, clip
from negharness.plugins.token_lengths import TEXT_ENCODER, bucket_overhead, length_buckets
from negharness.plugins.shapes_clip import shapes_clip
from negharness.plugins.trained_model import clip_bnl

COCO = SHARED / "data/negbench/negbench_eval_csvs/images/COCO_val_retrieval.csv"
TOL = 1e-5
LONG = " ".join(["a very long caption about a dog that is not on a red sofa"] * 12)  # > 77 tokens: truncated


def tiny_config(**text: object) -> dict:
    return {"model_cfg": {"embed_dim": 32, "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16,
                                                          "head_width": 16},
                          "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2,
                                       **text}},
            "preprocess_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}}


def captions(n: int = 120) -> list[str]:
    """Real COCO captions from the shared NegBench CSV when present, else generated ones of 1-40 words;
    always with an empty text and one longer than the context."""
    if COCO.is_file():
        with COCO.open(newline="") as f:
            rows = [c for row in csv.DictReader(f) for c in ast.literal_eval(row["captions"])]
        out = rows[:n]
    else:
        rng = random.Random(0)
        words = "a the man woman dog cat red blue sofa kitchen not no without table street car standing".split()
        out = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 40))) for _ in range(n)]
    return out + ["", LONG]


@pytest.fixture(scope="module")
def arch(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("arch") / "tiny.json"
    path.write_text(json.dumps(tiny_config()))
    return str(path)


@pytest.fixture(scope="module")
def weights(arch, tmp_path_factory):
    """A random tiny CLIP and its state saved as a plain checkpoint and as CLIP4Clip saves one."""
    torch.manual_seed(0)
    source = clip(ModelOptions(arch=arch))
    folder = tmp_path_factory.mktemp("weights")
    state = source.model.state_dict()
    torch.save(state, folder / "plain.pt")
    torch.save({f"clip.{k}": v for k, v in state.items()}, folder / "c4c.bin")
    return source, folder


def full_context(model: OpenClipModel, texts: list[str]) -> torch.Tensor:
    """open_clip's own encode_text on the whole 77-token context (the path before lengths)."""
    return F.normalize(model.model.encode_text(model.tokenizer(texts)).float(), dim=-1)


def in_host_batches(model: OpenClipModel, texts: list[str], batch_size: int) -> torch.Tensor:
    """What the runner does: encode the model's own batches, put each embedding back at its text's row."""
    batches = model.text_batches(texts, batch_size)
    assert sorted(i for b in batches for i in b) == list(range(len(texts)))
    out = torch.full((len(texts), model.model.text_projection.shape[1]), float("nan"))
    for b in batches:
        out[b] = model.encode_text([texts[i] for i in b])
    return out


def assert_same_as_full(model: OpenClipModel, texts: list[str]) -> None:
    assert model.text_on_lengths and model.describe()["text_encoder"] == TEXT_ENCODER
    with torch.inference_mode():
        got, want = model.encode_text(texts), full_context(model, texts)
        one_by_one = torch.cat([model.encode_text([t]) for t in texts[:8]])
        hosted = {bs: in_host_batches(model, texts, bs) for bs in (1, 64)}
    assert got.shape == want.shape
    assert float((got - want).abs().max()) <= TOL
    assert float((one_by_one - want[:8]).abs().max()) <= TOL
    for bs, out in hosted.items():
        assert float((out - want).abs().max()) <= TOL, bs


def test_buckets_cover_every_row_once_shortest_first():
    lengths = [5, 3, 3, 9, 20, 21, 5]
    for overhead in (0, 16, 10_000):
        buckets = length_buckets(lengths, overhead)
        assert sorted(i for b in buckets for i in b) == list(range(len(lengths)))
        tops = [max(lengths[i] for i in b) for b in buckets]
        assert tops == sorted(tops)
    assert length_buckets(lengths, 0) == [[1, 2], [0, 6], [3], [4], [5]]  # no overhead: one bucket per length
    assert length_buckets(lengths, 10_000) == [[1, 2, 0, 6, 3, 4, 5]]  # large overhead: one bucket
    # 16 per bucket: {3,3,5,5} at 5 and {9,20,21} at 21 cost 16+20+16+63 = 115, the minimum
    assert length_buckets(lengths, 16) == [[1, 2, 0, 6], [3, 4, 5]]


def test_captions_are_of_mixed_lengths_and_run_in_several_buckets(weights):
    source, _ = weights
    tokens = source.tokenizer(captions())
    lengths = (tokens.argmax(-1) + 1).tolist()
    assert min(lengths) <= 3 and max(lengths) == 77
    assert len(length_buckets(lengths, 16)) > 2


def test_host_batches_are_sorted_by_tokens_and_fill_a_full_context_batch(weights):
    """At batch size B a batch holds at most B x 77 token positions (one full-context batch's activations),
    so short captions come many more than B to a forward pass."""
    source, _ = weights
    texts = captions()
    lengths = (source.tokenizer(texts).argmax(-1) + 1).tolist()
    batches = source.text_batches(texts, 8)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(texts)))
    assert [lengths[i] for i in flat] == sorted(lengths)
    assert all(len(b) * max(lengths[i] for i in b) <= 8 * 77 for b in batches)
    assert max(len(b) for b in batches) > 8 and len(texts) - 1 in batches[-1]  # the 77-token text runs last
    assert source.text_batches([], 8) == []


def test_low_precision_on_cpu_splits_batches_less(weights):
    """bf16 on a CPU gains only on large matrix products: each length bucket costs more there."""
    source, _ = weights
    cpu = torch.device("cpu")
    fp32 = bucket_overhead(cpu)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bf16 = bucket_overhead(cpu)
    assert bf16 > fp32
    lengths = (source.tokenizer(captions()).argmax(-1) + 1).tolist()
    assert len(length_buckets(lengths, bf16)) < len(length_buckets(lengths, fp32))


def test_clip(weights):
    assert_same_as_full(weights[0], captions())


@pytest.mark.parametrize("factory", [negclip, conclip, clip_bnl])
def test_finetuned_and_released_checkpoints(weights, arch, factory):
    _, folder = weights
    assert_same_as_full(factory(ModelOptions(arch=arch, checkpoint=str(folder / "plain.pt"))), captions())


def test_clip4clip_text_tower(weights, arch):
    _, folder = weights
    assert_same_as_full(clip4clip(ModelOptions(arch=arch, checkpoint=str(folder / "c4c.bin"))), captions())


def test_shapes_clip_bundled_weights():
    """The embedded world's CLIP (context 32): its own trained weights, not random ones."""
    assert_same_as_full(shapes_clip(ModelOptions()), captions())


def test_eos_pooling(tmp_path):
    path = tmp_path / "eos.json"
    path.write_text(json.dumps(tiny_config(pool_type="eos", eos_id=49407)))
    torch.manual_seed(1)
    assert_same_as_full(clip(ModelOptions(arch=str(path))), captions())


@pytest.mark.parametrize("text", [{"no_causal_mask": True}, {"pool_type": "last"}])
def test_towers_where_cutting_is_not_exact_keep_the_full_context(tmp_path, text):
    path = tmp_path / "other.json"
    path.write_text(json.dumps(tiny_config(**text)))
    torch.manual_seed(2)
    model = clip(ModelOptions(arch=str(path)))
    assert not model.text_on_lengths and "text_encoder" not in model.describe()
    texts = captions(20)
    with torch.inference_mode():
        assert torch.equal(model.encode_text(texts), full_context(model, texts))


def test_training_keeps_the_full_context(weights):
    """With gradients on, the path is open_clip's own, so training numbers are as they were."""
    source, _ = weights
    texts = captions(10)
    got = source.encode_text(texts)
    assert got.requires_grad
    assert torch.equal(got.detach(), full_context(source, texts).detach())


def test_the_cache_key_names_the_encoder(weights, arch):
    """A length-path model's fingerprint differs from the same model described without the field."""
    source, _ = weights
    described = source.describe()
    assert described["text_encoder"] == TEXT_ENCODER
    source.text_on_lengths = False
    try:
        assert "text_encoder" not in source.describe()
        before = source.fingerprint()
    finally:
        source.text_on_lengths = True
    assert source.fingerprint() != before


# transformers ---------------------------------------------------------------------------------------
transformers = pytest.importorskip("transformers")

from hf_helpers import clip_tokenizer_files  # noqa: E402


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPTokenizer

    folder = tmp_path_factory.mktemp("hf")
    torch.manual_seed(0)
    config = CLIPConfig(text_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                                     "num_attention_heads": 2, "vocab_size": 49408},
                        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                       "num_attention_heads": 2, "image_size": 32, "patch_size": 8},
                        projection_dim=16)
    CLIPModel(config).eval().save_pretrained(folder)
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    clip_tokenizer_files(folder)
    CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt")).save_pretrained(folder)
    return folder


def test_hf_clip(hf_folder):
    from negharness.plugins.hf_clip import _features, hf_clip

    model = hf_clip(ModelOptions(arch=str(hf_folder)))
    assert model.describe()["text_encoder"] == TEXT_ENCODER
    texts = captions()
    with torch.inference_mode():
        got = model.encode_text(texts)
        enc = model.tokenizer(texts, padding="max_length", truncation=True, max_length=77, return_tensors="pt")
        want = F.normalize(_features(model.model.get_text_features(input_ids=enc["input_ids"])).float(), dim=-1)
        batches = model.text_batches(texts, 4)
        hosted = torch.full_like(want, float("nan"))
        for b in batches:
            hosted[b] = model.encode_text([texts[i] for i in b])
    assert float((got - want).abs().max()) <= TOL
    lengths = [int(n) for n in enc["attention_mask"].sum(-1)]
    assert sorted(i for b in batches for i in b) == list(range(len(texts)))
    assert all(len(b) * max(lengths[i] for i in b) <= 4 * 77 for b in batches) and max(map(len, batches)) > 4
    assert float((hosted - want).abs().max()) <= TOL


def test_hf_clip_decides_length_buckets_as_open_clip_does(hf_folder, monkeypatch):
    """One rule for both CLIP plugins (`lengths_pay`): on a device where buckets do not pay (every
    accelerator measured so far) and with ``-M text_lengths=off``, hf_clip runs plain batches, each padded
    to its longest, equal to the full context; ``off`` is its own fingerprint, the device is not."""
    import negharness.plugins.hf_clip as hf
    from negharness.plugins.hf_clip import _features, hf_clip

    texts = captions()
    auto = hf_clip(ModelOptions(arch=str(hf_folder)))
    off = hf_clip(ModelOptions(arch=str(hf_folder), extra={"text_lengths": "off"}))
    assert auto.on_lengths() and not off.on_lengths()
    assert "text_encoder" not in off.describe() and off.fingerprint() != auto.fingerprint()
    monkeypatch.setattr(hf, "lengths_pay", lambda device, choice="auto": choice == "on")  # as on a GPU
    assert not auto.on_lengths() and auto.describe()["text_encoder"] == TEXT_ENCODER
    with torch.inference_mode():
        enc = auto.tokenizer(texts, padding="max_length", truncation=True, max_length=77, return_tensors="pt")
        want = F.normalize(_features(auto.model.get_text_features(input_ids=enc["input_ids"])).float(), dim=-1)
        for model in (auto, off):
            batches = model.text_batches(texts, 4)  # the host's plain batches: 4 texts, by characters
            assert max(map(len, batches)) == 4 and sorted(i for b in batches for i in b) == list(range(len(texts)))
            assert float((model.encode_text(texts) - want).abs().max()) <= TOL


def test_the_length_pre_pass_tokens_are_reused_by_the_batches(weights, monkeypatch):
    """`text_batches` tokenises every text for its lengths; each batch's `prepare_texts` then takes those
    rows (equal to the tokenizer's) instead of tokenising the texts a second time."""
    source, _ = weights
    texts = captions()
    want = source.tokenizer(texts)
    batches = source.text_batches(texts, 8)
    calls = []
    real = source.tokenizer
    monkeypatch.setattr(source, "tokenizer", lambda t, *a, **k: calls.append(len(t)) or real(t, *a, **k))
    for b in batches:
        got = source.prepare_texts([texts[i] for i in b])
        assert got.dtype == want.dtype and torch.equal(got, want[b])
    assert calls == []
    unseen = source.prepare_texts(["a text the pre-pass never saw"])
    assert calls == [1] and torch.equal(unseen, real(["a text the pre-pass never saw"]))
