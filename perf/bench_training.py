"""Training throughput of `negharness train`'s loop against a bare PyTorch loop, in the same run.

Both train the same model with the same recipe (bnl: triplet + two bcl terms, one forward per step)
on the same samples of a generated MSR-VTT-layout train split (short videos written with OpenCV, no
PyAV needed; 8 uniform frames):

- loop: the real thing (`plugins.training_run`): decoding + preprocessing in DataLoader workers,
  checkpoints off, no validation (``-T val=none``), ``--warm-steps + --steps`` steps with a log line
  after each (``log_every=0``), stamped as it arrives: the rate is taken over the last ``--steps`` only
  (worker start and the first batches left out).
- bare: the same steps over batches decoded and preprocessed *before* timing, after one untimed step,
  so it measures forward + backward + optimizer only: the ceiling of any loop.
- decode: samples/s of decode + preprocess alone in this process (one core).
``--rounds`` interleaves (loop, bare) and reports the medians and the median of the per-round ratios.

On a CPU, workers and the model share the cores, so the loop cannot reach the bare rate; the
printed ceiling assumes decoding and compute share ``cores`` cores without overlap loss:
1 / (1 + bare/(decode x cores)) . On a GPU the model runs on the device and the workers decode:
min(1, workers x decode / bare) (the H200, 2026-11-30: 12 workers x 22.6 samples/s a core against 405 bare,
0.67; the loop reached 0.09 while OpenCV decoded on a thread per core in every worker).

    python perf/bench_training.py [--videos 48] [--steps 12] [--warm-steps 2] [--rounds 1] [--batch 8]
                                  [--arch tiny|ViT-B-32] [--device cpu|cuda] [--precision fp32|bf16]
                                  [--workers N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
from standin_video import write_videos  # noqa: E402

TINY = {"model_cfg": {"embed_dim": 64, "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "patch_size": 16,
                                                       "head_width": 32},
                      "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2}},
        "preprocess_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}}
WORDS = ["man", "dog", "woman", "car", "cat", "child", "bird", "horse"]
VERBS = ["running", "dancing", "cooking", "driving", "sleeping", "singing", "jumping", "walking"]


def write_split(root: Path, n: int, size: int) -> str:
    """An MSR-VTT-layout train split of ``n`` 3-s videos (15 fps) with two captions each, written with
    OpenCV (perf/gpu/standin_video.py: no PyAV needed); returns the container written (.mp4 or .avi)."""
    folder = root / "msrvtt10ktrain"
    for sub in ("TextData", "VideoSets", "videos"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    yy, xx = np.mgrid[0:size, 0:size]

    def frames(i: int):
        for f in range(45):  # 3 s
            # smooth moving content (as real video; noise would make decoding pathologically slow)
            base = (xx + 3 * f + 17 * i) % 256
            yield np.stack([base, (yy + 2 * f) % 256, (xx + yy + i) % 256], -1).astype(np.uint8)

    written = write_videos([folder / "videos" / f"video{i}" for i in range(n)], frames, 15)
    lines = [f"video{i}#enc#{k} a {WORDS[(i + k) % 8]} is {VERBS[(3 * i + k) % 8]} in the scene\n"
             for i in range(n) for k in range(2)]
    (folder / "TextData" / "msrvtt10ktrain.caption.txt").write_text("".join(lines))
    (folder / "VideoSets" / "msrvtt10ktrain.txt").write_text("".join(f"video{i}\n" for i in range(n)))
    return written[0].suffix


def steady_rate(stamps: list[tuple[int, float]], warm: int, batch: int) -> float:
    """Samples/s of the steps after the first ``warm``, from (step, time at its end) pairs: worker start
    and the first batches are left out."""
    after = [(k, t) for k, t in stamps if k >= warm]
    if len(after) < 2:
        raise SystemExit(f"the loop logged {len(stamps)} steps; need 2 beyond the {warm} warm-up steps")
    (k0, t0), (k1, t1) = after[0], after[-1]
    return (k1 - k0) * batch / (t1 - t0)


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser()
    ap.add_argument("--videos", type=int, default=48)
    ap.add_argument("--steps", type=int, default=12, help="timed steps per round (after the warm-up steps)")
    ap.add_argument("--warm-steps", type=int, default=1, help="the loop's first steps, left out of its rate (worker "
                    "start, first batches; at least 1); the bare loop runs one untimed step")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of (loop, bare); medians are reported")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--arch", default="tiny")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--size", type=int, default=128, help="video side in pixels")
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    os.environ.setdefault("NEGHARNESS_CACHE", tempfile.mkdtemp())

    from negharness.api import ModelOptions
    from negharness.api import bind_declared
    from negharness.api import TrainOptions, TrainSetOptions
    from negharness.engine.distributed import Dist
    from negharness.plugins.negation_data import SampleData, collate, sample_list
    from negharness.plugins.negation_training import Recipe
    from negharness.plugins.openclip_model import OpenClipModel
    from negharness.plugins.training_run import bnl, train
    from negharness.plugins.training_step import StepLoss
    from negharness.io.atomic_files import atomic_write_json
    from negharness.tasks.nt2vr.training import msrvtt10ktrain
    from negharness.testing import lookup

    tmp = Path(tempfile.mkdtemp())
    container = write_split(tmp / "data", args.videos, args.size)
    arch = args.arch
    if arch == "tiny":
        arch = str(tmp / "tiny.json")
        Path(arch).write_text(json.dumps(TINY))
    mopts = ModelOptions(arch=arch)

    def load_model(_n, o):
        return OpenClipModel.create("clip", o, default_pretrained=None)

    recipe_opts = {"epochs": "1000", "checkpoint_every": "0", "lr": "1e-6", "unit": "item"}

    def loop_rate(out: Path) -> float:
        """The real thing (checkpoints off, no validation) for warm-up + timed steps, one log line per
        step (``log_every=0``), each stamped here when it arrives: the rate over the timed steps."""
        stamps: list[tuple[int, float]] = []

        def log(line: str) -> None:
            found = re.search(r"\bstep (\d+)/\d+", line)
            if found:
                stamps.append((int(found.group(1)), time.perf_counter()))

        opts = TrainOptions(out=out, model="clip", model_options=mopts, task="msrvtt10ktrain",
                            task_extra={"val": "none"}, device=args.device, data_root=tmp / "data",
                            extra={**recipe_opts, "log_every": "0"}, precision=args.precision, batch_size=args.batch,
                            plugins=lookup(model={"clip": lambda o: load_model("clip", o)},
                                           trainset={"msrvtt10ktrain": msrvtt10ktrain}),
                            max_steps=args.warm_steps + args.steps, workers=args.workers, log=log)
        train(opts, "bnl")
        return steady_rate(stamps, args.warm_steps, args.batch)

    # bare: the same recipe's steps on batches decoded before timing
    torch.manual_seed(0)
    model = load_model("clip", mopts)
    device = torch.device(args.device)
    model.to(device)
    net = model.modules()[0].train()
    recipe = Recipe.from_options("bnl", bind_declared(bnl, TrainOptions(out=tmp, extra=recipe_opts, precision=args.precision,
                                                                        batch_size=args.batch), "bnl"))
    ts = msrvtt10ktrain(TrainSetOptions(tmp / "data", {"val": "none"}, cache_dir=tmp / "c"))
    stream = ts.streams[0]
    data = SampleData(stream, sample_list(stream, "item"), model.preprocess_video, 0, 0)
    n_dec = min(len(data), args.batch * 4)
    t = time.perf_counter()
    rows = [data[j] for j in range(n_dec)]
    decode_sps = n_dec / (time.perf_counter() - t)
    batches = [collate(rows[i:i + args.batch]) for i in range(0, n_dec - args.batch + 1, args.batch)]
    step = StepLoss(model, net, recipe, Dist(), device)
    opt = torch.optim.RMSprop(net.parameters(), lr=1e-6)
    import contextlib

    ctx = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if args.precision == "bf16" else contextlib.nullcontext

    def one(b):
        with ctx():
            loss, _ = step([(stream, b)])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def bare_rate() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        for s in range(args.steps):
            one(batches[s % len(batches)])
        if device.type == "cuda":
            torch.cuda.synchronize()
        return args.steps * args.batch / (time.perf_counter() - t)

    one(batches[0])  # warm-up
    loops, bares, walls = [], [], []
    for r in range(args.rounds):  # interleaved: a shared machine's load drifts between rounds
        t0 = time.perf_counter()
        loops.append(loop_rate(tmp / f"loop{r}"))
        walls.append(time.perf_counter() - t0)
        bares.append(bare_rate())
    ratios = [lo / b for lo, b in zip(loops, bares)]
    loop_sps, bare_sps, ratio = (float(np.median(v)) for v in (loops, bares, ratios))
    cores = os.cpu_count() or 1
    ceiling = (1 / (1 + bare_sps / (decode_sps * cores)) if device.type == "cpu"
               else min(1.0, min(max(1, args.workers), cores) * decode_sps / bare_sps))
    what = "shared cores" if device.type == "cpu" else "workers x 1-core decode"
    print(f"device {args.device} precision {args.precision} arch {args.arch} batch {args.batch} steps {args.steps} "
          f"(+{args.warm_steps} warm-up) rounds {args.rounds} workers {args.workers} cores {cores} "
          f"videos {args.size}px 3 s {container}, 8 frames")
    print(f"bare loop (pre-decoded)   : {bare_sps:8.1f} samples/s")
    print(f"negharness loop (workers) : {loop_sps:8.1f} samples/s   (warm-up excluded; a whole run incl. "
          f"start-up: {np.median(walls):.1f} s)")
    print(f"decode+preprocess, 1 core : {decode_sps:8.1f} samples/s")
    print(f"ratio loop / bare         : {ratio:8.2f}   (rounds {min(ratios):.2f}-{max(ratios):.2f}) "
          f"ceiling ({what}) {ceiling:.2f}")
    sys.stdout.flush()
    figures = {"loop_sps": loop_sps, "bare_sps": bare_sps, "ratio": ratio, "ratios": ratios, "decode_sps": decode_sps,
               "ceiling": ceiling, "ceiling_of": what, "workers": args.workers, "device": args.device,
               "precision": args.precision, "arch": args.arch,
               "batch": args.batch, "steps": args.steps, "rounds": args.rounds, "container": container}
    if args.json:
        atomic_write_json(args.json, figures)
    return figures


if __name__ == "__main__":
    main()
