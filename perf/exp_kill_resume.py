"""kill -9 a real `negharness run` at three moments, rerun, and compare with an uninterrupted run.

The model is a ViT-sized open_clip CLIP (open_clip's ViT-S-32 config by default; --config ViT-B-32
takes ~4x longer on a CPU) with random weights saved
once to a safetensors file, so every process loads the same model (a model built from a config alone
is random per process, and its fingerprint says so). The task is the embedded world's
shapes_t2i_original (500 images, 1,500 captions) at the CLI's default settings. A run is killed
with SIGKILL once the cache holds the given number of items of one kind; the rerun's counts say how
many items were kept and how many encoded again, and its metrics are compared with the clean run's.

Run: python perf/exp_kill_resume.py [--task shapes_t2i_original] [--config ViT-S-32]
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from negharness.store.shards import read_shard
from negharness.testing import random_open_clip


def stored(cache: Path, kind: str) -> int:
    n = 0
    for shard in cache.rglob(f"{kind}*/shard-*.safetensors"):
        try:
            n += len(read_shard(shard)[0])
        except Exception:
            pass
    return n


def run(model: list[str], task: str, cache: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "negharness.cli", "run", *model, "--task", task, "--device", "cpu",
                             "--cache-dir", str(cache), "--output-dir", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def record(out: Path, task: str) -> dict:
    """The task's record under ``out`` (its file is named by the task, plus the variant, e.g. a limit)."""
    from negharness.records.results import iter_records

    found = [rec for path, rec in iter_records(out) if path.stem.split(".")[0] == task]
    if len(found) != 1:
        sys.exit(f"{len(found)} records of {task} under {out}")
    return found[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="shapes_t2i_original")
    parser.add_argument("--config", default="ViT-S-32", help="an open_clip model config name")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kill-resume-"))
    model = random_open_clip(tmp, args.config)
    print(f"model: {args.config} config, random weights; task {args.task}", flush=True)
    start = time.perf_counter()
    clean = run(model, args.task, tmp / "clean-cache", tmp / "clean")
    assert clean.wait() == 0, clean.stderr.read().decode()[-2000:]
    reference = record(tmp / "clean", args.task)
    print(f"uninterrupted run: {time.perf_counter() - start:.1f} s, counts {reference['counts']}", flush=True)
    for kind, items in (("image", 64), ("image", 320), ("text", 640)):
        cache, killed_at = tmp / f"cache-{kind}-{items}", time.perf_counter()
        proc = run(model, args.task, cache, tmp / f"killed-{kind}-{items}")
        while stored(cache, kind) < items:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kept = {k: stored(cache, k) for k in ("image", "text")}
        rerun = run(model, args.task, cache, tmp / f"rerun-{kind}-{items}")
        assert rerun.wait() == 0, rerun.stderr.read().decode()[-2000:]
        got = record(tmp / f"rerun-{kind}-{items}", args.task)
        same = got["metrics"] == reference["metrics"]
        worst = max(abs(got["metrics"][k] - v) for k, v in reference["metrics"].items())
        print(f"killed once {kind} >= {items} kept ({time.perf_counter() - killed_at:.1f} s in): kept {kept}; "
              f"rerun counts {got['counts']}; metrics identical: {same} (largest difference {worst:.2e})", flush=True)


if __name__ == "__main__":
    main()
