"""The negation-training experiment's intervals resample the records' clusters, each query's value
its mean over seeds (issue 14 item 6; issue 45 item 3), checked against an independent computation
on fixed data."""

import importlib.util
import random
import statistics
from pathlib import Path

import numpy as np
import pytest

from negharness.scoring.bootstrap import bootstrap_estimates, paired_test, seed_means

SCRIPT = Path(__file__).resolve().parents[1] / "perf" / "exp_negation_training.py"


@pytest.fixture(scope="module")
def exp():
    spec = importlib.util.spec_from_file_location("exp_negation_training", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _runs(per_seed, task="shapes_t2v_original", metric="MIR", resamples=1000):
    """Runs as the script reads them from records: each query its own cluster here."""
    keys = np.array([f"q{i}" for i in range(len(per_seed[0]))])
    return [{task: {"query": keys, "clusters": keys, "method": np.array([resamples, 0]),
                    metric: np.asarray(v, dtype=np.float64)}} for v in per_seed]


def _interval(values, clusters=None):
    found = bootstrap_estimates({"m": list(values)}, 1000, 0, clusters=clusters)["m"]
    return found.lo, found.hi


def _fixed_data(n=60, seeds=3):
    rng = np.random.default_rng(7)
    query_effect = rng.uniform(0, 1, size=n)  # queries differ a lot, seeds a little
    return [np.clip(query_effect + rng.normal(0, 0.05, size=n), 0, 1) for _ in range(seeds)]


def _independent_interval(per_seed, resamples=20000, level=0.95):
    """Written out by hand with the standard library: average each query over seeds, resample
    queries with replacement, take the percentile interval of the resampled means."""
    n = len(per_seed[0])
    means = [sum(run[q] for run in per_seed) / len(per_seed) for q in range(n)]
    rnd = random.Random(12345)
    boot = sorted(statistics.fmean(means[rnd.randrange(n)] for _ in range(n)) for _ in range(resamples))
    lo = boot[int((1 - level) / 2 * resamples)]
    hi = boot[int((1 + level) / 2 * resamples) - 1]
    return statistics.fmean(means), lo, hi


def test_seed_means_averages_each_query_over_seeds():
    assert np.allclose(seed_means([[1.0, 0.0, 0.5], [0.0, 0.0, 1.0], [0.5, 0.0, 0.0]]), [0.5, 0.0, 0.5])
    with pytest.raises(ValueError):
        seed_means([[1.0, 2.0], [1.0]])


def test_interval_matches_an_independent_computation(exp):
    per_seed = _fixed_data()
    mean, lo, hi = exp.seed_interval(_runs(per_seed), "shapes_t2v_original", "MIR")
    ref_mean, ref_lo, ref_hi = _independent_interval(per_seed)
    width = ref_hi - ref_lo
    assert mean == pytest.approx(ref_mean, abs=1e-12)
    # 1000 resamples (the script's) against 20000: Monte Carlo error only, a few % of the width
    assert lo == pytest.approx(ref_lo, abs=0.1 * width) and hi == pytest.approx(ref_hi, abs=0.1 * width)
    # and against the normal approximation of the query means' standard error
    means = np.mean(per_seed, axis=0)
    se = means.std(ddof=1) / np.sqrt(len(means))
    assert width == pytest.approx(2 * 1.96 * se, rel=0.15)


def test_identical_seeds_give_the_single_seed_interval_not_a_narrower_one(exp):
    """Three seeds that agree on every query carry no more information than one: the interval must
    not shrink. Pooling them as 3n queries (the old computation) shrinks it by about 1/sqrt(3)."""
    one = _fixed_data(seeds=1)[0]
    _, lo, hi = exp.seed_interval(_runs([one, one, one]), "shapes_t2v_original", "MIR")
    assert (lo, hi) == pytest.approx(_interval(one, [f"q{i}" for i in range(len(one))]), abs=1e-12)
    pooled_lo, pooled_hi = _interval(np.concatenate([one, one, one]))
    assert 0.45 < (pooled_hi - pooled_lo) / (hi - lo) < 0.7


def test_paired_difference_uses_seed_means_and_refuses_other_queries(exp):
    per_seed = _fixed_data()
    better = [v + 0.02 for v in per_seed]
    base, tuned = _runs(per_seed), _runs(better)
    _, b = exp.seed_averaged(base, "shapes_t2v_original", "MIR")
    _, v = exp.seed_averaged(tuned, "shapes_t2v_original", "MIR")
    res = paired_test(b, v, 1000, 0)
    assert res.lo == pytest.approx(0.02) and res.hi == pytest.approx(0.02) and res.p_value == pytest.approx(1 / 1001)
    assert exp.paired_cell(base, tuned, "shapes_t2v_original", "MIR") == " Δ+0.020 [+0.020, +0.020]"
    shuffled = _runs(per_seed)
    shuffled[1]["shapes_t2v_original"]["query"] = shuffled[1]["shapes_t2v_original"]["query"][::-1].copy()
    with pytest.raises(ValueError, match="different queries"):
        exp.seed_interval(shuffled, "shapes_t2v_original", "MIR")


def test_report_builds_the_table_from_per_query_values(exp):
    columns = {"shapes_t2v_original": ("MIR", "R@1"), "shapes_t2v_negated": ("ΔMIR",),
               "shapes_t2v_composed": ("MIR", "R@1"), "shapes_mcq": ("accuracy",)}
    rng = np.random.default_rng(0)

    def run(shift):
        keys = np.array([f"q{i}" for i in range(20)])
        return {t: {"query": keys, "clusters": keys, "method": np.array([200, 0]),
                    **{m: rng.uniform(0, 1, 20) + shift for m in ms}} for t, ms in columns.items()}

    table = exp.report({"shapes_clip (no fine-tuning)": [run(0)], "clip_star": [run(0) for _ in range(3)],
                        "bnl": [run(0.5) for _ in range(3)]})
    rows = table.strip().splitlines()
    assert len(rows) == 5 and rows[2].startswith("| shapes_clip (no fine-tuning) | 1 |")
    assert "Δ" not in rows[2] and "Δ" not in rows[3].split("|", 3)[3] and rows[4].count(" Δ+") == 5
