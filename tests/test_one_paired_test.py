"""One paired test and one interval routine (issue 45 item 3): `compare` and the negation-training
table reach the same paired difference, the table's one-seed interval is its record's clustered
interval, and the NaN rule (a query NaN in either run leaves the pair) holds on the reviewer's vectors
whichever way they are compared."""

import numpy as np
import pytest
from test_seed_intervals import exp  # noqa: F401  (the script, loaded once: a fixture)

from negharness.records.compare import compare_task, load_runs, to_markdown
from negharness.records.fake import write_fake_record
from negharness.records.results import ModelConfig
from negharness.scoring.bootstrap import pairs, paired_test

# the reviewer's vectors (issue 45): one query in four is NaN in A only
A = np.array([100.0, np.nan, 0.0, 100.0] * 25)
B = np.array([100.0, 100.0, 0.0, 100.0] * 25)
TASK = "shapes_t2v_original"


def _records(tmp_path, a, b, clusters=None, resamples=500):
    """Two runs of one task as `negharness run` writes them (per-query files, clustered intervals)."""
    ids = [f"q{i:03d}" for i in range(len(a))]
    kw = {"ids": ids, "resamples": resamples, "clusters": clusters, "cluster": "video" if clusters else None}
    to_list = lambda v: [None if x != x else float(x) for x in v]  # noqa: E731
    pa = write_fake_record(tmp_path, ModelConfig("a", {}), TASK, {"MIR": to_list(a)}, **kw)
    pb = write_fake_record(tmp_path, ModelConfig("b", {}), TASK, {"MIR": to_list(b)}, **kw)
    return pa, pb


def test_the_nan_rule_drops_a_query_either_run_leaves_uncovered():
    pair = pairs(A, B, [f"c{i}" for i in range(100)])
    assert (len(pair.a), pair.dropped) == (75, 25) and len(pair.clusters) == 75
    assert np.array_equal(pair.a, pair.b)  # the queries both answered agree exactly
    res = paired_test(A, B, 2000, 0)
    assert (res.diff, res.lo, res.hi, res.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert (res.n_queries, res.dropped) == (75, 25)
    with pytest.raises(ValueError, match="no query is covered by both runs"):
        pairs(np.array([np.nan, 1.0]), np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="3 cluster ids for 2 queries"):
        pairs(np.array([1.0, 1.0]), np.array([1.0, 1.0]), ["a", "b", "c"])


def test_compare_and_the_experiment_table_agree_on_the_reviewers_vectors(tmp_path, exp):
    """Before: the table's `paired_bootstrap` averaged each run over what it covers and gave
    Δ+8.3 [4.83, 12.86] where `compare` gave 0 [0, 0]."""
    pa, pb = _records(tmp_path, A, B)
    (_, ra), (_, rb) = load_runs("a", tmp_path), load_runs("b", tmp_path)
    found = compare_task(TASK, ra[TASK], rb[TASK], n=500).metrics[0]
    assert (found.diff, found.lo, found.hi, found.queries, found.dropped) == (0.0, 0.0, 0.0, 75, 25)
    assert found.b - found.a == found.diff  # A and B over the paired queries: the row adds up (review)
    assert "MIR ↑ (75 paired, 25 covered by one run only)" in to_markdown("a", "b", [compare_task(
        TASK, ra[TASK], rb[TASK], n=500)], 500, 0)
    base, tuned = [{TASK: exp.per_query(pa)}], [{TASK: exp.per_query(pb)}]
    assert exp.paired_cell(base, tuned, TASK, "MIR") == " Δ+0.000 [+0.000, +0.000]"


def test_the_table_and_compare_reach_one_paired_interval_over_the_records_clusters(tmp_path, exp):
    rng = np.random.default_rng(3)
    video_effect = np.repeat(rng.normal(0, 0.3, 30), 4)  # four queries about each of 30 videos
    a = np.clip(0.5 + video_effect + rng.normal(0, 0.05, 120), 0, 1)
    b = np.clip(a + 0.05 + np.repeat(rng.normal(0, 0.1, 30), 4), 0, 1)
    clusters = [f"video{i // 4}" for i in range(120)]
    pa, pb = _records(tmp_path, a, b, clusters)
    (_, ra), (_, rb) = load_runs("a", tmp_path), load_runs("b", tmp_path)
    found = compare_task(TASK, ra[TASK], rb[TASK], n=500).metrics[0]
    assert found.clusters == 30
    cell = exp.paired_cell([{TASK: exp.per_query(pa)}], [{TASK: exp.per_query(pb)}], TASK, "MIR")
    assert cell == f" Δ{found.diff:+.3f} [{found.lo:+.3f}, {found.hi:+.3f}]"


def test_a_one_seed_row_of_the_table_is_its_records_clustered_interval(tmp_path, exp):
    """Before: the table resampled queries (1,000 resamples), 0.63x the clustered width on the
    committed shapes record; now it resamples what the record's `intervals` resample."""
    rng = np.random.default_rng(4)
    values = np.clip(0.5 + np.repeat(rng.normal(0, 0.3, 25), 6) + rng.normal(0, 0.05, 150), 0, 1)
    clusters = [f"video{i // 6}" for i in range(150)]
    path, _ = _records(tmp_path, values, values, clusters, resamples=800)
    rec = load_runs("a", tmp_path)[1][TASK].record
    mean, lo, hi = exp.seed_interval([{TASK: exp.per_query(path)}], TASK, "MIR")
    assert mean == pytest.approx(rec["metrics"]["MIR"], abs=1e-12)
    assert [lo, hi] == pytest.approx(rec["intervals"]["MIR"], abs=1e-9)
    rows = rec["intervals_rows"]["MIR"]
    assert hi - lo > 1.5 * (rows[1] - rows[0])  # the clusters matter here: not the row interval


def test_the_table_refuses_a_record_without_clusters(tmp_path, exp):
    import json

    path, _ = _records(tmp_path, B, B)
    rec = json.loads(path.read_text())
    rec["interval_method"].pop("cluster")
    path.write_text(json.dumps(rec))
    from negharness.records.check import RecordError

    with pytest.raises(RecordError, match="made before clustered intervals"):  # the one checked reader's refusal
        exp.per_query(path)
    with pytest.raises(ValueError, match="made before them"):  # a record handed in as read: the script's own check
        exp.per_query(path, json.loads(path.read_text()))
