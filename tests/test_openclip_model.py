"""open_clip models load real checkpoint layouts safely, and give the source model's embeddings."""

import time

import numpy as np
import pytest
import torch

from negharness.api import UserError
from negharness.api import ModelOptions
from negharness.plugins.openclip_model import OpenClipModel, clip
from negharness.plugins.shapes_clip import CONFIG


@pytest.fixture(scope="module")
def source():
    torch.manual_seed(1)
    return OpenClipModel.create("src", ModelOptions(arch=str(CONFIG)), default_pretrained=None)


def _embeddings(model):
    rng = np.random.default_rng(0)
    img = rng.integers(0, 255, size=(2, 32, 32, 3), dtype=np.uint8)
    pixels = torch.stack([model.preprocess_image(i) for i in img])
    with torch.inference_mode():
        return model.encode_text(["a red circle", "a blue square is sliding"]), model.encode_image(pixels)


@pytest.mark.parametrize("wrap", ["plain", "state_dict", "module", "state_dict+module", "safetensors"])
def test_checkpoint_layouts_load_to_identical_embeddings(source, tmp_path, wrap):
    state = source.model.state_dict()
    if "module" in wrap:
        state = {f"module.{k}": v for k, v in state.items()}
    if wrap.startswith("state_dict"):
        state = {"state_dict": state, "epoch": 3}
    if wrap == "safetensors":
        from safetensors.torch import save_file

        path = tmp_path / "ckpt.safetensors"
        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    else:
        path = tmp_path / "ckpt.pt"
        torch.save(state, path)
    loaded = clip(ModelOptions(arch=str(CONFIG), checkpoint=str(path)))
    for a, b in zip(_embeddings(source), _embeddings(loaded)):
        assert torch.equal(a, b)
    assert loaded.describe()["weights"] != "random-init"


class Evil:
    """Any non-tensor object: unpickling it would run arbitrary code from a user's file."""


def test_pickled_objects_are_ignored_not_built(source, tmp_path):
    """A foreign object beside the weights is named in a warning and describe(), never built."""
    path = tmp_path / "evil.pt"
    torch.save({"state_dict": source.model.state_dict(), "obj": Evil()}, path)
    with pytest.warns(UserWarning, match="Evil"):
        loaded = clip(ModelOptions(arch=str(CONFIG), checkpoint=str(path)))
    assert loaded.describe()["checkpoint_notes"]["ignored_objects"] == ["test_openclip_model.Evil"]
    torch.save({"state_dict": {"w": torch.zeros(1)}, "obj": Evil()}, path)
    with pytest.warns(UserWarning), pytest.raises(UserError, match=r"evil.pt: does not fit .*1 unexpected.*'w'"):
        clip(ModelOptions(arch=str(CONFIG), checkpoint=str(path)))


def test_foreign_checkpoint_is_a_clear_error(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"layer.weight": torch.zeros(2, 2)}, path)
    with pytest.raises(UserError, match="does not fit"):
        clip(ModelOptions(arch=str(CONFIG), checkpoint=str(path)))
    with pytest.raises(UserError, match="not found"):
        clip(ModelOptions(arch=str(CONFIG), checkpoint=str(tmp_path / "missing.pt")))


