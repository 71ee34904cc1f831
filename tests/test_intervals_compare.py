"""Bootstrap intervals against an independent bootstrap, p-values calibrated under the null, McNemar
by hand, and `compare` on two fake records with a known difference; clustered intervals checked by
simulation, Benjamini-Hochberg by hand (issue 37)."""

import importlib.util
import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from negharness.records.compare import compare, load_runs, to_markdown
from negharness.records.fake import fake_record, write_fake_record
from negharness.records.results import ModelConfig
from negharness.scoring import perquery
from negharness.scoring.bootstrap import (
    benjamini_hochberg,
    binomial_two_sided,
    bootstrap_estimates,
    cluster_totals,
    mcnemar_exact,
    paired_test,
    resampled_means,
)

PERF = Path(__file__).resolve().parents[1] / "perf"
FIXED = np.array([100.0] * 130 + [0.0] * 270)  # 32.5% hits over 400 queries
rng0 = np.random.default_rng(5)
RANKS = rng0.integers(1, 40, size=400)


def _independent_interval(values, resamples=10_000, seed=99):
    """A bootstrap written separately: Python's random module, one resample at a time."""
    r = random.Random(seed)
    vals = [float(v) for v in values]
    means = sorted(sum(r.choices(vals, k=len(vals))) / len(vals) for _ in range(resamples))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


@pytest.mark.parametrize("values", [FIXED, 1.0 / RANKS])
def test_intervals_agree_with_an_independent_bootstrap(values):
    found = bootstrap_estimates({"m": list(values)}, n=10_000, seed=0)["m"]
    ours = (found.lo, found.hi)
    theirs = _independent_interval(values)
    width = theirs[1] - theirs[0]
    assert ours[0] == pytest.approx(theirs[0], abs=0.04 * width)
    assert ours[1] == pytest.approx(theirs[1], abs=0.04 * width)
    # and the normal approximation of the mean's sampling spread, as a third opinion
    se = values.std() / np.sqrt(len(values))
    assert (ours[1] - ours[0]) == pytest.approx(2 * 1.96 * se, rel=0.06)


def test_uncovered_queries_are_left_out_of_each_resample():
    covered = [100.0, 0.0, 100.0, 100.0] * 50
    with_gaps = [v for c in covered for v in (c, None)]  # another metric's queries in between
    a = bootstrap_estimates({"m": covered}, n=4000, seed=1)["m"]
    b = bootstrap_estimates({"m": with_gaps}, n=4000, seed=1)["m"]
    assert b.lo == pytest.approx(a.lo, abs=2.0) and b.hi == pytest.approx(a.hi, abs=2.0)
    assert perquery.covered_mean(perquery.per_query(range(400), {"m": with_gaps})["values"]["m"]) == 75.0


def test_chunking_bounds_memory_and_never_changes_the_numbers():
    v = np.random.default_rng(3).random((2, 500))
    whole = resampled_means(v, 300, seed=4, chunk_elems=1 << 22)
    tiny = resampled_means(v, 300, seed=4, chunk_elems=700)  # one resample per chunk
    assert np.array_equal(whole, tiny)
    found = bootstrap_estimates({"m": list(v[0])}, n=300, seed=4)["m"]
    assert (found.lo, found.hi) == pytest.approx(tuple(np.quantile(whole[:, 0], [0.025, 0.975])))


def test_paired_p_values_are_calibrated_under_the_null():
    """Two models that differ only by noise: p < 0.05 in 4-6% of 3,000 simulated comparisons."""
    rng = np.random.default_rng(7)
    rejected = 0
    sims = 3000
    for s in range(sims):
        base = rng.normal(size=100)
        a, b = base + rng.normal(size=100), base + rng.normal(size=100)
        rejected += paired_test(a, b, n=1000, seed=s).p_value < 0.05
    assert 0.04 <= rejected / sims <= 0.06


def test_mcnemar_exact_by_hand():
    assert mcnemar_exact([1, 1, 1, 1, 0, 1], [0, 0, 0, 0, 0, 1]) == (4, 0, 0.125)
    # 10 vs 2 discordant: 2 * (C(12,0) + C(12,1) + C(12,2)) / 2^12 = 158 / 4096
    assert binomial_two_sided(2, 12) == pytest.approx(158 / 4096, rel=1e-12)
    assert binomial_two_sided(6, 12) == 1.0
    assert binomial_two_sided(0, 0) == 1.0
    # a large n stays finite: 9,000 vs 11,000 is far from chance
    assert 0 < binomial_two_sided(9000, 20000) < 1e-40


