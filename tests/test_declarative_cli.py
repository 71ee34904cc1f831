"""A user's YAML tasks found with --include-path, listed and run end to end; bad YAML and bad rows
stop with one line naming the file and the key or row (exit 2)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from negharness.api import UserError
from negharness.declarative.register import load_folder

CHOICE = """\
name: my_colours
kind: choice
family: mine
description: "which colour is it"
citation: "me, 2026"
data_help: "write colours.jsonl under the data root"
data:
  file: mine/colours.jsonl
media:
  path: "mine/{file}"
captions:
  true: caption
  false: [wrong, also_wrong]
metrics: [accuracy, tie_rate]
main_score: accuracy
"""

RETRIEVAL = """\
name: my_colour_retrieval
kind: retrieval
family: mine
description: "find the colour"
citation: "me, 2026"
data_help: "write colours.jsonl under the data root"
data:
  file: mine/colours.jsonl
media:
  path: "mine/{file}"
captions:
  field: caption
metrics: [R@1, MIR]
main_score: R@1
"""


def _data(root: Path, rows: list[dict]) -> None:
    from PIL import Image

    colours = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}
    (root / "mine").mkdir(parents=True, exist_ok=True)
    for c, rgb in colours.items():
        Image.fromarray(np.full((8, 8, 3), rgb, dtype=np.uint8)).save(root / "mine" / f"{c}.png")
    (root / "mine/colours.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


ROWS = [{"file": "red.png", "caption": "a red photo", "wrong": "a green photo", "also_wrong": "a blue photo"},
        {"file": "green.png", "caption": "a green photo", "wrong": "a red photo", "also_wrong": "a blue photo"},
        # pil_colour embeds a caption with no colour word as grey: both options tie, so wrong
        {"file": "blue.png", "caption": "a photo", "wrong": "one photo", "also_wrong": "the photo"}]


def test_user_yaml_is_listed_and_run_end_to_end(cli, tmp_path):
    tasks = tmp_path / "my_tasks"
    tasks.mkdir()
    (tasks / "colours.yaml").write_text(CHOICE)
    (tasks / "retrieval.yml").write_text(RETRIEVAL)
    _data(tmp_path / "data", ROWS)
    listed = cli("list", "--include-path", str(tasks), plugins=("choicefake",))
    assert listed.returncode == 0, listed.stderr
    assert "my_colours" in listed.stdout and "my_colour_retrieval" in listed.stdout and "include_path" in listed.stdout
    assert "shipped_colours" in listed.stdout  # YAML inside a plugin package, registered by its hook
    ran = cli("run", "--model", "pil_colour", "--include-path", str(tasks), "--task", "my_*", "--task", "shipped_colours",
              "--data-root", str(tmp_path / "data"), "--log-samples", plugins=("choicefake",))
    assert ran.returncode == 0, ran.stderr
    rec = json.loads((tmp_path / "results/pil_colour/my_colours.json").read_text())
    assert rec["metrics"]["accuracy"] == pytest.approx(200 / 3) and rec["metrics"]["tie_rate"] == pytest.approx(100 / 3)
    assert rec["task"]["family"] == "mine" and rec["main_score"] == {"name": "accuracy", "value": rec["metrics"]["accuracy"]}
    shipped = json.loads((tmp_path / "results/pil_colour/shipped_colours.json").read_text())
    assert shipped["metrics"]["accuracy"] == rec["metrics"]["accuracy"] and shipped["task"]["plugin"] == "choicefake"
    ret = json.loads((tmp_path / "results/pil_colour/my_colour_retrieval.json").read_text())
    # "a red photo" -> red first; "a green photo" -> green first; "a photo" (grey) ties all three
    # images, and ranks count ties pessimistically: rank 3
    assert ret["metrics"]["R@1"] == pytest.approx(200 / 3)
    assert ret["metrics"]["MIR"] == pytest.approx((1 + 1 + 1 / 3) / 3)
    assert set(ret["metrics"]) == {"R@1", "MIR"}
    (tmp_path / "empty").mkdir()
    missing = cli("run", "--model", "pil_colour", "--include-path", str(tasks), "--task", "my_colours",
                  "--data-root", str(tmp_path / "empty"), plugins=("choicefake",))
    assert missing.returncode == 2 and "write colours.jsonl under the data root" in missing.stderr.replace("\n", "")


def _bad(tmp_path: Path, text: str) -> str:
    folder = tmp_path / "bad"
    folder.mkdir(exist_ok=True)
    (folder / "task.yaml").write_text(textwrap.dedent(text))
    with pytest.raises(UserError) as info:
        load_folder(folder)
    assert str(folder / "task.yaml") in str(info.value)
    return str(info.value)


@pytest.mark.parametrize("edit, expected", [
    (lambda t: t.replace("main_score: accuracy\n", ""), "key 'main_score': missing"),
    (lambda t: t.replace("family: mine", "family: [a, b]"), "key 'family': expected a string"),
    (lambda t: t.replace("  false: [wrong, also_wrong]", "  false: 3"), "key 'captions.false'"),
    (lambda t: t.replace("metrics: [accuracy, tie_rate]", "metrics: [accuracy, recall]"),
     "key 'metrics.1': unknown metric 'recall'"),
    (lambda t: t.replace("main_score: accuracy", "main_score: macro_accuracy"), "key 'main_score'"),
    (lambda t: t.replace("kind: choice", "kind: ranking"), "key 'kind': 'ranking' is not one of"),
    (lambda t: t + "colour: red\n", "key 'colour': unknown key"),
    (lambda t: t.replace("  path: \"mine/{file}\"", "  path: \"mine/{file}\"\n  crop: [x, y]"), "key 'media.crop'"),
    (lambda t: t.replace("name: my_colours", "name: !!python/object:os.system ls"), "not a safe YAML task file"),
    (lambda t: t.replace("  file: mine/colours.jsonl", "  file: mine/colours.jsonl\n  where: {file: [a, b]}"),
     "key 'data.where.file': a list: write {in: [...]} or {not in: [...]}"),
    (lambda t: t.replace("  file: mine/colours.jsonl", "  file: mine/colours.jsonl\n  where: {file: {notin: [a]}}"),
     "key 'data.where.file.notin': unknown key"),
    (lambda t: t.replace("  file: mine/colours.jsonl", "  file: mine/colours.jsonl\n  where: {v: {min: two}}"),
     "key 'data.where.v.min': expected a finite number"),
    (lambda t: t.replace("  file: mine/colours.jsonl", "  file: mine/colours.jsonl\n  where: {v: {min: .nan}}"),
     "key 'data.where.v.min': expected a finite number, got nan"),
    (lambda t: t.replace("  file: mine/colours.jsonl", "  file: mine/colours.jsonl\n  where: {v: {max: -.inf}}"),
     "key 'data.where.v.max': expected a finite number"),
    (lambda t: t + "min_group: 0\n", "key 'min_group': expected a whole number >= 1, got 0"),
    (lambda t: t + "authors: {ties: last, note: x}\n", "key 'authors.ties': 'last' is not one of first, wrong"),
])
def test_bad_yaml_names_file_and_key(tmp_path, edit, expected):
    assert expected in _bad(tmp_path, edit(CHOICE))


def test_a_python_tag_is_never_constructed(tmp_path):
    message = _bad(tmp_path, "!!python/object/apply:os.system ['touch pwned']\n")
    assert "task.yaml:1" in message and not (tmp_path / "pwned").exists()


def test_cli_bad_yaml_and_bad_row_exit_2_with_one_line(cli, tmp_path):
    tasks = tmp_path / "t"
    tasks.mkdir()
    (tasks / "colours.yaml").write_text(CHOICE.replace("metrics: [accuracy, tie_rate]", "metrics: [accuracy, f1]"))
    res = cli("list", "--include-path", str(tasks))
    assert res.returncode == 2 and "colours.yaml: key 'metrics.1': unknown metric 'f1'" in res.stderr
    assert "Traceback" not in res.stderr
    (tasks / "colours.yaml").write_text(CHOICE)
    rows = ROWS[:1] + [{"file": "green.png", "caption": "a green photo", "wrong": "", "also_wrong": " "}]
    _data(tmp_path / "data", rows)
    res = cli("run", "--model", "pil_colour", "--include-path", str(tasks), "--task", "my_colours",
              "--data-root", str(tmp_path / "data"), plugins=("choicefake",))
    assert res.returncode == 2, res.stderr
    assert "colours.jsonl:line 2: no false caption ('wrong', 'also_wrong' empty)" in res.stderr.replace("\n", "")
    res = cli("run", "--model", "pil_colour", "--include-path", str(tmp_path / "absent"), "--task", "x")
    assert res.returncode == 2 and "--include-path" in res.stderr


def test_suite_members_must_be_choice_tasks_of_the_folder(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "a.yaml").write_text(CHOICE)
    (folder / "suite.yaml").write_text(textwrap.dedent("""\
        name: my_suite
        kind: suite
        family: mine
        description: d
        citation: c
        data_help: h
        members: {colours: my_colours, other: not_there}
        main_score: mean
        """))
    with pytest.raises(UserError, match=r"suite.yaml: key 'members.other': 'not_there'"):
        load_folder(folder)


ORDER = """\
name: my_order
kind: choice
family: mine
description: "caption vs ARO's four word-order shuffles, from a user's folder"
citation: "me, 2026"
data_help: "write order.json under the data root"
data:
  file: mine/order.json
  explode: caption
