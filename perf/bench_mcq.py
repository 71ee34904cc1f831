"""NegBench MCQ on the 5,914 real COCO rows with generated stand-in images (one per distinct path).

Counts the encodes (each distinct caption once: the file repeats captions across rows) and times
the task against the model's pure forward passes over the same distinct captions and images.
Run: python perf/bench_mcq.py [path/to/negbench_eval_csvs] [--rows N: the file's first N rows]
[--tiny: 12 rows, generated ones when the CSV is absent: a check of the script only]
"""

from __future__ import annotations

import argparse
import csv
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from negharness.api import ModelOptions
from negharness.discovery.manager import make_host
from negharness.engine.evaluate import RunRequest, evaluate_request
from negharness.plugins.shapes_clip import shapes_clip
from negharness.tasks.negbench.catalog import COCO_LAYOUT
from negharness.tasks.negbench.data import read_mcq

CSV = "COCO_val_mcq_llama3.1_rephrased.csv"


HEADER = ["image_path", "correct_answer", "caption_0", "caption_1", "caption_2", "caption_3", "correct_answer_template"]


def write_rows(source: Path, target: Path, rows: int | None) -> None:
    """The data file the task reads: the real CSV (its first ``rows`` rows when given), or, when it is
    absent and ``rows`` is given, generated rows in its layout (correct first; hybrid, positive, negative)."""
    if rows is None:  # a copy: a link out of the data root is refused (NEGHARNESS_ALLOW_LINKS_OUT opts in)
        shutil.copyfile(source, target)
        return
    if source.is_file():
        with source.open(newline="") as f:
            reader = csv.reader(f)
            lines = [next(reader)] + [r for _, r in zip(range(rows), reader)]
    else:
        things = ["dog", "cat", "car", "chair", "cup", "bowl"]
        lines = [HEADER] + [[f"data/coco/images/val2017/{i // 2:012d}.jpg", "0", f"A {a} is not in this image.",
                             f"This image shows a {b}, but no {a} is present.", f"A {a} is present in this image.",
                             f"A {b} is not in this image.", "negative"]
                            for i, (a, b) in enumerate(zip(things * rows, things[1:] * rows)) if i < rows]
    with target.open("w", newline="") as f:
        csv.writer(f).writerows(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csvs", nargs="?", type=Path,
                    default=Path(__file__).resolve().parents[2] / "shared/data/negbench/negbench_eval_csvs")
    ap.add_argument("--rows", type=int, help="the file's first N rows only")
    ap.add_argument("--tiny", action="store_true", help="12 rows (generated when the CSV is absent)")
    opts = ap.parse_args(argv)
    rows_wanted = 12 if opts.tiny else opts.rows
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "negbench").mkdir()
        write_rows(opts.csvs / "images" / CSV, root / "negbench" / CSV, rows_wanted)
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
        rec = evaluate_request(host, req)[0].record
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
