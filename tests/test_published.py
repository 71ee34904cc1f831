"""Published tables as data: every shipped table loads, matches the papers, and a run shows its difference."""

import csv
import types
from collections import defaultdict

import pytest
from conftest import SHARED

from negharness.records.published import (
    COLLECTIONS_FILE,
    CONTENT,
    Collection,
    collection_digest,
    collection_mismatch,
    ModelIdentity,
    PublishedTableError,
    collections_beside,
    compare,
    load_collections,
    load_table,
    published_notes,
    published_rows,
    registered_rows,
    table_rows,
)
from negharness.tasks import choice, negbench, nein, nt2vr

SHIPPED = (*nt2vr.PUBLISHED, *negbench.PUBLISHED, *nein.PUBLISHED, *choice.PUBLISHED)  # the built-in tasks' tables


def shipped_rows():
    return table_rows(SHIPPED)

REPO_MCQ = SHARED / "data" / "negbench" / "official_repo_results" / "mcq"
NT2VR_SEED = sorted((SHARED / "seeds").glob("000_*.txt"))
NEGBENCH_CSVS = SHARED / "data" / "negbench" / "negbench_eval_csvs"


def _seed_table(caption: str) -> dict[str, list[str]]:
    """Row label -> its printed cells, for the Markdown table under ``caption`` in the nT2VR seed,
    read line by line (so a last line without its newline counts). Header and rule lines carry no
    number and are left out."""
    lines = NT2VR_SEED[0].read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(caption))
    rows: dict[str, list[str]] = {}
    for line in lines[start + 1:]:
        if not line.strip():
            if rows:
                break
            continue
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if any(c.replace(".", "", 1).lstrip("-").isdigit() for c in cells[1:]):
            rows[cells[0]] = cells[1:]
    return rows


def _rows_per_table(paper: str) -> dict[str, int]:
    """Distinct paper rows per table, as a reader counts them in the paper."""
    seen: dict[str, set[str]] = defaultdict(set)
    for r in shipped_rows():
        if r.paper == paper:
            seen[r.table].add(r.row)
    return {t: len(rows) for t, rows in seen.items()}


def _value(paper, table, row, task, metric):
    found = [r for r in shipped_rows() if (r.paper, r.table, r.row, r.task, r.metric) == (paper, table, row, task, metric)]
    assert len(found) == 1, found
    return found[0].value


def test_every_shipped_table_loads():
    names = {p.name for p in SHIPPED}
    assert names == {"nt2vr_tables.csv", "official_mcq.csv", "negbench_paper.csv", "nein_table3.csv",
                     "tripletclip_sugarcrepe.csv"}
    assert all(load_table(p) for p in SHIPPED)


def test_nt2vr_tables_have_the_papers_rows_and_values():
    # Tables 2-4: 5 models, 5 boolean rows, CLIP-bnl; Tables 9 and 10: 5 rows each
    assert _rows_per_table("nT2VR") == {"Table 2": 11, "Table 3": 11, "Table 4": 11, "Table 9": 5, "Table 10": 5}
    assert _value("nT2VR", "Table 2", "CLIP [28]", "msrvtt3k_original", "MIR") == 0.309
    assert _value("nT2VR", "Table 2", "CLIP [28]", "msrvtt3k_negated", "ΔMIR") == 0.020
    assert _value("nT2VR", "Table 2", "CLIP-bnl (this paper)", "msrvtt3k_composed", "R@1") == 15.3
    assert _value("nT2VR", "Table 3", "SEA", "msrvtt1k_negated", "ΔMIR") == -0.007
    assert _value("nT2VR", "Table 3", "CLIP-bnl", "msrvtt1k_negated", "ΔR@10") == 14.4
    assert _value("nT2VR", "Table 4", "Boolean operation: CLIP4Clip", "vatex_composed", "MIR") == 0.171
    assert _value("nT2VR", "Table 9", "CLIP-bnl", "flickr30k_negated", "ΔR@1") == 18.5
    assert _value("nT2VR", "Table 10", "CLIP*(boolean)", "mscoco_negated", "ΔMIR") == 0.467
    # the boolean operation is not applicable to original queries: no published number there
    assert not [r for r in published_rows("msrvtt3k_original", shipped_rows()) if r.model.startswith("boolean")]
    original = published_rows("msrvtt3k_original", shipped_rows())
    assert len(original) == 24 and len({r.row for r in original}) == 6  # 6 rows x R@1, R@5, R@10, MIR


