"""NeIn on the embedded world: reference editors bound the scores, edits resume, bad outputs are named."""


import numpy as np
import pytest
from PIL import Image

from negharness.api import Editor
from negharness.api import UserError
from negharness.engine.evaluate import RunRequest, evaluate_request
from negharness.plugins.reference_editors import negated_object
from negharness.plugins.shapes_detector import ShapesDetector
from negharness.tasks.nein.shapes import ShapesNeIn, editing_pairs
from negharness.tasks.nein.tasks import FORMATS
from negharness.testing import host_with_models
from negharness.world.render import BACKGROUND
from negharness.world.scenes import COLOURS, SHAPES


def _run(tmp_path, editor, host=None, **kw):
    from negharness.discovery.manager import make_host

    req = RunRequest(model=editor, tasks=["nein_shapes"], output_dir=str(tmp_path / "res"),
                     task_extra={"n_items": "40"}, **kw)
    return evaluate_request(host or make_host(), req)[0]


def test_every_table2_format_names_its_object():
    for f in FORMATS:
        assert negated_object(f.format(S="red circle")) == "red circle"


@pytest.mark.heavy  # tens of seconds: scheduled first (tests/conftest.py)
def test_detector_is_exact_on_every_sample_of_the_default_split():
    """Every sample nein_shapes builds by default: the input shows exactly its objects and the added
    target, the truth exactly its objects, asked about every colour and shape of the world."""
    det = ShapesDetector()
    labels = [f"{c} {s}" for c in COLOURS for s in SHAPES]
    n = ShapesNeIn.task_options["n_items"].default
    pairs = editing_pairs(0, "test", n, None, query_seed=0)  # as ShapesNeIn.samples at the default seed
    wrong = []
    for p in pairs:
        for what, image, shown in (("input", p.load_input(), set(p.objects) | {p.target}),
                                   ("truth", p.load_truth(), set(p.objects))):
            found = {label for label, v in det.max_scores(image, labels).items() if v > 0}
            if found != shown:
                wrong.append((p.id, what, sorted(shown), sorted(found)))
    assert len(pairs) == 200 and wrong == []


def test_detector_fits_a_component_once_and_again_when_its_pixels_change(monkeypatch):
    """The detector remembers each component's shape by the pixels and the component (all a fit reads):
    the same image asked twice (NeIn's edited image; an editor that changed nothing) is fitted once, with
    the same detections; one pixel changed is a new fit, whose answer may differ."""
    from negharness.plugins import shapes_detector

    fitted = []
    real = shapes_detector.classify
    monkeypatch.setattr(shapes_detector, "classify", lambda px, comp: fitted.append(1) or real(px, comp))
    det = ShapesDetector()
    p = editing_pairs(0, "test", 1, None)[0]
    first = det.detect(p.load_input(), [p.target])
    once = len(fitted)
    assert once >= 1 and det.detect(p.load_input(), [p.target]) == first and len(fitted) == once
    pixels = np.array(p.load_input())
    x0, y0, x1, y1 = (int(v) for v in first[0].box)
    pixels[y0:(y0 + y1) // 2, x0:x1] = BACKGROUND.astype(np.uint8)  # its top half painted out
    assert det.detect(Image.fromarray(pixels), [p.target]) == [] and len(fitted) > once


def test_detector_reads_any_size_and_rejects_what_is_no_shape():
    det = ShapesDetector()
    p = editing_pairs(0, "test", 1, None)[0]
    big = p.load_input().resize((128, 128), Image.NEAREST)
    assert det.max_scores(big, [p.target])[p.target] == 1.0  # an editor's larger output is read at 32 px
    pixels = np.array(p.load_input())
    box = next(d.box for d in det.detect(p.load_input(), [p.target]))
    x0, y0, x1, y1 = (int(v) for v in box)
    half = pixels.copy()
    half[y0:(y0 + y1) // 2, x0:x1] = BACKGROUND.astype(np.uint8)  # the top half painted out
    assert det.max_scores(Image.fromarray(half), [p.target])[p.target] == 0.0


@pytest.mark.heavy  # tens of seconds: scheduled first (tests/conftest.py)
def test_reference_editors_bound_the_scores_and_edits_resume(tmp_path):
    ident = _run(tmp_path, "identity")
    m = ident.record["metrics"]
    assert m["Removal"] == 0.0 and m["Retention"] == 100.0 and m["L1"] > 0
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


def test_an_editing_run_refuses_a_precision_it_would_not_apply(tmp_path):
    """Nothing on the editing path autocasts: a --precision bf16 run was recorded "(bf16)" with fp32
    edits. It is refused, naming the option and the editor's own dtype option, before anything runs."""
    with pytest.raises(UserError, match=r"--precision bf16: editing runs apply no autocast.*-M precision=bf16"):
        _run(tmp_path, "identity", precision="bf16")
    assert not list(tmp_path.rglob("*.json"))


def test_nein_parquet_is_read_by_the_one_reader_with_its_caps(tmp_path):
    """NeIn read its parquet files with buffers and checks of its own and none of the YAML tasks' caps:
    a file of more rows than a data file may hold was read row by row. Now the one reader refuses it by its
    metadata, naming the file, and a file it cannot decode is named too (was: pyarrow's bare error)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from negharness.io.data_limits import MAX_DATA_RECORDS
    from negharness.tasks.nein.sources import ENTRY_COLUMNS, iter_parquet_rows

    many = tmp_path / "validation-00000-of-00002.parquet"  # null columns: a few kilobytes on disk
    pq.write_table(pa.table({c: pa.nulls(MAX_DATA_RECORDS + 1, pa.string()) for c in ENTRY_COLUMNS}), many)
    with pytest.raises(UserError, match=f"{many.name}: more than {MAX_DATA_RECORDS:,} rows"):
        next(iter_parquet_rows([many]))
    damaged = tmp_path / "validation-00001-of-00002.parquet"
    damaged.write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
    with pytest.raises(UserError, match=f"{damaged.name}: not a readable parquet file"):
        next(iter_parquet_rows([damaged]))
    (tmp_path / "folder.parquet").mkdir()
    with pytest.raises(UserError, match="folder.parquet"):
        next(iter_parquet_rows([tmp_path / "folder.parquet"]))
