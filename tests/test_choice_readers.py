"""Each built-in choice benchmark read from a small file in its published format, scored through a
model with chosen similarities (ties included), against values worked out by hand."""

from __future__ import annotations

import base64
import io
import json
from importlib.resources import files
from pathlib import Path

import pytest
import torch
from choice_helpers import TableModel, evaluate, write_image
from conftest import SHARED

from negharness.api import UserError
from negharness.declarative.register import load_folder
from negharness.scoring import perquery
from negharness.tasks.builtin import GENERATORS

BUILTIN = {c.name: c for c in load_folder(Path(str(files("negharness.tasks.choice"))), GENERATORS)}


def test_every_builtin_yaml_is_a_task_with_metadata():
    expected = {f"sugarcrepe_{s}" for s in ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel",
                                            "swap_att", "swap_obj")}
    expected |= {"sugarcrepe_mean", "aro_vg_relation", "aro_vg_attribution", "aro_coco_order", "aro_flickr_order",
                 "valse_existence", "crepe_negate", "ccneg", "negvqa_negated", "negvqa_original"}
    expected |= {f"sugarcrepepp_{s}_{m}" for s in ("replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")
                 for m in ("itt", "tot")} | {"negrefcocog", "winoground", "bivlc", "vinoground",
                                             "naturalbench_retrieval"}  # the item kinds (issue 34)
    expected |= {"mmvp_vlm", "mrmr_negation"} | {f"vismin_{c}" for c in ("object", "attribute", "relation", "counting")}
    assert set(BUILTIN) == expected
    for cls in BUILTIN.values():
        assert cls.main_score in cls.metric_info and cls.citation and cls.data_help and cls.licence
        assert set(cls.leaderboard_metrics) <= set(cls.metric_info)


def _sugarcrepe(root: Path, split: str, items: dict[str, tuple[str, str, str]]) -> None:
    data = {str(i): {"filename": f, "caption": c, "negative_caption": n} for i, (f, c, n) in enumerate(items.values())}
    (root / "sugarcrepe").mkdir(parents=True, exist_ok=True)
    (root / "sugarcrepe" / f"{split}.json").write_text(json.dumps(data, indent=4))


def test_sugarcrepe_split_and_macro_mean(tmp_path):
    write_image(tmp_path / "coco/val2017/000000565045.jpg", "red")
    write_image(tmp_path / "coco/val2017/000000526706.jpg", "green")
    _sugarcrepe(tmp_path, "swap_att", {
        "right": ("000000565045.jpg", "Blue bathroom with white towels.", "White bathroom with blue towels."),
        "wrong": ("000000526706.jpg", "A baby cow.", "Two baby cows."),
        "tie": ("000000565045.jpg", "A bathroom.", "The bathroom."),
    })
    for split in ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_obj"):
        _sugarcrepe(tmp_path, split, {"r": ("000000565045.jpg", "Blue bathroom with white towels.", "A baby cow.")})
    model = TableModel({"Blue bathroom with white towels.": {"red": 0.5},
                        "White bathroom with blue towels.": {"red": 0.4},
                        "A baby cow.": {"green": 0.1, "red": 0.2}, "Two baby cows.": {"green": 0.3},
                        "A bathroom.": {"red": 0.25}, "The bathroom.": {"red": 0.25}})
    res = evaluate(BUILTIN["sugarcrepe_swap_att"], tmp_path, model)
    assert res.metrics["accuracy"] == pytest.approx(100 / 3)  # right; 0.1 < 0.3 wrong; 0.25 = 0.25 tie, wrong
    assert res.metrics["tie_rate"] == pytest.approx(100 / 3)
    # "Blue bathroom with white towels." and its negative are the same words: an order-blind model ties there
    assert res.n_items == {"rows": 3, "images": 2} and res.notes["same_words"]["rows"] == 1
    assert res.metrics["same_words_rate"] == pytest.approx(100 / 3)
    assert res.metrics["order_blind_ceiling"] == pytest.approx(200 / 3)
    assert [s["tie"] for s in res.samples] == [False, False, True]
    suite = evaluate(BUILTIN["sugarcrepe_mean"], tmp_path, model)
    assert suite.metrics["swap_att"] == pytest.approx(100 / 3)
    # the other six splits: 0.5 vs 0.2 on a red image, all right
    assert suite.metrics["mean"] == pytest.approx((100 / 3 + 6 * 100) / 7)


