"""The three query sets of one collection in one run (shared embedding cache) against one after
another with re-encoding (no cache), on the embedded world's 500 test videos.

Goals (issue #5): >= 2.9x fewer video encodes and >= 2.5x less wall time.
Two models: the tiny shapes_clip, where encoding the 2-4k texts costs more than the 500 videos,
and a random ViT at 224 px (frames upsampled from 32 px), where videos dominate as they do on real
collections. Run: python perf/bench_shared_encoding.py (``--tiny``: shapes_clip only, 16 items per
task, one repeat, a check of the script only)
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from negharness.discovery.manager import make_host
from negharness.engine.evaluate import RunRequest, evaluate_request

TASKS = ["shapes_t2v_original", "shapes_t2v_negated", "shapes_t2v_composed"]
VIT224 = {"model_cfg": {"embed_dim": 256, "vision_cfg": {"image_size": 224, "layers": 4, "width": 256, "patch_size": 32},
                        "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 128, "heads": 2, "layers": 2}}}


def run(host, tasks, use_cache: bool, cache: str, out: str, model=("shapes_clip", None),
        limit: int | None = None) -> tuple[float, int, int]:
    from negharness.api import ModelOptions

    req = RunRequest(model=model[0], model_options=ModelOptions(arch=model[1]), tasks=tasks, output_dir=out,
                     cache_dir=cache, use_cache=use_cache, overwrite=True, device="cpu", limit=limit)
    start = time.perf_counter()
    outcomes = evaluate_request(host, req)
    seconds = time.perf_counter() - start
    media = sum(o.record["counts"]["media_encoded"] for o in outcomes)
    texts = sum(o.record["counts"]["texts_encoded"] for o in outcomes)
    return seconds, media, texts


def compare(host, model, repeats: int, limit: int | None = None) -> None:
    with tempfile.TemporaryDirectory() as warm_cache, tempfile.TemporaryDirectory() as out:
        run(host, TASKS, True, warm_cache, out, model, limit)  # warm-up: world and query files on disk, imports
    shared, separate = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
            shared.append(run(host, TASKS, True, cache, out, model, limit))
            t = m = x = 0
            for task in TASKS:  # one after another, each re-encoding everything it needs
                s, media, texts = run(host, [task], False, cache, out, model, limit)
                t, m, x = t + s, m + media, x + texts
            separate.append((t, m, x))
    a, b = min(shared), min(separate)
    print(f"[{model[0]}{' ' + Path(model[1]).stem if model[1] else ''}]")
    print(f"  one run, shared cache:        {a[0]:.2f} s, {a[1]} video encodes, {a[2]} text encodes")
    print(f"  one after another, no cache:  {b[0]:.2f} s, {b[1]} video encodes, {b[2]} text encodes")
    print(f"  video encodes {b[1] / a[1]:.2f}x fewer (goal >= 2.9x); wall time {b[0] / a[0]:.2f}x less (goal >= 2.5x)")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="shapes_clip only, 16 items per task, one repeat")
    opts = ap.parse_args(argv)
    host = make_host()
    if opts.tiny:
        compare(host, ("shapes_clip", None), 1, limit=16)
        return
    compare(host, ("shapes_clip", None), 3)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "vit224.json"
        cfg.write_text(json.dumps(VIT224))
        compare(host, ("clip", str(cfg)), 1)


if __name__ == "__main__":
    main()
