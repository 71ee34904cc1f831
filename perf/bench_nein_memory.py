"""Peak memory of `nein_val` on NeIn's published parquet layout, for 200 and for 2,000 samples.

Goal (issue #13, item 10): bounded memory whatever the number of samples. Each size runs in its own
process on a generated parquet file (embedded PNGs, row groups of 64 rows as the Hugging Face
export writes them) with the identity editor and the embedded world's exact detector (no weights),
CLIP-I and DINO off; the process prints its peak RSS (ru_maxrss) and its RSS just before the run
(imports done: the baseline measured in the same process). Reported: both, the growth during the
run, and the ratio of the 2,000-sample peak to the 200-sample peak (1.0 = independent of the
number of samples; holding every image, as before, grows ~10x with 10x the samples).

Run: python perf/bench_nein_memory.py [--sizes 200 2000] [--side 256]
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _png(seed: int, side: int) -> bytes:
    """A noisy image (so PNG cannot shrink it to nothing, as a photo)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    base = np.linspace(0, 255, side, dtype=np.float32)[None, :, None] * np.ones((side, 1, 3), np.float32)
    pixels = np.clip(base + rng.normal(0, 24, (side, side, 3)), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def write_parquet(folder: Path, n: int, side: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "validation-00000-of-00001.parquet"
    writer = None
    for lo in range(0, n, 64):  # written a row group at a time: the generator stays small too
        rows = [{"COCO": {"bytes": _png(k, side), "path": f"{k:012d}.jpg"},
                 "T_original": "A dog on a sofa next to a lamp.", "T_generated": "Add a cat.",
                 "T_negative": "No cat in the image.", "NeIn": {"bytes": _png(k + 10**6, side), "path": f"NeIn_{k}_1.png"}}
                for k in range(lo, min(n, lo + 64))]
        table = pa.Table.from_pylist(rows)
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table, row_group_size=64)
    writer.close()
    return path


def _rss_now_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child(root: Path, out: Path) -> None:
    """One run in this process; prints JSON with the RSS figures (KiB)."""
    import pyarrow.parquet  # noqa: F401

    import negharness.plugins.shapes_detector  # noqa: F401
    import negharness.tasks.nein.tasks  # noqa: F401  (imported before the baseline is taken)
    from negharness.discovery.manager import make_host
    from negharness.engine.evaluate import RunRequest, evaluate_request

    host = make_host()
    before = _rss_now_kib()
    start = time.perf_counter()
    req = RunRequest(model="identity", tasks=["nein_val"], data_root=str(root), output_dir=str(out),
                     use_cache=False, task_extra={"detector": "shapes_exact", "clip_model": "none", "dino_model": "none"})
    rec = evaluate_request(host, req)[0].record
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"samples": rec["n_items"]["samples"], "before_kib": before, "peak_kib": peak,
                      "seconds": round(seconds, 1)}))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 2000])
    ap.add_argument("--side", type=int, default=256, help="image side in pixels (default 256)")
    ap.add_argument("--child", nargs=2, metavar=("ROOT", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(Path(args.child[0]), Path(args.child[1]))
        return
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            root = Path(tmp) / f"data{n}"
            parquet = write_parquet(root / "nein", n, args.side)
            proc = subprocess.run([sys.executable, __file__, "--child", str(root), str(Path(tmp) / f"res{n}")],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                sys.exit(f"run of {n} samples failed:\n{proc.stderr[-3000:]}")
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            results[n] = r
            decoded_mib = 3 * n * args.side * args.side * 3 / 2**20
            print(f"{n:6d} samples ({parquet.stat().st_size / 2**20:6.1f} MiB parquet; all decoded images of the run: "
                  f"{decoded_mib:7.1f} MiB): RSS before {r['before_kib'] / 1024:7.1f} MiB, peak {r['peak_kib'] / 1024:7.1f} "
                  f"MiB, growth {(r['peak_kib'] - r['before_kib']) / 1024:6.1f} MiB, {r['seconds']} s")
    small, large = min(results), max(results)
    if small != large:
        grow = [(results[n]["peak_kib"] - results[n]["before_kib"]) / 1024 for n in (small, large)]
        print(f"peak RSS ratio {large} / {small} samples: {results[large]['peak_kib'] / results[small]['peak_kib']:.2f}x "
              f"(growth during the run: {grow[0]:.1f} -> {grow[1]:.1f} MiB)")


if __name__ == "__main__":
    main()
