"""Bootstrap intervals against an independent bootstrap, p-values calibrated under the null, McNemar
by hand, and `compare` on two fake records with a known difference."""

import random

import numpy as np
import pytest

from negharness.records.compare import compare, load_runs, to_markdown
from negharness.records.fake import fake_record, write_fake_record
from negharness.records.results import ModelConfig
from negharness.scoring import perquery
from negharness.scoring.bootstrap import (
    binomial_two_sided,
    bootstrap_ci,
    bootstrap_intervals,
    mcnemar_exact,
    paired_test,
    resampled_means,
)

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
    ours = bootstrap_intervals({"m": list(values)}, n=10_000, seed=0)["m"]
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
    a = bootstrap_intervals({"m": covered}, n=4000, seed=1)["m"]
    b = bootstrap_intervals({"m": with_gaps}, n=4000, seed=1)["m"]
    assert b[0] == pytest.approx(a[0], abs=2.0) and b[1] == pytest.approx(a[1], abs=2.0)
    assert perquery.covered_mean(perquery.per_query(range(400), {"m": with_gaps})["values"]["m"]) == 75.0


def test_chunking_bounds_memory_and_never_changes_the_numbers():
    v = np.random.default_rng(3).random((2, 500))
    whole = resampled_means(v, 300, seed=4, chunk_elems=1 << 22)
    tiny = resampled_means(v, 300, seed=4, chunk_elems=700)  # one resample per chunk
    assert np.array_equal(whole, tiny)
    assert bootstrap_ci(v[0], n=300, seed=4) == pytest.approx(tuple(np.quantile(whole[:, 0], [0.025, 0.975])))


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
    assert pq["values"]["R@5"] == [100, 100, 0] and pq["values"]["neg_R@5"] == [0, 100, 100]
    assert pq["values"]["drop_R@5"] == [100, 0, -100]
    pq, how = retrieval_neg_values(orig, (["c.jpg#0"], torch.tensor([2])))  # HardNeg-Syn: other captions
    assert how.startswith("unpaired") and len(pq["ids"]) == 4 and "drop_R@5" not in pq["values"]
    assert perquery.covered_mean(pq["values"]["neg_R@5"]) == 100.0
    assert perquery.covered_mean(pq["values"]["R@1"]) == pytest.approx(100 / 3)
