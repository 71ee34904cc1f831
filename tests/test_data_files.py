"""Data files as users hand them over (issue 13, items 10 and 11): a UTF-8 BOM never ends up in the
first id, over-long lines are refused by file and line, NeIn's files are read one sample at a time
and a run holds a bounded number of images whatever the number of samples."""

from __future__ import annotations

import csv
import gc
import json
import types
import weakref

import pytest

from negharness.api import UserError

BOM = "\ufeff"


# BOM -------------------------------------------------------------------------------------------------
def test_bom_in_nt2vr_text_files(tmp_path):
    from negharness.text.nt2vr_files import (
        read_caption_file,
        read_composed_file,
        read_video_set,
    )

    cap = tmp_path / "c.caption.txt"
    cap.write_text(BOM + "video1#enc#0 a dog\nvideo2#enc#0 a cat\n", encoding="utf-8")
    assert read_caption_file(cap)[0] == ("video1#enc#0", "a dog")
    vs = tmp_path / "c.txt"
    vs.write_text(BOM + "video1\nvideo2\n", encoding="utf-8")
    assert read_video_set(vs) == ["video1", "video2"]
    comp = tmp_path / "c.composed.txt"
    comp.write_text(BOM + json.dumps({"cap_id": "q1", "caption": "a dog", "video_ids": ["video1"]}) + "\n",
                    encoding="utf-8")
    assert read_composed_file(comp)[0]["cap_id"] == "q1"


def test_bom_in_the_frame_index(tmp_path):
    from negharness.tasks.nt2vr.frame_index import read_frame_index

    idx = tmp_path / "id.imagepath.txt"
    idx.write_text(BOM + "video1_0 frames/video1/0.jpg\nvideo1_1 frames/video1/1.jpg\n", encoding="utf-8")
    assert list(read_frame_index(idx)) == ["video1"]


def test_bom_in_build_queries_inputs(tmp_path):
    from negharness.text.nt2vr_files import read_caption_table

    c = tmp_path / "caps.csv"
    c.write_text(BOM + "image_id,captions\nimg1,\"['a dog', 'a cat']\"\nimg2,a bird\n", encoding="utf-8")
    assert read_caption_table(c) == [("img1", ["a dog", "a cat"]), ("img2", ["a bird"])]
    j = tmp_path / "caps.json"
    j.write_text(BOM + json.dumps({"img1": ["a dog"]}), encoding="utf-8")
    assert read_caption_table(j) == [("img1", ["a dog"])]
    t = tmp_path / "caps.txt"
    t.write_text(BOM + "v1#enc#0 a dog\n", encoding="utf-8")
    assert read_caption_table(t) == [("v1", ["a dog"])]


def test_bom_in_negbench_csvs(tmp_path):
    from negharness.tasks.negbench.data import read_mcq, read_retrieval

    mcq = tmp_path / "m.csv"
    with open(mcq, "w", newline="", encoding="utf-8-sig") as fh:  # Excel's "CSV UTF-8"
        w = csv.writer(fh)
        w.writerow(["image_path", "correct_answer", "caption_0", "caption_1", "correct_answer_template"])
        w.writerow(["data/coco/images/val2017/1.jpg", 0, "a dog", "no dog", "positive"])
    rows = read_mcq(mcq, tmp_path, None)
    assert rows[0].media == tmp_path / "coco/val2017/1.jpg" and rows[0].where == f"{mcq}:2"
    ret = tmp_path / "r.csv"
    ret.write_text(BOM + "filepath,captions\ndata/coco/images/val2017/1.jpg,\"['a dog']\"\n", encoding="utf-8")
    assert read_retrieval(ret, tmp_path) == [(tmp_path / "coco/val2017/1.jpg", ["a dog"])]


def test_bom_in_nein_json(tmp_path):
    from negharness.tasks.nein.sources import iter_json_entries

    p = tmp_path / "val.json"
    p.write_text(BOM + json.dumps([{"NeIn": "a"}, {"NeIn": "b"}]), encoding="utf-8")
    assert [e["NeIn"] for e in iter_json_entries(p)] == ["a", "b"]