media:
  path: "mine/{image}"
captions:
  true: caption
  generate: aro_order_shuffles     # a built-in generator, named from --include-path
authors: {ties: first, note: "ARO's argmax: index 0 wins a tie"}
metrics: [accuracy, tie_rate]
main_score: accuracy
"""

EXCLUDING = CHOICE.replace("name: my_colours", "name: my_colours_not_blue").replace(
    "  file: mine/colours.jsonl\n", "  file: mine/colours.jsonl\n  where:\n    file:\n      not in: [blue.png]\n"
    "      reason: \"the blue image is a stand-in\"\n")


@pytest.mark.needs("nltk")  # real (open-vocabulary) captions: the tagger
def test_user_yaml_has_generators_exclusions_authors_rule_and_paired_per_query(cli, tmp_path):
    tasks = tmp_path / "my_tasks"
    tasks.mkdir()
    (tasks / "order.yaml").write_text(ORDER)
    (tasks / "excluding.yaml").write_text(EXCLUDING)
    _data(tmp_path / "data", ROWS)
    (tmp_path / "data/mine/order.json").write_text(json.dumps(
        [{"image": "red.png", "caption": ["the red dog chases one small cat across some green field", "red"]}]))
    for out in ("r1", "r2"):
        ran = cli("run", "--model", "pil_colour", "--include-path", str(tasks), "--task", "my_*",
                  "--data-root", str(tmp_path / "data"), "--output-dir", out, plugins=("choicefake",))
        assert ran.returncode == 0, ran.stderr
    order = json.loads((tmp_path / "r1/pil_colour/my_order.json").read_text())
    # pil_colour embeds a text by its first colour word: on the red image, row 0's caption ties the
    # shuffles that keep "red" first (wrong, safe rule). "red" alone shuffles to itself (left out,
    # counted). ARO's argmax (index 0 wins a tie) counts both rows right
    assert order["n_items"]["rows_identical"] == 1 and order["n_items"]["rows"] == 2
    assert order["metrics"]["accuracy"] == 0 and order["metrics"]["accuracy_authors_rule"] == 100
    assert "ARO's argmax" in order["notes"]["authors_rule"]
    excl = json.loads((tmp_path / "r1/pil_colour/my_colours_not_blue.json").read_text())
    assert excl["n_items"]["rows"] == 2 and excl["n_items"]["rows_filtered"] == 1
    assert excl["notes"]["filtered"] == [{"filter": "file not in 1 values", "rows": 1,
                                          "reason": "the blue image is a stand-in"}]
    assert excl["metrics"]["accuracy"] == 100
    for rec in (order, excl):
        assert rec["per_query_file"] and "accuracy" in rec["intervals"]
    sidecar = json.loads((tmp_path / "r1/pil_colour" / excl["per_query_file"]).read_text())
    assert sidecar["ids"] == ["mine/colours.jsonl:line 1", "mine/colours.jsonl:line 2"]  # relative to the data root
    cmp = cli("compare", "r1/pil_colour", "r2/pil_colour", "--resamples", "200")
    assert cmp.returncode == 0, cmp.stderr
    assert "my_colours_not_blue" in cmp.stdout and "no per-query" not in cmp.stdout


def test_the_docs_document_every_key_a_yaml_task_may_use():
    import re

    from negharness.declarative import spec
    from negharness.declarative.annotations import FILTER_KEYS
    from negharness.tasks.builtin import GENERATORS

    section = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "yaml-tasks.md").read_text()
    from negharness.declarative import kind_specs

    keys = (spec.TOP_KEYS | spec.DATA_KEYS | spec.MEDIA_KEYS | spec.CAPTION_KEYS
            | spec.AUTHORS_KEYS | set(FILTER_KEYS) | {"field", "replace"} | kind_specs.QUERY_KEYS
            | kind_specs.QRELS_KEYS | set().union(*kind_specs.ITEM_CAPTIONS.values())
            | kind_specs.QUESTION_KEYS | kind_specs.POOL_KEYS)
    missing = [k for k in sorted(keys) if not re.search(rf"(^|[\s{{#`]){re.escape(k)}:", section, re.M)]
    assert missing == []
    for ties in spec.AUTHORS_TIES:
        assert f"ties: {ties}" in section or f"{ties}:" in section
    assert all(f"`{g}`" in section for g in GENERATORS)


def test_an_unknown_generator_in_a_users_file_is_named_before_any_model(tmp_path):
    from negharness.api import TaskOptions

    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "g.yaml").write_text(CHOICE.replace("  false: [wrong, also_wrong]", "  generate: nope"))
    [cls] = load_folder(folder)  # --include-path: plugins' generators are known once their hooks ran
    _data(tmp_path / "data", ROWS)
    with pytest.raises(UserError, match=r"g.yaml: key 'captions.generate': unknown generator 'nope'"):
        cls(TaskOptions(tmp_path / "data")).required_files()
    with pytest.raises(UserError, match=r"key 'captions.generate': unknown generator 'nope'"):
        load_folder(folder, {})  # a plugin's own folder: checked at once


def test_an_edited_yaml_definition_reruns_and_says_which(cli, tmp_path):
    """The YAML definition is data the numbers rest on (which caption is true, what is read): an
    edit reruns and names the file (it reran nothing: the stale accuracy 66.7 stood for 33.3)."""
    tasks = tmp_path / "my_tasks"
    tasks.mkdir()
    (tasks / "colours.yaml").write_text(CHOICE)
    _data(tmp_path / "data", ROWS)
    args = ("run", "--model", "pil_colour", "--include-path", str(tasks), "--task", "my_colours",
            "--data-root", str(tmp_path / "data"))
    assert cli(*args, plugins=("choicefake",)).returncode == 0
    assert "(cached)" in cli(*args, plugins=("choicefake",)).stdout
    (tasks / "colours.yaml").write_text(CHOICE.replace("true: caption\n  false: [wrong, also_wrong]",
                                                       "true: wrong\n  false: [caption, also_wrong]"))
    ran = cli(*args, plugins=("choicefake",))
    assert ran.returncode == 0, ran.stderr
    assert "(cached)" not in ran.stdout and "rerun: data file" in ran.stdout  # the summary's cell may wrap the path
    rec = json.loads((tmp_path / "results/pil_colour/my_colours.json").read_text())
    assert rec["rerun_reason"] == f"data file {tasks / 'colours.yaml'} changed"
    assert rec["metrics"]["accuracy"] == pytest.approx(0.0)
