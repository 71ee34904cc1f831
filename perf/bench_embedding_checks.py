"""What the model contract costs where embeddings enter the host (round 4, item 1).

`negharness.engine.embedding_contract.EmbeddingContract` checks each batch a model computes (2-D, the rows asked
for, one dimension, finite, unit norm) before it is cached; a cached row passed it when it was
computed, so a warm run (every embedding cached) does not check again. Measured in one process on the
embedded default (shapes_clip on ``shapes_t2v_original`` and ``shapes_t2i_original``, ``--limit``
items each): a cold run with the check timed inside it (the ratio with / without is its evaluate time
over that time less the check's: an A/B of two cold runs on shared cores measures their noise, not a
check of microseconds), then ``--warm`` warm runs each way over its cache, interleaved ABBA, with the
check and with it replaced by the bare conversion it does besides (``.float().cpu()``). Printed: the
times, the ratios (goal: warm <= 1.02), and the check alone per row.
Run: python perf/bench_embedding_checks.py [--limit 64] [--warm 5]   (under a minute)
(``--tiny``: 16 items per task, 2 warm runs each way, a check of the script only)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from contextlib import contextmanager
from typing import Any, Iterator

import torch

from negharness.discovery.manager import make_host
from negharness.engine import embedding_contract
from negharness.engine.evaluate import RunRequest, evaluate_request

TASKS = ["shapes_t2v_original", "shapes_t2i_original"]


@contextmanager
def check(enabled: bool, spent: list[float] | None = None) -> Iterator[None]:
    """The contract as shipped (its time added to ``spent``), or only the conversion to float32 on
    the CPU that it also does."""
    original = embedding_contract.EmbeddingContract.checked

    def timed(self: Any, raw: Any, ids: Any, what: str) -> torch.Tensor:
        start = time.perf_counter()
        try:
            return original(self, raw, ids, what)
        finally:
            if spent is not None:
                spent.append(time.perf_counter() - start)

    embedding_contract.EmbeddingContract.checked = timed if enabled else lambda self, raw, ids, what: raw.float().cpu()
    try:
        yield
    finally:
        embedding_contract.EmbeddingContract.checked = original


def evaluate_seconds(host: Any, cache: str, out: str, limit: int | None) -> float:
    req = RunRequest(model="shapes_clip", tasks=TASKS, batch_size=64, output_dir=out, cache_dir=cache,
                     overwrite=True, device="cpu", limit=limit)
    outcomes = evaluate_request(host, req)
    return sum(o.record["timings"]["total_s"] for o in outcomes)


def measure(host: Any, limit: int, warm_runs: int) -> tuple[float, list[float], dict[bool, float]]:
    """(the cold run's evaluate time, the check's time in it per batch, median warm evaluate time with
    and without the check); the warm runs alternate ABBA over the cache the cold run filled."""
    spent: list[float] = []
    warm: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
        with check(True, spent):
            cold = evaluate_seconds(host, cache, out, limit)
        for i in range(2 * warm_runs):
            enabled = (i % 2 == 0) == (i // 2 % 2 == 0)  # ABBA: neither side always goes first
            with check(enabled):
                warm[enabled].append(evaluate_seconds(host, cache, out, limit))
    return cold, spent, {k: statistics.median(v) for k, v in warm.items()}


def per_row_microseconds(rows: int = 4096, dim: int = 512) -> float:
    """The check alone on one (rows, dim) batch of unit rows, per row."""
    table = torch.nn.functional.normalize(torch.randn(rows, dim), dim=1)
    contract = embedding_contract.EmbeddingContract(embedding_contract.ModelOrigin("bench"))
    ids = [str(i) for i in range(rows)]
    start = time.perf_counter()
    for _ in range(10):
        contract.checked(table, ids, "text")
    return (time.perf_counter() - start) / (10 * rows) * 1e6


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=64, help="items per task")
    ap.add_argument("--warm", type=int, default=5, help="warm runs each way")
    ap.add_argument("--tiny", action="store_true", help="16 items per task, 2 warm runs each way")
    args = ap.parse_args(argv)
    limit, warm_runs = (16, 2) if args.tiny else (args.limit, args.warm)
    host = make_host()
    evaluate_seconds(host, tempfile.mkdtemp(), tempfile.mkdtemp(), min(limit, 16))  # warm-up: threads, the world
    cold, spent, warm = measure(host, limit, warm_runs)
    print(f"torch threads: {torch.get_num_threads()}; {limit} items per task; the tasks' evaluate time")
    print(f"cold: {cold:.3f} s, of which the check {sum(spent) * 1e3:.1f} ms over {len(spent)} batches: "
          f"ratio with / without {cold / (cold - sum(spent)):.4f}")
    print(f"warm (median of {warm_runs} each): with the check {warm[True]:.3f} s, without {warm[False]:.3f} s, "
          f"ratio {warm[True] / warm[False]:.3f}   (goal <= 1.02; the check does not run: every row is cached)")
    print(f"the check alone: {per_row_microseconds():.2f} us per 512-d row")


if __name__ == "__main__":
    main()