# long lines and bad bytes ----------------------------------------------------------------------------
def test_caption_longer_than_the_cap_is_named_by_file_and_line(tmp_path):
    from negharness.text.nt2vr_files import (
        MAX_CAPTION_CHARS,
        read_caption_file,
        read_caption_table,
    )

    cap = tmp_path / "c.caption.txt"
    cap.write_text("v1#enc#0 a dog\nv2#enc#0 " + "x" * (MAX_CAPTION_CHARS + 1) + "\n")
    with pytest.raises(UserError, match=r"c.caption.txt:2: caption of 10,001 characters"):
        read_caption_file(cap)
    c = tmp_path / "caps.csv"
    c.write_text("image_id,captions\nimg1,a dog\nimg2," + "y" * (MAX_CAPTION_CHARS + 1) + "\n")
    with pytest.raises(UserError, match=r"caps.csv:3: caption of"):
        read_caption_table(c)


def test_a_huge_line_is_refused_without_reading_it_whole(tmp_path, monkeypatch):
    import negharness.text.nt2vr_files as f

    monkeypatch.setattr(f, "MAX_LINE_CHARS", 50)
    p = tmp_path / "v.txt"
    p.write_text("video1\n" + "é" * 80 + "\nvideo3\n", encoding="utf-8")  # cut inside a 2-byte character too
    with pytest.raises(UserError, match=r"v.txt:2: line longer than 50 characters"):
        list(f.decoded_lines(p, 50))


def test_bad_utf8_is_named_by_its_line(tmp_path):
    from negharness.text.nt2vr_files import read_caption_file

    p = tmp_path / "c.caption.txt"
    p.write_bytes(b"".join(b"v1#enc#%d a dog\n" % i for i in range(3000)) + b"v2#enc#0 a \xff cat\n")
    with pytest.raises(UserError, match=r"c.caption.txt:3001: not UTF-8"):
        read_caption_file(p)


# NeIn streaming --------------------------------------------------------------------------------------
def test_json_entries_decoded_one_at_a_time_across_read_windows(tmp_path, monkeypatch):
    import negharness.tasks.nein.sources as sources

    monkeypatch.setattr(sources, "CHUNK_CHARS", 5)  # every entry is cut by the read window
    entries = [{"COCO": 397133 + k, "T_negative": "No cat \u00e9 \"here\".", "n": [1.5e3, None, True]} for k in range(40)]
    p = tmp_path / "val.json"
    for text in (json.dumps(entries), json.dumps(entries, indent=2), json.dumps({str(i): e for i, e in enumerate(entries)})):
        p.write_text(text, encoding="utf-8")
        stream = sources.iter_json_entries(p)
        assert next(stream) == entries[0]  # the first entry comes before the file is read through
        assert [entries[0], *stream] == entries
    p.write_text('[{"a": 1},\n {"a": 2}\n {"a": 3}]')
    with pytest.raises(UserError, match=r"val.json:3: not valid JSON"):
        list(sources.iter_json_entries(p))


def test_parquet_rows_read_in_small_batches(tmp_path, monkeypatch):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    import negharness.tasks.nein.sources as sources

    rows = [{"COCO": {"bytes": b"x", "path": f"{k}.jpg"}, "T_original": "a", "T_generated": "Add a cat.",
             "T_negative": "no cat", "NeIn": {"bytes": b"y", "path": f"NeIn_{k}.png"}, "extra": k} for k in range(50)]
    p = tmp_path / "validation-0.parquet"
    pq.write_table(pa.Table.from_pylist(rows), p, row_group_size=20)
    seen = []
    real = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        for batch in real(self, *args, **kwargs):
            seen.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    got = list(sources.iter_parquet_rows([p]))
    assert [n for _, n, _ in got] == list(range(50)) and "extra" not in got[0][2]
    assert max(seen) <= sources.PARQUET_BATCH_ROWS and sum(seen) == 50


