"""``--model steer``: negation steering (Sammani et al., arXiv 2603.20554) as a wrapper of an open_clip
model, checked on the bundled tiny model against a transcription of the authors' formula written
here independently of the plugin, with the fit, its cache and the pairs file's refusals."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["a red circle", "there is no blue square", "a green triangle isn't sliding", "no yellow star"]


def stand_in_pairs(path: Path, drop: int = 0) -> Path:
    """120 positive -> negated captions in the world's words (stand-in for the authors' train_data.json)."""
    from negharness.world.scenes import COLOURS, SHAPES

    pairs = {}
    for colour in COLOURS:
        for shape in SHAPES:
            pairs[f"a {colour} {shape}"] = f"no {colour} {shape}"
            pairs[f"there is a {colour} {shape}"] = f"there is not a {colour} {shape}"
            pairs[f"a {colour} {shape} blinking"] = f"a {colour} {shape} not blinking"
            pairs[f"a {colour} {shape} is sliding"] = f"a {colour} {shape} isn't sliding"
            pairs[f"a {colour} {shape} and a red cross"] = f"a {colour} {shape} without a red cross"
    items = list(pairs.items())[drop:]
    path.write_text(json.dumps(dict(items)), encoding="utf-8")
    return path


def make(pairs: Path | None, **extra: str):
    from negharness.api import ModelOptions, installed_plugins
    from negharness.plugins.steering import steer

    opts = {"base": "shapes_clip", "holdout": "5", **extra, **({"pairs": str(pairs)} if pairs else {})}
    return steer(ModelOptions(extra=opts, plugins=installed_plugins()))


def by_hand(model: torch.nn.Module, tokens: torch.Tensor, directions: torch.Tensor, alpha: float) -> torch.Tensor:
    """The authors' steer_every_layer (steer.py:175-224) written out: the text tower block by block,
    each block's output at the argmax (EOT) token replaced by (1 - a) x + a d |x|."""
    x = model.token_embedding(tokens) + model.positional_embedding
    rows, eot = torch.arange(len(tokens)), tokens.argmax(dim=-1)
    first = model.transformer.batch_first
    x = x if first else x.transpose(0, 1)
    for layer, block in enumerate(model.transformer.resblocks):
        x = block(x, attn_mask=model.attn_mask).clone()
        v = x[rows, eot] if first else x[eot, rows]
        new = (1 - alpha) * v + alpha * directions[layer] * v.norm(dim=-1, keepdim=True)
        if first:
            x[rows, eot] = new
        else:
            x[eot, rows] = new
    x = model.ln_final(x if first else x.transpose(0, 1))
    return F.normalize(x[rows, eot] @ model.text_projection, dim=-1)


def test_steered_text_equals_the_authors_formula_by_hand(tmp_path):
    steered = make(stand_in_pairs(tmp_path / "pairs.json"))
    with torch.no_grad():
        got = steered.encode_text(TEXTS)
        want = by_hand(steered.base.model, steered.base.tokenizer(TEXTS), steered.directions(), 0.13)
        plain = steered.base.encode_text(TEXTS)
    assert torch.allclose(got, want, atol=1e-5)
    assert (got - plain).abs().max() > 1e-3  # the steering changes the embeddings
    assert steered.directions().norm(dim=-1).sub(1).abs().max() < 1e-5  # unit directions, one per layer
    assert steered.directions().shape == (len(steered.base.model.transformer.resblocks), 32)


def test_alpha_zero_is_the_base_model_and_images_are_untouched(tmp_path):
    steered = make(stand_in_pairs(tmp_path / "pairs.json"), alpha="0")
    pixels = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(steered.encode_text(TEXTS), steered.base.encode_text(TEXTS))
        assert torch.equal(steered.encode_image(pixels), steered.base.encode_image(pixels))
    # and the hooks are gone afterwards: the shared base model encodes as itself
    with torch.no_grad():
        before = steered.base.encode_text(TEXTS)
        make(tmp_path / "pairs.json").encode_text(TEXTS)
        assert torch.equal(steered.base.encode_text(TEXTS), before)


