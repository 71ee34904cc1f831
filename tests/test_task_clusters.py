"""Every built-in task clusters by what its rows share (issue 45 item 3): rows about one image
resample together. Checked against the data, not the declaration: the authors' files where they are
here (SugarCrepe, VALSE, NegBench's CSVs), and for the rest the tasks' data builders
(tests/relations_data.py) with two rows written on one image. Before, NegRefCOCOg and SugarCrepe++
declared ``row`` (75 of NegRefCOCOg's 440 items and 41 of SugarCrepe++ swap_obj's 245 rows share
their COCO image with another row)."""

import csv
import json
import os
from pathlib import Path

import pytest
from conftest import NLTK_REASON, _nltk_data_present
from relations_data import ROWS, builder_for

from negharness.api import TaskOptions
from negharness.declarative.choice_task import ChoiceTask
from negharness.discovery.manager import make_host

SHARED = Path(os.environ.get("NEGHARNESS_SHARED", Path(__file__).resolve().parents[2] / "shared"))
# the YAML kinds whose rows may share an image (`cluster:`); a group's images (Winoground, VisMin, ...) and
# MRMR's query images are each row's own by construction
CLUSTERED_KINDS = ("choice", "multi_choice", "image_choice")
# a third row on row 0's image (same file name, same pixels), with row 1's captions
SHARED_IMAGE_ROWS = [ROWS[0], ROWS[1], (ROWS[0][0], (ROWS[0][1][0], *ROWS[1][1][1:]))]


def _tasks() -> dict[str, type]:
    return {e.name: e.load() for e in make_host().registry.entries("task")}


TASKS = _tasks()


def partition(keys: list) -> list[int]:
    """Each row's first row with the same key: two key lists group rows alike when these are equal."""
    first: dict = {}
    return [first.setdefault(k, i) for i, k in enumerate(keys)]


def row_clusters(task) -> list[str]:
    """Each row's cluster id as the task's per-query block gives it (its own row where it declares none)."""
    per_row = [r.cluster for r in task.rows] if isinstance(task, ChoiceTask) else [it.cluster for it in task.items]
    return task.clusters(per_row) or [f"row{i}" for i in range(len(per_row))]


def _builder_tasks() -> list[str]:
    out = []
    for name, cls in sorted(TASKS.items()):
        build = builder_for(name, cls.family)
        if getattr(cls, "spec", {}).get("kind") in CLUSTERED_KINDS and build is not None and build(name).rows == ROWS:
            out.append(name)
    return out


BUILDER_TASKS = _builder_tasks()


def test_the_builder_check_covers_the_tasks_the_review_named():
    assert {"negrefcocog", "sugarcrepepp_swap_obj_itt", "sugarcrepepp_swap_obj_tot", "sugarcrepe_swap_obj",
            "ccneg", "aro_vg_relation", "crepe_negate", "negvqa_negated"} <= set(BUILDER_TASKS)


@pytest.mark.parametrize("name", [n for n in BUILDER_TASKS if n != "valse_existence"])  # VALSE keys rows by image
def test_rows_on_one_image_share_a_cluster(name, tmp_path):
    data = builder_for(name, TASKS[name].family)(name)
    if "nltk" in data.needs and not _nltk_data_present():  # the package alone is not the tagger's data
        pytest.skip(NLTK_REASON)
    data.build(tmp_path, SHARED_IMAGE_ROWS)
    task = TASKS[name](TaskOptions(tmp_path, extra=data.options(tmp_path)))
    assert partition(row_clusters(task)) == partition([i for i, _ in SHARED_IMAGE_ROWS]) == [0, 1, 0], \
        f"{name} declares cluster {TASKS[name].cluster!r}"
    assert TASKS[name].cluster == "image"


def _json_rows(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    return list(data.values()) if isinstance(data, dict) else data


# the authors' files here: (task, its file under data/, the column naming each row's image)
REAL = [(f"sugarcrepe_{s}", f"sugarcrepe/{s}.json", "filename")
        for s in ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")]
REAL.append(("valse_existence", "valse/existence.json", "image_file"))


@pytest.mark.parametrize("name, file, column", REAL)
def test_real_files_rows_on_one_image_share_a_cluster(name, file, column):
    path = SHARED / "data" / file
    if not path.is_file():
        pytest.skip(f"needs ../shared/data/{file}")
    task = TASKS[name](TaskOptions(SHARED / "data"))
    rows = task.records()
    images = [r.get(column) for r in rows]
    assert partition(row_clusters(task)) == partition(images)
    if len(set(images)) < len(images):
        assert TASKS[name].cluster != "row"


NEGBENCH_CSVS = SHARED / "data/negbench/negbench_eval_csvs"


@pytest.mark.needs("data/negbench/negbench_eval_csvs")
def test_negbench_rows_share_images_and_its_tasks_cluster_by_them():
    """NegBench's tasks give each query its medium's id as cluster (`retrieval_neg_values`,
    `evaluate_mcq`); the CSVs ask several questions, and write several captions, per image."""
    mcq = next(NEGBENCH_CSVS.rglob("COCO_val_mcq_llama3.1_rephrased.csv"))
    with mcq.open(newline="") as f:
        images = [row["image_path"] for row in csv.DictReader(f)]
    assert len(set(images)) < len(images)
    clustered = [n for n in TASKS if n.startswith("negbench_")]
    assert clustered and all(TASKS[n].cluster in ("image", "video") for n in clustered)


CHOICE_DIR = Path(__file__).resolve().parents[1] / "src/negharness/tasks/choice"


def _yaml_task(tmp_path, source: str, cluster_line: str):
    """A built-in YAML with its ``cluster:`` line replaced, loaded as a user's task."""
    from negharness.declarative.register import load_folder

    text = "".join(line for line in (CHOICE_DIR / source).read_text().splitlines(keepends=True)
                   if not line.startswith("cluster:"))
    folder = tmp_path / "tasks"
    folder.mkdir(parents=True)
    (folder / source).write_text(text + cluster_line)
    return load_folder(folder)


def test_an_item_kind_reads_cluster_and_a_text_only_one_must_name_a_field(tmp_path):
    from negharness.api import UserError

    [tot] = _yaml_task(tmp_path / "a", "sugarcrepepp_swap_obj_tot.yaml", "cluster: {field: filename, name: COCO image}\n")
    assert tot.cluster == "COCO image"
    with pytest.raises(UserError, match="key 'cluster': a text_only task scores no media"):
        _yaml_task(tmp_path / "b", "sugarcrepepp_swap_obj_tot.yaml", "cluster: media\n")
    [itt] = _yaml_task(tmp_path / "c", "sugarcrepepp_swap_obj_itt.yaml", "cluster: media\n")
    assert itt.cluster == "image"
