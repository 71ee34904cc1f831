"""A user's YAML task files fed through `negharness run --include-path DIR --task NAME`, as a user
would: every path they make negharness read stays under the data root (the YAML's data files as
written and through symlinks, each row's media), the file is parsed with limits (size, no anchors or
aliases, no duplicate keys, bounded nesting), a key the task would not read is refused at any level,
and an empty option that would shift the answer index is refused by row. Each refusal is one line
naming the YAML file and key, or the annotation file and row, with exit code 2 and no record."""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

import pytest
from test_declarative_cli import CHOICE, RETRIEVAL, ROWS, _data

from negharness.api import UserError
from negharness.declarative.register import load_folder
from negharness.declarative.yaml_reader import MAX_YAML_BYTES


def _folder(tmp_path: Path, text: str, name: str = "task.yaml") -> Path:
    folder = tmp_path / "tasks"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    return folder


def _run(cli, tmp_path: Path, folder: Path, task: str = "my_colours", env: dict[str, str] | None = None):
    return cli("run", "--model", "pil_colour", "--include-path", str(folder), "--task", task,
               "--data-root", str(tmp_path / "data"), plugins=("choicefake",), env=env)


def _refused(res, *expected: str) -> str:
    """Exit 2, one error naming what is expected, no traceback and no record written."""
    err = res.stderr.replace("\n", " ")
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "unexpected" not in res.stderr
    for text in expected:
        assert text in err, (text, res.stderr)
    return err


def _no_record(tmp_path: Path) -> None:
    assert not list((tmp_path / "results").rglob("*.json"))


# 1. one data-root rule -----------------------------------------------------------------------------

@pytest.mark.parametrize("file", ["../../etc/passwd", "/etc/passwd", "mine/../../outside/x.csv"])
def test_a_data_file_outside_the_data_root_is_refused_before_it_is_read(cli, tmp_path, file):
    """A FIFO stands where the file would be: if anything opened it, the run would hang."""
    _data(tmp_path / "data", ROWS)
    (tmp_path / "outside").mkdir()
    os.mkfifo(tmp_path / "outside/x.csv")
    folder = _folder(tmp_path, CHOICE.replace("  file: mine/colours.jsonl", f"  file: {file}\n  format: csv"))
    err = _refused(_run(cli, tmp_path, folder), str(folder / "task.yaml"), "key 'data.file'", "leaves the data root")
    assert "relative to the data root" in err
    _no_record(tmp_path)


def test_a_data_file_that_links_out_of_the_data_root_is_refused_naming_the_yaml(cli, tmp_path):
    _data(tmp_path / "data", ROWS)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside/colours.jsonl").write_text((tmp_path / "data/mine/colours.jsonl").read_text())
    (tmp_path / "data/mine/linked.jsonl").symlink_to(tmp_path / "outside/colours.jsonl")
    folder = _folder(tmp_path, CHOICE.replace("mine/colours.jsonl", "mine/linked.jsonl"))
    _refused(_run(cli, tmp_path, folder), f"{folder / 'task.yaml'}: key 'data.file'", "symlink",
             str(tmp_path / "outside/colours.jsonl"), "NEGHARNESS_ALLOW_LINKS_OUT=1")
    # the same switch as for Python tasks lets a data root assembled from links through
    ran = _run(cli, tmp_path, folder, env={"NEGHARNESS_ALLOW_LINKS_OUT": "1"})
    assert ran.returncode == 0, ran.stderr


def test_the_second_of_two_data_files_is_named_by_its_index(tmp_path):
    folder = _folder(tmp_path, CHOICE.replace("  file: mine/colours.jsonl", "  file: [mine/colours.jsonl, ../x.jsonl]"))
    with pytest.raises(UserError, match=r"task.yaml: key 'data.file.1': '../x.jsonl' leaves the data root"):
        load_folder(folder)


