"""FIRE: extra relevance judgements beside the original metrics, and the subsample bootstrap."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from negharness.api import UserError
from negharness.records.results import record_files
from negharness.scoring.fire import (
    augment,
    check_sizes,
    detectable_differences,
    read_qrels,
    subsample_deltas,
)
from negharness.scoring.metrics import Relevance


def test_qrels_formats_and_augmented_relevance(tmp_path):
    path = tmp_path / "q.txt"
    path.write_text("\ufeff# comment\nq1\tv2\t1\nq1 0 v3 2\nq2 v1 0\n\nq9 v1 1\n")
    qrels = read_qrels(path)
    assert qrels.positives == {"q1": {"v2", "v3"}, "q9": {"v1"}} and qrels.n_lines == 4
    base = Relevance.from_lists([[0], [1]], 4)
    aug, counts = augment(base, ["q1", "q2"], ["v0", "v1", "v2", "v3"], qrels)
    assert aug.indices[aug.indptr[0]:aug.indptr[1]].tolist() == [0, 2, 3]
    assert aug.indices[aug.indptr[1]:aug.indptr[2]].tolist() == [1]  # judged 0 never removes a positive
    assert counts["qrels_positives_added"] == 2 and counts["qrels_queries_unknown"] == 1


def test_bad_qrels_lines_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("q1 v1 1\nq2 v2\n")
    with pytest.raises(UserError, match=r"bad.txt:2: expected 'query_id item_id relevance'"):
        read_qrels(bad)
    bad.write_text("q1 v1 yes\n")
    with pytest.raises(UserError, match=r"bad.txt:1: relevance 'yes'"):
        read_qrels(bad)
    bad.write_text("q1 v1 nan\n")
    with pytest.raises(UserError, match=r"bad.txt:1: relevance 'nan' is not a finite number"):
        read_qrels(bad)
    bad.write_text("q1 v1 1\nq2 v1 0\nq1 v1 2\nq1 0 v1 0\n")  # the same judgement twice is fine; opposite ones are not
    with pytest.raises(UserError, match=r"bad.txt:4: q1 v1 judged not relevant here and relevant at line 1"):
        read_qrels(bad)
    unknown = tmp_path / "u.txt"
    unknown.write_text("q1 v7 1\n")
    with pytest.raises(UserError, match="not in the collection"):
        augment(Relevance.from_lists([[0]], 2), ["q1"], ["v0", "v1"], read_qrels(unknown))


def test_fire_metrics_by_hand(tmp_path):
    """Two queries over three items. q0's source v0 ranks 2nd (v1 first); q1's source v2 ranks 1st.
    Judging v1 relevant to q0 makes q0 a hit at 1: C@1 50 -> 100, MIR 0.75 -> 1."""
    from negharness.io.media import MediaSet
    from negharness.scoring.retrieval import QuerySet, _add_fire

    sim = torch.tensor([[0.5, 0.9, 0.1], [0.2, 0.3, 0.8]])
    qs = QuerySet(["q0", "q1"], ["a", "b"], Relevance.from_lists([[0], [2]], 3))
    media = MediaSet("m", "image", ["v0", "v1", "v2"], lambda i: None)
    path = tmp_path / "q.txt"
    path.write_text("q0 v1 1\n")
    metrics, notes = {"MIR": 0.75}, {}
    _add_fire(metrics, notes, sim, qs, media, read_qrels(path), False)
    assert metrics["fire_C@1"] == 100.0 and metrics["fire_MIR"] == 1.0
    # AP of q0 with relevant {v0 (rank 2), v1 (rank 1)}: (1/1 + 2/2) / 2 = 1; q1: 1
    assert metrics["fire_mAP"] == pytest.approx(1.0)
    assert notes["fire"]["table"]["C@1"] == "100 (50 + 50)"


def test_subsample_deltas_match_an_independent_loop():
    values = np.array([0.0, 100.0, 100.0, 0.0, 100.0])
    got = subsample_deltas(values, 3, resamples=200, seed=7)
    rng = np.random.default_rng(7)
    draws = rng.integers(0, 5, size=(200, 3))
    want = np.array([abs(values[d].mean() - values.mean()) for d in draws])
    assert np.allclose(got, want)
    table, _ = detectable_differences([{"rank": r} for r in (2, 1, 1, 2, 1)], [3], resamples=200, seed=7)
    assert table["C@1"][3] == pytest.approx(np.quantile(want, 0.95))


def test_qrels_option_on_a_world_task_and_fire_command(cli, tmp_path):
    """End to end: a judgement file on shapes_t2i_original gives fire_* beside the originals, and
    `negharness fire` prints the table and writes the plot."""
    ids = [f"image{i:05d}" for i in range(20)]
    qrels = tmp_path / "judged.txt"
    qrels.write_text("".join(f"{i}#enc#0 {ids[(k + 1) % 20]} 1\n" for k, i in enumerate(ids)))
    ran = cli("run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "--limit", "20", "-T", f"qrels={qrels}")
    assert ran.returncode == 0, ran.stderr
    rec = json.loads(next(p for p in record_files(tmp_path / "results") if p.name.startswith("shapes_t2i_original")).read_text())
    assert rec["metrics"]["fire_C@1"] >= rec["metrics"]["R@1"]  # positives only added: hits never lost
    assert rec["metrics"]["fire_MIR"] >= rec["metrics"]["MIR"]
    assert rec["notes"]["fire"]["qrels_positives_added"] > 0
    fire = cli("fire", "--model", "shapes_clip", "--task", "shapes_t2i_original", "-T", "n_items=60",
               "--sizes", "10,30", "--resamples", "500", "--out", str(tmp_path / "fire.svg"))
    assert fire.returncode == 0, fire.stderr
    assert "N=10" in fire.stdout and "MIR" in fire.stdout and "mAP" in fire.stdout
    assert (tmp_path / "fire.svg").stat().st_size > 1000
    big = cli("fire", "--model", "shapes_clip", "--task", "shapes_t2i_original", "-T", "n_items=60",
              "--sizes", "10,181", "--resamples", "50", "--out", str(tmp_path / "big.svg"))
    # 60 images, 3 captions each: 180 queries
    assert big.returncode != 0 and "--sizes 181: task shapes_t2i_original has only 180 queries" in big.stderr
    assert len(big.stderr.strip().splitlines()) == 1 and not (tmp_path / "big.svg").exists()


def _fire_ap(scores: list[float], relevant: set[int]) -> float:
    """FIRE's Eq. 2 written out: walk the ranked list, average precision@i at each relevant video
    (ties broken against the relevant ones, as the harness ranks pessimistically)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i in relevant))
    hits, total = 0, 0.0
    for position, item in enumerate(order, 1):
        if item in relevant:
            hits += 1
            total += hits / position
    return total / len(relevant)