@pytest.mark.needs("seeds/000_86ebe5282b06d19f.txt")  # the nT2VR paper
@pytest.mark.parametrize("table,dataset", [("Table 9", "flickr30k"), ("Table 10", "mscoco")])
def test_image_tables_equal_the_seed_row_for_row(table, dataset):
    """Every row the seed prints under Tables 9 and 10 (its last line included), every number."""
    seed = _seed_table(f"{table}:")
    assert _rows_per_table("nT2VR")[table] == len(seed)
    columns = [("original", m) for m in ("R@1", "R@5", "R@10", "MIR")] + \
              [("negated", m) for m in ("ΔR@1", "ΔR@5", "ΔR@10", "ΔMIR")] + \
              [("composed", m) for m in ("R@1", "R@5", "R@10", "MIR")]
    for row, cells in seed.items():
        for (query_set, metric), printed in zip(columns, cells):
            task = f"{dataset}_{query_set}"
            found = [r for r in shipped_rows() if (r.table, r.row, r.task, r.metric) == (table, row, task, metric)]
            if printed == "-":
                assert found == [], (row, task, metric)
            else:
                assert [r.printed for r in found] == [printed], (row, task, metric)


def test_every_published_task_names_its_papers_collection():
    """Each task with a published row that a negharness model can match has the size of the collection
    the paper measured, with a source for every count."""
    collections = collections_beside(SHIPPED)
    matchable = {r.task for r in shipped_rows() if r.model}
    assert matchable <= set(collections), matchable - set(collections)
    assert all(c.sources[k] for c in collections.values() for k in c.counts)
    assert collections["msrvtt3k_original"].counts == {"videos": 2990, "queries": 59800}
    assert collections["msrvtt1k_composed"].counts == {"videos": 1000, "queries": 3697}
    assert collections["vatex_negated"].counts == {"videos": 1398, "negated_queries": 7339}
    assert collections["nein_val"].counts == {"samples": 35000}


@pytest.mark.needs("data/negbench/negbench_eval_csvs")
def test_negbench_collections_are_the_authors_files_as_the_tasks_count_them(tmp_path, monkeypatch):
    from negharness.tasks.negbench.catalog import MCQ, RETRIEVAL
    from negharness.tasks.negbench.data import find_csv, read_mcq, read_retrieval
    from negharness.tasks.negbench.tasks import mcq_digest, retrieval_digest

    monkeypatch.setenv("NEGHARNESS_ALLOW_LINKS_OUT", "1")  # the published files, linked into the data root
    (tmp_path / "negbench").symlink_to(NEGBENCH_CSVS.resolve())
    collections = collections_beside(negbench.PUBLISHED)
    for task, c in collections.items():
        if task in MCQ:
            name, kind, layout, _ = MCQ[task]
            rows = read_mcq(find_csv(tmp_path, name), tmp_path, layout)
            counted = {"questions": len(rows), f"{kind}s": len({r.media for r in rows})}
            digest = mcq_digest(rows)
        else:
            original, negated, kind, _ = RETRIEVAL[task]
            counted, both = {}, []
            for which, name in (("original", original), ("negated", negated)):
                rows = read_retrieval(find_csv(tmp_path, name), tmp_path, [])
                both.append(rows)
                counted[f"{which}_captions"] = sum(len(caps) for _, caps in rows)
                counted[f"{kind}s_{which}"] = len({m for m, _ in rows})
            digest = retrieval_digest(*both)
        assert c.counts == counted, task
        assert c.content == {CONTENT: digest}, task  # every NegBench collection is pinned by its content