def _runs(tmp_path, flip=30, other_ids=False):
    a_hits = np.array([100.0] * 200 + [0.0] * 300)
    b_hits = a_hits.copy()
    b_hits[200:200 + flip] = 100.0  # B answers `flip` more questions right, loses none
    mir_a = 1.0 / np.random.default_rng(1).integers(1, 20, size=500)
    a, b = ModelConfig("a", {}), ModelConfig("b", {})
    ids = [f"q{i}" for i in range(500)]
    write_fake_record(tmp_path, a, "t", {"accuracy": a_hits, "MIR": mir_a}, ids=ids)
    write_fake_record(tmp_path, b, "t", {"accuracy": b_hits, "MIR": mir_a + 0.01},
                      ids=[f"x{i}" for i in range(500)] if other_ids else ids)
    return load_runs("a", tmp_path), load_runs(str(tmp_path / "b"), tmp_path)


def test_compare_finds_a_known_difference(tmp_path):
    (la, ra), (lb, rb) = _runs(tmp_path)
    [task] = compare(ra, rb, n=2000)
    assert task.skipped is None
    acc = next(m for m in task.metrics if m.metric == "accuracy")
    assert acc.diff == pytest.approx(6.0) and acc.lo > 0 and acc.p_value < 0.001
    assert acc.mcnemar == (0, 30, pytest.approx(2 / 2**30))
    mir = next(m for m in task.metrics if m.metric == "MIR")
    assert mir.diff == pytest.approx(0.01) and mir.mcnemar is None  # not a 0/100 metric
    assert mir.lo == pytest.approx(0.01) and mir.hi == pytest.approx(0.01)  # a constant shift has no spread
    md = to_markdown(la, lb, [task], 2000, 0)
    assert "| accuracy ↑ | 40.0 | 46.0 | +6.0 [+" in md and "0/30, p=<0.001" in md


def test_compare_pairs_only_the_same_variant_of_a_task(tmp_path):
    """Issue 32 (3): compare took the newest record per task whatever its --seed / -T / --limit variant,
    so a seed-1 negated set was paired with the other model's seed-0 set, unlabelled."""
    hits = [100.0] * 20 + [0.0] * 30
    ids = [f"q{i}" for i in range(50)]
    a, b = ModelConfig("a", {}), ModelConfig("b", {})
    write_fake_record(tmp_path, a, "t", {"accuracy": hits}, ids=ids)
    write_fake_record(tmp_path, a, "t", {"accuracy": hits[::-1]}, ids=ids, variant={"seed": 1},
                      created="2026-02-01T00:00:00+00:00")  # newer, another query set
    write_fake_record(tmp_path, b, "t", {"accuracy": hits}, ids=ids)
    (_, ra), (_, rb) = load_runs("a", tmp_path), load_runs("b", tmp_path)
    assert set(ra) == {"t", "t [seed=1]"} and set(rb) == {"t"}
    by = {c.task: c for c in compare(ra, rb, n=200)}
    assert by["t"].skipped is None and [m.diff for m in by["t"].metrics] == [0.0]  # seed 0 against seed 0
    assert by["t [seed=1]"].skipped == "only A has a record"
    same = compare(ra, load_runs("a", tmp_path)[1], n=200)  # compare A A: every difference zero
    assert all(m.diff == 0.0 and m.lo == 0.0 == m.hi for c in same for m in c.metrics) and len(same) == 2


def test_compare_refuses_different_queries(tmp_path):
    (_, ra), (_, rb) = _runs(tmp_path, other_ids=True)
    [task] = compare(ra, rb, n=100)
    assert task.metrics == [] and "different queries: A has 500, B has 500, 0 shared" in task.skipped


def test_compare_cli(cli, tmp_path):
    _runs(tmp_path / "results")
    out = cli("compare", "a", "b", "--markdown", "cmp.md", "--resamples", "500")
    assert out.returncode == 0, out.stderr
    assert "+6.0" in out.stdout and "| accuracy ↑ | 40.0 | 46.0 |" in (tmp_path / "cmp.md").read_text()
    bad = cli("compare", "a", "nope")
    assert bad.returncode == 2 and "nope: no record folder or model label" in bad.stderr


