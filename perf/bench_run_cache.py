"""`negharness run` on the embedded default's original-caption tasks (the same inputs as the pure forward):
cold cache, warm cache, against the pure forward passes.

Goals (issue #3): cold <= 1.10x the model's pure forward time over the same inputs; warm <= 5% of cold.
Pure forward = the same texts, videos and images, already decoded and preprocessed into tensors,
through encode_text / encode_video / encode_image in the same batch size, nothing else.
Cold/warm = the tasks' evaluate time as recorded (world loading, caching, ranking and metrics in),
plus the whole `run_evaluation` wall time (model load in). Run: python perf/bench_run_cache.py
(``--tiny``: 16 items per task, one repeat, a check of the script only)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from negharness.api import ModelOptions
from negharness.discovery.manager import make_host
from negharness.engine.evaluate import RunRequest, evaluate_request
from negharness.io.paths import data_root
from negharness.plugins.shapes_clip import shapes_clip
from negharness.world.media import load_world

BATCH = 64
REPEATS = 3


def pure_forward_seconds(model, limit: int | None = None) -> float:
    inputs = []
    for kind in ("video", "image"):
        world = load_world(0, "test", kind, 500, data_root()[0])
        pre = model.preprocess_video if kind == "video" else model.preprocess_image
        tensors = torch.stack([pre(p) for p in world.pixels[:limit]])
        # distinct texts only: the same work the run must do at the least
        inputs.append((kind, tensors, list(dict.fromkeys(c for caps in world.captions[:limit] for c in caps))))
    start = time.perf_counter()
    with torch.inference_mode():
        for kind, tensors, texts in inputs:
            for lo in range(0, len(tensors), BATCH):
                batch = tensors[lo:lo + BATCH]
                model.encode_video(batch) if kind == "video" else model.encode_image(batch)
            for lo in range(0, len(texts), BATCH):
                model.encode_text(texts[lo:lo + BATCH])
    return time.perf_counter() - start


def timed_run(host, cache_dir: str, out_dir: str, limit: int | None = None) -> tuple[float, float, dict]:
    req = RunRequest(model="shapes_clip", tasks=["shapes_t2v_original", "shapes_t2i_original"], batch_size=BATCH, output_dir=out_dir,
                     cache_dir=cache_dir, overwrite=True, device="cpu", limit=limit)
    start = time.perf_counter()
    outcomes = evaluate_request(host, req)
    wall = time.perf_counter() - start
    evaluate = sum(o.record["timings"]["total_s"] for o in outcomes)
    counts = {k: sum(o.record["counts"][k] for o in outcomes) for k in outcomes[0].record["counts"]}
    return evaluate, wall, counts


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="16 items per task, one repeat")
    opts = ap.parse_args(argv)
    limit, repeats = (16, 1) if opts.tiny else (None, REPEATS)
    host = make_host()
    model = shapes_clip(ModelOptions()).eval_mode()
    pure_forward_seconds(model, limit)  # warm-up: threads, allocator, world pixels on disk
    pure = [pure_forward_seconds(model, limit) for _ in range(repeats)]
    cold, warm = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
            cold.append(timed_run(host, cache, out, limit))
            warm.append(timed_run(host, cache, out, limit))
    p = statistics.median(pure)
    c_eval = statistics.median(x[0] for x in cold)
    w_eval = statistics.median(x[0] for x in warm)
    print(f"torch threads: {torch.get_num_threads()}")
    print(f"pure forward (1000 media, distinct texts): {p:.3f} s   runs: {', '.join(f'{x:.3f}' for x in pure)}")
    print(f"cold run, tasks' evaluate time:        {c_eval:.3f} s   counts {cold[0][2]}")
    print(f"cold run, whole run_evaluation:        {statistics.median(x[1] for x in cold):.3f} s (model load in)")
    print(f"warm run, tasks' evaluate time:        {w_eval:.3f} s   counts {warm[0][2]}")
    print(f"warm run, whole run_evaluation:        {statistics.median(x[1] for x in warm):.3f} s (model load in)")
    print(f"ratio cold / pure forward: {c_eval / p:.3f}   (goal <= 1.10)")
    print(f"ratio warm / cold:         {w_eval / c_eval:.3f}   (goal <= 0.05)")


if __name__ == "__main__":
    main()