def test_aro_vg_relation_crops_and_macro_over_relations(tmp_path):
    # left half red, right half green: the box on the right half must make it a green image
    write_image(tmp_path / "aro/images/2315910.jpg", "red", size=32, right="green")
    rows = [
        {"image_id": "2315910", "relation_name": "on", "bbox_x": 16, "bbox_y": 0, "bbox_w": 16, "bbox_h": 32,
         "image_path": "2315910.jpg", "true_caption": "the cup is on the table", "false_caption": "the table is on the cup"},
        {"image_id": "2315910", "relation_name": "on", "bbox_x": 0, "bbox_y": 0, "bbox_w": 16, "bbox_h": 32,
         "image_path": "2315910.jpg", "true_caption": "the hat is on the man", "false_caption": "the man is on the hat"},
        {"image_id": "2315910", "relation_name": "under", "bbox_x": 16, "bbox_y": 0, "bbox_w": 16, "bbox_h": 32,
         "image_path": "2315910.jpg", "true_caption": "the dog is under the table", "false_caption": "the table is under the dog"},
    ]
    (tmp_path / "aro").mkdir(exist_ok=True)
    (tmp_path / "aro/visual_genome_relation.json").write_text(json.dumps(rows))
    model = TableModel({"the cup is on the table": {"green": 0.6, "red": 0.1},
                        "the table is on the cup": {"green": 0.2, "red": 0.9},
                        "the hat is on the man": {"green": 0.9, "red": 0.1},  # crop is red: 0.1 < 0.3, wrong
                        "the man is on the hat": {"red": 0.3},
                        "the dog is under the table": {"green": 0.5}, "the table is under the dog": {"green": 0.4}})
    # ARO's notebook drops "with" (its list of excluded relations); a row whose swap reads the same
    # ("the dog is near the dog": "near" is excluded too, so use "under") tests nothing
    rows += [{**rows[0], "relation_name": "with", "true_caption": "the cup with the table", "false_caption": "x"},
             {**rows[2], "true_caption": "the dog is under the dog", "false_caption": "the dog is under the dog"}]
    (tmp_path / "aro/visual_genome_relation.json").write_text(json.dumps(rows))
    res = evaluate(BUILTIN["aro_vg_relation"], tmp_path, model)
    assert res.metrics["accuracy"] == pytest.approx(200 / 3)
    assert res.metrics["macro_accuracy"] == pytest.approx((50 + 100) / 2)
    assert res.notes["accuracy_by_relation_name"]["on"] == {"accuracy": 50.0, "rows": 2}
    assert res.n_items == {"rows": 4, "images": 2, "rows_filtered": 1, "rows_identical": 1, "rows_scored": 3}
    [dropped] = res.notes["filtered"]
    assert dropped["rows"] == 1 and dropped["filter"] == "relation_name not in 157 values"
    # ARO's rule scores the identical row (a tie: argmax picks the false caption, wrong): under 1 of 2
    assert res.metrics["macro_accuracy_authors_rule"] == pytest.approx((50 + 50) / 2)
    assert res.metrics["accuracy_authors_rule"] == pytest.approx(50.0)
    assert perquery.problems(res.per_query, res.metrics) == []
    assert sum(v is not None for v in res.per_query["values"]["macro_accuracy"]) == 3


def test_aro_vg_attribution_keeps_pairs_with_25_cases(tmp_path):
    write_image(tmp_path / "aro/images/1.jpg", "blue")
    row = {"image_path": "1.jpg", "bbox_x": 0, "bbox_y": 0, "bbox_w": 16, "bbox_h": 16}
    rows = [{**row, "attributes": ["white", "black"], "true_caption": f"the white cat {i} and the black dog",
             "false_caption": f"the black cat {i} and the white dog"} for i in range(25)]
    rows += [{**row, "attributes": ["red", "small"], "true_caption": "the red car and the small boat",
              "false_caption": "the small car and the red boat"}]
    (tmp_path / "aro").mkdir(exist_ok=True)
    (tmp_path / "aro/visual_genome_attribution.json").write_text(json.dumps(rows))
    table = {f"the white cat {i} and the black dog": {"blue": 0.5 if i < 20 else 0.1} for i in range(25)}
    table.update({f"the black cat {i} and the white dog": {"blue": 0.3} for i in range(25)})
    res = evaluate(BUILTIN["aro_vg_attribution"], tmp_path, TableModel(table))
    assert res.metrics["accuracy"] == pytest.approx(20 / 26 * 100)  # the red/small row: both 0, a tie
    assert res.metrics["macro_accuracy"] == pytest.approx(80.0)  # only white_black has >= 25 cases
    assert list(res.notes["accuracy_by_attributes.0_attributes.1"]) == ["white_black"]