def test_published_numbers_only_beside_the_papers_collection():
    """A run of a matching model on a 30-video stand-in gets no differences, and a note saying why."""
    model = types.SimpleNamespace(name="clip_bnl", describe=lambda: {"arch": "ViT-B-32", "weights": "x.pth"})
    measured = {"R@1": 20.0, "R@5": 40.0, "R@10": 50.0, "MIR": 0.3}
    stand_in = published_notes("msrvtt3k_original", model, measured, SHIPPED, {"queries": 600, "videos": 30})
    assert stand_in == {"published_not_shown": (
        "published numbers not shown: 30 videos measured, the paper's MSR-VTT3k test (nT2VR Table 1; 2,990 x 20 "
        "queries) has 2,990; 600 queries measured, the paper's MSR-VTT3k test (nT2VR Table 1) has 59,800")}
    full = published_notes("msrvtt3k_original", model, measured, SHIPPED, {"queries": 59800, "videos": 2990})
    assert {f["metric"]: round(f["diff"], 6) for f in full["published"]} == {
        "R@1": -8.4, "R@5": -13.7, "R@10": -14.6, "MIR": -0.104}  # Table 2, CLIP-bnl: 28.4 53.7 64.6 0.404
    uncounted = published_notes("msrvtt3k_original", model, measured, SHIPPED, {"videos": 2990})
    assert uncounted["published_not_shown"].endswith("the record gives no queries count, "
                                                     "the paper's MSR-VTT3k test (nT2VR Table 1) has 59,800")
    nobody = types.SimpleNamespace(name="shapes_clip", describe=lambda: {})
    assert published_notes("msrvtt3k_original", nobody, measured, SHIPPED, {"videos": 30}) == {}


def test_a_task_without_a_collection_line_shows_no_published_numbers(tmp_path):
    table = tmp_path / "published" / "mine.csv"
    table.parent.mkdir()
    table.write_text("paper,table,row,model,arch,pretrained,task,note,acc\nMine,T1,A,clip,,,my_task,,0.5\n")
    clip = types.SimpleNamespace(name="clip", describe=lambda: {})
    why = published_notes("my_task", clip, {"acc": 0.7}, [table], {"questions": 10})["published_not_shown"]
    assert "collection the paper measured my_task on is not recorded" in why
    (table.parent / COLLECTIONS_FILE).write_text("task,count,value,source\nmy_task,questions,10,Mine's test set\n")
    assert load_collections(table.parent / COLLECTIONS_FILE)["my_task"].counts == {"questions": 10}


@pytest.mark.parametrize("body,message", [
    ("task,count,value\nt,n,1\n", r"collections\.csv:1: the header must be task,count,value,source"),
    ("task,count,value,source\nt,n,1.5,s\n", r"collections\.csv:2: n = '1\.5' is not a whole number"),
    ("task,count,value,source\nt,n,1,s\nt,n,2,s\n", r"collections\.csv:3: t n given twice"),
    ("task,count,value,source\nt,n,1\n", r"collections\.csv:2: 3 cells, the header has 4"),
])
def test_a_bad_collections_file_names_file_and_line(tmp_path, body, message):
    path = tmp_path / "collections.csv"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(PublishedTableError, match=message):
        load_collections(path)


def test_negbench_paper_and_nein_rows():
    assert _rows_per_table("NegBench paper") == {"Table 1 (COCO)": 8, "Table 1 (MSR-VTT)": 8,
                                                 "Section 4 text (Figure 3a)": 3, "Section 4 text (Figure 3b)": 2,
                                                 "Section 5 alpha ablation": 5}
    assert _value("NegBench paper", "Table 1 (COCO)", "NegCLIP / None", "negbench_retrieval_coco", "R-Neg@5") == 64.4
    assert _value("NegBench paper", "Table 1 (MSR-VTT)", "CLIP / CC12M-NegFull", "negbench_mcq_msrvtt", "accuracy_authors_rule") == 35.6
    assert _value("NegBench paper", "Section 4 text (Figure 3b)", "NegCLIP", "negbench_retrieval_hardneg_syn",
                  "drop_R@5") == 23.0
    assert _rows_per_table("NeIn") == {"Table 3": 5}
    assert _value("NeIn", "Table 3", "MagicBrush (NeurIPS’23) [29]", "nein_val", "Retention") == 89.79
    assert _value("NeIn", "Table 3", "MagicBrush (NeurIPS’23) [29]", "nein_val", "L1") == pytest.approx(0.0932)
    l1 = next(r for r in published_rows("nein_val", shipped_rows()) if r.row.startswith("HQ-Edit") and r.metric == "L1")
    assert l1.printed == "23.54" and l1.value == pytest.approx(0.2354)