def test_fire_average_precision_per_query_against_eq2(tmp_path):
    """q0 ranks v1, v3, v0, v2; its source v0 is 3rd and the judged v2 4th: AP (1/3 + 2/4) / 2.
    q1's source v3 is 2nd (AP 1/2), the judged v0 1st: AP (1/1 + 2/2) / 2 = 1."""
    from negharness.io.media import MediaSet
    from negharness.scoring.retrieval import QuerySet, _add_fire

    rows = [[0.5, 0.9, 0.1, 0.7], [0.8, 0.2, 0.3, 0.6]]
    qs = QuerySet(["q0", "q1"], ["a", "b"], Relevance.from_lists([[0], [3]], 4))
    media = MediaSet("m", "image", ["v0", "v1", "v2", "v3"], lambda i: None)
    path = tmp_path / "q.txt"
    path.write_text("q0 v2 1\nq1 v0 1\n")
    metrics, notes = {"MIR": 0.0}, {}
    ranks, ap = _add_fire(metrics, notes, torch.tensor(rows), qs, media, read_qrels(path), False)
    want = [_fire_ap(rows[0], {0, 2}), _fire_ap(rows[1], {3, 0})]
    assert want == pytest.approx([(1 / 3 + 2 / 4) / 2, 1.0])
    assert ap.tolist() == pytest.approx(want) and ranks.tolist() == [3, 1]
    assert metrics["fire_mAP"] == pytest.approx(sum(want) / 2)
    table, _ = detectable_differences([{"rank": 3, "ap": want[0]}, {"rank": 1, "ap": want[1]}], [2],
                                      resamples=100, seed=3)
    draws = np.random.default_rng(3).integers(0, 2, size=(100, 2))
    deltas = np.abs(np.array(want)[draws].mean(1) - np.mean(want))
    assert table["mAP"][2] == pytest.approx(np.quantile(deltas, 0.95))