@pytest.mark.needs("nltk")  # real (open-vocabulary) captions: the tagger
def test_aro_order_shuffles_are_permutations_and_scored_against_the_normalised_caption(tmp_path):
    import random

    from negharness.tasks.choice.aro_order import order_shuffles, pre_caption

    write_image(tmp_path / "coco/val2014/COCO_val2014_000000391895.jpg", "red")
    caps = ["A man with a red helmet on a small moped on a dirt road.", "Dog."]
    (tmp_path / "aro").mkdir(exist_ok=True)
    (tmp_path / "aro/coco_karpathy_test.json").write_text(json.dumps(
        [{"image": "val2014/COCO_val2014_000000391895.jpg", "caption": caps}]))
    true0, false0 = order_shuffles(caps[0], random.Random(0))
    assert true0 == "a man with a red helmet on a small moped on a dirt road"
    assert len(false0) == 4 and all(sorted(f.split()) == sorted(true0.split()) for f in false0)
    assert pre_caption('Two "dogs" (big); one cat!') == "two dogs big one cat"
    model = TableModel({pre_caption(c): {"red": 0.5} for c in caps})
    res = evaluate(BUILTIN["aro_coco_order"], tmp_path, model)
    # one-word "dog": every shuffle is "dog" again: no test of the model, left out of accuracy and
    # counted; ARO's argmax (index 0 wins a tie) counts it right, which accuracy_authors_rule keeps
    by_row = {s["row"].split("[")[1]: s for s in res.samples}
    assert by_row["caption 1]"]["identical"] and len(by_row["caption 1]"]["scores"]) == 5
    assert not by_row["caption 0]"]["identical"] and not by_row["caption 0]"]["tie"]  # shuffles score 0 < 0.5
    assert res.n_items == {"rows": 2, "images": 1, "rows_identical": 1, "rows_scored": 1}
    assert res.notes["identical"]["rows"] == 1
    assert res.metrics["accuracy"] == pytest.approx(100.0) and res.metrics["tie_rate"] == 0
    assert res.metrics["accuracy_authors_rule"] == pytest.approx(100.0)
    assert res.per_query["values"]["accuracy"] == [100, None]
    assert res.per_query["values"]["accuracy_authors_rule"] == [100, 100]
    # a constant model: every row ties; the safe rule gives 0, ARO's rule 100
    flat = evaluate(BUILTIN["aro_coco_order"], tmp_path, TableModel({}))
    assert flat.metrics["accuracy"] == 0 and flat.metrics["accuracy_authors_rule"] == 100


def test_valse_existence_keeps_the_annotator_validated_items(tmp_path):
    write_image(tmp_path / "visual7w/images/v7w_2371044.jpg", "red")
    write_image(tmp_path / "visual7w/images/v7w_2393805.jpg", "green")

    def item(idx, caption, foil, votes):
        return {"dataset": "visual7w", "dataset_idx": idx, "image_file": f"v7w_{idx}.jpg", "caption": caption,
                "foil": foil, "classes": 0, "classes_foil": [1], "mturk": {"foil": 0, "caption": votes, "other": 0}}
    data = {"existence_visual7w_2371044": item("2371044", "There are no people.", "There are people.", 3),
            "existence_visual7w_2393805": item("2393805", "There are no animals.", "There are animals.", 2),
            "existence_visual7w_2400000": item("2371044", "There is no cat.", "There is a cat.", 1)}
    (tmp_path / "valse").mkdir()
    (tmp_path / "valse/existence.json").write_text(json.dumps(data))
    model = TableModel({"There are no people.": {"red": 0.2}, "There are people.": {"red": 0.3},
                        "There are no animals.": {"green": 0.4}, "There are animals.": {"green": 0.1}})
    res = evaluate(BUILTIN["valse_existence"], tmp_path, model)
    assert res.n_items["rows"] == 2  # the item with one vote is not in the valid set
    assert res.metrics["accuracy"] == pytest.approx(50.0)


def test_crepe_negate_reads_list_literals_both_vg_folders_and_complexities(tmp_path):
    write_image(tmp_path / "visual_genome/VG_100K/10.jpg", "red", size=32, right="blue")
    write_image(tmp_path / "visual_genome/VG_100K_2/20.jpg", "green")
    folder = tmp_path / "crepe/prod_hard_negatives/negate"
    folder.mkdir(parents=True)
    header = "image_id,x,y,width,height,caption,hard_negs\n"
    for c in range(4, 13):
        body = ""
        if c == 4:
            body = ('10,16,0,16,32,a blue sky,"[\'not a blue sky\', \'a sky that is not blue\']"\n'
                    '20,0,0,16,16,a green field,"[\'no green field\']"\n')
        elif c == 5:
            body = '20,0,0,16,16,a green field,"[\'no green field\', \'a field that is not green\']"\n'
        if body:
            (folder / f"prod_vg_hard_negs_negate_complexity_{c}.csv").write_text(header + body)
    task_cls = BUILTIN["crepe_negate"]
    with pytest.raises(AssertionError):  # complexity files 6..12 are missing: reported before any model
        evaluate(task_cls, tmp_path, TableModel({}))
    for c in range(6, 13):
        (folder / f"prod_vg_hard_negs_negate_complexity_{c}.csv").write_text(
            header + '20,0,0,16,16,a green field,"[\'no green field\']"\n')
    model = TableModel({"a blue sky": {"blue": 0.5}, "not a blue sky": {"blue": 0.2},
                        "a sky that is not blue": {"blue": 0.5},  # tie with the caption: wrong
                        "a green field": {"green": 0.7}, "no green field": {"green": 0.1},
                        "a field that is not green": {"green": 0.8}})
    res = evaluate(task_cls, tmp_path, model)
    # ten rows. complexity 4: tie (wrong), right; 5: 0.8 beats 0.7 (wrong); 6..12: one right each
    assert res.metrics["accuracy"] == pytest.approx(8 / 10 * 100)
    assert res.metrics["macro_accuracy"] == pytest.approx((50 + 0 + 7 * 100) / 9)
    assert res.metrics["tie_rate"] == pytest.approx(100 / 10)


