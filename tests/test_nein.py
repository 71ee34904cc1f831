"""NeIn on the embedded world: reference editors bound the scores, edits resume, bad outputs are named."""


import pytest

from negharness.contracts.editing import Editor
from negharness.contracts.errors import UserError
from negharness.engine.evaluate import RunRequest, run_evaluation
from negharness.plugins.reference_editors import negated_object
from negharness.plugins.shapes_detector import ShapesDetector
from negharness.tasks.nein.shapes import editing_pairs
from negharness.tasks.nein.tasks import FORMATS
from negharness.testing import host_with_models


def _run(tmp_path, editor, host=None, **kw):
    from negharness.discovery.manager import make_host

    req = RunRequest(model=editor, tasks=["nein_shapes"], output_dir=str(tmp_path / "res"),
                     task_extra={"n_items": "40"}, **kw)
    return run_evaluation(host or make_host(), req)[0]


def test_every_table2_format_names_its_object():
    for f in FORMATS:
        assert negated_object(f.format(S="red circle")) == "red circle"


def test_world_pairs_and_detector():
    det = ShapesDetector()
    pairs = editing_pairs(0, "test", 30, None)
    hits = sum(det.max_scores(p.load_input(), [p.target])[p.target] > 0 for p in pairs)
    gone = sum(det.max_scores(p.load_truth(), [p.target])[p.target] == 0 for p in pairs)
    assert hits >= 27 and gone == 30  # the added shape is seen in the input and absent from the truth


def test_reference_editors_bound_the_scores_and_edits_resume(tmp_path):
    ident = _run(tmp_path, "identity")
    m = ident.record["metrics"]
    assert m["Removal"] < 15 and m["Retention"] == 100.0 and m["L1"] > 0
    assert ident.record["counts"]["edited"] == 40
    inpaint = _run(tmp_path, "detect_inpaint")
    mi = inpaint.record["metrics"]
    assert mi["Removal"] > 80 and mi["L1"] < m["L1"]
    assert inpaint.record["notes"]["editor_detector"] == "shapes_exact" and "circular" in inpaint.record["notes"]
    again = _run(tmp_path, "identity", overwrite=True)
    assert again.record["counts"] == {"reused": 40} and again.record["metrics"] == m
    gallery = (ident.path.with_suffix(".edits") / "gallery.html").read_text()
    assert gallery.count("<tr>") == 13


class _Broken(Editor):
    name = "broken"

    def edit(self, image, instruction, seed):
        return "not an image"


def test_an_output_that_is_not_an_image_is_named(tmp_path):
    host = host_with_models({})
    import types

    from negharness.discovery.hookspecs import hookimpl

    @hookimpl
    def negharness_register_editors(registry):
        registry.add("broken", lambda options: _Broken(), "returns text")

    host.register(types.SimpleNamespace(negharness_register_editors=negharness_register_editors), "broken_plugin")
    with pytest.raises(UserError, match="editor broken returned str for sample image00000"):
        _run(tmp_path, "broken", host=host)