@pytest.mark.needs("data/negbench/official_repo_results/mcq")
def test_official_repo_tables_are_complete_and_exact():
    """Every number of every CSV in the authors' results/mcq/ is shipped, times 100, nothing else."""
    shipped = {(r.table, r.row, r.task, r.metric): r.value for r in shipped_rows() if r.paper == "NegBench repo"}
    expected = {}
    for path in sorted(REPO_MCQ.glob("*.csv")):
        for row in csv.DictReader(path.open()):
            for col, value in row.items():
                if col == "Model":
                    continue
                dataset, rest = col.split(" ", 1)
                # the authors' argmax (a tie to the first option): their numbers are the _authors_rule metrics
                metric = "accuracy_authors_rule" if "Total" in rest else f"acc_{rest.split()[0].lower()}_authors_rule"
                task = {"COCO": "negbench_mcq_coco", "VOC2007": "negbench_mcq_voc2007"}[dataset]
                expected[(f"results/mcq/{path.name}", row["Model"], task, metric)] = float(value) * 100
    assert shipped.keys() == expected.keys()
    assert all(shipped[k] == pytest.approx(v, rel=1e-12) for k, v in expected.items())
    assert _rows_per_table("NegBench repo")["results/mcq/3_finetuned_total.csv"] == 4


def test_every_row_names_a_task_and_a_metric_that_task_emits():
    from negharness.discovery.manager import make_host

    registry = make_host().registry
    for task, metrics in {(r.task, r.metric) for r in shipped_rows()}:
        entry = registry.get("task", task)
        assert metrics in entry.load().metric_info, (task, metrics)


def test_a_matching_record_shows_its_difference():
    """A fake clip/openai run on MSR-VTT3k negated queries, differences worked out by hand."""
    model = types.SimpleNamespace(name="clip", describe=lambda: {"arch": "ViT-B-32", "weights": "openai"})
    measured = {"ΔR@1": 2.0, "ΔR@5": 2.5, "ΔR@10": 1.9, "ΔMIR": 0.025, "neg_R@1": 19.0}
    paper = {"negated_queries": 59668, "videos": 2990}  # nT2VR Table 1, MSR-VTT3k
    found = published_notes("msrvtt3k_negated", model, measured, SHIPPED, paper)["published"]
    by = {f["metric"]: f for f in found}
    assert set(by) == {"ΔR@1", "ΔR@5", "ΔR@10", "ΔMIR"}  # Table 2, row CLIP: 1.5 2.5 2.9 0.020
    assert by["ΔR@1"]["diff"] == pytest.approx(0.5) and by["ΔR@5"]["diff"] == pytest.approx(0.0)
    assert by["ΔR@10"]["diff"] == pytest.approx(-1.0) and by["ΔMIR"]["diff"] == pytest.approx(0.005)
    assert by["ΔR@1"]["published"] == 1.5 and by["ΔR@1"]["measured"] == 2.0
    assert by["ΔMIR"]["source"] == "nT2VR, Table 2, row 'CLIP [28]'"
    # the boolean wrapper around the same CLIP is a different row; another architecture matches none
    boolean = types.SimpleNamespace(name="boolean(clip)", describe=model.describe)
    assert {f["published"] for f in compare("msrvtt3k_negated", ModelIdentity.of(boolean), measured, shipped_rows())} == {
        18.8, 37.5, 46.2, 0.278}
    vit_l = ModelIdentity("clip", "ViT-L-14", "openai")
    assert compare("msrvtt3k_negated", vit_l, measured, shipped_rows()) == []


