"""NegBench: the real CSVs (counts, paths, captions), MCQ and Retrieval-Neg by hand, bad input, diagnose."""

import csv
import types
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import SHARED

from negharness.api import MissingDataError, UserError
from negharness.engine.evaluate import RunRequest, evaluate_request
from negharness.scoring.mcq import mcq_choices, mcq_metrics
from negharness.tasks.negbench.catalog import COCO_LAYOUT, MCQ
from negharness.tasks.negbench.data import (
    map_media_path,
    read_mcq,
    read_retrieval,
    template_of_caption,
)
from negharness.testing import COLOURS, host_with_models, keyword_model

CSVS = SHARED / "data/negbench/negbench_eval_csvs"
needs_shared = pytest.mark.needs("data/negbench/negbench_eval_csvs")


@needs_shared
@pytest.mark.parametrize("name, counts", [
    ("images/COCO_val_mcq_llama3.1_rephrased.csv", {"positive": 2032, "negative": 1870, "hybrid": 2012}),
    ("images/VOC2007_mcq_llama3.1_rephrased.csv", {"positive": 682, "negative": 2121, "hybrid": 2228}),
    ("videos/msr_vtt_mcq_rephrased_llama.csv", {"positive": 335, "negative": 353, "hybrid": 312}),
])
def test_real_mcq_files_counts_and_paths(name, counts):
    root = Path("/data-root")
    rows = read_mcq(CSVS / name, root, COCO_LAYOUT)
    assert Counter(r.template for r in rows) == counts
    assert all(r.media.is_relative_to(root) and r.media.parts[2] in ("coco", "voc2007", "msrvtt") for r in rows)
    assert all(len(r.options) == 4 and all(r.options) for r in rows)
    # the caption rule agrees with the file's fixed positions on almost every option
    agree = np.mean([template_of_caption(o) == t for r in rows for o, t in zip(r.options, r.option_templates)])
    assert agree > 0.85


@needs_shared
def test_every_real_path_maps_and_every_caption_parses():
    root = Path("/R")
    for name, (csv_name, *_rest) in MCQ.items():
        path = next(iter(CSVS.glob(f"*/{csv_name}")), None)
        if path is None:
            continue  # CheXpert files are not public
        layout = MCQ[name][2]
        for r in read_mcq(path, root, layout):
            assert r.media.parts[2] in ("coco", "voc2007", "msrvtt", "hardneg_syn")
    skipped = []
    coco = read_retrieval(CSVS / "images/COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv", root, skipped)
    assert len(coco) == 5000 and sum(len(c) for _, c in coco) == 25014 - 1
    assert skipped == ["COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv:914"]
    original = read_retrieval(CSVS / "images/COCO_val_retrieval.csv", root)
    assert [m for m, _ in original] == [m for m, _ in coco]  # same rows, same order
    assert map_media_path("video7020.mp4", root) == root / "msrvtt/videos/video7020.mp4"
    with pytest.raises(UserError, match="absolute"):
        map_media_path("/somewhere/else/x.jpg", root)


def test_mcq_ties_count_as_wrong_and_templates_are_counted():
    scores = torch.tensor([[0.9, 0.1, 0.2, 0.3],   # right (positive)
                           [0.5, 0.5, 0.1, 0.1],   # tie on top: wrong, chooses nothing
                           [0.1, 0.2, 0.9, 0.3],   # chose option 2 (positive distractor): wrong
                           [0.2, 0.2, 0.2, 0.2]])  # a constant model: tie, never "right by position"
    chosen, tie = mcq_choices(scores)
    assert tie.tolist() == [False, True, False, True]
    layouts = [("positive", "hybrid", "positive", "negative"), ("negative", "hybrid", "positive", "negative"),
               ("hybrid", "hybrid", "positive", "negative"), ("hybrid", "hybrid", "positive", "negative")]
    m = mcq_metrics(chosen, tie, [0, 0, 0, 0], ["positive", "negative", "hybrid", "hybrid"], layouts)
    assert m["accuracy"] == 25.0 and m["tie_rate"] == 50.0
    assert m["acc_positive"] == 100.0 and m["acc_negative"] == 0.0 and m["acc_hybrid"] == 0.0
    assert m["chose_positive"] == 50.0 and m["chose_negative"] == 0.0  # 2 of 4 rows chose a positive option
    # NegBench's own argmax: a tie goes to the first option, here the correct one (rows 0, 1 and 3)
    assert m["accuracy_authors_rule"] == 75.0


