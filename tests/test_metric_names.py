"""One name, one meaning, one direction per metric (issue 45 item 5). nT2VR's ``neg_R@K`` (the negated
query against the video written for the original: lower is better) and NegBench's Retrieval-Neg
recall of the negated captions (the paper's R-Neg@K: higher is better) once shared a name with
opposite directions; records written under the old name read under the new one."""

import json

import numpy as np
import pytest

from negharness.discovery.manager import make_host
from negharness.records.check import load_checked
from negharness.records.compare import compare, load_runs
from negharness.records.fake import write_fake_record
from negharness.records.results import ModelConfig, iter_records
from negharness.report.leaderboard import build_tables
from negharness.scoring import catalog

HITS = np.array([100.0] * 30 + [0.0] * 20)


def test_every_task_declares_each_metric_with_the_catalogues_direction():
    """A metric's direction read from a task's metric_info and from the catalogue is one answer."""
    seen: dict[str, set[bool]] = {}
    for entry in make_host().registry.entries("task"):
        cls = entry.load()
        for name, info in cls.metric_info.items():
            seen.setdefault(name, set()).add(info.higher_is_better)
            if hasattr(cls, "members"):
                continue  # a suite's member columns: named by its YAML (`catalog.scale_of` reads them)
            assert name in catalog.METRICS, f"{entry.name}: {name!r} is not in the metric catalogue"
            assert info.higher_is_better == catalog.METRICS[name].higher_is_better, (entry.name, name)
    assert {n for n, ways in seen.items() if len(ways) > 1} == set()  # across tasks too
    assert catalog.METRICS["R-Neg@5"].higher_is_better and not catalog.METRICS["neg_R@1"].higher_is_better


def test_negbench_and_nt2vr_report_distinct_names():
    tasks = {e.name: e.load() for e in make_host().registry.entries("task")}
    negbench, nt2vr = tasks["negbench_retrieval_coco"], tasks["msrvtt3k_negated"]
    assert negbench.main_score == "R-Neg@5" and {"R-Neg@1", "R-Neg@5", "R-Neg@10"} <= set(negbench.metric_info)
    assert not any(m.startswith("neg_") for m in negbench.metric_info)
    assert {"neg_R@1", "neg_R@10", "neg_MIR"} <= set(nt2vr.metric_info)
    assert not any(m.startswith("R-Neg") for m in nt2vr.metric_info)


def _old_negbench_record(root, label="old"):
    """A NegBench record as negharness wrote it before the rename: neg_R@5 everywhere."""
    return write_fake_record(root, ModelConfig(label, {}), "negbench_retrieval_coco",
                             {"R@5": list(HITS), "neg_R@5": list(HITS[::-1])}, leaderboard=["R@5", "neg_R@5"],
                             main="neg_R@5")


def test_an_old_negbench_record_reads_under_the_new_name(tmp_path):
    path = _old_negbench_record(tmp_path)
    raw = json.loads(path.read_text())
    assert "neg_R@5" in raw["metrics"] and "neg_R@5" in json.loads(path.with_suffix(".perquery.json").read_text())["values"]
    for rec in (load_checked(path), dict(iter_records(tmp_path))[path]):
        assert rec["metrics"]["R-Neg@5"] == raw["metrics"]["neg_R@5"] and "neg_R@5" not in rec["metrics"]
        assert rec["main_score"] == {"name": "R-Neg@5", "value": raw["main_score"]["value"]}
        assert rec["task"]["leaderboard_metrics"] == ["R@5", "R-Neg@5"]
        for field in ("intervals", "intervals_rows", "standard_errors", "metric_info"):
            assert rec[field]["R-Neg@5"] == raw[field]["neg_R@5"]
    run = load_runs("old", tmp_path)[1]["negbench_retrieval_coco"]
    assert set(run.per_query["values"]) == {"R@5", "R-Neg@5"}


def test_nt2vr_records_keep_neg_r_at_k(tmp_path):
    path = write_fake_record(tmp_path, ModelConfig("m", {}), "msrvtt3k_negated", {"neg_R@1": list(HITS)},
                             lower_is_better=["neg_R@1"])
    assert load_checked(path)["metrics"] == json.loads(path.read_text())["metrics"]
    assert catalog.renames("msrvtt3k_negated") == {} and catalog.renames("shapes_t2v_negated") == {}


