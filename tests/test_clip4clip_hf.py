"""CLIP4Clip checkpoints in their own layout and transformers CLIP folders load to the source model's embeddings."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from negharness.api import UserError
from negharness.api import ModelOptions
from negharness.plugins.clip4clip import SeqTransfHead, clip4clip
from negharness.plugins.openclip_model import OpenClipModel

TINY_VIT = {"model_cfg": {"embed_dim": 64, "quick_gelu": True,
                          "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "patch_size": 16},
                          "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 1}}}


@pytest.fixture(scope="module")
def c4c(tmp_path_factory):
    """A random tiny CLIP and seqTransf head, saved as CLIP4Clip saves them (torch.save of a state dict)."""
    folder = tmp_path_factory.mktemp("c4c")
    cfg = folder / "tiny_vit.json"
    cfg.write_text(json.dumps(TINY_VIT))
    torch.manual_seed(0)
    source = OpenClipModel.create("src", ModelOptions(arch=str(cfg)), default_pretrained=None)
    head = SeqTransfHead(64, 2, 77)
    with torch.no_grad():  # push the head away from identity so a wrong head shows
        for p in head.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    state = {f"clip.{k}": v for k, v in source.model.state_dict().items()}
    torch.save({**state, **head.state_dict()}, folder / "seq.bin")
    torch.save(state, folder / "meanp.bin")
    return cfg, folder, source, head.state_dict()


def _reference_seqtransf(feats, mask, hs, heads=1):
    """CLIP4Clip's _loose_similarity for seqTransf, written out from its code with the checkpoint tensors."""
    x = feats + hs["frame_position_embeddings.weight"][: feats.shape[1]][None]
    ext = ((1.0 - mask[:, None, :]) * -1000000.0).expand(-1, mask.shape[1], -1)
    x = x.permute(1, 0, 2)
    layers = sorted({k.split(".")[2] for k in hs if k.startswith("transformerClip.")})
    for i in layers:
        p = lambda n: hs[f"transformerClip.resblocks.{i}.{n}"]  # noqa: E731
        h = F.layer_norm(x, (x.shape[-1],), p("ln_1.weight"), p("ln_1.bias"), 1e-12)
        a = F.multi_head_attention_forward(h, h, h, x.shape[-1], heads, p("attn.in_proj_weight"), p("attn.in_proj_bias"),
                                           None, None, False, 0.0, p("attn.out_proj.weight"), p("attn.out_proj.bias"),
                                           training=False, need_weights=False, attn_mask=ext.repeat(heads, 1, 1))[0]
        x = x + a
        h = F.layer_norm(x, (x.shape[-1],), p("ln_2.weight"), p("ln_2.bias"), 1e-12)
        h = F.linear(h, p("mlp.c_fc.weight"), p("mlp.c_fc.bias"))
        x = x + F.linear(h * torch.sigmoid(1.702 * h), p("mlp.c_proj.weight"), p("mlp.c_proj.bias"))
    x = x.permute(1, 0, 2) + feats
    x = F.normalize(x, dim=-1) * mask[..., None]
    return F.normalize(x.sum(1) / mask.sum(1, keepdim=True), dim=-1)


def _frames(b, t, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((b, t, 3, 32, 32)).astype(np.float32))


def test_seqtransf_matches_clip4clip_formula(c4c):
    cfg, folder, source, head_state = c4c
    model = clip4clip(ModelOptions(arch=str(cfg), checkpoint=str(folder / "seq.bin")))
    assert model.describe()["head"] == "seqTransf"
    frames = _frames(3, 5)
    with torch.inference_mode():
        got = model.encode_video(frames)
        feats = source.model.encode_image(frames.flatten(0, 1)).view(3, 5, -1)
        want = _reference_seqtransf(feats, torch.ones(3, 5), head_state)
        assert torch.allclose(got, want, atol=1e-5)
        one = torch.tensor([[1.0, 1.0, 1.0, 0.0, 0.0]])  # a padded clip, alone in its batch
        assert torch.allclose(model.encode_video(frames[:1], one.bool()),
                              _reference_seqtransf(feats[:1], one, head_state), atol=1e-5)
        text = model.encode_text(["a man is not cooking"])
        assert torch.equal(text, source.encode_text(["a man is not cooking"]))


def test_video_embedding_does_not_depend_on_its_batch(c4c):
    cfg, folder, *_ = c4c
    model = clip4clip(ModelOptions(arch=str(cfg), checkpoint=str(folder / "seq.bin")))
    frames = _frames(2, 4, seed=1)
    mask = torch.tensor([[True, True, True, True], [True, True, False, False]])
    with torch.inference_mode():
        together = model.encode_video(frames, mask)
        alone = model.encode_video(frames[1:], mask[1:])
    assert torch.allclose(together[1], alone[0], atol=1e-5)