@pytest.mark.heavy  # tens of seconds: scheduled first (tests/conftest.py)
def test_nein_holds_a_bounded_number_of_images_whatever_the_number_of_samples(tmp_path):
    """Every image a sample loads is tracked by a weak reference: at any load, the images still alive
    are at most what one edit batch needs, never one per sample (the gallery too is written at once)."""
    from negharness.discovery.hookspecs import hookimpl
    from negharness.discovery.manager import make_host
    from negharness.engine.evaluate import RunRequest, evaluate_request
    from negharness.tasks.nein.shapes import ShapesNeIn, editing_pairs

    live: list[weakref.ref] = []  # PIL images are unhashable: a list of weak references, not a WeakSet
    peak = [0]
    bound = 2 * 2 + 2  # one batch of (input, truth) pairs, plus the pair being loaded

    def tracked(load):
        def wrapped():
            live[:] = [r for r in live if r() is not None]
            if len(live) > bound:  # only then a full collection (slow with torch loaded): what it frees was no leak
                gc.collect()
                live[:] = [r for r in live if r() is not None]
            peak[0] = max(peak[0], len(live))
            img = load()
            live.append(weakref.ref(img))
            return img
        return wrapped

    class CountedNeIn(ShapesNeIn):
        name = "nein_counted"

        def samples(self):
            for s in editing_pairs(0, "test", self.n_items, None, self.options.seed):
                s.load_input, s.load_truth = tracked(s.load_input), tracked(s.load_truth)
                yield s

    @hookimpl
    def negharness_register_tasks(registry):
        registry.add("nein_counted", CountedNeIn, "counted", family="nein")

    host = make_host()
    host.register(types.SimpleNamespace(negharness_register_tasks=negharness_register_tasks), "counted")
    req = RunRequest(model="identity", tasks=["nein_counted"], output_dir=str(tmp_path / "res"),
                     task_extra={"n_items": "24", "edit_batch": "2", "clip_model": "none"})
    outcome = evaluate_request(host, req)[0]
    rec = outcome.record
    assert rec["n_items"] == {"samples": 24}
    assert peak[0] <= bound, peak[0]
    gallery = outcome.path.with_suffix(".edits")  # -T options make a variant record (<task>@<hash>)
    assert len(list(gallery.glob("*.input.png"))) == 12 and (gallery / "gallery.html").read_text().count("<tr>") == 13


# one caption or a list of them ---------------------------------------------------------------------
CELLS = {"(Your response)": ["(Your response)"], "('a dog', 'a cat')": ["a dog", "a cat"],
         "{'a dog', 'a cat'}": ["a cat", "a dog"], '["a dog", "a cat"]': ["a dog", "a cat"], "a dog": ["a dog"]}


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_every_reader_reads_a_cell_as_one_caption_or_a_list_by_one_rule(tmp_path, cell):
    """A YAML task's field, NegBench training CSVs and build-queries' CSV read a cell alike
    (`cell_captions`): on fc4bba0 the YAML reader refused ``(Your response)`` and build-queries took a
    tuple or set for one caption."""
    from negharness.declarative.annotations import Record
    from negharness.tasks.negbench.training import _cell
    from negharness.text.nt2vr_files import read_caption_table

    path = tmp_path / "c.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([["image_id", "captions"], ["1", cell]])
    assert Record({"c": cell}, "here").texts("c") == CELLS[cell]
    assert _cell(cell, "here") == CELLS[cell]
    assert read_caption_table(path) == [("1", CELLS[cell])]


def test_a_bracketed_cell_that_starts_like_a_list_but_is_none_is_refused():
    from negharness.declarative.annotations import Record

    with pytest.raises(UserError, match=r"here: field 'c': captions cell is not a list literal"):
        Record({"c": "('a dog', not quoted)"}, "here").texts("c")