@pytest.mark.parametrize("value", ["../../outside/red.png", "x/../../../outside/red.png"])
def test_a_row_media_path_with_dotdot_is_refused_naming_the_row(cli, tmp_path, value):
    rows = [ROWS[0], {**ROWS[1], "file": value}]
    _data(tmp_path / "data", rows)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside/red.png").write_bytes((tmp_path / "data/mine/red.png").read_bytes())
    folder = _folder(tmp_path, CHOICE)
    _refused(_run(cli, tmp_path, folder), f"{tmp_path / 'data/mine/colours.jsonl'}:line 2", "leaves the data root")
    _no_record(tmp_path)


def test_a_row_media_path_through_a_symlink_out_is_refused_naming_the_row(cli, tmp_path):
    rows = [ROWS[0], {**ROWS[1], "file": "link.png"}]
    _data(tmp_path / "data", rows)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside/green.png").write_bytes((tmp_path / "data/mine/green.png").read_bytes())
    (tmp_path / "data/mine/link.png").symlink_to(tmp_path / "outside/green.png")
    _refused(_run(cli, tmp_path, _folder(tmp_path, CHOICE)), f"{tmp_path / 'data/mine/colours.jsonl'}:line 2",
             "symlink", "outside the data root")
    _no_record(tmp_path)