def test_ccneg_reads_the_torch_file_weights_only_and_drops_commas(tmp_path):
    write_image(tmp_path / "ccneg/cc3m_subset_images_extracted_final/a.jpg", "red")
    write_image(tmp_path / "ccneg/cc3m_subset_images_extracted_final/b.jpg", "blue")
    data = {"image_paths": ["/workspace/datasets/cc3m/cc3m_subset_images_extracted_final/a.jpg",
                            "/workspace/datasets/cc3m/cc3m_subset_images_extracted_final/b.jpg"],
            "annotations": [{"json": {"caption": "a dog on grass"}, "sop_data": {"negative-prompt": "a dog, not on grass"}},
                            {"json": {"caption": "a blue car"}, "sop_data": {"negative-prompt": "a car, that is not blue"}}]}
    torch.save(data, tmp_path / "ccneg/ccneg_preprocessed.pt")
    model = TableModel({"a dog on grass": {"red": 0.3}, "a dog not on grass": {"red": 0.35},
                        "a blue car": {"blue": 0.6}, "a car that is not blue": {"blue": 0.2}})
    res = evaluate(BUILTIN["ccneg"], tmp_path, model)
    assert res.metrics["accuracy"] == pytest.approx(50.0)  # the negated text wins on a.jpg
    assert res.metrics["accuracy_authors_rule"] == pytest.approx(50.0)  # no tie: CoN-CLIP's argmax agrees
    flat = evaluate(BUILTIN["ccneg"], tmp_path, TableModel({}))  # a constant model: every row a tie
    assert flat.metrics["accuracy"] == 0 and flat.metrics["accuracy_authors_rule"] == 100
    assert [s["media"] for s in res.samples] == ["ccneg/cc3m_subset_images_extracted_final/a.jpg",
                                                  "ccneg/cc3m_subset_images_extracted_final/b.jpg"]


def test_ccneg_refuses_a_pickle_of_arbitrary_objects(tmp_path):
    import argparse

    from negharness.api import TaskOptions

    (tmp_path / "ccneg").mkdir()
    torch.save({"image_paths": [], "annotations": argparse.Namespace(x=1)}, tmp_path / "ccneg/ccneg_preprocessed.pt")
    task = BUILTIN["ccneg"](TaskOptions(tmp_path))
    with pytest.raises(UserError, match="weights_only"):
        task.rows


def _png_b64(colour: str) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), {"red": (255, 0, 0), "green": (0, 255, 0)}[colour]).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def test_negvqa_reads_letters_questions_and_embedded_images(tmp_path):
    from negharness.api import TaskOptions
    from negharness.engine.runner import CachedEvalContext, RunSettings

    items = [{"index": 0, "image": _png_b64("red"), "original_question": "What colour is the ball?",
              "negated_question": "What colour is the ball not?", "A": "red", "B": "blue",
              "original_answer": "A", "negated_answer": "B", "category": "color"},
             {"index": 1, "image": _png_b64("green"), "original_question": "Is it a cat?",
              "negated_question": "Is it not a cat?", "A": "yes", "B": "no",
              "original_answer": "B", "negated_answer": "A", "category": "animal"}]
    (tmp_path / "negvqa").mkdir()
    (tmp_path / "negvqa/NegVQA-7379.jsonl").write_text("\n".join(json.dumps(i) for i in items) + "\n")

    class Asker(TableModel):
        """Scores an option by (question, option, dominant colour of the decoded image)."""

        scores_choices_itself = True

        def score_choices(self, choices, batch_size, precision):
            out = torch.zeros(len(choices), 2)
            for r in range(len(choices)):
                image = choices.media.load(choices.media_index[r])
                colour = ["red", "green", "blue"][int(self.preprocess_image(image).argmax())]
                for k, option in enumerate(choices.options[r]):
                    out[r, k] = self.table.get(f"{choices.question(r)}|{option}", {}).get(colour, 0.0)
            return out

    model = Asker({"What colour is the ball not?|blue": {"red": 0.9}, "Is it not a cat?|yes": {"green": 0.2},
                   "Is it not a cat?|no": {"green": 0.2}})
    res = evaluate(BUILTIN["negvqa_negated"], tmp_path, model)
    assert res.metrics["accuracy"] == pytest.approx(50.0) and res.metrics["tie_rate"] == pytest.approx(50.0)
    assert [s["correct"] for s in res.samples] == [1, 0]
    original = BUILTIN["negvqa_original"](TaskOptions(tmp_path))
    assert [r.correct for r in original.rows] == [0, 1] and original.rows[1].question == "Is it a cat?"
    with pytest.raises(UserError, match="questions"):  # a CLIP-like model would ignore the question
        original.evaluate(CachedEvalContext(TableModel({}), RunSettings(), None))


