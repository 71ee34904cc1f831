"""NeIn's real-data plugins on tiny random models built offline: OWLv2, DINO, InstructPix2Pix, nein_val."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from negharness.api import MediaError, UserError
from negharness.api import ModelOptions

transformers = pytest.importorskip("transformers")
diffusers = pytest.importorskip("diffusers")

from hf_helpers import clip_tokenizer_files  # noqa: E402


def _tokenizer(folder: Path, max_length: int = 77):
    from transformers import CLIPTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    clip_tokenizer_files(folder)
    return CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), model_max_length=max_length)


@pytest.fixture(scope="module")
def owl_folder(tmp_path_factory):
    from transformers import (
        Owlv2Config,
        Owlv2ForObjectDetection,
        Owlv2ImageProcessor,
        Owlv2Processor,
    )

    d = tmp_path_factory.mktemp("owl")
    cfg = Owlv2Config(text_config={"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1,
                                   "num_attention_heads": 2, "vocab_size": 49408},
                      vision_config={"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1,
                                     "num_attention_heads": 2, "image_size": 32, "patch_size": 8},
                      projection_dim=32)  # projection_dim equal to the text hidden size
    torch.manual_seed(0)
    Owlv2ForObjectDetection(cfg).save_pretrained(d)
    Owlv2Processor(image_processor=Owlv2ImageProcessor(size={"height": 32, "width": 32}),
                   tokenizer=_tokenizer(d / "tok", 16)).save_pretrained(d)  # OWLv2 reads 16 tokens
    return d


@pytest.fixture(scope="module")
def dino_folder(tmp_path_factory):
    from transformers import ViTConfig, ViTModel

    d = tmp_path_factory.mktemp("dino")
    torch.manual_seed(0)
    ViTModel(ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
                       image_size=32, patch_size=16), add_pooling_layer=False).save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def ip2p_folder(tmp_path_factory):
    from diffusers import (
        AutoencoderKL,
        PNDMScheduler,
        StableDiffusionInstructPix2PixPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel

    d = tmp_path_factory.mktemp("ip2p")
    torch.manual_seed(0)
    unet = UNet2DConditionModel(block_out_channels=(32, 64), layers_per_block=1, sample_size=8, in_channels=8,
                                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=32)
    vae = AutoencoderKL(block_out_channels=[32, 64], in_channels=3, out_channels=3, latent_channels=4,
                        down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2)
    text = CLIPTextModel(CLIPTextConfig(bos_token_id=0, eos_token_id=2, hidden_size=32, intermediate_size=37,
                                        num_attention_heads=4, num_hidden_layers=2, pad_token_id=1, vocab_size=49408))
    StableDiffusionInstructPix2PixPipeline(
        vae=vae, text_encoder=text, tokenizer=_tokenizer(d / "tok"), unet=unet,
        scheduler=PNDMScheduler(skip_prk_steps=True), safety_checker=None, feature_extractor=None,
        requires_safety_checker=False).save_pretrained(d / "pipe")
    return d / "pipe"


def _image(seed=0, size=(40, 60)):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (*size, 3), dtype=np.uint8))


def test_owlv2_max_scores_are_the_post_processed_maximum(owl_folder):
    from negharness.plugins.owlv2_detector import owlv2

    det = owlv2(ModelOptions(extra={"model": str(owl_folder), "threshold": "0.0"}))
    img = _image()
    found = det.detect(img, ["a cat", "a dog"])
    assert found and {d.label for d in found} <= {"a cat", "a dog"}
    best = det.max_scores(img, ["a cat", "a dog"])
    assert best["a cat"] == pytest.approx(max(d.score for d in found if d.label == "a cat"))
    strict = owlv2(ModelOptions(extra={"model": str(owl_folder), "threshold": "1.01"}))
    assert strict.max_scores(img, ["a cat"]) == {"a cat": 0.0}  # nothing above threshold: 0, as NeIn counts
    with pytest.raises(UserError, match="owlv2: cannot load"):
        owlv2(ModelOptions(extra={"model": str(owl_folder / "missing")}))


def test_dino_similarity(dino_folder):
    from negharness.plugins.dino_similarity import load_dino

    dino = load_dino(str(dino_folder))
    a, b = _image(1), _image(2)
    assert dino.image_cosine(a, a) == pytest.approx(1.0, abs=1e-5)
    assert -1.0 <= dino.image_cosine(a, b) < 0.9999


def test_dinos_fingerprint_sees_its_weights(tmp_path):
    """A DINO folder retrained in place once kept its fingerprint (source, sizes), so its cached embeddings."""
    from transformers import ViTConfig, ViTModel

    from negharness.plugins.dino_similarity import load_dino

    def saved(seed: int) -> str:
        torch.manual_seed(seed)
        ViTModel(ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
                           image_size=32, patch_size=16), add_pooling_layer=False).save_pretrained(tmp_path)
        return str(tmp_path)

    first = load_dino(saved(0)).fingerprint()
    assert load_dino(saved(0)).fingerprint() == first and load_dino(saved(1)).fingerprint() != first


def _perturbed(weights: Path) -> None:
    """One tensor of a safetensors file changed in place, nothing else of its folder."""
    from safetensors.torch import load_file, save_file

    state = load_file(str(weights))
    first = sorted(k for k, v in state.items() if v.is_floating_point())[0]
    state[first] = state[first] + 0.01
    save_file(state, str(weights), metadata={"format": "pt"})


def test_an_editor_or_detector_retrained_in_place_is_another(ip2p_folder, owl_folder, tmp_path):
    """InstructPix2Pix and OWLv2 were named by their source alone: a folder retrained in place (or a hub id
    uploaded again) kept the identity its cached edits and records are keyed by. Now weights by content."""
    import shutil

    from negharness.plugins.instruct_pix2pix import instruct_pix2pix
    from negharness.plugins.owlv2_detector import owlv2

    pipe, owl = shutil.copytree(ip2p_folder, tmp_path / "pipe"), shutil.copytree(owl_folder, tmp_path / "owl")

    def identities() -> tuple[dict, dict]:
        return (instruct_pix2pix(ModelOptions(extra={"model": str(pipe)})).describe(),
                owlv2(ModelOptions(extra={"model": str(owl)})).describe())

    editor, detector = identities()
    assert identities() == (editor, detector)
    _perturbed(pipe / "unet" / "diffusion_pytorch_model.safetensors")
    _perturbed(owl / "model.safetensors")
    now = identities()
    assert now[0] != editor and now[1] != detector


def test_instruct_pix2pix_is_seeded_per_sample_and_batch_independent(ip2p_folder):
    from negharness.plugins.instruct_pix2pix import fit_size, instruct_pix2pix

    assert fit_size(640, 480, 512) == (512, 384) and fit_size(500, 333, 512) == (512, 320)
    ed = instruct_pix2pix(ModelOptions(extra={"model": str(ip2p_folder), "steps": "2", "size": "64"}))
    half = instruct_pix2pix(ModelOptions(extra={"model": str(ip2p_folder), "precision": "bf16"}))
    # the editor's own dtype option (editing runs take no --precision) loads the pipeline in it, recorded
    assert half.describe()["steps"] == 100 and half.describe()["precision"] == "bf16"
    assert half.pipe.unet.dtype == torch.bfloat16
    img = _image()
    one = ed.edit(img, "no cat in the image", 3)
    batch = ed.edit_batch([_image(5), img], ["no dog", "no cat in the image"], [4, 3])
    assert one.size == (64, 64)
    # same seed, same edit, whatever the batch: up to float rounding, which depends on how torch
    # splits the batch over threads (on a loaded 2-core machine 0.008% of pixels differ by one level)
    a, b = np.asarray(one).astype(np.int16), np.asarray(batch[1]).astype(np.int16)
    diff = np.abs(a - b)
    assert diff.max() <= 1 and (diff > 0).mean() <= 0.001, (diff.max(), (diff > 0).mean())
    assert not np.array_equal(np.asarray(one), np.asarray(ed.edit(img, "no cat in the image", 4)))


def _nein_layout(root: Path, n: int = 4) -> list[dict]:
    (root / "nein" / "images").mkdir(parents=True)
    (root / "coco" / "val2017").mkdir(parents=True)
    entries = []
    for k in range(n):
        stem = f"{397133 + k}"
        _image(k, (32, 32)).save(root / "coco" / "val2017" / f"{stem.zfill(12)}.jpg")
        _image(k + 10, (32, 32)).save(root / "nein" / "images" / f"NeIn_{k}_1.png")
        entries.append({"COCO": stem, "T_original": "A man with a dog is riding a bicycle on a road.",
                        "T_generated": "Add a cat.", "T_negative": "The image lacks cat.", "NeIn": f"NeIn_{k}_1"})
    (root / "nein" / "val.json").write_text(json.dumps(entries))
    return entries


@pytest.mark.needs("nltk")
def test_nein_val_end_to_end_with_a_missing_image_and_a_bad_entry(tmp_path, owl_folder, dino_folder):
    from negharness.discovery.manager import make_host
    from negharness.engine.evaluate import RunRequest, evaluate_request
    from negharness.text.phrases import head_nouns

    assert head_nouns("A man with a dog is riding a bicycle on a road.") == ["man", "dog", "bicycle", "road"]
    root = tmp_path / "data"
    entries = _nein_layout(root)
    (root / "nein" / "images" / "NeIn_2_1.png").unlink()  # one missing input: named, the rest scored
    extra = {"detector": "owlv2", "clip_model": "shapes_clip", "dino_model": str(dino_folder)}
    import negharness.plugins.owlv2_detector as owl_mod

    default = owl_mod.DEFAULT
    owl_mod.DEFAULT = str(owl_folder)  # the scoring detector as the task loads it: by registry name
    try:
        req = RunRequest(model="identity", tasks=["nein_val"], data_root=str(root), output_dir=str(tmp_path / "res"),
                         task_extra=extra)
        with pytest.raises(MediaError, match=r"image not found: .*NeIn_2_1\.png"):  # a missing input stops the run
            evaluate_request(make_host(), req)
        req = RunRequest(**{**req.__dict__, "skip_broken_media": True})  # or is counted and named
        rec = evaluate_request(make_host(), req)[0].record
        assert rec["n_items"] == {"samples": 3} and rec["n_skipped_media"] == 1
        assert rec["skipped_media"] == {"nein_val": ["nein/images/NeIn_2_1.png"]}
        assert {"Removal", "AUC-Removal", "L1", "L2", "CLIP-I", "DINO"} <= set(rec["metrics"])
        assert rec["notes"]["scoring_detector"] == "owlv2"
        entries[1].pop("T_generated")
        (root / "nein" / "val.json").write_text(json.dumps(entries))
        with pytest.raises(UserError, match=r"val.json entry 1 \(NeIn_1_1\): no 'T_generated'"):
            evaluate_request(make_host(), RunRequest(**{**req.__dict__, "overwrite": True}))
    finally:
        owl_mod.DEFAULT = default


@pytest.mark.needs("nltk")
def test_nein_val_reads_the_published_parquet(tmp_path, dino_folder):
    pa = pytest.importorskip("pyarrow")
    import io

    import pyarrow.parquet as pq

    from negharness.discovery.manager import make_host
    from negharness.engine.evaluate import RunRequest, evaluate_request

    def png(seed):
        buf = io.BytesIO()
        _image(seed, (32, 32)).save(buf, format="PNG")
        return {"bytes": buf.getvalue(), "path": f"NeIn_{seed}_1.png"}

    rows = [{"COCO": png(k), "T_original": "A dog on a sofa.", "T_generated": "Add a cat.",
             "T_negative": "No cat in the image.", "NeIn": png(k + 10)} for k in range(3)]
    (tmp_path / "data" / "nein").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "data" / "nein" / "validation-00000-of-00001.parquet")
    req = RunRequest(model="identity", tasks=["nein_val"], data_root=str(tmp_path / "data"),
                     output_dir=str(tmp_path / "res"),
                     task_extra={"detector": "shapes_exact", "clip_model": "none", "dino_model": "none"})
    outcome = evaluate_request(make_host(), req)[0]
    rec = outcome.record
    assert rec["n_items"] == {"samples": 3} and rec["metrics"]["Removal"] == 100.0  # no shapes in noise
    # -T options that change the numbers make a variant: its record and edits go beside the default's
    assert outcome.path.name.startswith("nein_val@")
    assert sorted(p.name for p in outcome.path.with_suffix(".edits").glob("NeIn_*_1.png")) == [
        "NeIn_10_1.png", "NeIn_11_1.png", "NeIn_12_1.png"]
    # the parquet files are the data: one row's input replaced, the record reruns and says which file
    assert list(rec["data"]["files"]) == ["nein/validation-00000-of-00001.parquet"]  # was: nothing hashed
    assert evaluate_request(make_host(), req)[0].skipped
    rows[1]["NeIn"] = png(42)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "data" / "nein" / "validation-00000-of-00001.parquet")
    again = evaluate_request(make_host(), req)[0]
    assert again.reason == "data file nein/validation-00000-of-00001.parquet changed"
    assert again.record["counts"] == {"reused": 2, "edited": 1}  # the replaced input is edited again


def _nein_val(root: Path, out: Path, **kw):
    """nein_val edited by identity and scored by the exact detector, in process."""
    from negharness.discovery.manager import make_host
    from negharness.engine.evaluate import RunRequest, evaluate_request

    req = RunRequest(model="identity", tasks=["nein_val"], data_root=str(root), output_dir=str(out),
                     cache_dir=str(root.parent / "cache"),
                     task_extra={"detector": "shapes_exact", "clip_model": "none", "dino_model": "none"}, **kw)
    return evaluate_request(make_host(), req)[0]


@pytest.mark.needs("nltk")
def test_nein_val_reruns_when_an_input_image_is_replaced_and_says_which(tmp_path):
    """Every file a NeIn number rests on is hashed: val.json, each input and each ground truth (the
    old record hashed val.json alone and said "(cached)" after an image was replaced)."""
    root = tmp_path / "data"
    _nein_layout(root)
    first = _nein_val(root, tmp_path / "res")
    assert first.record["data"]["n_files"] == 9  # val.json, 4 inputs, 4 ground truths
    assert _nein_val(root, tmp_path / "res").skipped
    _image(99, (32, 32)).save(root / "nein" / "images" / "NeIn_1_1.png")
    again = _nein_val(root, tmp_path / "res")
    assert not again.skipped and again.reason == "data file nein/images/NeIn_1_1.png changed"
    assert again.record["counts"] == {"reused": 3, "edited": 1}  # the saved edit of the old input is not reused
    _image(98, (32, 32)).save(root / "coco" / "val2017" / "000000397133.jpg")
    assert _nein_val(root, tmp_path / "res").reason == "data file coco/val2017/000000397133.jpg changed"


@pytest.mark.needs("nltk")
def test_nein_val_overwrite_equals_a_fresh_output_folder(tmp_path):
    """Saved edits are keyed by what they were made from, not by sample id: after an input and its
    ground truth are replaced, --overwrite over the old folder gives a fresh folder's numbers (the
    old edit of the replaced input was read back: L1 0.0860 where a fresh folder gave 0.1326)."""
    root = tmp_path / "data"
    _nein_layout(root)
    _nein_val(root, tmp_path / "res")
    _image(98, (32, 32)).save(root / "nein" / "images" / "NeIn_2_1.png")
    _image(97, (32, 32)).save(root / "coco" / "val2017" / "000000397135.jpg")
    over = _nein_val(root, tmp_path / "res", overwrite=True)
    fresh = _nein_val(root, tmp_path / "fresh")
    assert over.record["metrics"] == fresh.record["metrics"]
    assert over.record["counts"] == {"reused": 3, "edited": 1} and fresh.record["counts"] == {"edited": 4}


def _break_idat(path: Path) -> None:
    """The PNG with its IDAT chunk renamed: the header reads, the pixels do not (Pillow: SyntaxError)."""
    path.write_bytes(path.read_bytes().replace(b"IDAT", b"IDAX", 1))


@pytest.mark.needs("nltk")
def test_nein_val_with_an_undecodable_input_stops_or_skips_it_as_every_task_does(tmp_path, cli):
    """fc4bba0: exit 0, "3 samples", n_skipped_media 0, not a word said. Now without
    --skip-broken-media the run stops naming the file; with it the sample is counted and named,
    and the metrics are those of the same data without that sample."""
    root = tmp_path / "data"
    entries = _nein_layout(root)
    _break_idat(root / "nein" / "images" / "NeIn_2_1.png")
    run = ["run", "--model", "identity", "--task", "nein_val", "--data-root", str(root), "--cache-dir",
           str(tmp_path / "cache"), "-T", "detector=shapes_exact", "-T", "clip_model=none", "-T", "dino_model=none"]
    stopped = cli(*run, "--output-dir", str(tmp_path / "res"))
    assert stopped.returncode != 0 and "NeIn_2_1.png" in stopped.stderr, stopped.stderr
    assert "SyntaxError" not in stopped.stderr
    skipped = cli(*run, "--output-dir", str(tmp_path / "res"), "--skip-broken-media")
    assert skipped.returncode == 0, skipped.stderr
    assert "1 unreadable media left out of scoring" in skipped.stdout and "nein/images/NeIn_2_1.png" in skipped.stdout
    rec = json.loads(next((tmp_path / "res").glob("*/nein_val@*.json")).read_text())
    assert rec["n_skipped_media"] == 1 and rec["skipped_media"] == {"nein_val": ["nein/images/NeIn_2_1.png"]}
    assert rec["n_items"] == {"samples": 3}
    (root / "nein" / "val.json").write_text(json.dumps([e for e in entries if e["NeIn"] != "NeIn_2_1"]))
    without = _nein_val(root, tmp_path / "without").record
    assert without["n_skipped_media"] == 0 and without["n_items"] == {"samples": 3}
    assert rec["metrics"] == pytest.approx(without["metrics"])


def _break_second_chunk(path: Path) -> None:
    """A noise PNG of several IDAT chunks, the second's length field damaged (Pillow: a bare SyntaxError)."""
    import struct

    Image.fromarray(np.random.default_rng(0).integers(0, 255, (256, 256, 3), dtype=np.uint8)).save(path)
    data = path.read_bytes()
    second = data.index(b"IDAT", data.index(b"IDAT") + 4)
    length = struct.unpack(">I", data[second - 4:second])[0]
    path.write_bytes(data[:second - 4] + struct.pack(">I", length + 5) + data[second:])


@pytest.mark.needs("nltk")
def test_a_png_with_a_broken_chunk_is_a_named_media_error_in_nein_val(tmp_path):
    """fc4bba0's NeIn openers let Pillow's bare SyntaxError through; the shared reader names the file."""
    from negharness.api import TaskOptions
    from negharness.tasks.nein.tasks import NeInVal

    _nein_layout(tmp_path, 1)
    _break_second_chunk(tmp_path / "nein" / "images" / "NeIn_0_1.png")
    sample = next(iter(NeInVal(TaskOptions(tmp_path)).samples()))
    with pytest.raises(MediaError, match=r"cannot decode image .*NeIn_0_1\.png: broken PNG file"):
        sample.load_input()