def test_an_absolute_row_media_path_is_refused_pointing_at_strip_prefix(cli, tmp_path):
    _data(tmp_path / "data", ROWS)
    rows = [{**ROWS[0], "file": str(tmp_path / "data/mine/red.png")}]
    (tmp_path / "data/mine/colours.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = RETRIEVAL.replace("name: my_colour_retrieval", "name: my_colours").replace('"mine/{file}"', '"{file}"')
    folder = _folder(tmp_path, text)
    _refused(_run(cli, tmp_path, folder), "colours.jsonl:line 1: media path", "is absolute", "media.strip_prefix")
    # listing the prefix is the fix
    fixed = text.replace('  path: "{file}"', f'  path: "{{file}}"\n  strip_prefix: ["{tmp_path / "data"}/"]')
    folder = _folder(tmp_path, fixed)
    assert _run(cli, tmp_path, folder).returncode == 0


@pytest.mark.parametrize("template, key", [('"../{file}"', "media.path"), ('"/srv/{file}"', "media.path"),
                                           ('["mine/{file}", "{a}/../../{file}"]', "media.path.1")])
def test_a_media_template_leaving_the_data_root_is_refused_by_key(tmp_path, template, key):
    folder = _folder(tmp_path, CHOICE.replace('  path: "mine/{file}"', f"  path: {template}"))
    with pytest.raises(UserError, match=rf"task.yaml: key '{key}': .* leaves the data root"):
        load_folder(folder)


# 2. parsed with limits ------------------------------------------------------------------------------

BOMB = ('description: [&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"],'
        + "".join(f" &{n} [" + ",".join([f"*{p}"] * 9) + "],"
                  for p, n in zip("abcdefgh", "bcdefghi")).rstrip(",") + "]\n")


def test_a_yaml_alias_bomb_fails_fast_naming_the_file(cli, tmp_path):
    """Nine levels of nine aliases: 9**9 strings once expanded. Refused at its first anchor."""
    text = CHOICE.replace('description: "which colour is it"\n', BOMB)
    assert len(BOMB) < 800
    folder = _folder(tmp_path, text)
    err = _refused(_run(cli, tmp_path, folder), f"{folder / 'task.yaml'}:4", "anchors and aliases are not allowed")
    assert "MemoryError" not in err and len(err) < 400


@pytest.mark.parametrize("yaml_text, expected", [
    ("x: &a 1\ny: *a\n", ":1: not a safe YAML task file (anchor &a"),
    ("<<: {a: 1}\nname: n\n", "not a safe YAML task file"),
    ("name: a\nkind: choice\nname: b\n", ":3: not a safe YAML task file (duplicate key 'name')"),
    ("description: " + "[" * 40 + "]" * 40 + "\n", "nested more than 32 levels deep"),
])
def test_anchors_duplicate_keys_and_deep_nesting_are_refused_by_line(tmp_path, yaml_text, expected):
    folder = _folder(tmp_path, yaml_text)
    with pytest.raises(UserError) as info:
        load_folder(folder)
    assert str(folder / "task.yaml") in str(info.value) and expected in str(info.value)


def test_a_task_file_over_the_size_cap_is_refused_unread(cli, tmp_path):
    text = CHOICE.replace('description: "which colour is it"', 'description: "' + "x" * MAX_YAML_BYTES + '"')
    folder = _folder(tmp_path, text)
    err = _refused(_run(cli, tmp_path, folder), str(folder / "task.yaml"), f"at most {MAX_YAML_BYTES:,}")
    assert len(err) < 400


def test_a_fifo_or_non_utf8_task_file_is_named(tmp_path):
    folder = tmp_path / "tasks"
    folder.mkdir()
    os.mkfifo(folder / "pipe.yaml")  # opening it would block forever
    with pytest.raises(UserError, match=r"pipe.yaml is a FIFO, not a regular file"):
        load_folder(folder)
    (folder / "pipe.yaml").unlink()
    (folder / "latin.yaml").write_bytes(CHOICE.replace("which colour", "caf\xe9 colour").encode("latin-1"))
    with pytest.raises(UserError, match=r"latin.yaml:4: not UTF-8 text"):
        load_folder(folder)


def test_a_huge_wrong_value_is_named_without_being_echoed(cli, tmp_path):
    text = CHOICE.replace("family: mine", "family: [" + ", ".join(["'" + "y" * 1000 + "'"] * 500) + "]")
    folder = _folder(tmp_path, text)
    err = _refused(_run(cli, tmp_path, folder), f"{folder / 'task.yaml'}: key 'family': expected a string, got list")
    assert len(err) < 400 and "yyy..." in err


@pytest.mark.parametrize("edit, key, known", [
    # a misspelt filter operator names the file, key and the operators there are
    (lambda t: t.replace("  file: mine/colours.jsonl", "  file: mine/colours.jsonl\n  where: {x: {minimum: 2}}"),
     "data.where.x.minimum", "filter operators: min, max, in, not in, reason"),
    (lambda t: t.replace("  file: mine/colours.jsonl", "  file: mine/colours.jsonl\n  wher: {x: 1}"),
     "data.wher", "known: cells, explode, file, format, records, revision, rows_per_item, slice, where"),
    (lambda t: t.replace('  path: "mine/{file}"', '  path: "mine/{file}"\n  croop: [a, b, c, d]'),
     "media.croop", "known: base64, box, box_format, boxes, crop, embedded, id, kind, members, path, strip_prefix, true_box"),
    (lambda t: t.replace("  false: [wrong, also_wrong]", "  false: [{field: wrong, replase: {a: b}}]"),
     "captions.false.0.replase", "known: field, replace"),
    (lambda t: t + "authors: {ties: first, note: n, notes: m}\n", "authors.notes", "known: note, ties"),
    (lambda t: t + "Metrics: [accuracy]\n", "Metrics", "unknown key"),
    # keys a choice task of this kind would not read: refused, not ignored
    (lambda t: t + "members: {a: b}\n", "members", "not read by a choice task"),
    (lambda t: t.replace("  false: [wrong, also_wrong]", "  false: [wrong]\n  options: [wrong, also_wrong]\n  answer: a"),
     "captions.false", "not read beside 'options'"),
    (lambda t: t.replace("  false: [wrong, also_wrong]", "  false: [wrong]\n  answer_base: 1"),
     "captions.answer_base", "not read beside 'false'"),
    (lambda t: t.replace("  false: [wrong, also_wrong]", "  false: [wrong]\n  generate: aro_order_shuffles"),
     "captions.false", "not read beside 'generate'"),
])
def test_unknown_keys_are_refused_at_every_level(cli, tmp_path, edit, key, known):
    folder = _folder(tmp_path, edit(CHOICE))
    _refused(_run(cli, tmp_path, folder), f"{folder / 'task.yaml'}: key '{key}'", known)


@pytest.mark.parametrize("text, key, message", [
    (RETRIEVAL + "group_by: file\n", "group_by", "not read by a retrieval task"),
    (RETRIEVAL + "question: q\n", "question", "not read by a retrieval task"),
    (RETRIEVAL.replace("  field: caption", "  field: caption\n  false: wrong"), "captions.false", "unknown key"),
    (textwrap.dedent("""\
        name: s
        kind: suite
        family: f
        description: d
        citation: c
        data_help: h
        members: {colours: my_colours}
        metrics: [accuracy]
        main_score: mean
        """), "metrics", "not read by a suite task"),
])
def test_keys_another_kind_reads_are_refused(tmp_path, text, key, message):
    folder = _folder(tmp_path, text)
    with pytest.raises(UserError, match=rf"task.yaml: key '{key}': {message}"):
        load_folder(folder)


OPTIONS = CHOICE.replace("  true: caption\n  false: [wrong, also_wrong]",
                         "  options: [o0, o1, o2, o3]\n  answer: answer")


def _option_rows(root: Path, rows: list[dict]) -> None:
    _data(root, ROWS)
    (root / "mine/colours.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_an_empty_option_that_would_shift_the_answer_is_refused_by_row(cli, tmp_path):
    """Row 2's answer is option 2, "a green photo"; dropping the empty option 1 would make index 2
    name "a blue photo" (the wrong caption, scored as right, exit 0 before)."""
    good = {"file": "red.png", "o0": "a red photo", "o1": "a green photo", "o2": "a blue photo", "o3": "one photo",
            "answer": 0}
    shifted = {"file": "green.png", "o0": "a red photo", "o1": "", "o2": "a green photo", "o3": "a blue photo",
               "answer": 2}
    _option_rows(tmp_path / "data", [good, shifted])
    folder = _folder(tmp_path, OPTIONS)
    _refused(_run(cli, tmp_path, folder), f"{tmp_path / 'data/mine/colours.jsonl'}:line 2: option 1 (field 'o1') is empty",
             "refused rather than dropped", "the answer, option 2, would name option 3's caption")
    _no_record(tmp_path)
    _option_rows(tmp_path / "data", [good, {**shifted, "o1": "one photo"}])
    ran = _run(cli, tmp_path, folder)
    assert ran.returncode == 0, ran.stderr
    rec = json.loads((tmp_path / "results/pil_colour/my_colours.json").read_text())
    assert rec["metrics"]["accuracy"] == 100  # both rows: the true caption names the image's colour


def test_an_empty_option_inside_a_list_field_is_refused_by_row(tmp_path):
    from negharness.api import TaskOptions

    text = CHOICE.replace("  true: caption\n  false: [wrong, also_wrong]", "  options: [captions, last]\n  answer: answer")
    _option_rows(tmp_path / "data", [{"file": "red.png", "captions": ["a blue photo", " ", "a red photo"],
                                      "last": "one photo", "answer": 2}])
    [cls] = load_folder(_folder(tmp_path, text))
    with pytest.raises(UserError, match=r"colours.jsonl:line 1: option 1 \(field 'captions'\) is empty"):
        cls(TaskOptions(tmp_path / "data")).required_files()


# a CSV annotation file: a ragged row or a repeated column is refused, never shifted or dropped -------

CSV_CHOICE = CHOICE.replace("  file: mine/colours.jsonl", "  file: mine/colours.csv\n  format: csv")
CSV_HEADER = "file,caption,wrong,also_wrong\n"


@pytest.mark.parametrize("header, row, expected", [
    # an unquoted comma: 5 cells; before, "a red" was scored as the caption and " photo" as a wrong one
    (CSV_HEADER, "red.png,a red, photo,a green photo,a blue photo\n", ":line 3: 5 cells where the header has 4"),
    (CSV_HEADER, "red.png,a red photo,a green photo\n", ":line 3: 3 cells where the header has 4"),
    # before, DictReader kept the second 'wrong' column only: "a green photo" was never offered
    ("file,caption,wrong,wrong\n", "red.png,a red photo,a green photo,a blue photo\n",
     ":1: column 4 'wrong' repeats column 3"),
])
def test_a_ragged_csv_row_or_repeated_column_is_refused_by_line(cli, tmp_path, header, row, expected):
    _data(tmp_path / "data", ROWS)
    good = "green.png,a green photo,a red photo,a blue photo\n"
    (tmp_path / "data/mine/colours.csv").write_text(header + good + row)
    folder = _folder(tmp_path, CSV_CHOICE)
    _refused(_run(cli, tmp_path, folder), f"{tmp_path / 'data/mine/colours.csv'}{expected}")
    _no_record(tmp_path)
    (tmp_path / "data/mine/colours.csv").write_text(CSV_HEADER + good)
    assert _run(cli, tmp_path, folder).returncode == 0  # the same file, well-formed, runs


# 3. one spelling of each metric, one caption limit, one BOM rule ------------------------------------

def test_a_retrieval_task_declaring_the_readmes_mdr_and_mnr_reports_medr_and_meanr(tmp_path):
    """Old code: the checker took MdR, scoring wrote MedR: the record's main score was null."""
    from choice_helpers import TableModel, evaluate

    from negharness.api import TaskOptions, check_result

    _data(tmp_path / "data", ROWS)
    folder = _folder(tmp_path, RETRIEVAL.replace("metrics: [R@1, MIR]\nmain_score: R@1",
                                                 "metrics: [R@1, MdR, MnR]\nmain_score: MdR\n"
                                                 "leaderboard_metrics: [MdR, MnR]"))
    (cls,) = load_folder(folder)
    assert cls.main_score == "MedR" and list(cls.metric_info) == ["R@1", "MedR", "MeanR"]
    assert cls.leaderboard_metrics == ("MedR", "MeanR") and not cls.metric_info["MedR"].higher_is_better
    model = TableModel({"a red photo": {"red": 1.0}, "a green photo": {"green": 1.0}})
    res = evaluate(cls, tmp_path / "data", model)
    check_result(cls(TaskOptions(tmp_path / "data")), res, "p")  # the main score is a number: a record may be written
    # ranks 1, 1 and 3 ("a photo" ties every image: the pessimistic rank)
    assert res.metrics == pytest.approx({"R@1": 200 / 3, "MedR": 1.0, "MeanR": 5 / 3})


def test_an_unknown_metric_names_the_catalogue_and_the_aliases(tmp_path):
    folder = _folder(tmp_path, RETRIEVAL.replace("metrics: [R@1, MIR]", "metrics: [R@1, MedianR]"))
    with pytest.raises(UserError, match=r"key 'metrics.1': unknown metric 'MedianR' \(known for retrieval tasks: "
                                        r"R@1, R@5, R@10, MIR, MedR, MeanR; also read: MdR = MedR, MnR = MeanR\)"):
        load_folder(folder)


def test_a_yaml_row_caption_over_the_shared_limit_is_refused_by_line(tmp_path):
    """Old code: the tokenizer cut it to 77 tokens and the row was scored as another caption."""
    from negharness.api import TaskOptions

    rows = [dict(ROWS[0]), dict(ROWS[1], wrong="a red photo " * 834)]  # 10,007 characters once stripped
    _data(tmp_path / "data", rows)
    (cls,) = load_folder(_folder(tmp_path, CHOICE))
    with pytest.raises(UserError, match=r"colours.jsonl:line 2: field 'wrong': caption of 10,0\d\d characters "
                                        r"\(at most 10,000\)"):
        cls(TaskOptions(tmp_path / "data")).rows


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "tsv"])
def test_a_data_file_starting_with_a_utf8_bom_reads_as_without(tmp_path, fmt):
    """The README says data files may start with a BOM; old code refused a JSONL or JSON one, and a
    CSV's first column name carried it (so the field was "missing")."""
    from negharness.api import TaskOptions

    _data(tmp_path / "data", ROWS)
    keys = list(ROWS[0])
    if fmt == "jsonl":
        body = "".join(json.dumps(r) + "\n" for r in ROWS)
    elif fmt == "json":
        body = json.dumps(ROWS)
    else:
        sep = "," if fmt == "csv" else "\t"
        body = "".join(sep.join(line) + "\n" for line in [keys, *[[r[k] for k in keys] for r in ROWS]])
    options = []
    for name, text in (("plain", body), ("bom", "\ufeff" + body)):
        (tmp_path / f"data/mine/{name}.{fmt}").write_text(text, encoding="utf-8")
        (tmp_path / name).mkdir()
        folder = _folder(tmp_path / name, CHOICE.replace("mine/colours.jsonl", f"mine/{name}.{fmt}"))
        (cls,) = load_folder(folder)
        options.append([r.options for r in cls(TaskOptions(tmp_path / "data")).rows])
    assert options[0] == options[1] == [(r["caption"], r["wrong"], r["also_wrong"]) for r in ROWS]


