"""All retrieval metrics on a 59,800 x 3,000 random similarity matrix (the MSR-VTT3k size).

Goal (issue #5): <= 1 s on 2 cores for R@1/5/10, MIR, MedR/MeanR, ΔR@K/ΔMIR (negated against
original), and Correct@K/mAP on 18,157 composed queries with several relevant videos each.
Baseline in the same run: a per-query Python loop over the same single-relevant ranking.
Run: python perf/bench_metrics.py [--tiny: 600 x 100, a check of the script only]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from negharness.scoring.metrics import (
    Relevance,
    best_relevant_rank,
    negation_deltas,
    retrieval_metrics,
    several_relevant_metrics,
    source_rank,
)

QUERIES, ITEMS, COMPOSED_QUERIES = 59_800, 3_000, 18_157


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="600 x 100 matrices, 180 composed queries, a 50-query loop")
    opts = ap.parse_args(argv)
    Q, N, COMPOSED = (600, 100, 180) if opts.tiny else (QUERIES, ITEMS, COMPOSED_QUERIES)
    g = torch.Generator().manual_seed(0)
    sim = torch.rand(Q, N, generator=g)
    neg_sim = torch.rand(Q, N, generator=g)
    comp_sim = torch.rand(COMPOSED, N, generator=g)
    rng = np.random.default_rng(0)
    src = rng.integers(0, N, Q)
    comp = Relevance.from_lists([rng.choice(N, rng.integers(1, 12), replace=False) for _ in range(COMPOSED)], N)
    single = Relevance.from_lists([[int(s)] for s in src], N)

    def all_metrics() -> tuple[torch.Tensor, dict]:
        orig_ranks = best_relevant_rank(sim, single)
        out = {"original": retrieval_metrics(orig_ranks)}
        out["negated"] = negation_deltas(orig_ranks, source_rank(neg_sim, src))
        comp_ranks = best_relevant_rank(comp_sim, comp)
        out["composed"] = {**retrieval_metrics(comp_ranks), **several_relevant_metrics(comp_sim, comp, comp_ranks)}
        return orig_ranks, out

    times = []
    for _ in range(3):
        start = time.perf_counter()
        orig_ranks, out = all_metrics()
        times.append(time.perf_counter() - start)
    vectorised = min(times)

    loop_n = 50 if opts.tiny else 2000  # the obvious per-query loop, timed on a sample of each set and extrapolated
    start = time.perf_counter()
    loop = [int((sim[q] >= sim[q, src[q]]).sum()) for q in range(loop_n)]
    [int((neg_sim[q] >= neg_sim[q, src[q]]).sum()) for q in range(loop_n)]
    per_single = (time.perf_counter() - start) / loop_n
    start = time.perf_counter()
    for q in range(loop_n):
        rel = torch.from_numpy(comp.indices[comp.indptr[q]:comp.indptr[q + 1]])
        scores = comp_sim[q, rel].sort(descending=True).values
        irrelevant = torch.ones(N, dtype=torch.bool)
        irrelevant[rel] = False
        ahead = [int((comp_sim[q][irrelevant] >= v).sum()) for v in scores]
        sum((j + 1) / (a + j + 1) for j, a in enumerate(ahead)) / len(ahead)
    per_comp = (time.perf_counter() - start) / loop_n
    assert loop == orig_ranks[:loop_n].tolist()
    looped = per_single * Q + per_comp * COMPOSED
    print(f"torch threads {torch.get_num_threads()}; matrices {Q}x{N} (original, negated) and {COMPOSED}x{N} (composed)")
    print(f"all metrics, vectorised: {vectorised:.3f} s, best of 3 ({', '.join(f'{t:.3f}' for t in times)})  (goal <= 1 s)")
    print(f"per-query Python loop (extrapolated from {loop_n} queries per set): {looped:.2f} s; "
          f"vectorised is {looped / vectorised:.1f}x faster")
    for name, metrics in out.items():
        print(f"  {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in metrics.items()))


if __name__ == "__main__":
    main()