def test_per_query_contract_is_checked():
    rec, pq = fake_record(ModelConfig("m", {}), "t", {"R@1": [100, 0, 0, 100]})
    assert perquery.problems(pq, {"R@1": 50.0}) == []
    assert "mean of per-query values" in perquery.problems(pq, {"R@1": 40.0})[0]
    assert rec["intervals"]["R@1"][0] >= 0 and rec["interval_method"]["resamples"] == 1000


def test_retrieval_neg_pairs_captions_when_the_negated_file_rewrites_them():
    import torch

    from negharness.tasks.negbench.tasks import retrieval_neg_values

    keys = ["a.jpg#0", "a.jpg#1", "b.jpg#0"]
    orig = (keys, torch.tensor([1, 3, 7]))
    neg = (["b.jpg#0", "a.jpg#0", "a.jpg#1"], torch.tensor([1, 9, 2]))  # another order, the same captions
    pq, how = retrieval_neg_values(orig, neg)
    assert how.startswith("paired") and pq["ids"] == keys
    assert pq["values"]["R@5"] == [100, 100, 0] and pq["values"]["R-Neg@5"] == [0, 100, 100]
    assert pq["values"]["drop_R@5"] == [100, 0, -100]
    pq, how = retrieval_neg_values(orig, (["c.jpg#0"], torch.tensor([2])))  # HardNeg-Syn: other captions
    assert how.startswith("unpaired") and len(pq["ids"]) == 4 and "drop_R@5" not in pq["values"]
    assert perquery.covered_mean(pq["values"]["R-Neg@5"]) == 100.0
    assert perquery.covered_mean(pq["values"]["R@1"]) == pytest.approx(100 / 3)


# clusters (issue 37): queries on one image or video resample together -----------------------------
def _clustered(clusters=40, size=6, icc=0.5, seed=3):
    """Per-query values with a known intra-cluster correlation, and their cluster ids."""
    rng = np.random.default_rng(seed)
    values = np.repeat(rng.normal(0, np.sqrt(icc), clusters), size) + rng.normal(0, np.sqrt(1 - icc), clusters * size)
    return values, [f"img{i // size}" for i in range(clusters * size)]


def test_clustered_intervals_cover_the_truth_and_row_intervals_do_not():
    """Seeded simulation (perf/sim_cluster_coverage.py runs the full 1,000 replicates): the interval
    over clusters covers the true mean about 95% of the time, the one over rows visibly less (it
    treats a cluster's queries as independent)."""
    spec = importlib.util.spec_from_file_location("sim_cluster_coverage", PERF / "sim_cluster_coverage.py")
    sim = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sim  # its dataclass looks its module up there
    spec.loader.exec_module(sim)
    found = sim.coverage(replicates=150, clusters=60, size=8, icc=0.3, resamples=300, seed=11)
    assert 0.90 <= found.clustered <= 0.99
    assert found.rows <= found.clustered - 0.15  # design effect 3.1: rows cover about 73%


def test_cluster_ids_are_sorted_before_resampling_so_row_order_never_matters():
    values, clusters = _clustered()
    order = np.random.default_rng(0).permutation(len(values))
    a = bootstrap_estimates({"m": list(values)}, 500, 1, clusters=clusters)["m"]
    b = bootstrap_estimates({"m": list(values[order])}, 500, 1, clusters=[clusters[i] for i in order])["m"]
    assert (a.lo, a.hi, a.se) == (b.lo, b.hi, b.se)


def test_one_query_per_cluster_is_the_row_bootstrap_and_shared_clusters_widen_it():
    values, clusters = _clustered()
    ids = [f"q{i}" for i in range(len(values))]
    rows = bootstrap_estimates({"m": list(values)}, 2000, 0, clusters=ids)["m"]
    same = bootstrap_estimates({"m": list(values)}, 2000, 0, clusters=[f"c{i}" for i in ids])["m"]
    assert (rows.lo, rows.hi) == (same.lo, same.hi)  # ids renamed in the same sorted order: same draws
    clustered = bootstrap_estimates({"m": list(values)}, 2000, 0, clusters=clusters)["m"]
    assert clustered.hi - clustered.lo > 1.5 * (rows.hi - rows.lo)  # design effect 1 + 5 * 0.5 = 3.5
    # the standard error is the resampled means' spread: about the textbook ones
    assert rows.se == pytest.approx(values.std() / np.sqrt(len(values)), rel=0.1)
    cluster_means = values.reshape(40, 6).mean(1)
    assert clustered.se == pytest.approx(cluster_means.std() / np.sqrt(40), rel=0.15)