# cluster: what a task's rows share, for its intervals (issue 37) -----------------------------------
def test_yaml_cluster_media_resamples_rows_on_one_image_together(cli, tmp_path):
    rows = ROWS + [{**ROWS[0], "wrong": "a blue photo", "also_wrong": "one photo"}]  # a second row on red.png
    _data(tmp_path / "data", rows)
    ran = _run(cli, tmp_path, _folder(tmp_path, CHOICE + "cluster: media\n"))
    assert ran.returncode == 0, ran.stderr
    rec = json.loads((tmp_path / "results/pil_colour/my_colours.json").read_text())
    side = json.loads((tmp_path / "results/pil_colour/my_colours.perquery.json").read_text())
    assert rec["task"]["cluster"] == "image" and rec["interval_method"]["clusters"] == 3
    assert side["clusters"] == ["mine/red.png", "mine/green.png", "mine/blue.png", "mine/red.png"]
    assert set(rec["standard_errors"]) == set(rec["intervals"]) == set(rec["intervals_rows"]) == {"accuracy"}


def test_yaml_cluster_by_field_and_the_default(tmp_path):
    from negharness.api import TaskOptions

    _data(tmp_path / "data", [{**r, "scene": "s1" if i < 2 else "s2"} for i, r in enumerate(ROWS)])
    [by_field] = load_folder(_folder(tmp_path, CHOICE + "cluster: {field: scene}\n"))
    task = by_field(TaskOptions(tmp_path / "data"))
    assert task.cluster == "scene" and [r.cluster for r in task.rows] == ["s1", "s1", "s2"]
    [plain] = load_folder(_folder(tmp_path, CHOICE))
    assert plain.cluster == "row" and plain(TaskOptions(tmp_path / "data")).clusters(["a"]) is None