def test_old_and_new_records_give_one_number_on_the_board_and_in_compare(tmp_path):
    _old_negbench_record(tmp_path / "results")
    write_fake_record(tmp_path / "results", ModelConfig("new", {}), "negbench_retrieval_coco",
                      {"R@5": list(HITS), "R-Neg@5": list(HITS[::-1])}, leaderboard=["R@5", "R-Neg@5"], main="R-Neg@5")
    tables = build_tables(iter_records(tmp_path / "results"))
    by = {(row.label, metric): (cell.value, cell.interval) for t in tables for row in t.rows
          for metric, cell in row.cells.items()}
    assert by[("old", "R-Neg@5")] == by[("new", "R-Neg@5")] and ("old", "neg_R@5") not in by
    (_, a), (_, b) = load_runs("old", tmp_path / "results"), load_runs("new", tmp_path / "results")
    [task] = compare(a, b, n=200)
    found = {m.metric: m for m in task.metrics}
    assert set(found) == {"R@5", "R-Neg@5"} and found["R-Neg@5"].diff == 0.0 and found["R-Neg@5"].higher_is_better


@pytest.mark.parametrize("task, old, new", [("negbench_retrieval_coco", "neg_R@5", "R-Neg@5"),
                                            ("negbench_retrieval_msrvtt", "neg_R@10", "R-Neg@10"),
                                            ("msrvtt3k_negated", "neg_R@1", "neg_R@1")])
def test_the_rename_map(task, old, new):
    assert catalog.renamed_keys({old: 1.0, "R@5": 2.0}, task) == {new: 1.0, "R@5": 2.0}


def test_the_renamed_retrieval_constant_still_resolves_with_a_warning_naming_its_new_name():
    """`negharness.api.RETRIEVAL_METRICS` (and the scoring facade's) was one of two constants of that
    name; a plugin written against it keeps working, told the new spelling each time."""
    import negharness.api as api
    import negharness.api.scoring as facade

    for module in (api, facade):
        with pytest.warns(DeprecationWarning, match="renamed negharness.api.scoring.TEXT_TO_MEDIA_METRICS"):
            assert module.RETRIEVAL_METRICS is facade.TEXT_TO_MEDIA_METRICS


def test_every_metric_a_task_reports_has_a_unit_so_every_export_carries_it():
    """`negharness export` leaves out a metric of no known unit (issue 46 item 6): none of ours is one."""
    for entry in make_host().registry.entries("task"):
        cls = entry.load()
        for name in cls.metric_info:
            assert catalog.scale_of(name, getattr(cls, "members", ())) is not None, (entry.name, name)
    assert catalog.scale_of("add_att", ["add_att"]) is catalog.scale_of("accuracy") is catalog.PERCENT
    assert catalog.scale_of("wobble") is None and catalog.scale_of("mean") is None


def test_each_units_bounds_are_what_the_scorers_reach():
    """A perfect ranking reaches each metric's best bound in the unit the scorer writes: R@K 100 (percent),
    MIR 1 (a proportion, not 100), MeanR and MedR 1 (a rank); a negation that sends every source video
    from rank 1 to the bottom gives ΔR@K 100 points and ΔMIR (nearly) 1."""
    import torch

    from negharness.scoring.metrics import negation_deltas, retrieval_metrics

    top = torch.ones(20)
    for metric, value in {**retrieval_metrics(top), **negation_deltas(top, torch.full((20,), 1e9))}.items():
        scale = catalog.METRICS[metric].scale
        best = scale.high if catalog.METRICS[metric].higher_is_better else scale.low
        if metric != "SrcMeanR_neg":  # the negated queries' rank of the source video: context, not a target
            assert value == pytest.approx(best, abs=1e-6), (metric, value, scale)
    assert catalog.PERCENT.per_one(16.67) == 0.1667 and catalog.RANK.per_one(16.67) == 16.67