def test_meanp_and_head_choice(c4c):
    cfg, folder, source, _ = c4c
    meanp = clip4clip(ModelOptions(arch=str(cfg), checkpoint=str(folder / "meanp.bin")))
    assert meanp.describe()["head"] == "meanP"
    frames = _frames(2, 3, seed=2)
    with torch.inference_mode():
        per_frame = F.normalize(source.model.encode_image(frames.flatten(0, 1)), dim=-1).view(2, 3, -1)
        assert torch.allclose(meanp.encode_video(frames), F.normalize(per_frame.mean(1), dim=-1), atol=1e-5)
    forced = clip4clip(ModelOptions(arch=str(cfg), checkpoint=str(folder / "seq.bin"), extra={"head": "meanP"}))
    assert forced.describe()["head"] == "meanP"
    with pytest.raises(UserError, match="no seqTransf weights"):
        clip4clip(ModelOptions(arch=str(cfg), checkpoint=str(folder / "meanp.bin"), extra={"head": "seqTransf"}))
    with pytest.raises(UserError, match="not a CLIP4Clip checkpoint"):
        torch.save({"visual.proj": torch.zeros(2)}, folder / "plain.bin")
        clip4clip(ModelOptions(arch=str(cfg), checkpoint=str(folder / "plain.bin")))
    with pytest.raises(UserError, match="-M colour"):
        clip4clip(ModelOptions(arch=str(cfg), checkpoint=str(folder / "seq.bin"), extra={"colour": "red"}))


# transformers ---------------------------------------------------------------------------------------
transformers = pytest.importorskip("transformers")

from hf_helpers import clip_tokenizer_files  # noqa: E402


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPTokenizer

    folder = tmp_path_factory.mktemp("hf")
    torch.manual_seed(0)
    config = CLIPConfig(text_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                     "num_attention_heads": 2, "vocab_size": 49408},
                        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                       "num_attention_heads": 2, "image_size": 32, "patch_size": 8},
                        projection_dim=16)
    model = CLIPModel(config).eval()
    model.save_pretrained(folder)
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    clip_tokenizer_files(folder)
    CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt")).save_pretrained(folder)
    return folder, model


def test_hf_clip_folder_gives_the_source_models_embeddings(hf_folder):
    from transformers import CLIPTokenizer

    from negharness.plugins.hf_clip import hf_clip

    folder, source = hf_folder
    model = hf_clip(ModelOptions(arch=str(folder)))
    texts = ["a dog that is not barking", "a red circle"]
    tok = CLIPTokenizer.from_pretrained(folder)
    enc = tok(texts, padding=True, return_tensors="pt")
    img = np.random.default_rng(0).integers(0, 255, size=(32, 32, 3), dtype=np.uint8)
    with torch.inference_mode():
        got_t = model.encode_text(texts)
        out = source.get_text_features(**enc)
        want_t = F.normalize(out if isinstance(out, torch.Tensor) else out.pooler_output, dim=-1)
        got_i = model.encode_image(model.preprocess_image(img)[None])
        px = model.processor(images=img, return_tensors="pt")["pixel_values"]
        out = source.get_image_features(pixel_values=px)
        want_i = F.normalize(out if isinstance(out, torch.Tensor) else out.pooler_output, dim=-1)
    assert torch.allclose(got_t, want_t, atol=1e-6) and torch.allclose(got_i, want_i, atol=1e-6)
    assert not torch.allclose(got_t[0], got_t[1])


def test_hf_clip_refuses_a_folder_without_a_real_tokenizer(hf_folder, tmp_path):
    import shutil

    from negharness.plugins.hf_clip import hf_clip

    folder, _ = hf_folder
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors", "preprocessor_config.json"):
        shutil.copy(folder / name, bare / name)
    with pytest.raises(UserError, match="only 2 tokens|cannot load"):  # never a silent 2-token tokenizer
        hf_clip(ModelOptions(arch=str(bare)))


def test_hf_clip_fingerprint_sees_the_tokenizer_files(hf_folder, tmp_path):
    """The fingerprint names the embedding cache: a folder whose tokenizer files were replaced (same weights,
    same processor) encodes texts otherwise, so it is another model; the same files give the same fingerprint."""
    import shutil

    from negharness.plugins.hf_clip import hf_clip

    folder, _ = hf_folder
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    same = hf_clip(ModelOptions(arch=str(copy)))
    assert hf_clip(ModelOptions(arch=str(copy))).fingerprint() == same.fingerprint()
    for name, where in (("vocab.json", ()), ("tokenizer.json", ("model", "vocab"))):  # "dog" and "cat" swap ids
        path = copy / name
        if path.is_file():
            data = json.loads(path.read_text())
            vocab = data
            for key in where:
                vocab = vocab[key]
            vocab["dog</w>"], vocab["cat</w>"] = vocab["cat</w>"], vocab["dog</w>"]
            path.write_text(json.dumps(data))
    swapped = hf_clip(ModelOptions(arch=str(copy)))
    with torch.inference_mode():
        assert not torch.allclose(same.encode_text(["a dog"]), swapped.encode_text(["a dog"]))
    assert swapped.fingerprint() != same.fingerprint()