@pytest.mark.parametrize("line, key, message", [
    ("cluster: pixels\n", "cluster", "'pixels' is not one of row, media or {field: NAME}"),
    ("cluster: {column: scene}\n", "cluster.column", "unknown key (known: field, name)"),
    ("cluster: [media]\n", "cluster", "['media'] is not one of row, media"),
])
def test_a_bad_cluster_key_is_named(tmp_path, line, key, message):
    with pytest.raises(UserError, match=re.escape(f"task.yaml: key '{key}': {message}")):
        load_folder(_folder(tmp_path, CHOICE + line))


def test_a_task_name_with_a_look_alike_letter_is_refused_naming_the_yaml_file(cli, tmp_path):
    """fc4bba0 answered "unknown task 'negbench_mcq_c\u03bfco'; did you mean negbench_mcq_coco?" and never
    named the YAML file that declared the look-alike (a Greek omicron)."""
    name = "negbench_mcq_c\u03bfco"
    folder = _folder(tmp_path, CHOICE.replace("name: my_colours", f"name: {name}"), "lookalike.yaml")
    _data(tmp_path / "data", ROWS)
    err = _refused(_run(cli, tmp_path, folder, name), f"{folder / 'lookalike.yaml'}: key 'name'", "U+03BF",
                   "GREEK SMALL LETTER OMICRON")
    assert "unknown task" not in err
    _no_record(tmp_path)