def test_embedded_and_file_images_are_cached_under_the_decoder_that_made_their_pixels(tmp_path, monkeypatch):
    """One recipe for a declarative task's images, embedded or files: a decoder upgrade (which may change JPEG
    pixels) is another cache collection for both, where the embedded images once kept the old embeddings."""
    import negharness.declarative.base_task as declarative_tasks
    from negharness.api import TaskOptions
    from negharness.declarative.media import MediaRef

    (tmp_path / "negvqa").mkdir()
    (tmp_path / "negvqa/NegVQA-7379.jsonl").write_text(json.dumps(
        {"index": 0, "image": _png_b64("red"), "original_question": "q", "negated_question": "q not", "A": "a",
         "B": "b", "original_answer": "A", "negated_answer": "B", "category": "c"}) + "\n")
    task = BUILTIN["negvqa_negated"](TaskOptions(tmp_path))
    embedded, files = [MediaRef("0", base64=_png_b64("red"))], [MediaRef("1", path=tmp_path / "x.png")]

    def recipes() -> tuple[str, str | None]:
        return task.media_set(None, embedded).key, task.media_set(None, files).recipe

    before = recipes()
    monkeypatch.setattr(declarative_tasks, "image_decoder_identity", lambda: "pillow-99|libjpeg-99")
    after = recipes()
    assert after[0] != before[0] and after[1] != before[1]
    assert all("pillow-99|libjpeg-99" in r for r in after if r is not None)


NEGBENCH_COCO = SHARED / "data/negbench/negbench_eval_csvs/images"

NEGBENCH_YAML = """\
name: negbench_coco_as_yaml
kind: choice
family: negbench
description: "NegBench COCO MCQ declared in YAML"
citation: "Alhamoud et al., CVPR 2025"
data_help: "NegBench CSVs into <data root>/negbench/"
data:
  file: negbench/COCO_val_mcq_llama3.1_rephrased.csv
media:
  path: "coco/val2017/{image_path}"
  strip_prefix: ["data/coco/images/val2017/"]
captions:
  options: [caption_0, caption_1, caption_2, caption_3]
  answer: correct_answer
group_by: correct_answer_template
metrics: [accuracy, tie_rate, macro_accuracy]
main_score: accuracy
"""


@pytest.mark.needs("data/negbench/negbench_eval_csvs/images/COCO_val_mcq_llama3.1_rephrased.csv")
def test_negbench_mcq_in_yaml_scores_as_the_python_task(tmp_path):
    """The first 60 rows of the real COCO MCQ file, read by the YAML kind and by negbench_mcq_coco,
    through one model with seeded similarities (and planted ties): same accuracy, ties and per-template accuracies."""
    import random

    from negharness.tasks.negbench.tasks import negbench_mcq_coco

    lines = (NEGBENCH_COCO / "COCO_val_mcq_llama3.1_rephrased.csv").read_text(encoding="utf-8").splitlines(True)[:61]
    (tmp_path / "negbench").mkdir()
    (tmp_path / "negbench/COCO_val_mcq_llama3.1_rephrased.csv").write_text("".join(lines), encoding="utf-8")
    yaml_dir = tmp_path / "yaml"
    yaml_dir.mkdir()
    (yaml_dir / "coco.yaml").write_text(NEGBENCH_YAML)
    yaml_task = load_folder(yaml_dir)[0]
    rng = random.Random(0)
    table = {}
    from negharness.api import TaskOptions

    for i, ref in enumerate(yaml_task(TaskOptions(tmp_path)).rows):
        write_image(ref.media.path, ["red", "green", "blue"][i % 3])
        for option in ref.options:
            table.setdefault(option, {c: round(rng.uniform(0, 0.5), 1) for c in ("red", "green", "blue")})
    model = TableModel(table)
    ours = evaluate(yaml_task, tmp_path, model)
    theirs = evaluate(negbench_mcq_coco, tmp_path, model)
    assert ours.n_items["rows"] == theirs.n_items["questions"] == 60
    assert ours.metrics["accuracy"] == pytest.approx(theirs.metrics["accuracy"])
    assert ours.metrics["tie_rate"] == pytest.approx(theirs.metrics["tie_rate"]) and theirs.metrics["tie_rate"] > 0
    for template, got in ours.notes["accuracy_by_correct_answer_template"].items():
        assert got["accuracy"] == pytest.approx(theirs.metrics[f"acc_{template}"], abs=1e-3)