# a tiny NegBench layout the tests write ----------------------------------------------------------------
def _write_images(root: Path, names):
    from PIL import Image

    for name, colour in names.items():
        p = root / "coco" / "val2017" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((8, 8, 3), COLOURS[colour], dtype=np.uint8)).save(p)


def _host():
    return host_with_models({"kw": keyword_model})


def _mcq_csv(path: Path, rows):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["image_path", "correct_answer", "caption_0", "caption_1", "caption_2", "caption_3",
                    "correct_answer_template"])
        w.writerows(rows)


def test_mcq_task_end_to_end_and_bad_rows(tmp_path):
    root = tmp_path / "data"
    (root / "negbench").mkdir(parents=True)
    _write_images(root, {"000000000001.jpg": "red", "000000000002.jpg": "blue"})
    csv_path = root / "negbench" / "COCO_val_mcq_llama3.1_rephrased.csv"
    p1, p2 = "data/coco/images/val2017/000000000001.jpg", "data/coco/images/val2017/000000000002.jpg"
    _mcq_csv(csv_path, [  # the keyword model embeds a bag of words: reordered words tie exactly
        [p1, 0, "a red picture", "a green picture", "a blue picture", "a yellow picture", "positive"],
        [p2, 0, "a blue picture", "picture a blue", "a yellow picture", "a green picture", "positive"],
        [p1, 0, "a picture", "picture a", "a photo", "photo a", "negative"],  # two reordered pairs: top score shared
    ])
    req = RunRequest(model="kw", tasks=["negbench_mcq_coco"], data_root=str(root), output_dir=str(tmp_path / "res"),
                     cache_dir=str(tmp_path / "c"), log_samples=True)
    rec = evaluate_request(_host(), req)[0].record
    # row 1 right; row 2: the correct answer ties with its own reordering -> wrong;
    # row 3: the best option ties with its reordering -> wrong (no tie is broken by option order)
    assert rec["metrics"]["accuracy"] == pytest.approx(100 / 3)
    assert rec["metrics"]["tie_rate"] == pytest.approx(200 / 3)
    assert rec["n_items"] == {"questions": 3, "images": 2, "distinct_captions": 9}
    assert "published" not in rec["notes"]  # no published row for this model
    (root / "coco" / "val2017" / "000000000002.jpg").unlink()
    with pytest.raises(MissingDataError, match=r"COCO_val_mcq_llama3.1_rephrased.csv:3: image \S*000000000002.jpg not found") as info:
        evaluate_request(_host(), RunRequest(**{**req.__dict__, "overwrite": True}))
    assert "`negharness fetch negbench_mcq_coco` downloads them (816.9 MB)" in str(info.value)  # CSV and COCO val2017
    _mcq_csv(csv_path, [[p1, 0, "a red picture", "x", "y", "", "positive"]])
    with pytest.raises(UserError, match=r"COCO_val_mcq_llama3.1_rephrased.csv:2: 3 option\(s\)"):
        evaluate_request(_host(), RunRequest(**{**req.__dict__, "overwrite": True}))