def test_a_lone_surrogate_in_a_caption_is_read_as_open_clip_reads_it(cli, tmp_path):
    """A JSONL caption ending in ``\\ud83d`` (half an emoji) ended the run with exit 1, UnicodeEncodeError,
    "plugin bug", naming no file. It is read as open_clip's tokenizer reads it (ftfy: a lone surrogate is
    U+FFFD, a pair its character), alike from JSONL, JSON and a CSV list cell; the run scores it."""
    rows = [dict(r) for r in ROWS]
    rows[0]["caption"] = "a red photo \ud83d"
    rows[1]["wrong"] = "a red photo \ud83d\ude00"
    _data(tmp_path / "data", rows)
    assert "\\ud83d" in (tmp_path / "data/mine/colours.jsonl").read_text()  # json.dumps escapes it
    assert _run(cli, tmp_path, _folder(tmp_path, CHOICE)).returncode == 0
    read = _records_of(tmp_path).rows
    assert read[0].options[0] == "a red photo \ufffd" and read[1].options[1] == "a red photo \U0001f600"
    (tmp_path / "data/mine/colours.json").write_text(json.dumps(rows))
    as_json = _records_of(tmp_path, CHOICE.replace("  file: mine/colours.jsonl", "  file: mine/colours.json"))
    assert [r.options for r in as_json.rows] == [r.options for r in read]
    (tmp_path / "data/mine/colours.csv").write_text(
        "file,caption,wrong,also_wrong\nred.png,a red photo,\"['a green photo \\ud83d']\",a blue photo\n")
    as_csv = _records_of(tmp_path, CHOICE.replace("  file: mine/colours.jsonl", "  file: mine/colours.csv"))
    assert as_csv.rows[0].options == ("a red photo", "a green photo \ufffd", "a blue photo")