def test_clusters_of_unequal_size_weigh_by_their_queries():
    """A resample's mean is over the queries it drew (sum / count), not a mean of cluster means."""
    values = [100.0, 0.0, 0.0, 0.0, 100.0]
    sums, counts = cluster_totals(np.array([values]), ["c", "b", "b", "b", "a"])
    assert sums.tolist() == [[100.0, 0.0, 100.0]] and counts.tolist() == [[1.0, 3.0, 1.0]]  # a, b, c sorted
    means = resampled_means(np.array([values]), 4000, 0, clusters=["a", "b", "b", "b", "c"])[:, 0]
    # by hand: the 27 equally likely draws of 3 clusters, each mean = 100 * (#a + #c) / (#a + 3 #b + #c)
    draws = [(x, y, z) for x in range(3) for y in range(3) for z in range(3)]
    exact = np.mean([100 * sum(k != 1 for k in d) / sum(3 if k == 1 else 1 for k in d) for d in draws])
    assert np.mean(means) == pytest.approx(exact, abs=1.5)
    assert abs(exact - 100 * 2 / 3) > 10  # a mean of cluster means would give 66.7
    with pytest.raises(ValueError, match="3 cluster ids for 5 queries"):
        resampled_means(np.array([values]), 10, 0, clusters=["a", "b", "c"])


def test_record_keeps_clustered_and_row_intervals_standard_errors_and_the_cluster_count():
    values, clusters = _clustered()
    rec, _ = fake_record(ModelConfig("m", {}), "t", {"acc": values}, clusters=clusters, cluster="image")
    method = rec["interval_method"]
    assert (method["cluster"], method["clusters"], method["queries"]) == ("image", 40, 240)
    assert rec["task"]["cluster"] == "image" and set(rec["standard_errors"]) == {"acc"}
    (lo, hi), (rlo, rhi) = rec["intervals"]["acc"], rec["intervals_rows"]["acc"]
    assert hi - lo > rhi - rlo and rec["standard_errors"]["acc"] > rec["standard_errors_rows"]["acc"] > 0
    plain, _ = fake_record(ModelConfig("m", {}), "t", {"acc": values})  # a task that declares no cluster
    assert plain["interval_method"]["cluster"] == "row" and plain["interval_method"]["clusters"] == 240
    assert "each query is its own cluster" in plain["interval_method"]["cluster_note"]
    assert plain["intervals"] == plain["intervals_rows"]


def test_a_run_must_give_the_cluster_ids_its_task_declares():
    pq = perquery.per_query(["a", "b"], {"acc": [100, 0]})
    with pytest.raises(perquery.PerQueryError, match="declares cluster 'image' but gives no cluster ids"):
        perquery.check("t", "p", pq, {"acc": 50.0}, "image")
    with_ids = perquery.per_query(["a", "b"], {"acc": [100, 0]}, ["x", "x"])
    with pytest.raises(perquery.PerQueryError, match="declares no cluster"):
        perquery.check("t", "p", with_ids, {"acc": 50.0})
    perquery.check("t", "p", with_ids, {"acc": 50.0}, "image")
    assert "one non-empty cluster id" in perquery.problems({**with_ids, "clusters": ["x"]}, {"acc": 50.0})[0]


