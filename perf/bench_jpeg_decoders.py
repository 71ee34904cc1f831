"""torchvision's JPEG decoding (deprecated since torchvision 0.29) against its named successor, TorchCodec's
(`torchcodec.decoders.decode_jpeg`, from torchcodec 0.16), on the CPU: throughput and pixel equality on
COCO-like mixed-size JPEGs, both measured in this run. Prints figures and the ratio; TorchCodec is optional
(not a dependency): where it is absent the script says so and measures torchvision alone.

    python perf/bench_jpeg_decoders.py [--images 400] [--rounds 3]
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
import warnings

import numpy as np
import torch
from PIL import Image


def make_jpegs(n: int, seed: int = 0) -> list[bytes]:
    """Mixed-size photos-like JPEGs (smooth gradients plus noise, 320-640 px a side, quality 90)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        h, w = (int(x) for x in rng.integers(320, 641, size=2))
        base = np.linspace(0, 255, w)[None, :, None] * rng.random(3)[None, None, :]
        img = np.clip(base + rng.normal(0, 25, (h, w, 3)), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, "JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def timed(decode, data: list[torch.Tensor], rounds: int) -> tuple[float, list[torch.Tensor]]:
    """Median images/s over ``rounds`` and the last round's outputs."""
    rates, outs = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        outs = [decode(d) for d in data]
        rates.append(len(data) / (time.perf_counter() - start))
    return statistics.median(rates), outs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=400)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    data = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in make_jpegs(args.images)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from torchvision.io import decode_jpeg as tv_decode

        tv_rate, tv_out = timed(lambda d: tv_decode(d, mode="RGB"), data, args.rounds)
    print(f"torchvision.io.decode_jpeg (deprecated):  {tv_rate:8.1f} img/s (1 thread, {args.images} images)")
    try:
        from torchcodec.decoders import decode_jpeg as tc_decode
    except ImportError as exc:
        print(f"torchcodec: not installed ({exc}); `pip install torchcodec` to compare")
        return 0
    import torchcodec

    tc_rate, tc_out = timed(lambda d: tc_decode(d, mode="RGB"), data, args.rounds)
    diffs = [int((a.int() - b.int()).abs().max()) for a, b in zip(tv_out, tc_out)]
    print(f"torchcodec {torchcodec.__version__} decode_jpeg:        {tc_rate:8.1f} img/s")
    print(f"ratio torchcodec / torchvision:           {tc_rate / tv_rate:8.2f}")
    print(f"pixels: {sum(d == 0 for d in diffs)}/{len(diffs)} images identical, max |difference| {max(diffs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