# 4. what a task file's data make the harness do is bounded ----------------------------------------

def _records_of(tmp_path: Path, text: str = CHOICE):
    from negharness.api import TaskOptions

    [cls] = load_folder(_folder(tmp_path, text))
    return cls(TaskOptions(tmp_path / "data"))


def test_a_data_file_over_the_size_cap_or_not_a_regular_file_is_refused_unread(tmp_path):
    """A sparse file one byte over `MAX_DATA_FILE_BYTES` (4 GiB, nothing written) and a FIFO (which
    would block any read) are refused by name before they are opened; a file at the cap is read."""
    import signal

    from negharness.io.data_limits import MAX_DATA_FILE_BYTES

    _data(tmp_path / "data", ROWS)
    data = tmp_path / "data/mine/colours.jsonl"
    def hung(*_: object) -> None:
        raise TimeoutError("the FIFO was opened: the read hung")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)  # a read of the FIFO would hang: fail instead
    try:
        data.unlink()
        os.mkfifo(data)
        with pytest.raises(UserError, match=re.escape(f"{data} is a FIFO, not a regular file")):
            _ = _records_of(tmp_path).rows
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    data.unlink()
    _data(tmp_path / "data", ROWS)
    with open(data, "r+b") as fh:
        fh.truncate(MAX_DATA_FILE_BYTES + 1)  # sparse: the rows, then zeros, never written
    with pytest.raises(UserError, match=re.escape(f"{data} is {MAX_DATA_FILE_BYTES + 1:,} bytes") + ".*at most"):
        _ = _records_of(tmp_path).rows


def test_json_nested_past_the_parser_is_refused_naming_the_file_and_line(tmp_path):
    """Before, Python's RecursionError reached the user as 'unexpected RecursionError'."""
    _data(tmp_path / "data", ROWS)
    deep = "[" * 200_000 + "]" * 200_000
    (tmp_path / "data/mine/colours.jsonl").write_text(json.dumps(ROWS[0]) + "\n" + deep + "\n")
    with pytest.raises(UserError, match=r"colours.jsonl:line 2: JSON nested too deeply"):
        _ = _records_of(tmp_path).rows
    (tmp_path / "data/mine/colours.json").write_text(deep)
    text = CHOICE.replace("  file: mine/colours.jsonl", "  file: mine/colours.json\n  format: json")
    with pytest.raises(UserError, match=r"colours.json: JSON nested too deeply"):
        _ = _records_of(tmp_path, text).rows


OPTION_LIST = CHOICE.replace("  true: caption\n  false: [wrong, also_wrong]", "  options: [captions, last]\n  answer: answer")


def _wide_rows(widths: list[int]) -> list[dict]:
    """Rows whose ``captions`` list (plus ``last``) makes ``widths[i]`` options; the answer is option 0."""
    return [{"file": "red.png", "captions": ["a red photo"] + [f"photo {k}" for k in range(n - 2)],
             "last": "one photo", "answer": 0} for n in widths]