def test_benjamini_hochberg_by_hand():
    # sorted: 0.005 (1), 0.01 (2), 0.03 (3), 0.04 (4); p * 4 / rank = 0.02, 0.02, 0.04, 0.04;
    # the running minimum from the largest down leaves them so; back in input order:
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    # 0.01, 0.02, 0.03, 0.5 of 4: 0.04, 0.04, 0.04, 0.5 (0.02 * 4 / 2 = 0.04 and 0.03 * 4 / 3 = 0.04)
    assert benjamini_hochberg([0.5, 0.03, 0.02, 0.01]) == pytest.approx([0.5, 0.04, 0.04, 0.04])
    # a larger p-value's smaller scaled value carries down: 0.04 * 2 / 1 = 0.08 > 0.045 * 2 / 2
    assert benjamini_hochberg([0.04, 0.045]) == pytest.approx([0.045, 0.045])
    assert benjamini_hochberg([0.9, 0.8]) == [0.9, 0.9] and benjamini_hochberg([]) == []
    assert benjamini_hochberg([0.6, 0.7, 0.8]) == pytest.approx([0.8, 0.8, 0.8])  # capped at 1, never above


def test_paired_test_over_clusters_is_wider_when_clusters_move_together():
    values, clusters = _clustered(icc=0.6)
    rng = np.random.default_rng(9)
    a = values
    b = values + np.repeat(rng.normal(0.15, 0.5, 40), 6)  # B's gain varies by image, not by query
    rows = paired_test(a, b, 2000, 0, clusters=[f"q{i}" for i in range(240)])
    clustered = paired_test(a, b, 2000, 0, clusters=clusters)
    assert clustered.n_clusters == 40 and rows.n_clusters == 240
    assert clustered.hi - clustered.lo > 2 * (rows.hi - rows.lo)
    assert clustered.p_value > rows.p_value


def _clustered_runs(tmp_path, old_b=False):
    values, clusters = _clustered()
    hits_a = (values > 0) * 100.0
    hits_b = (values > -0.3) * 100.0
    ids = [f"q{i}" for i in range(len(values))]
    a, b = ModelConfig("a", {}), ModelConfig("b", {})
    write_fake_record(tmp_path, a, "t", {"accuracy": hits_a, "MIR": 1 / (1 + values ** 2)}, ids=ids,
                      clusters=clusters, cluster="image")
    path = write_fake_record(tmp_path, b, "t", {"accuracy": hits_b, "MIR": 1 / (1 + values ** 2) + 0.01}, ids=ids,
                             clusters=clusters, cluster="image")
    write_fake_record(tmp_path, a, "u", {"accuracy": hits_a}, ids=ids)
    write_fake_record(tmp_path, b, "u", {"accuracy": hits_b}, ids=ids)
    if old_b:  # as negharness wrote it before clusters: no cluster fields, intervals over rows
        rec = json.loads(path.read_text())
        for key in ("intervals_rows", "standard_errors", "standard_errors_rows"):
            rec.pop(key)
        rec["interval_method"] = {k: v for k, v in rec["interval_method"].items() if k not in ("cluster", "clusters")}
        rec["task"].pop("cluster")
        path.write_text(json.dumps(rec))
        side = path.with_suffix(".perquery.json")
        side.write_text(json.dumps({k: v for k, v in json.loads(side.read_text()).items() if k != "clusters"}))
    return load_runs("a", tmp_path), load_runs("b", tmp_path)


def test_compare_resamples_clusters_and_adjusts_many_tests(tmp_path):
    (la, ra), (lb, rb) = _clustered_runs(tmp_path)
    results = compare(ra, rb, n=500)
    by = {t.task: t for t in results}
    assert (by["t"].cluster, by["t"].clusters) == ("image", 40) and (by["u"].cluster, by["u"].clusters) == ("row", 240)
    tested = [m for t in results for m in t.metrics]
    assert len(tested) == 3 and [m.p_adjusted for m in tested] == pytest.approx(
        benjamini_hochberg([m.p_value for m in tested]))
    acc = next(m for m in by["t"].metrics if m.metric == "accuracy")
    assert acc.clusters == 40 and acc.mcnemar_adjusted is not None
    md = to_markdown(la, lb, results, 500, 0)
    assert "## t (40 clusters, by image)" in md and "## u (240 clusters, each query its own)" in md
    assert "3 metrics tested at once" in md and "Benjamini-Hochberg adjusted over all of them" in md
    assert "| p (BH) |" in md


def test_compare_refuses_a_record_made_before_clusters(tmp_path):
    """As ``leaderboard --check`` refuses it: the one record reader (`read_checked`) names the file."""
    from negharness.records.check import RecordError

    with pytest.raises(RecordError, match=r"b/t\.json: made before clustered intervals.*rerun it with --overwrite"):
        _clustered_runs(tmp_path, old_b=True)