def test_retrieval_neg_side_by_side_and_unparseable_cell(tmp_path):
    root = tmp_path / "data"
    (root / "negbench").mkdir(parents=True)
    _write_images(root, {"a.jpg": "red", "b.jpg": "blue", "c.jpg": "green"})
    header = "positive_objects,negative_objects,filepath,image_id,captions\n"
    rows = [("a.jpg", '"[\'a red car\', \'red paint\']"', '"[\'a red car and no blue\', \'blue is not here\']"'),
            ("b.jpg", '"[\'a blue sky\']"', '"[\'a blue sky with no red\']"'),
            ("c.jpg", '"[\'green grass\']"', '"[\'no red or blue, just green\']"')]
    orig = header + "".join(f"[],[],data/coco/images/val2017/{f},{i},{o}\n" for i, (f, o, _) in enumerate(rows))
    neg = header + "".join(f"[],[],data/coco/images/val2017/{f},{i},{n}\n" for i, (f, _, n) in enumerate(rows))
    (root / "negbench" / "COCO_val_retrieval.csv").write_text(orig)
    (root / "negbench" / "COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv").write_text(neg)
    req = RunRequest(model="kw", tasks=["negbench_retrieval_coco"], data_root=str(root),
                     output_dir=str(tmp_path / "res"), cache_dir=str(tmp_path / "c"))
    rec = evaluate_request(_host(), req)[0].record
    m = rec["metrics"]
    assert m["R@1"] == 100.0  # colour words alone retrieve the originals
    # negated: "a red car and no blue" mixes red and blue -> cos equal-ish: by hand, red image wins (red+blue
    # normalised vs red: 0.707; vs blue: 0.707 -> tie -> pessimistic rank 2); "blue is not here" -> blue image
    assert m["R-Neg@1"] < 100.0 and m["drop_R@1"] == pytest.approx(m["R@1"] - m["R-Neg@1"])
    assert rec["n_items"]["original_captions"] == 4 and rec["n_items"]["negated_captions"] == 4
    assert rec["counts"]["media_encoded"] == 3 and rec["counts"]["media_cached"] == 0  # both files: one encode
    uncached = evaluate_request(_host(), RunRequest(**{**req.__dict__, "overwrite": True, "use_cache": False}))[0].record
    assert uncached["counts"]["media_encoded"] == 3 and uncached["metrics"] == m  # --no-cache: still once
    (root / "negbench" / "COCO_val_retrieval.csv").write_text(header + "[],[],data/coco/images/val2017/a.jpg,0,\"['unclosed\"\n")
    with pytest.raises(UserError, match=r"COCO_val_retrieval.csv:2: captions cell is not a list literal"):
        evaluate_request(_host(), RunRequest(**{**req.__dict__, "overwrite": True}))


def test_shapes_mcq_ground_truth_is_exact():
    from negharness.tasks.shapes.mcq import questions
    from negharness.world.media import load_world

    world = load_world(0, "test", "image", 60, None)
    for (options, template), facts in zip(questions(world, 0), world.groups):
        present = facts.split("|")
        correct = options[0]
        said_present = [f for f in present if f"features a {f}" in correct and f"not a {f}" not in correct]
        if template in ("positive", "hybrid"):
            assert said_present, (correct, present)
        if template in ("negative", "hybrid"):
            absent = correct.split("not feature a ")[-1] if template == "negative" else correct.split("but not a ")[-1]
            assert absent not in present
        assert options[3].startswith("this image does not feature a ") and options[3][30:] in present


def test_published_numbers_match_a_run_of_the_same_weights():
    from negharness.records.published import published_notes
    from negharness.tasks.negbench import PUBLISHED

    from negharness.records.published import CONTENT, collections_beside

    model = types.SimpleNamespace(name="clip", describe=lambda: {"arch": "ViT-B-32", "weights": "openai"})
    paper = collections_beside(PUBLISHED)["negbench_mcq_coco"]  # the authors' COCO MCQ file: counts and content
    coco, digest = paper.counts, paper.content[CONTENT]
    measured = {"accuracy_authors_rule": 40.0, "acc_negative_authors_rule": 7.0}
    found = published_notes("negbench_mcq_coco", model, measured, PUBLISHED, coco, digest)["published"]
    repo = {(f["metric"], f["source"]): f for f in found if f["source"].startswith("NegBench repo")}
    total = repo[("accuracy_authors_rule", "NegBench repo, results/mcq/1_baseline_total.csv, row 'CLIP-OpenAI'")]
    assert total["diff"] == pytest.approx(40.0 - 39.296584376056815, abs=1e-9)
    neg = repo[("acc_negative_authors_rule", "NegBench repo, results/mcq/1_baseline_breakdown.csv, row 'CLIP-OpenAI'")]
    assert neg["diff"] == pytest.approx(7.0 - 6.844919786096257, abs=1e-9)
    other = types.SimpleNamespace(name="clip", describe=lambda: {"arch": "ViT-L-14", "weights": "openai"})
    assert published_notes("negbench_mcq_coco", other, measured, PUBLISHED, coco, digest) == {}