def test_sizes_above_the_query_count_are_refused():
    check_sizes([10, 60], 60, "t")
    with pytest.raises(UserError, match=r"^--sizes 61,500: task t has only 60 queries \(give N of at most 60\)$"):
        check_sizes([10, 61, 500], 60, "t")


def test_an_edited_qrels_file_reruns_and_says_which(tmp_path):
    """The -T qrels file is data the fire_* numbers rest on: its content enters the record's data
    hashes (it was named in the config only, so an edit reran nothing: stale C@1 33.3 for 100.0)."""
    from negharness.discovery.manager import make_host
    from negharness.engine.evaluate import RunRequest, evaluate_request

    ids = [f"image{i:05d}" for i in range(6)]
    qrels = tmp_path / "judged.txt"
    qrels.write_text("".join(f"{i}#enc#0 {ids[(k + 1) % 6]} 1\n" for k, i in enumerate(ids)))
    req = RunRequest(model="shapes_clip", tasks=["shapes_t2i_original"], limit=6, task_extra={"qrels": str(qrels)},
                     output_dir=str(tmp_path / "res"), cache_dir=str(tmp_path / "cache"))
    first = evaluate_request(make_host(), req)[0]
    assert str(qrels) in first.record["data"]["files"]
    assert evaluate_request(make_host(), req)[0].skipped
    qrels.write_text("".join(f"{i}#enc#0 {j} 1\n" for i in ids for j in ids))  # every image relevant
    again = evaluate_request(make_host(), req)[0]
    assert not again.skipped and again.reason == f"data file {qrels} changed"
    added = [r["notes"]["fire"]["qrels_positives_added"] for r in (first.record, again.record)]
    assert added[1] > added[0]


def test_default_sizes_keep_what_the_task_can_supply_and_name_the_rest():
    from negharness.scoring.fire import default_sizes

    assert default_sizes(5000) == ([500, 1000, 3000], None)
    kept, note = default_sizes(1500)
    assert kept == [500, 1000] and note == "N=3000 left out: the task has 1500 queries; resampling N=500,1000"
    assert default_sizes(180)[0] == [45, 90, 180] and default_sizes(1)[0] == [1]


