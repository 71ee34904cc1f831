"""A model is named by its typed, bound options: spellings of one ``-M`` value give one record
folder, one config hash and one leaderboard row, and a default given explicitly equals its absence.
Records written before under the documented spelling (``true``/``false``, numbers as Python writes
them) and records without ``-M`` keep their folder, label and config hash, so they keep resolving."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from negharness.api import UserError
from negharness.api import ModelOptions
from negharness.api import OptionSpec
from negharness.records.results import ModelConfig

SPECS = {"quick_gelu": OptionSpec(bool, None), "jpeg_draft": OptionSpec(bool, False), "scale": OptionSpec(float, 1.0),
         "frames": OptionSpec(str, None)}


@pytest.mark.parametrize("spelling", ["true", "1", "YES", "on", " True "])
def test_spellings_of_one_value_are_one_identity(spelling):
    got = ModelOptions(extra={"quick_gelu": spelling}).identity(SPECS, "clip")
    assert got == {"quick_gelu": "true"}


def test_a_default_given_explicitly_is_no_option():
    for extra in ({"jpeg_draft": "false"}, {"jpeg_draft": "0"}, {"scale": "1"}, {"scale": "1e0"}, {}):
        assert ModelOptions(arch="ViT-B-32", extra=extra).identity(SPECS, "clip") == {"arch": "ViT-B-32"}, extra
    assert ModelOptions(extra={"scale": "2"}).identity(SPECS, "clip") == {"scale": "2.0"}
    assert ModelOptions(extra={"frames": "fps:2"}).identity(SPECS, "clip") == {"frames": "fps:2"}


def test_undeclared_keys_keep_their_spelling_and_a_bad_value_names_the_model():
    rest = ModelOptions(extra={"base": "clip", "quick_gelu": "YES"}).identity({"base": OptionSpec(str)}, "boolean",
                                                                             passes_rest=True)
    assert rest == {"base": "clip", "quick_gelu": "YES"}  # the wrapped model's option: not this factory's to type
    assert ModelOptions(extra={"x": "1"}).identity(None, "thirdparty") == {"x": "1"}  # declares none: as given
    with pytest.raises(UserError, match="quick_gelu=maybe.*model 'clip'"):
        ModelOptions(extra={"quick_gelu": "maybe"}).identity(SPECS, "clip")


def _run(tmp_path: Path, extra: dict[str, str], cli: bool = False, model: str = "shapes_clip"):
    from negharness.discovery.manager import make_host
    from negharness.engine.evaluate import evaluate_request
    from negharness.engine.fingerprints import standing
    from negharness.engine.plan import make_plan
    from negharness.engine.request import RunRequest

    host = make_host()
    req = RunRequest(model=model, tasks=["shapes_t2i_original"], model_options=ModelOptions(extra=extra),
                     limit=4, device="cpu", output_dir=str(tmp_path / "res"), cache_dir=str(tmp_path / "cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ((cli and standing(host, make_plan(host, req))) or evaluate_request(host, req))[0]


def test_two_spellings_reach_one_record_and_one_row_on_every_road(tmp_path):
    """``-M quick_gelu=YES`` then ``=1`` (the run, then the CLI's road): one record, reused, one label;
    ``-M jpeg_draft=false`` is the run without options. Old records: the folder and config hash are
    those a run spelling ``quick_gelu=true`` wrote before (fc4bba0), so such records are found."""
    from negharness.engine.evaluate import config_hash
    from negharness.records.board_pass import checked_records

    first = _run(tmp_path, {"quick_gelu": "YES"})
    again = _run(tmp_path, {"quick_gelu": "1"}, cli=True)
    assert again.skipped and again.path == first.path and again.record["metrics"] == first.record["metrics"]
    documented = ModelConfig("shapes_clip", {"quick_gelu": "true"})
    assert first.path.parent.name == documented.dirname and first.record["model"]["label"] == documented.label
    task = first.record["config"]["task"]
    assert first.record["config_hash"] == config_hash(documented, task)

    plain = _run(tmp_path, {})
    explicit = _run(tmp_path, {"jpeg_draft": "false"})
    assert explicit.skipped and explicit.path == plain.path and explicit.record["metrics"] == plain.record["metrics"]
    labels = sorted({rec["model"]["label"] for _, rec in checked_records(tmp_path / "res")})
    assert labels == ["shapes_clip", "shapes_clip (quick_gelu=true)"]


def test_diagnose_files_its_picture_under_the_folder_a_run_of_the_same_options_writes(cli, tmp_path):
    """`negharness diagnose -M quick_gelu=YES -M jpeg_draft=0` names the model as a run does: the folder of
    ``quick_gelu=true`` (jpeg_draft's default dropped), not one of its own spelling."""
    import json

    from negharness.report.diagnosis_file import FILE_NAME

    arch = tmp_path / "tiny_clip.json"
    arch.write_text(json.dumps({"model_cfg": {
        "embed_dim": 16, "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16, "head_width": 16},
        "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}}}))
    res = cli("diagnose", "--model", "clip", "--arch", str(arch), "-M", "quick_gelu=YES", "-M", "jpeg_draft=0",
              "--objects", "dog,cat,car", "--device", "cpu", "--out", str(tmp_path / "d.png"),
              "--results-dir", "results")
    assert res.returncode == 0, res.stderr
    cfg = ModelConfig("clip", {"arch": str(arch), "quick_gelu": "true"})
    written = json.loads((tmp_path / "results" / cfg.dirname / FILE_NAME).read_text())
    assert written["model"]["label"] == cfg.label and written["model"]["options"] == cfg.options


def test_a_wrappers_passed_through_options_are_named_as_the_wrapped_model_names_them():
    """``boolean -M base=shapes_clip -M quick_gelu=YES`` and ``=1`` are one model (the wrapped model's
    typed value), and ``-M jpeg_draft=false`` (its default) is no option; what no model declares stays."""
    from negharness.discovery.lookup import PluginLookup
    from negharness.discovery.manager import make_host

    lookup = PluginLookup(make_host().registry)
    entry = lookup.registry.get("model", "boolean")

    def named(extra: dict[str, str]) -> dict:
        return lookup.identified(entry, ModelOptions(extra={"base": "shapes_clip", **extra}))[1]

    assert named({"quick_gelu": "YES"}) == named({"quick_gelu": "1"}) == {"base": "shapes_clip", "quick_gelu": "true"}
    assert named({"jpeg_draft": "false"}) == named({}) == {"base": "shapes_clip"}
    with pytest.raises(UserError, match="quick_gelu=maybe.*shapes_clip"):
        named({"quick_gelu": "maybe"})
    # a base this host does not know keeps the rest as given (the run refuses the name, not the identity)
    assert lookup.identified(entry, ModelOptions(extra={"base": "nope", "x": "1"}))[1] == {"base": "nope", "x": "1"}


def test_a_wrappers_two_spellings_reach_one_record(tmp_path):
    """The run road: ``boolean -M base=shapes_clip -M quick_gelu=YES`` writes the record that ``=1``
    then reuses (one folder, one label)."""
    first = _run(tmp_path, {"base": "shapes_clip", "quick_gelu": "YES"}, model="boolean")
    again = _run(tmp_path, {"base": "shapes_clip", "quick_gelu": "1"}, model="boolean")
    assert again.skipped and again.path == first.path and again.record["metrics"] == first.record["metrics"]
    assert first.record["model"]["options"] == {"base": "shapes_clip", "quick_gelu": "true"}


def test_a_wrapper_whose_base_is_its_default_names_the_rest_as_that_base():
    """A wrapper whose ``base`` option has a default: the base is dropped from the identity (a default), and
    the rest is still named as that base names it (``quick_gelu=YES`` and ``=1``, with or without ``base=``)."""
    from negharness.api import takes_options
    from negharness.discovery.lookup import identity_options
    from negharness.discovery.manager import make_host
    from negharness.discovery.registry import Entry

    @takes_options({"base": OptionSpec(str, "shapes_clip")}, wraps="base")
    def wrapper(options):
        raise AssertionError("identity never builds the model")

    entry = Entry("model", "wrapper", wrapper, "", "test")
    registry = make_host().registry
    named = [identity_options(entry, ModelOptions(extra=extra), registry)
             for extra in ({"quick_gelu": "YES"}, {"base": "shapes_clip", "quick_gelu": "1"})]
    assert named == [{"quick_gelu": "true"}, {"quick_gelu": "true"}]