def test_either_tag_and_editor_source_match():
    laion = ModelIdentity("clip", "ViT-B-32", "laion400m_e31")
    rows = {f["source"] for f in compare("negbench_mcq_coco", laion, {"accuracy_authors_rule": 30.0}, shipped_rows())}
    assert "NegBench repo, results/mcq/1_baseline_total.csv, row 'CLIP-Laion400M'" in rows
    assert "NegBench repo, results/mcq/2_scaling_clip_total.csv, row 'CLIP-Laion400M-Base'" in rows
    editor = types.SimpleNamespace(name="instruct_pix2pix",
                                   describe=lambda: {"name": "instruct_pix2pix", "source": "vinesmsuic/magicbrush-jul7"})
    found = {f["metric"]: f for f in published_notes("nein_val", editor, {"Removal": 20.0, "L1": 0.1}, SHIPPED,
                                                           {"samples": 35000})["published"]}
    assert found["Removal"]["diff"] == pytest.approx(20.0 - 14.96)
    assert found["L1"]["diff"] == pytest.approx(0.1 - 0.0932)


GOOD_HEADER = "paper,table,row,model,arch,pretrained,task,note,R@1,MIR*1\n"


@pytest.mark.parametrize("body,message", [
    (GOOD_HEADER + "P,T,r,clip,,,t,,12.5,abc\n", r"bad\.csv:2: MIR\*1 = 'abc' is not a number"),
    ("# comment\n" + GOOD_HEADER + "P,T,r,clip,,,t,,12.5\n", r"bad\.csv:3: 9 cells, the header has 10"),
    (GOOD_HEADER + "P,T,r,clip,,,t,,-,-\n", r"bad\.csv:2: no value on this line"),
    (GOOD_HEADER + "P,,r,clip,,,t,,1,2\n", r"bad\.csv:2: empty 'table'"),
    ("paper,table,row,model,R@1\nP,T,r,m,1\n", r"bad\.csv:1: header lacks column\(s\) task"),
    ("paper,table,row,task,R@1*x\nP,T,r,t,1\n", r"bad\.csv:1: column 'R@1\*x' is not a metric name"),
    ("", r"bad\.csv: empty table"),
])
def test_a_bad_table_names_file_and_line(tmp_path, body, message):
    path = tmp_path / "bad.csv"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(PublishedTableError, match=message):
        load_table(path)