@pytest.mark.heavy
def test_fire_with_its_defaults_runs_on_a_bundled_task(cli, tmp_path):
    """Issue 46: `fire` with its defaults stopped on every bundled task ("--sizes 3000: task
    shapes_t2v_original has only 1500 queries"); the sizes it cannot draw are now named and left out
    (the rule itself: `test_default_sizes_keep_what_the_task_can_supply_and_name_the_rest`)."""
    out = tmp_path / "fire.svg"
    res = cli("fire", "--model", "shapes_clip", "--task", "shapes_t2v_original", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "N=3000 left out: the task has 1500 queries" in res.stdout
    assert "N=500" in res.stdout and "N=1000" in res.stdout and out.stat().st_size > 1000


# data of one task of each kind, written under tmp_path; returns the `fire` arguments that reach it --------
NEGBENCH = {"a.jpg": (["a red car", "red paint"], ["a red car and no blue", "blue is not here"]),
            "b.jpg": (["a blue sky"], ["a blue sky with no red"]),
            "c.jpg": (["green grass"], ["no red or blue, just green"])}  # image: (original, negated captions)
NEGBENCH_FILES = ("COCO_val_retrieval.csv", "COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv")


def _negbench(root, rows=NEGBENCH):
    """negbench_retrieval_coco's two CSVs (the authors' columns) and its solid-colour images."""
    import csv

    from test_negbench import _write_images

    _write_images(root, dict(zip(rows, ("red", "blue", "green"))))
    (root / "negbench").mkdir(parents=True, exist_ok=True)
    for which, name in enumerate(NEGBENCH_FILES):
        with open(root / "negbench" / name, "w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["positive_objects", "negative_objects", "filepath", "image_id", "captions"])
            out.writerows(["[]", "[]", f"data/coco/images/val2017/{f}", i, repr(caps[which])]
                          for i, (f, caps) in enumerate(rows.items()))


def _yaml_retrieval(tmp_path):
    """A user's YAML retrieval task (the declarative CLI test's) whose first row has two captions; its folder."""
    from test_declarative_cli import RETRIEVAL, ROWS, _data

    _data(tmp_path / "data", [{**ROWS[0], "caption": ["a red photo", "red"]}, *ROWS[1:]])
    (tmp_path / "yaml").mkdir()
    (tmp_path / "yaml/retrieval.yml").write_text(RETRIEVAL)
    return tmp_path / "yaml"


def _no_data(tmp_path):
    return []


def _negbench_data(tmp_path):
    _negbench(tmp_path / "data")
    return ["--data-root", str(tmp_path / "data")]


def _yaml_data(tmp_path):
    return ["--include-path", str(_yaml_retrieval(tmp_path)), "--data-root", str(tmp_path / "data")]


def _mrmr_data(tmp_path):
    from test_item_kinds import _mrmr

    _mrmr(tmp_path / "data", 6)
    return ["--data-root", str(tmp_path / "data")]


@pytest.mark.parametrize("task, count, data", [
    ("shapes_t2i_original", 1500, _no_data), ("shapes_t2v_composed", 288, _no_data),
    ("negbench_retrieval_coco", 4, _negbench_data), ("my_colour_retrieval", 4, _yaml_data),
    ("mrmr_negation", 6, _mrmr_data)])
def test_sizes_the_task_cannot_supply_are_refused_before_torch(task, count, data, tmp_path):
    """Issue 53 item 5: `fire --sizes 3000` ran the whole evaluation (torch, the model, every embedding)
    before it counted the queries; the task says how many it scores (`Task.query_count`) when planned.
    NegBench's Retrieval-Neg and qrels tasks said nothing (refused after torch), a user's YAML task could
    not be named (`fire` had no --include-path)."""
    from test_cli_imports import TORCH_LINE, console_script, said

    done = console_script(["fire", "--model", "shapes_clip", "--task", task, "--sizes", "2,3000", *data(tmp_path)],
                          tmp_path)
    lines = said(done.stderr)
    assert done.returncode == 2 and lines == [f"error: --sizes 3000: task {task} has only {count} queries (give N "
                                              f"of at most {count})"], done.stderr[-2000:]
    assert not TORCH_LINE.search(done.stderr), "torch was imported before --sizes was refused"


def _counted(host, model, task, tmp_path, **settings):
    """(the task's `query_count` as planned, the outcome of running that plan, samples logged)."""
    from negharness.engine.evaluate import run_evaluation
    from negharness.engine.plan import planned
    from negharness.engine.request import RunRequest

    req = RunRequest(model=model, tasks=[task], output_dir=str(tmp_path / task), cache_dir=str(tmp_path / "cache"),
                     log_samples=True, **settings)
    plan, hasher = planned(host, req)
    count = plan.tasks[0].task.query_count()
    return count, run_evaluation(host, plan, hasher=hasher)[0]


def _samples(host, model, task, tmp_path, **settings):
    """(the task's `query_count` as planned, the per-query samples its run wrote)."""
    count, outcome = _counted(host, model, task, tmp_path, **settings)
    return count, outcome.path.with_suffix(".samples.jsonl").read_text().splitlines()


def _query_ids(outcome):
    """The ids of the run's per-query values (what intervals and `compare` resample)."""
    from negharness.scoring.perquery import read_sidecar

    return read_sidecar(outcome.path, outcome.record)["ids"]


def _kw_host(*folders):
    """The installed plugins, the keyword model (`kw`) and the YAML tasks of ``folders``."""
    from negharness.declarative.register import include_plugin
    from negharness.testing import host_with_models, keyword_model

    host = host_with_models({"kw": keyword_model})
    if folders:
        host.register(include_plugin([str(f) for f in folders]), "include_path")
    return host


@pytest.mark.parametrize("task", ["shapes_t2i_original", "shapes_t2v_negated", "shapes_t2v_composed"])
def test_a_world_tasks_query_count_is_what_its_run_scores(task, tmp_path):
    from negharness.discovery.manager import make_host

    count, samples = _samples(make_host(), "shapes_clip", task, tmp_path, limit=12)
    assert count == len(samples) > 0


@pytest.mark.needs("nltk")
def test_an_nt2vr_tasks_query_count_is_what_its_run_scores(tmp_path):
    from test_nt2vr_tasks import _host, write_layout

    write_layout(tmp_path / "data")
    for task in ("msrvtt1k_original", "msrvtt1k_negated", "msrvtt1k_composed"):
        count, samples = _samples(_host(), "kw", task, tmp_path, data_root=str(tmp_path / "data"),
                                  task_extra={"build": "true"})
        assert count == len(samples) > 0, task


@pytest.mark.parametrize("negated, limit, want", [
    ({}, None, 4),  # the negated file rewrites each caption: one query per caption pair
    ({"a.jpg": ["no blue here"]}, None, 4 + 3),  # not one for one: both files' captions, side by side
    ({}, 2, 3)])  # --limit keeps the first two images' rows
def test_a_negbench_retrieval_tasks_query_count_is_what_its_run_scores(negated, limit, want, tmp_path):
    """Retrieval-Neg logs no samples: its queries are those of its per-query values (`query_ids`)."""
    rows = {f: (orig, negated.get(f, neg)) for f, (orig, neg) in NEGBENCH.items()}
    _negbench(tmp_path / "data", rows)
    count, outcome = _counted(_kw_host(), "kw", "negbench_retrieval_coco", tmp_path, data_root=str(tmp_path / "data"),
                              limit=limit)
    assert count == len(_query_ids(outcome)) == want


def test_a_yaml_retrieval_tasks_query_count_is_what_its_run_scores(tmp_path):
    count, outcome = _counted(_kw_host(_yaml_retrieval(tmp_path)), "kw", "my_colour_retrieval", tmp_path,
                              data_root=str(tmp_path / "data"))
    samples = outcome.path.with_suffix(".samples.jsonl").read_text().splitlines()
    assert count == len(samples) == len(_query_ids(outcome)) == 4  # three rows, the first with two captions


@pytest.mark.parametrize("limit, want", [(None, 8), (5, 5)])
def test_a_qrels_tasks_query_count_is_what_its_run_scores(limit, want, tmp_path):
    """Nine queries, one judged relevant to nothing (left out, as trec_eval does); --limit cuts the queries."""
    import textwrap

    from test_item_kinds import QRELS, _qrels_data

    _qrels_data(tmp_path / "data")
    (tmp_path / "yaml").mkdir()
    (tmp_path / "yaml/task.yaml").write_text(textwrap.dedent(QRELS))
    count, samples = _samples(_kw_host(tmp_path / "yaml"), "kw", "my_qrels", tmp_path,
                              data_root=str(tmp_path / "data"), limit=limit)
    assert count == len(samples) == want


def test_an_image_to_text_qrels_tasks_query_count_is_what_its_run_scores(tmp_path):
    _mrmr_data(tmp_path)
    count, samples = _samples(_kw_host(), "kw", "mrmr_negation", tmp_path, data_root=str(tmp_path / "data"))
    assert count == len(samples) == 6


def test_a_task_that_logs_no_ranks_is_named_not_its_missing_samples_file(cli, tmp_path):
    """`fire` on Retrieval-Neg (no samples) ended with "<tmp>/....samples.jsonl: No such file or directory"."""
    res = cli("fire", "--model", "shapes_clip", "--task", "negbench_retrieval_coco", "--sizes", "2",
              *_negbench_data(tmp_path), "--out", str(tmp_path / "fire.svg"))
    assert res.returncode == 2
    assert "task negbench_retrieval_coco: has no per-query ranks (FIRE needs a retrieval task)" in res.stderr