def test_directions_are_cached_by_pairs_content(tmp_path, monkeypatch, _private_cache):
    import negharness.plugins.steering as steering

    fits = []
    real = steering.fit_directions
    monkeypatch.setattr(steering, "fit_directions", lambda *a: fits.append(1) or real(*a))
    pairs = stand_in_pairs(tmp_path / "pairs.json")
    first = make(pairs).encode_text(TEXTS)
    again = make(pairs).encode_text(TEXTS)  # a new wrapper: read from the cache, not fitted
    assert len(fits) == 1 and torch.allclose(first, again)
    cached = list((_private_cache / "steering").glob("*.safetensors"))
    assert len(cached) == 1
    stand_in_pairs(pairs, drop=3)  # same path, other content
    other = make(pairs).encode_text(TEXTS)
    assert len(fits) == 2 and len(list((_private_cache / "steering").glob("*.safetensors"))) == 2
    assert not torch.allclose(first, other)
    cached[0].write_bytes(b"not safetensors")  # a damaged file is refitted, never trusted
    stand_in_pairs(pairs)
    assert torch.allclose(make(pairs).encode_text(TEXTS), first, atol=1e-5) and len(fits) == 3


def test_identity_names_base_alpha_and_pairs(tmp_path):
    pairs = stand_in_pairs(tmp_path / "pairs.json")
    plain = make(pairs)
    prints = {plain.fingerprint(), make(pairs, alpha="0.2").fingerprint(),
              make(pairs, quick_gelu="true").fingerprint(),  # another base (-M goes to it)
              make(stand_in_pairs(tmp_path / "other.json", drop=1)).fingerprint(),
              plain.base.fingerprint()}
    assert len(prints) == 5
    assert plain.describe()["steering"]["pairs_sha256"] == __import__("hashlib").sha256(pairs.read_bytes()).hexdigest()
    assert plain.name == "steer(shapes_clip)"


@pytest.mark.parametrize("content, says", [
    ("{not json", "not a JSON file"),
    ('["a", "b"]', "expected one JSON object"),
    ('{"a red circle": "no red circle", "a blue square": ""}', "entry 2 ('a blue square')"),
    ('{"a red circle": "no red circle", "a blue square": 3}', "entry 2 ('a blue square')"),
    ('{"a red circle": "a red circle"}', "entry 1 ('a red circle'): the negated caption equals"),
    ('{"a red circle": "no red circle", "a red circle": "not a red circle"}', "entry 2 ('a red circle'): this positive"),
])
def test_a_bad_pairs_file_is_refused_by_name(tmp_path, content, says):
    from negharness.api import UserError

    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    with pytest.raises(UserError) as err:
        make(bad)
    assert f"-M pairs={bad}" in str(err.value) and says in str(err.value)


def test_missing_pairs_and_unsteerable_bases_are_refused(tmp_path):
    from negharness.api import MissingDataError, UserError
    from negharness.plugins.boolean_model import BooleanModel
    from negharness.plugins.steering import check_steerable

    with pytest.raises(MissingDataError, match="negharness fetch negation_steering/train_data.json"):
        make(None)  # the authors' file is not in this data root
    with pytest.raises(UserError, match="no such file"):
        make(tmp_path / "absent.json")
    with pytest.raises(UserError, match="holdout=500: the pairs file has 120 pairs"):
        make(stand_in_pairs(tmp_path / "pairs.json"), holdout="500")
    base = make(tmp_path / "pairs.json").base
    with pytest.raises(UserError, match="-M base=boolean: .*boolean is not one"):
        check_steerable(BooleanModel(base, "shapes_clip"), "boolean")


def test_the_fit_matches_sklearn():
    """Directions of the L-BFGS fit and of the authors' sklearn call agree (sklearn is not a dependency)."""
    sklearn = pytest.importorskip("sklearn.linear_model")
    from negharness.plugins.steering_fit import logistic_weights

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(300, 12, generator=gen) * 3 + torch.linspace(-1, 1, 12)
    y = ((x @ torch.randn(12, generator=gen) + torch.randn(300, generator=gen)) > 0).long()
    ours = logistic_weights(x, y)
    theirs = torch.from_numpy(sklearn.LogisticRegression(solver="lbfgs", max_iter=1000, fit_intercept=False)
                              .fit(x.double().numpy(), y.numpy()).coef_[0])
    assert F.cosine_similarity(ours, theirs, dim=0) > 0.999
    assert torch.allclose(ours, theirs, rtol=1e-2, atol=1e-3)


def test_readme_steer_command_runs_on_stand_in_pairs(tmp_path):
    """The models guide's `steer` command with a pairs file, as written, on stand-in pairs."""
    text = (ROOT / "docs" / "guides" / "models.md").read_text()
    commands = [c.split(" #")[0].strip() for c in re.findall(r"^negharness run --model steer .*$", text, re.M)]
    runnable = [c for c in commands if "pairs=pairs.json" in c]
    assert runnable, "docs/guides/models.md shows a steer command with -M pairs=pairs.json"
    stand_in_pairs(tmp_path / "pairs.json")
    for command in runnable:
        result = run_cli(shlex.split(command)[1:], tmp_path)
        assert result.returncode == 0, result.stderr
        assert "MIR" in result.stdout