@pytest.mark.needs("data/negbench/negbench_eval_csvs/images/COCO_val_mcq_llama3.1_rephrased.csv")
def test_an_option_in_parentheses_is_a_caption_in_yaml_as_in_the_python_task(tmp_path):
    """Line 236 of the real COCO MCQ file has the option ``(Your response)``: fc4bba0's YAML reader took
    it for a tuple literal and stopped ("captions cell is not a list literal"); one rule
    (`cell_captions`) keeps it a caption, so the YAML task and negbench_mcq_coco give one accuracy."""
    from negharness.api import TaskOptions
    from negharness.tasks.negbench.tasks import negbench_mcq_coco

    lines = (NEGBENCH_COCO / "COCO_val_mcq_llama3.1_rephrased.csv").read_text(encoding="utf-8").splitlines(True)
    assert "(Your response)" in lines[235]
    (tmp_path / "negbench").mkdir()
    (tmp_path / "negbench/COCO_val_mcq_llama3.1_rephrased.csv").write_text("".join([lines[0]] + lines[230:240]),
                                                                           encoding="utf-8")
    (tmp_path / "yaml").mkdir()
    (tmp_path / "yaml/coco.yaml").write_text(NEGBENCH_YAML)
    yaml_task = load_folder(tmp_path / "yaml")[0]
    rows = yaml_task(TaskOptions(tmp_path)).rows
    assert "(Your response)" in rows[5].options
    table: dict[str, dict[str, float]] = {}
    for i, ref in enumerate(rows):
        write_image(ref.media.path, ["red", "green", "blue"][i % 3])
        for k, option in enumerate(ref.options):
            table.setdefault(option, {"red": 0.1 * ((i + k) % 4), "green": 0.1 * ((i + 2 * k) % 5), "blue": 0.05 * k})
    ours = evaluate(yaml_task, tmp_path, TableModel(table))
    theirs = evaluate(negbench_mcq_coco, tmp_path, TableModel(table))
    assert ours.n_items["rows"] == theirs.n_items["questions"] == 10
    assert ours.metrics["accuracy"] == pytest.approx(theirs.metrics["accuracy"])


NEGBENCH_MCQ_FILES = {"images/COCO_val_mcq_llama3.1_rephrased.csv": 5914, "images/VOC2007_mcq_llama3.1_rephrased.csv": 5031,
                      "images/VOC2007_mcq.csv": 5031, "images/synthetic_mcq_llama3.1_rephrased.csv": 9997,
                      "videos/msr_vtt_mcq_rephrased_llama.csv": 1000, "videos/msr_vtt_mcq_templated.csv": 1000}
CLUSTER_PREFIXES = ["/data/healthy-ml/scratch/kumail/projects/cs/negation/synthetic_dataset/negation_processing_scripts/",
                    "/data/healthy-ml/scratch/kumail/projects/"]


def _mcq_yaml(file: str, kind: str = "image", cells: str = "") -> str:
    """NegBench's MCQ schema as a YAML choice task over ``negbench/<file>`` (the media need not exist to read rows)."""
    return (NEGBENCH_YAML.replace("name: negbench_coco_as_yaml", f"name: mcq_{abs(hash(file)) % 10**8}")
            .replace("  file: negbench/COCO_val_mcq_llama3.1_rephrased.csv", f"  file: negbench/{file}{cells}")
            .replace('  path: "coco/val2017/{image_path}"', f'  kind: {kind}\n  path: "media/{{image_path}}"')
            .replace('  strip_prefix: ["data/coco/images/val2017/"]', f"  strip_prefix: {json.dumps(CLUSTER_PREFIXES)}"))


