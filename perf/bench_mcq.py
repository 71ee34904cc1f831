"""NegBench MCQ on the 5,914 real COCO rows with generated stand-in images (one per distinct path).

Counts the encodes (each distinct caption once: the file repeats captions across rows) and times
the task against the model's pure forward passes over the same distinct captions and images.
Run: python perf/bench_mcq.py [path/to/negbench_eval_csvs]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from negharness.contracts.model import ModelOptions
from negharness.discovery.manager import make_host
from negharness.engine.evaluate import RunRequest, run_evaluation
from negharness.plugins.shapes_clip import shapes_clip
from negharness.tasks.negbench.catalog import COCO_LAYOUT
from negharness.tasks.negbench.data import read_mcq

CSV = "COCO_val_mcq_llama3.1_rephrased.csv"


def main() -> None:
    csvs = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared/data/negbench/negbench_eval_csvs"
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "negbench").mkdir()
        (root / "negbench" / CSV).symlink_to(csvs / "images" / CSV)
        rows = read_mcq(root / "negbench" / CSV, root, COCO_LAYOUT)
        paths = list(dict.fromkeys(r.media for r in rows))
        rng = np.random.default_rng(0)
        for p in paths:
            p.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(p, quality=90)
        options = [o for r in rows for o in r.options]
        distinct = list(dict.fromkeys(options))
        host = make_host()
        req = RunRequest(model="shapes_clip", tasks=["negbench_mcq_coco"], data_root=str(root),
                         output_dir=str(root / "res"), cache_dir=str(root / "cache"), device="cpu", batch_size=256)
        start = time.perf_counter()
        rec = run_evaluation(host, req)[0].record
        task_s = rec["timings"]["total_s"]
        wall = time.perf_counter() - start

        model = shapes_clip(ModelOptions()).eval_mode()
        pixels = torch.stack([model.preprocess_image(Image.open(p)) for p in paths])
        start = time.perf_counter()
        with torch.inference_mode():
            for lo in range(0, len(pixels), 256):
                model.encode_image(pixels[lo:lo + 256])
            for lo in range(0, len(distinct), 256):
                model.encode_text(distinct[lo:lo + 256])
        pure = time.perf_counter() - start
        c = rec["counts"]
        print(f"{len(rows)} questions, {len(options)} options, {len(distinct)} distinct captions, {len(paths)} images")
        print(f"encoded: {c['texts_encoded']} texts, {c['media_encoded']} images "
              f"(each distinct caption once: {c['texts_encoded'] == len(distinct)})")
        print(f"task evaluate {task_s:.2f} s (whole run {wall:.2f} s with model load); pure forward over the same "
              f"distinct inputs {pure:.2f} s; ratio {task_s / pure:.2f} (decoding {len(paths)} JPEGs is in the task, "
              "not in the pure forward)")
        print(f"throughput: {len(rows) / task_s:.0f} questions/s")
        print("metrics:", {k: round(v, 2) for k, v in rec["metrics"].items()})


if __name__ == "__main__":
    main()