def test_a_thousand_option_row_stands_as_zero_shot_classification_needs(tmp_path):
    """Zero-shot ImageNet written as a choice task: 1,000 options a row. Refused before ("an item may
    hold at most 100"); the bound is now the scores' memory, rows x widest row (default limits)."""
    _option_rows(tmp_path / "data", _wide_rows([1000] * 50))
    rows = _records_of(tmp_path, OPTION_LIST).rows
    assert len(rows) == 50 and {len(r.options) for r in rows} == {1000} and rows[0].options[0] == "a red photo"


def test_one_hostile_row_that_would_make_every_row_wide_is_refused_naming_it(tmp_path):
    """One 100,000-caption row among 2,000 would lay out 2,000 x 100,000 scores: refused naming that
    row and the layout, with the default limits; the same rows all narrow stand."""
    from negharness.io.data_limits import MAX_SCORE_CELLS

    widths = [2] * 2000
    _option_rows(tmp_path / "data", _wide_rows(widths))
    assert len(_records_of(tmp_path, OPTION_LIST).rows) == 2000
    widths[1234] = 100_000
    _option_rows(tmp_path / "data", _wide_rows(widths))
    assert 2000 * 100_000 > MAX_SCORE_CELLS
    with pytest.raises(UserError, match=r"colours.jsonl:line 1235: 100,000 options in one row make the task's "
                                        r"scores 2,000 rows x 100,000 = 200,000,000 cells"):
        _ = _records_of(tmp_path, OPTION_LIST).rows


def test_a_published_table_over_its_cap_is_refused_unread(tmp_path):
    """A task file names its papers' tables beside it: read capped (16 MiB), like every file it names."""
    from negharness.records.published import MAX_TABLE_BYTES, PublishedTableError, load_table

    table = tmp_path / "big.csv"
    with open(table, "wb") as fh:
        fh.truncate(MAX_TABLE_BYTES + 1)
    with pytest.raises(PublishedTableError, match=re.escape(f"{table} is {MAX_TABLE_BYTES + 1:,} bytes; a published table")):
        load_table(table)


def test_a_data_file_of_more_rows_than_a_file_may_hold_is_refused_before_its_records_are_made(tmp_path):
    """10,000,001 rows (a 20 MB JSON list of zeros): refused naming the file, before any record is made."""
    from negharness.io.data_limits import MAX_DATA_RECORDS

    _data(tmp_path / "data", ROWS)
    (tmp_path / "data/mine/colours.json").write_text("[" + "0," * MAX_DATA_RECORDS + "0]")
    text = CHOICE.replace("  file: mine/colours.jsonl", "  file: mine/colours.json\n  format: json")
    with pytest.raises(UserError, match=re.escape(f"colours.json: more than {MAX_DATA_RECORDS:,} rows")):
        _ = _records_of(tmp_path, text).rows


def test_columns_that_unpack_past_the_cap_are_refused_as_they_are_decoded():
    """Parquet and Arrow batches are counted as decoded: a file whose columns unpack past 4 GiB (a dictionary
    or compressed column: kilobytes on disk) is refused at the batch that passes it, and no later batch is
    decoded; the same for rows. (Stand-in batches say their sizes: no gigabytes are allocated here.)"""
    from types import SimpleNamespace

    from negharness.io.data_limits import MAX_DATA_FILE_BYTES, MAX_DATA_RECORDS, bounded_rows

    decoded: list[int] = []

    def batches(rows: int, nbytes: int):
        for i in range(100):
            decoded.append(i)
            yield SimpleNamespace(num_rows=rows, nbytes=nbytes)

    with pytest.raises(UserError, match=re.escape(f"x.parquet unpacks to more than {MAX_DATA_FILE_BYTES:,} bytes")):
        list(bounded_rows("x.parquet", batches(1024, 2**30)))
    assert len(decoded) == 5  # 4 GiB stand, the fifth passes the cap, the sixth is never decoded
    decoded.clear()
    with pytest.raises(UserError, match=re.escape(f"x.arrow: more than {MAX_DATA_RECORDS:,} rows")):
        list(bounded_rows("x.arrow", batches(MAX_DATA_RECORDS // 3, 1)))
    assert len(decoded) == 4
    assert len(list(bounded_rows("ok", batches(10, 10)))) == 100