@pytest.mark.needs(*(f"data/negbench/negbench_eval_csvs/{f}" for f in NEGBENCH_MCQ_FILES))
def test_every_real_negbench_mcq_csv_reads_whole_in_a_yaml_task(tmp_path):
    """VOC2007 line 329 has the option ``("This image includes a car")``, HardNeg-Syn line 6852
    ``("There are neither barrels nor kegs in this image.")``: read as tuple literals, they stopped the
    YAML task (exit 2). An option field's cells are text, as NegBench's authors (and negbench_mcq_*) read
    them: every MCQ file reads whole, those options as written."""
    from negharness.api import TaskOptions

    (tmp_path / "negbench").mkdir()
    read = {}
    for k, (rel, n) in enumerate(NEGBENCH_MCQ_FILES.items()):
        name = rel.split("/")[1]
        (tmp_path / "negbench" / name).write_bytes((SHARED / "data/negbench/negbench_eval_csvs" / rel).read_bytes())
        folder = tmp_path / f"yaml{k}"
        folder.mkdir()
        (folder / "t.yaml").write_text(_mcq_yaml(name, "video" if rel.startswith("videos") else "image"))
        rows = load_folder(folder)[0](TaskOptions(tmp_path)).rows
        assert len(rows) == n and {len(r.options) for r in rows} == {4}, rel
        read[name] = {r.where.rsplit(":line ", 1)[1]: r for r in rows}
    assert read["VOC2007_mcq_llama3.1_rephrased.csv"]["329"].options[2] == '("This image includes a car")'
    assert read["synthetic_mcq_llama3.1_rephrased.csv"]["6852"].options[3] == \
        '("There are neither barrels nor kegs in this image.")'


def test_a_list_looking_option_cell_stays_one_option_unless_its_column_is_declared_a_list(tmp_path):
    """An option cell written ``['a cat', 'a bird']`` became two options, silently: every later option
    moved up one place and the answer index named another caption. Option fields are text by default;
    ``data.cells: {column: list}`` reads such a column's cells as lists, and a bad key is named."""
    from negharness.api import TaskOptions

    (tmp_path / "negbench").mkdir()
    (tmp_path / "negbench/mcq.csv").write_text(
        "image_path,correct_answer,caption_0,caption_1,caption_2,caption_3,correct_answer_template\n"
        "a.jpg,3,A dog.,\"['a cat', 'a bird']\",No bird.,The right one.,positive\n", encoding="utf-8")

    def rows(cells: str = ""):
        folder = tmp_path / f"yaml{abs(hash(cells))}"
        folder.mkdir(exist_ok=True)
        (folder / "t.yaml").write_text(_mcq_yaml("mcq.csv", cells=cells))
        return load_folder(folder)[0](TaskOptions(tmp_path)).rows

    [row] = rows()
    assert row.options == ("A dog.", "['a cat', 'a bird']", "No bird.", "The right one.")
    assert row.options[row.correct] == "The right one."
    [listed] = rows("\n  cells: {caption_1: list}")  # declared: the cell is its two captions
    assert listed.options[1:3] == ("a cat", "a bird") and len(listed.options) == 5
    with pytest.raises(UserError, match=r"t.yaml: key 'data.cells.caption_1': 'lists' is not one of text, list"):
        rows("\n  cells: {caption_1: lists}")
    with pytest.raises(UserError, match=r"key 'data.cells.captoin_1': not a field this task reads captions from"):
        rows("\n  cells: {captoin_1: text}")


SKIP_YAML = """\
name: {name}
kind: choice
family: mine
description: "colours"
citation: "me"
data_help: "none"
data:
  file: mine/{file}
media:
  path: "mine/{{file}}"
captions:
  true: caption
  false: [wrong, other]
group_by: g
authors:
  ties: first
  note: "test"
metrics: [accuracy, tie_rate, macro_accuracy]
main_score: accuracy
"""


def _skip_rows() -> dict[str, dict[str, str]]:
    """Ten rows over three readable images and two broken ones, some right, some wrong, some ties
    (a caption the table does not list scores 0: two of them tie), in two groups."""
    import random

    rng = random.Random(0)
    files = ["red.jpg", "green.jpg", "bad0.jpg", "blue.jpg", "bad1.jpg"]
    words = ["a red one", "a green one", "a blue one", "a grey one", "a dull one"]
    rows = {}
    for i in range(10):
        caption, wrong, other = rng.sample(words, 3)
        rows[f"r{i}"] = {"file": files[i % 5], "caption": caption, "wrong": wrong, "other": other, "g": "ab"[i % 2]}
    return rows