def test_pretrained_tag_offline_fails_fast_with_what_to_do(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(UserError) as exc:
        clip(ModelOptions(arch="RN50", pretrained="openai"))
    assert time.perf_counter() - start < 30
    assert "--checkpoint" in str(exc.value) and "RN50/openai" in str(exc.value)


def test_unknown_arch_suggests(source):
    with pytest.raises(UserError, match="ViT-B-32"):
        clip(ModelOptions(arch="ViT-B-33"))


def test_fingerprint_tracks_weights_and_activation(source, tmp_path):
    path = tmp_path / "w.pt"
    torch.save(source.model.state_dict(), path)
    gelu = clip(ModelOptions(arch=str(CONFIG), checkpoint=str(path)))
    quick = clip(ModelOptions(arch=str(CONFIG), checkpoint=str(path), extra={"quick_gelu": "true"}))
    assert gelu.describe()["quick_gelu"] is False and quick.describe()["quick_gelu"] is True
    assert gelu.fingerprint() != quick.fingerprint()


def test_pil_and_array_preprocessing_agree(source):
    from PIL import Image

    img = np.random.default_rng(3).integers(0, 255, size=(32, 32, 3), dtype=np.uint8)
    assert torch.allclose(source.preprocess_image(img), source.preprocess_image(Image.fromarray(img)), atol=1e-6)
    big = np.random.default_rng(4).integers(0, 255, size=(48, 64, 3), dtype=np.uint8)
    assert source.preprocess_image(big).shape == (3, 32, 32)


def _smooth_jpeg(path, size=(256, 192)):
    from PIL import Image

    y, x = np.mgrid[0:size[1], 0:size[0]]
    img = np.stack([x * 255 // size[0], y * 255 // size[1], (x + y) % 256], -1).astype(np.uint8)
    Image.fromarray(img).save(path, quality=92)
    return path


def test_jpeg_draft_is_opt_in_fingerprinted_and_close(source, tmp_path):
    """-M jpeg_draft=true decodes a large JPEG at a DCT scale that keeps the shorter side >= the model's
    input; off by default (the model's own preprocessing, exactly), and a separate cache namespace."""
    from open_clip.transform import PreprocessCfg, image_transform_v2
    from PIL import Image

    from negharness.api import jpeg_draft

    path = _smooth_jpeg(tmp_path / "photo.jpg")
    with Image.open(path) as im:
        assert jpeg_draft(im, 32) and im.size == (64, 48)  # 1/4: 1/8 would leave 24 < 32
    with Image.open(path) as im:
        assert not jpeg_draft(im, 120)  # no DCT scale keeps 120 of 192
    with Image.open(path) as im:
        im.load()
        assert not jpeg_draft(im, 32)  # already decoded
    png = tmp_path / "photo.png"
    Image.open(path).save(png)
    with Image.open(png) as im:
        assert not jpeg_draft(im, 32)

    weights = tmp_path / "w.pt"
    torch.save(source.model.state_dict(), weights)
    plain = clip(ModelOptions(arch=str(CONFIG), checkpoint=str(weights)))
    draft = clip(ModelOptions(arch=str(CONFIG), checkpoint=str(weights), extra={"jpeg_draft": "true"}))
    assert plain.fingerprint() != draft.fingerprint() and "jpeg_draft" not in plain.describe()
    reference = image_transform_v2(PreprocessCfg(**plain.preprocess_cfg), is_train=False)(Image.open(path).convert("RGB"))
    assert torch.equal(plain.preprocess_image(Image.open(path)), reference)
    reduced = draft.preprocess_image(Image.open(path))
    assert not torch.equal(reduced, reference) and (reduced - reference).abs().mean() < 0.05
    with torch.inference_mode():
        cos = (plain.encode_image(reference[None]) * draft.encode_image(reduced[None])).sum()
    assert cos > 0.99


# QuickGELU from the pretrained tag: resolved from open_clip's registry, nothing downloaded ---------
from negharness.plugins.openclip_weights import resolve_quick_gelu, tag_quick_gelu  # noqa: E402


@pytest.mark.parametrize("arch,tag,expected", [
    ("ViT-B-32", "openai", True), ("ViT-B-32", "laion400m_e31", True), ("ViT-B-32", "laion400m_e32", True),
    ("ViT-B-32", "datacomp_xl_s13b_b90k", False), ("ViT-B-32", "laion2b_s34b_b79k", False),
    ("ViT-B-16", "laion400m_e32", False), ("ViT-B-32", None, None), ("ViT-B-32", "no_such_tag", None),
])
def test_tag_quick_gelu_reads_open_clip_registry(arch, tag, expected):
    assert tag_quick_gelu(arch, tag) is expected


def test_explicit_option_wins_and_warns_when_it_contradicts_the_tag(recwarn):
    assert resolve_quick_gelu("ViT-B-32", "laion400m_e32", None, None) is True
    assert resolve_quick_gelu("ViT-B-32", "datacomp_xl_s13b_b90k", None, True) is False  # the tag beats a default
    assert resolve_quick_gelu("ViT-B-32", None, None, True) is True  # no tag: the plugin default
    assert not recwarn.list
    with pytest.warns(UserWarning, match="trained with QuickGELU"):
        assert resolve_quick_gelu("ViT-B-32", "laion400m_e32", False, None) is False
    with pytest.warns(UserWarning, match="trained with GELU"):
        assert resolve_quick_gelu("ViT-B-32", "datacomp_xl_s13b_b90k", True, None) is True
    with pytest.warns(UserWarning, match="cannot turn it off"):
        assert resolve_quick_gelu("ViT-B-32-quickgelu", None, False, None) is True


def test_laion400m_tag_runs_and_records_quick_gelu(source, monkeypatch):
    """The model is built with the tag's activation and describe()/fingerprint record it."""
    asked = []

    def fake_create(arch, pretrained, quick_gelu):
        asked.append((arch, pretrained, quick_gelu))
        return source.model

    monkeypatch.setattr(OpenClipModel, "_create_named", staticmethod(fake_create))
    laion = clip(ModelOptions(arch="ViT-B-32", pretrained="laion400m_e32"))
    datacomp = clip(ModelOptions(arch="ViT-B-32", pretrained="datacomp_xl_s13b_b90k"))
    assert asked == [("ViT-B-32", "laion400m_e32", True), ("ViT-B-32", "datacomp_xl_s13b_b90k", False)]
    assert laion.describe()["quick_gelu"] is True and datacomp.describe()["quick_gelu"] is False
    with pytest.warns(UserWarning):
        forced = clip(ModelOptions(arch="ViT-B-32", pretrained="laion400m_e32", extra={"quick_gelu": "false"}))
    assert asked[-1][2] is False and forced.describe()["quick_gelu"] is False
    assert forced.fingerprint() != laion.fingerprint()


def test_a_pretrained_tag_whose_weights_moved_is_another_fingerprint(source, monkeypatch):
    """A tag names weights a hub cache holds, whose snapshot may move under the same tag: the fingerprint
    (embedding cache namespace, record reuse) once held the tag alone, so new weights read the old ones'
    embeddings. Now the weights' content is in it beside the tag."""
    import copy

    import torch

    moved = copy.deepcopy(source.model)
    with torch.no_grad():
        moved.text_projection.add_(0.01)
    served = [source.model]
    monkeypatch.setattr(OpenClipModel, "_create_named", staticmethod(lambda arch, pretrained, quick: served[0]))
    first = clip(ModelOptions(arch="ViT-B-32", pretrained="openai"))
    assert first.describe()["weights"] == "openai" and first.describe()["weights_content"]  # the tag: published rows
    assert clip(ModelOptions(arch="ViT-B-32", pretrained="openai")).fingerprint() == first.fingerprint()
    served[0] = moved
    assert clip(ModelOptions(arch="ViT-B-32", pretrained="openai")).fingerprint() != first.fingerprint()


@pytest.mark.parametrize("cfg", [
    {"size": 224, "mean": (0.48145466, 0.4578275, 0.40821073), "std": (0.26862954, 0.26130258, 0.27577711)},
    {"size": (160, 224), "mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5)},
    {"size": 64, "resize_mode": "squash", "interpolation": "bilinear"},
    {"size": (48, 64), "resize_mode": "longest", "fill_color": 0},
])
def test_pil_preprocessing_is_open_clips_transform_bit_for_bit(cfg):
    """The PIL path runs open_clip's resize and crop, then ToTensor + Normalize's arithmetic in one
    conversion: every pixel equal to the whole transform's, for RGB, grey, RGBA and palette images."""
    from dataclasses import asdict

    from open_clip.transform import PreprocessCfg, image_transform_v2
    from PIL import Image

    from negharness.plugins.openclip_model import geometry_steps, normalised_chw

    pp = asdict(PreprocessCfg(**cfg))
    whole = image_transform_v2(PreprocessCfg(**cfg), is_train=False)
    geometry = geometry_steps(whole, pp)
    assert geometry is not None
    mean, std = (torch.tensor(pp[k], dtype=torch.float32).view(3, 1, 1) for k in ("mean", "std"))
    rng = np.random.default_rng(5)
    images = [Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)) for h, w in [(120, 90), (17, 31)]]
    images += [images[0].convert("L"), images[1].convert("RGBA"), images[0].convert("P")]
    for image in images:
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        got = normalised_chw(np.asarray(geometry(rgb)), mean, std)
        assert torch.equal(got, whole(image.convert("RGB"))) and got.is_contiguous()


def test_model_preprocess_image_equals_open_clip_transform(source, tmp_path):
    from open_clip.transform import PreprocessCfg, image_transform_v2
    from PIL import Image

    path = _smooth_jpeg(tmp_path / "photo.jpg")
    reference = image_transform_v2(PreprocessCfg(**source.preprocess_cfg), is_train=False)
    assert torch.equal(source.preprocess_image(Image.open(path)), reference(Image.open(path).convert("RGB")))
    assert source._geometry is not None  # the split path ran, not the whole transform


def test_model_from_checkpoint_skips_random_init_and_loads_every_tensor(source, tmp_path):
    """Built from a checkpoint, the model's fills are skipped (the checkpoint overwrites them): its
    state equals the checkpoint's tensor for tensor, and torch's init functions are back afterwards."""
    import torch.nn.init as init

    from negharness.plugins.openclip_weights import no_random_init

    before = init.normal_
    path = tmp_path / "w.pt"
    torch.save(source.model.state_dict(), path)
    loaded = clip(ModelOptions(arch=str(CONFIG), checkpoint=str(path)))
    assert init.normal_ is before
    state = loaded.model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in source.model.state_dict().items())
    with pytest.raises(RuntimeError), no_random_init():
        assert init.normal_ is not before and "uniform_" in torch.Tensor.__dict__
        raise RuntimeError("restored even on an error")
    assert init.normal_ is before and torch.nn.init.kaiming_uniform_.__name__ == "kaiming_uniform_"
    assert "uniform_" not in torch.Tensor.__dict__ and torch.zeros(4).uniform_(1, 2).min() >= 1


def test_a_fill_the_state_dict_does_not_hold_is_found():
    """A random non-persistent buffer would stay unfilled memory after loading: `fills_all_loaded`
    says so, and the model is then built with its fills."""
    from negharness.plugins.openclip_weights import fills_all_loaded, no_random_init

    class Noisy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(3, 2)
            self.register_buffer("noise", torch.empty(3).normal_(), persistent=False)

    with no_random_init() as skipped:
        plain = torch.nn.Linear(3, 2)
    assert skipped and fills_all_loaded(plain, skipped)
    with no_random_init() as skipped:
        noisy = Noisy()
    assert not fills_all_loaded(noisy, skipped)
    with no_random_init(False) as skipped:
        torch.nn.Linear(3, 2)
    assert skipped == []


def test_weights_hash_is_sha256_of_the_tensors_bytes():
    """hash_state_dict reads tensors through the buffer protocol: the same digest as their bytes."""
    import hashlib

    from negharness.api import hash_state_dict

    state = {"b": torch.arange(6, dtype=torch.float32).view(2, 3).t(), "a": torch.ones(3, dtype=torch.bfloat16),
             "e": torch.empty(0)}
    h = hashlib.sha256()
    for key in sorted(state):
        t = state[key].contiguous()
        h.update(key.encode() + str(t.dtype).encode() + str(tuple(t.shape)).encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    assert hash_state_dict(state) == h.hexdigest()[:16]


def test_config_models_tokenizer_is_open_clips_at_its_context_length():
    """The copied default tokenizer gives open_clip's own tokens at the config's context length."""
    from open_clip.tokenizer import SimpleTokenizer

    from negharness.plugins.openclip_weights import simple_tokenizer

    texts = ["a red circle", "There is no dog in the image, but a cat sleeps on a sofa.", "naïve café ¿qué?", ""]
    for context in (16, 77):
        made = simple_tokenizer(context)
        assert made.context_length == context
        assert torch.equal(made(texts), SimpleTokenizer(context_length=context)(texts))


def _layouts_seen(model):
    """Record, per forward of each attention module, whether it ran batch-first."""
    seen = []
    hooks = [m.register_forward_pre_hook(lambda mod, _args: seen.append(mod.batch_first))
             for m in model.model.modules() if isinstance(m, torch.nn.MultiheadAttention)]
    return seen, hooks


def test_bf16_on_cpu_runs_sequence_first_and_agrees_with_batch_first(source):
    """Under CPU bf16 autocast the towers run sequence-first (a CPU's bf16 product on the transposed
    input batch-first attention makes is several times slower); embeddings agree with open_clip's own
    batch-first forward to bf16 rounding; fp32 keeps batch-first; every module is restored."""
    rng = np.random.default_rng(0)
    pixels = torch.stack([source.preprocess_image(i) for i in rng.integers(0, 255, (4, 32, 32, 3), dtype=np.uint8)])
    texts = ["a red circle", "a blue square is sliding", "not a green cross", "two shapes"]
    seen, hooks = _layouts_seen(source)
    try:
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            got = source.encode_image(pixels), source.encode_text(texts)
            low = list(seen)
            want = (torch.nn.functional.normalize(source.model.encode_image(pixels).float(), dim=-1),
                    torch.nn.functional.normalize(source.model.encode_text(source.tokenizer(texts)).float(), dim=-1))
        seen.clear()
        with torch.inference_mode():
            source.encode_image(pixels), source.encode_text(texts)
    finally:
        for h in hooks:
            h.remove()
    assert low and not any(low)  # every attention call under bf16 ran sequence-first
    assert seen and all(seen)  # fp32: batch-first
    assert all(m.batch_first for m in source.model.modules() if isinstance(m, torch.nn.MultiheadAttention))
    for a, b in zip(got, want):
        assert float((a * b).sum(-1).min()) > 0.999


def test_the_layout_is_restored_when_a_forward_fails(source):
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(RuntimeError):
        source.encode_image(torch.zeros(1, 3, 7, 7))  # too small for the patch embedding
    assert all(m.batch_first for m in source.model.modules() if isinstance(m, torch.nn.MultiheadAttention))
