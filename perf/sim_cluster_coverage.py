"""Coverage of the 95% bootstrap intervals on data with a known intra-cluster correlation (issue 37).

Each replicate draws C clusters of m queries, y = mu + u_c + e with u_c ~ N(0, icc) and e ~ N(0, 1 - icc)
(so the intra-cluster correlation is ``icc`` and the true mean is mu), and asks whether the record's
interval over clusters and the one over rows (`negharness.scoring.perquery.intervals`, as a run
writes them) cover mu. Over rows the interval ignores that a cluster's queries move together and is
too narrow by about sqrt(1 + (m - 1) icc); over clusters it should cover mu about 95% of the time
(the percentile bootstrap over C clusters is a little narrow, by about sqrt((C - 1) / C)).

Run: python perf/sim_cluster_coverage.py [--replicates 1000] [--tiny: 40 replicates, a check of the script]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from negharness.scoring import perquery

TRUE_MEAN = 50.0


@dataclass(frozen=True)
class Coverage:
    clustered: float  # share of replicates whose interval over clusters covers the true mean
    rows: float  # the same for the interval over rows
    replicates: int


def replicate(rng: np.random.Generator, clusters: int, size: int, icc: float) -> dict:
    """One synthetic task's per-query block: ``clusters`` x ``size`` queries, correlation ``icc`` within a cluster."""
    shared = rng.normal(0.0, np.sqrt(icc), clusters)
    values = TRUE_MEAN + np.repeat(shared, size) + rng.normal(0.0, np.sqrt(1.0 - icc), clusters * size)
    ids = [f"q{i}" for i in range(clusters * size)]
    return perquery.per_query(ids, {"m": values}, [f"c{i // size}" for i in range(clusters * size)])


def coverage(replicates: int = 1000, clusters: int = 100, size: int = 10, icc: float = 0.3,
             resamples: int = 1000, seed: int = 0) -> Coverage:
    """How often each interval covers the true mean over ``replicates`` seeded replicates."""
    rng = np.random.default_rng(seed)
    record = {"task": {"leaderboard_metrics": ["m"], "cluster": "image"}, "main_score": {"name": "m"}}
    hits = np.zeros(2)
    for r in range(replicates):
        found = perquery.intervals(record, replicate(rng, clusters, size, icc), resamples, seed=r)
        for k, field in enumerate(("intervals", "intervals_rows")):
            lo, hi = found[field]["m"]
            hits[k] += lo <= TRUE_MEAN <= hi
    return Coverage(hits[0] / replicates, hits[1] / replicates, replicates)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--clusters", type=int, default=100)
    ap.add_argument("--size", type=int, default=10, help="queries per cluster")
    ap.add_argument("--icc", type=float, default=0.3, help="intra-cluster correlation")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tiny", action="store_true", help="40 replicates of 20 clusters, 200 resamples")
    opts = ap.parse_args(argv)
    if opts.tiny:
        opts.replicates, opts.clusters, opts.resamples = 40, 20, 200
    start = time.perf_counter()
    found = coverage(opts.replicates, opts.clusters, opts.size, opts.icc, opts.resamples, opts.seed)
    design = 1 + (opts.size - 1) * opts.icc
    print(f"{found.replicates} replicates, {opts.clusters} clusters of {opts.size}, ICC {opts.icc} "
          f"(design effect {design:.2f}), {opts.resamples} resamples, seed {opts.seed}:")
    print(f"  interval over clusters covers the true mean in {found.clustered:.1%} of replicates")
    print(f"  interval over rows covers it in {found.rows:.1%}")
    print(f"  ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