def test_skip_broken_media_on_a_yaml_choice_task_equals_the_run_without_those_rows(tmp_path):
    """Old code: a broken image's NaN scores picked option 0 (the true caption): its rows counted right."""
    from negharness.engine.runner import CachedEvalContext, RunSettings

    root = tmp_path / "data"
    for colour in ("red", "green", "blue"):
        write_image(root / f"mine/{colour}.jpg", colour)
    for k in range(2):  # a JPEG header and nothing else: PIL cannot decode it
        buf = io.BytesIO()
        from PIL import Image

        Image.new("RGB", (64, 64), (128, 128, 128)).save(buf, "JPEG")
        (root / f"mine/bad{k}.jpg").write_bytes(buf.getvalue()[:40])
    rows = _skip_rows()
    (root / "mine/all.json").write_text(json.dumps(rows))
    readable = {k: r for k, r in rows.items() if not r["file"].startswith("bad")}
    assert 0 < len(readable) < len(rows)
    (root / "mine/readable.json").write_text(json.dumps(readable))
    folder = tmp_path / "tasks"
    folder.mkdir()
    for name, file in (("with_broken", "all.json"), ("without", "readable.json")):
        (folder / f"{name}.yaml").write_text(SKIP_YAML.format(name=name, file=file))
    tasks = {cls.name: cls for cls in load_folder(folder)}
    model = TableModel({"a red one": {"red": 0.6}, "a green one": {"green": 0.5, "red": 0.6},
                        "a blue one": {"blue": 0.7, "green": 0.2}})
    from negharness.api import TaskOptions

    def run(name: str):
        ctx = CachedEvalContext(model, RunSettings(skip_broken_media=True, workers=0), None)
        return tasks[name](TaskOptions(root)).evaluate(ctx)

    skipped, plain = run("with_broken"), run("without")
    assert skipped.metrics == pytest.approx(plain.metrics)
    assert set(skipped.metrics) == {"accuracy", "tie_rate", "macro_accuracy", "accuracy_authors_rule",
                                    "macro_accuracy_authors_rule", "same_words_rate", "order_blind_ceiling"}
    assert skipped.n_items == plain.n_items
    assert [i.replace("all.json", "readable.json") for i in skipped.per_query["ids"]] == plain.per_query["ids"]
    assert skipped.per_query["values"] == plain.per_query["values"]
    assert skipped.notes["accuracy_by_g"] == plain.notes["accuracy_by_g"]
    assert skipped.notes["media_skipped"] == 2 and skipped.notes["rows_dropped"] == len(rows) - len(readable)


def _crepe_files(root: Path, complexity_4: str) -> None:
    """CREPE's negate layout: ``complexity_4`` is complexity 4's rows, the other files one plain row each."""
    write_image(root / "visual_genome/VG_100K/10.jpg", "red", size=32, right="blue")
    write_image(root / "visual_genome/VG_100K_2/20.jpg", "green")
    folder = root / "crepe/prod_hard_negatives/negate"
    folder.mkdir(parents=True, exist_ok=True)
    header = "image_id,x,y,width,height,caption,hard_negs\n"
    for c in range(4, 13):
        body = complexity_4 if c == 4 else '20,0,0,16,16,a green field,"[\'no green field\']"\n'
        (folder / f"prod_vg_hard_negs_negate_complexity_{c}.csv").write_text(header + body)


@pytest.mark.parametrize("cell", ["{'not a blue sky', 'a sky that is not blue'}",  # CREPE's set literals
                                  "('not a blue sky', 'a sky that is not blue')",
                                  '["not a blue sky", "a sky that is not blue"]'])
def test_crepe_hard_negs_written_as_a_set_tuple_or_json_array_are_the_same_captions(tmp_path, cell):
    """Old code parsed only cells starting with '[': a set literal became one false caption (the
    whole literal), which no model prefers, so complexity 4 scored far too high."""
    model = TableModel({"a blue sky": {"blue": 0.5}, "not a blue sky": {"blue": 0.6},
                        "a sky that is not blue": {"blue": 0.2}, "a green field": {"green": 0.7},
                        "no green field": {"green": 0.1}})
    row = '10,16,0,16,32,a blue sky,"{}"\n'
    _crepe_files(tmp_path / "list", row.format("['not a blue sky', 'a sky that is not blue']"))
    _crepe_files(tmp_path / "other", row.format(cell.replace('"', '""')))
    want = evaluate(BUILTIN["crepe_negate"], tmp_path / "list", model)
    got = evaluate(BUILTIN["crepe_negate"], tmp_path / "other", model)
    assert got.metrics == want.metrics and got.metrics["accuracy"] == pytest.approx(8 / 9 * 100)
    from negharness.api import TaskOptions

    options = BUILTIN["crepe_negate"](TaskOptions(tmp_path / "other")).rows[0].options
    expected = ("a blue sky", "not a blue sky", "a sky that is not blue")
    assert options == (("a blue sky", *sorted(expected[1:])) if cell.startswith("{") else expected)


def test_a_hard_negs_cell_that_looks_like_a_literal_but_is_none_is_refused_by_row(tmp_path):
    from negharness.api import TaskOptions

    _crepe_files(tmp_path, '10,16,0,16,32,a blue sky,"{\'not a blue sky\', not quoted}"\n')
    with pytest.raises(UserError, match=r"complexity_4.csv:line 2: field 'hard_negs': captions cell is not a list "
                                        r"literal \(ValueError"):
        BUILTIN["crepe_negate"](TaskOptions(tmp_path)).rows