def test_diagnose_end_to_end(cli, tmp_path):
    res = cli("diagnose", "--model", "shapes_clip", "--objects", "red circle,blue square,green cross",
              "--out", str(tmp_path / "d.png"))
    assert res.returncode == 0, res.stderr
    png = (tmp_path / "d.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert "negation gap" in res.stdout
    bad = cli("diagnose", "--model", "shapes_clip", "--objects", "only-one", "--out", str(tmp_path / "x.png"))
    assert bad.returncode == 2 and "--objects" in bad.stderr


# CheXpert in the authors' schema (m1k2zoo/negbench benchmarks/src/training/data.py) ------------------
def _chexpert_images(root: Path, names):
    from PIL import Image

    for name, colour in names.items():
        p = root / "chexpert" / "valid" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((8, 8, 3), COLOURS[colour], dtype=np.uint8)).save(p)


def _write_csv(path: Path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


CXR = "CheXpert-v1.0-small/valid/patient{0:05d}/study1/view1_frontal.jpg"


def _chexpert_root(tmp_path):
    root = tmp_path / "data"
    _chexpert_images(root, {f"patient{i:05d}/study1/view1_frontal.jpg": c for i, c in ((1, "red"), (2, "blue"))})
    return root


def test_chexpert_binary_files_in_the_authors_schema(tmp_path):
    """CsvBinaryMCQDataset's columns only: image_path, caption_0, caption_1, correct_answer. Templates come
    from the words; a correct_answer_template column, if a file has one, is not read (the authors' loader
    does not read it)."""
    root = _chexpert_root(tmp_path)
    rows = [[CXR.format(1), "a red picture", "a blue picture", 0],        # right
            [CXR.format(2), "a green picture", "a blue picture", 1],      # right
            [CXR.format(1), "picture red", "red picture", 0]]            # exact tie: wrong
    _write_csv(root / "negbench" / "chexpert_binary_mcq.csv", ["image_path", "caption_0", "caption_1", "correct_answer"], rows)
    _write_csv(root / "negbench" / "chexpert_binary_mcq_control.csv",
               ["image_path", "caption_0", "caption_1", "correct_answer", "correct_answer_template"],
               [r + ["not-a-template"] for r in rows])
    parsed = read_mcq(root / "negbench" / "chexpert_binary_mcq.csv", root, None, binary=True)
    assert parsed[0].media == root / "chexpert/valid/patient00001/study1/view1_frontal.jpg"
    assert [r.options for r in parsed][1] == ("a green picture", "a blue picture")
    assert all(r.template == "positive" for r in parsed)
    for task in ("negbench_mcq_chexpert_binary", "negbench_mcq_chexpert_binary_control"):
        req = RunRequest(model="kw", tasks=[task], data_root=str(root), output_dir=str(tmp_path / "res"),
                         cache_dir=str(tmp_path / "c"))
        rec = evaluate_request(_host(), req)[0].record
        assert rec["metrics"]["accuracy"] == pytest.approx(200 / 3)
        assert rec["n_items"]["questions"] == 3
    _write_csv(root / "negbench" / "chexpert_binary_mcq.csv", ["image_path", "caption_0", "correct_answer"],
               [[CXR.format(1), "a red picture", 0]])
    with pytest.raises(UserError, match=r"chexpert_binary_mcq.csv:1: no column 'caption_1'"):
        read_mcq(root / "negbench" / "chexpert_binary_mcq.csv", root, None, binary=True)


def test_chexpert_four_choice_and_affirmation_control(tmp_path):
    """chexpert_mcq.csv and chexpert_mcq_no_negation.csv: CsvMCQDataset's schema, with correct_answer_template."""
    root = _chexpert_root(tmp_path)
    header = ["image_path", "caption_0", "caption_1", "caption_2", "caption_3", "correct_answer", "correct_answer_template"]
    _write_csv(root / "negbench" / "chexpert_mcq_no_negation.csv", header, [
        [CXR.format(1), "a blue picture", "a red picture", "a green picture", "a yellow picture", 1, "positive"],
        [CXR.format(2), "a blue picture", "a red picture", "a green picture", "a yellow picture", 2, "positive"]])
    _write_csv(root / "negbench" / "chexpert_mcq.csv", header, [
        [CXR.format(2), "a blue picture", "no red picture", "a red picture", "not a blue picture", 0, "positive"],
        [CXR.format(1), "no blue picture", "a blue picture", "a green picture", "a yellow picture", 0, "negative"]])
    res = {}
    for task in ("negbench_mcq_chexpert_control", "negbench_mcq_chexpert"):
        req = RunRequest(model="kw", tasks=[task], data_root=str(root), output_dir=str(tmp_path / "res"),
                         cache_dir=str(tmp_path / "c"))
        res[task] = evaluate_request(_host(), req)[0].record["metrics"]
    assert res["negbench_mcq_chexpert_control"]["accuracy"] == 50.0  # row 1 right; row 2 picks blue, not green
    assert res["negbench_mcq_chexpert"]["acc_positive"] == 100.0
    _write_csv(root / "negbench" / "chexpert_mcq_no_negation.csv", header[:-1],
               [[CXR.format(1), "a", "b", "c", "d", 0]])
    with pytest.raises(UserError, match=r"chexpert_mcq_no_negation.csv:1: no column 'correct_answer_template'"):
        read_mcq(root / "negbench" / "chexpert_mcq_no_negation.csv", root, None)


@pytest.fixture
def csv_field_limit():
    """The csv module's default field limit (131,072), whatever an earlier reader set, restored after."""
    before = csv.field_size_limit(131072)
    yield 131072
    csv.field_size_limit(before)


def test_a_caption_over_the_csv_field_limit_is_a_user_error_naming_file_and_line(tmp_path, csv_field_limit):
    """Old code: csv.Error out of the reader, reported as a plugin bug naming neither file nor row."""
    root = tmp_path / "data"
    (root / "negbench").mkdir(parents=True)
    _write_images(root, {"a.jpg": "red"})
    huge = "x " * (csv_field_limit // 2 + 10)
    mcq = root / "negbench" / "mcq.csv"
    _mcq_csv(mcq, [["data/coco/images/val2017/a.jpg", 0, "a red one", "no red", "red not", "blue", "positive"],
                   ["data/coco/images/val2017/a.jpg", 0, huge, "no red", "red not", "blue", "positive"]])
    with pytest.raises(UserError, match=rf"{mcq}:3: cannot read this row as CSV \(field larger than field limit"):
        read_mcq(mcq, root, None)
    ret = root / "negbench" / "ret.csv"
    ret.write_text("filepath,captions\n" f"data/coco/images/val2017/a.jpg,\"['{huge}']\"\n")
    with pytest.raises(UserError, match=rf"{ret}:2: cannot read this row as CSV"):
        read_retrieval(ret, root)
    csv.field_size_limit(1 << 30)  # a YAML task read earlier in the process raises the limit: the caption rule then
    with pytest.raises(UserError, match=rf"{ret}:2: caption of {len(huge.strip()):,} characters \(at most 10,000\)"):
        read_retrieval(ret, root)


def test_retrieval_neg_reads_tuple_and_set_cells_as_lists(tmp_path):
    root = tmp_path / "data"
    (root / "negbench").mkdir(parents=True)
    _write_images(root, {"a.jpg": "red"})
    path = root / "negbench" / "ret.csv"
    for cell in ("['b red', 'a red']", "('b red', 'a red')", "{'b red', 'a red'}", '["a red", "b red"]'):
        with open(path, "w", newline="") as fh:
            csv.writer(fh).writerows([["filepath", "captions"], ["data/coco/images/val2017/a.jpg", cell]])
        assert sorted(read_retrieval(path, root)[0][1]) == ["a red", "b red"], cell