def test_scaled_columns_convert_to_task_units(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("paper,table,row,task,acc*100,L1/100\nP,T,r,t,0.25,12.5\n", encoding="utf-8")
    rows = {r.metric: r for r in load_table(path)}
    assert rows["acc"].value == pytest.approx(25.0) and rows["L1"].value == pytest.approx(0.125)
    assert rows["acc"].printed == "0.25" and rows["acc"].line == 2 and rows["acc"].model == ""
    assert published_rows("t", load_table(path)) == list(load_table(path))


def test_nt2vr_task_adds_published_notes(tmp_path, monkeypatch):
    """The call site: an nT2VR task's result carries the comparison under notes['published']."""
    from negharness.api import TaskOptions, TaskResult
    from negharness.tasks.nt2vr.tasks import TASKS

    task = TASKS["msrvtt1k_composed"](TaskOptions(data_root=tmp_path))
    counts = {"queries": 3697, "videos": 1000}  # nT2VR Table 1, MSR-VTT1k composed
    monkeypatch.setattr(task, "_score", lambda ctx: TaskResult({"R@1": 13.9, "MIR": 0.2}, dict(counts)))
    ctx = types.SimpleNamespace(model=types.SimpleNamespace(
        name="clip", describe=lambda: {"arch": "ViT-B-32", "weights": "openai"}))
    notes = task.evaluate(ctx).notes["published"]
    assert {(n["metric"], round(n["diff"], 6)) for n in notes} == {("R@1", 1.0), ("MIR", -0.037)}  # Table 3: 12.9, 0.237
    counts["videos"] = 30  # a stand-in: the record says why it has no differences
    notes = task.evaluate(ctx).notes
    assert "published" not in notes and notes["published_not_shown"] == (
        "published numbers not shown: 30 videos measured, the paper's MSR-VTT1k test (nT2VR Table 1) has 1,000")


def test_the_leaderboard_finds_a_tasks_tables_through_its_registration(tmp_path):
    """Published rows come from the files a task names when it registers, for built-in and
    third-party tasks alike; a task that names none has none."""
    from negharness.discovery.manager import make_host
    from negharness.discovery.registry import Registry

    installed = make_host().registry
    assert len(registered_rows("msrvtt3k_original", installed)) == 24
    assert registered_rows("shapes_mcq", installed) == [] and registered_rows("no_such_task", installed) == []
    table = tmp_path / "published" / "mine.csv"
    table.parent.mkdir()
    table.write_text("paper,table,row,model,arch,pretrained,task,note,acc\nMine,T1,A,clip,,,my_task,,0.5\n")
    registry = Registry()
    registry.add("task", "my_task", "mine:Task", "", "third_party", published=(table,))
    assert [(r.row, r.value) for r in registered_rows("my_task", registry)] == [("A", 0.5)]


def test_a_collection_with_the_papers_counts_but_other_content_shows_no_published_numbers():
    """Issue 32 (8): counts alone took a CSV with one caption changed for the paper's file. With a
    content digest on the collections line, equal counts with other content show nothing, and say why."""
    rows = [["img1.jpg", ["a dog", "no dog"], 0, "positive"], ["img2.jpg", ["a cat", "no cat"], 0, "negative"]]
    paper = Collection("t", {"questions": 2}, {"questions": "the paper's file", CONTENT: "the paper's file"},
                       {CONTENT: collection_digest(rows)})
    assert collection_mismatch("t", {"questions": 2}, paper, collection_digest(rows)) is None
    edited = [rows[0], ["img2.jpg", ["a cat", "not a cat"], 0, "negative"]]
    why = collection_mismatch("t", {"questions": 2}, paper, collection_digest(edited))
    assert why and "is not the paper's file" in why
    assert "gave no content digest" in collection_mismatch("t", {"questions": 2}, paper, None)
    moved = [["elsewhere/img1.jpg", *rows[0][1:]], rows[1]]  # a digest is of what the task reads, as given
    assert collection_digest(moved) != collection_digest(rows)


def test_negbench_mcq_published_numbers_are_the_authors_argmax_rule():
    """Issue 32 (8): the authors' MCQ numbers are plain argmax with ties to the first option, so they are
    compared with accuracy_authors_rule (and acc_<t>_authors_rule), never with the tie-safe accuracy."""
    mcq = [r for r in shipped_rows() if r.task.startswith("negbench_mcq")]
    assert mcq and all(r.metric.endswith("_authors_rule") for r in mcq if "acc" in r.metric)
    model = types.SimpleNamespace(name="clip", describe=lambda: {"arch": "ViT-B-32", "weights": "openai"})
    collection = collections_beside(negbench.PUBLISHED)["negbench_mcq_coco"]
    measured = {"accuracy": 10.0, "accuracy_authors_rule": 40.0, "acc_positive_authors_rule": 70.0}
    notes = published_notes("negbench_mcq_coco", model, measured, negbench.PUBLISHED, collection.counts,
                            collection.content[CONTENT])
    by = {(f["metric"], f["source"]): f["diff"] for f in notes["published"]}
    assert by[("accuracy_authors_rule", "NegBench repo, results/mcq/1_baseline_total.csv, row 'CLIP-OpenAI'")] == \
        pytest.approx(40.0 - 39.296584376056815)
    assert {m for m, _ in by} <= {"accuracy_authors_rule", "acc_positive_authors_rule"}
    other = published_notes("negbench_mcq_coco", model, measured, negbench.PUBLISHED, collection.counts, "0" * 64)
    assert "published" not in other and "is not the authors' COCO_val_mcq" in other["published_not_shown"]


SUGARCREPE = SHARED / "data" / "sugarcrepe"
SUGARCREPE_SPLITS = ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")


def _builtin_choice() -> dict:
    from importlib.resources import files
    from pathlib import Path

    from negharness.declarative.register import load_folder
    from negharness.tasks.builtin import GENERATORS

    return {c.name: c for c in load_folder(Path(str(files("negharness.tasks.choice"))), GENERATORS)}


def test_tripletclip_sugarcrepe_table_is_its_readme_table():
    """TripletCLIP's src/openclip/README.md "Results", per split in its column order; only its own row has
    a negharness counterpart (the CLIP and NegCLIP rows are baselines re-trained on its 1M pairs)."""
    printed = {"CLIP": "54.77 56.93 62.81 61.22 56.33 53.6 50.61",
               "NegCLIP": "64.88 57.17 70.55 65.92 68.136 56.756 57.142",
               "TripletCLIP": "67.196 64.646 75.127 73.184 70.55 60.06 60.408"}
    rows = table_rows(choice.PUBLISHED)
    for row, cells in printed.items():
        got = {r.task: r.printed for r in rows if r.row == row}
        assert got == {f"sugarcrepe_{s}": c for s, c in zip(SUGARCREPE_SPLITS, cells.split())}, row
    assert {(r.model, r.arch) for r in rows if r.model} == {("tripletclip", "ViT-B-32")}
    assert {r.metric for r in rows} == {"accuracy"} and all(not r.pretrained for r in rows)
    classes = _builtin_choice()
    assert all(classes[f"sugarcrepe_{s}"].spec["published"] == tuple(map(str, choice.PUBLISHED))
               for s in SUGARCREPE_SPLITS)
    assert not classes["aro_vg_relation"].spec["published"]


@pytest.mark.needs("data/sugarcrepe/swap_obj.json")
def test_sugarcrepe_collections_are_the_authors_files_as_the_tasks_read_them(tmp_path, monkeypatch):
    from negharness.api import TaskOptions

    monkeypatch.setenv("NEGHARNESS_ALLOW_LINKS_OUT", "1")
    (tmp_path / "sugarcrepe").symlink_to(SUGARCREPE.resolve())
    collections, classes = collections_beside(choice.PUBLISHED), _builtin_choice()
    assert {t for t in collections if t.startswith("sugarcrepe_")} == {f"sugarcrepe_{s}" for s in SUGARCREPE_SPLITS}
    for name in (f"sugarcrepe_{s}" for s in SUGARCREPE_SPLITS):
        c = collections[name]
        task = classes[name](TaskOptions(tmp_path))
        assert c.counts == {"rows": len(task.rows)}, name
        assert c.content == {CONTENT: task.content_digest(task.rows)}, name


@pytest.mark.needs("data/sugarcrepe/swap_obj.json")
def test_tripletclip_numbers_shown_on_the_papers_sugarcrepe_file_only(tmp_path, monkeypatch):
    """A tripletclip ViT-B-32 run on SugarCrepe's swap_obj.json gets the difference to the published 60.408;
    a copy with one negative caption changed (same counts) gets none, and says why; negclip matches no row."""
    import json

    from choice_helpers import TableModel, evaluate, write_image

    class Triplet(TableModel):
        name = "tripletclip"

        def describe(self):
            return {"arch": "ViT-B-32", "weights": "abc"}

    data = json.loads((SUGARCREPE / "swap_obj.json").read_text(encoding="utf-8"))
    for root in (tmp_path / "paper", tmp_path / "edited"):
        for item in data.values():
            if not (root / "coco/val2017" / item["filename"]).exists():
                write_image(root / "coco/val2017" / item["filename"], "red", size=8)
    monkeypatch.setenv("NEGHARNESS_ALLOW_LINKS_OUT", "1")
    (tmp_path / "paper/sugarcrepe").symlink_to(SUGARCREPE.resolve())
    edited = dict(data)
    first = next(iter(edited))
    edited[first] = {**edited[first], "negative_caption": edited[first]["negative_caption"] + " again"}
    (tmp_path / "edited/sugarcrepe").mkdir()
    (tmp_path / "edited/sugarcrepe/swap_obj.json").write_text(json.dumps(edited))
    table = {item["caption"]: {"red": 0.5} for item in data.values()}
    task = _builtin_choice()["sugarcrepe_swap_obj"]
    res = evaluate(task, tmp_path / "paper", Triplet(table))
    [shown] = res.notes["published"]
    assert shown["published"] == pytest.approx(60.408) and shown["measured"] == res.metrics["accuracy"]
    assert shown["diff"] == pytest.approx(res.metrics["accuracy"] - 60.408)
    assert "TripletCLIP" in shown["source"]
    other = evaluate(task, tmp_path / "edited", Triplet(table))
    assert "published" not in other.notes and "sha256" in other.notes["published_not_shown"]
    negclip = type("NegCLIPish", (Triplet,), {"name": "negclip"})
    assert not {"published", "published_not_shown"} & set(evaluate(task, tmp_path / "paper", negclip(table)).notes)


@pytest.mark.parametrize("value, message", [
    ("../elsewhere.csv", "key 'published'.*leaves the task's folder"),
    ("published/absent.csv", "key 'published'.*no such file beside the task"),
    ("published/bad.csv", r"bad\.csv:2: 2 cells, the header has 9"),
])
def test_a_yaml_tasks_published_key_is_checked_before_any_model_loads(tmp_path, value, message):
    from negharness.api import UserError
    from negharness.declarative.spec import parse_spec

    (tmp_path / "published").mkdir()
    (tmp_path / "published/bad.csv").write_text("paper,table,row,model,arch,pretrained,task,note,accuracy\nP,T\n")
    spec = {"name": "t", "kind": "choice", "family": "f", "description": "d", "citation": "c", "data_help": "h",
            "data": {"file": "t.json"}, "media": {"path": "{filename}"},
            "captions": {"true": "caption", "false": "negative"}, "main_score": "accuracy", "published": value}
    with pytest.raises(UserError, match=message):
        parse_spec(spec, str(tmp_path / "t.yaml"))


GROUP_TASK = """\
name: pairs
kind: group
family: mine
description: "two images x two captions per line"
citation: "none"
data_help: "none"
data:
  file: g/pairs.jsonl
media:
  members: ["g/{a}.jpg", "g/{b}.jpg"]
captions:
  members: [ca, cb]
main_score: group_score
published: published/paper.csv
"""


def test_an_item_kinds_published_row_shows_on_the_papers_file_hash_only(tmp_path):
    """Issue 34 (5): group, multi_choice and image_choice tasks take `published:` too; their collection
    is the data file's sha256 (what `sha256sum` prints for the paper's file). A copy with the same rows
    and one caption changed shows none of the paper's numbers, and says why."""
    import hashlib
    import json

    from choice_helpers import TableModel, evaluate, write_image

    from negharness.declarative.register import load_folder

    lines = [{"a": "red", "b": "blue", "ca": "a red thing", "cb": "a blue thing"}] * 3
    for name, edit in (("paper", {}), ("edited", {"cb": "a blue thing again"})):
        write_image(tmp_path / name / "g/red.jpg", "red")
        write_image(tmp_path / name / "g/blue.jpg", "blue")
        (tmp_path / name / "g/pairs.jsonl").write_text("".join(json.dumps({**r, **edit}) + "\n" for r in lines))
    digest = hashlib.sha256((tmp_path / "paper/g/pairs.jsonl").read_bytes()).hexdigest()
    (tmp_path / "yaml/published").mkdir(parents=True)
    (tmp_path / "yaml/pairs.yaml").write_text(GROUP_TASK)
    (tmp_path / "yaml/published/paper.csv").write_text(
        "paper,table,row,model,arch,pretrained,task,note,group_score,text_score\n"
        "P,Table 1,Ours,table,table,,pairs,,90.0,95.5\n")
    (tmp_path / "yaml/published/collections.csv").write_text(
        f"task,count,value,source\npairs,rows,3,P's pairs.jsonl\npairs,content_sha256,{digest},P's pairs.jsonl\n")
    [task] = load_folder(tmp_path / "yaml")
    table = {"a red thing": {"red": 0.9}, "a blue thing": {"blue": 0.9}, "a blue thing again": {"blue": 0.9}}
    res = evaluate(task, tmp_path / "paper", TableModel(table))
    assert res.metrics["group_score"] == 100.0
    shown = {s["metric"]: s for s in res.notes["published"]}
    assert shown["group_score"]["diff"] == pytest.approx(10.0) and shown["text_score"]["published"] == 95.5
    assert shown["group_score"]["source"] == "P, Table 1, row 'Ours'"
    other = evaluate(task, tmp_path / "edited", TableModel(table))
    assert other.metrics == res.metrics and "published" not in other.notes
    assert f"(sha256 {digest[:12]}...)" in other.notes["published_not_shown"]


def test_every_collection_line_names_a_builtin_task():
    """A typo in collections.csv would leave a task's published numbers never shown (or another's shown)."""
    assert set(collections_beside(choice.PUBLISHED)) <= set(_builtin_choice())
