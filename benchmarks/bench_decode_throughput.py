"""Image and video encoding throughput with decoding in the loop, against the pure forward pass.

Issue #4's goal: >= 0.9 of the pure rate on CPU with a tiny model. Stand-in media are written here:
JPEG images (256x256) and H.264 clips (10 s, 320x240, 25 fps, keyframe every 2 s). "Pure" runs the
same model on the same inputs already decoded and preprocessed; "in the loop" is the runner's
path (decode + preprocess in DataLoader workers, encode, cache off). A tiny random ViT at 224 px
stands in for a real model. Run: python benchmarks/bench_decode_throughput.py [--workers 0 1 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from negharness.media import MediaSet
from negharness.model import ModelOptions
from negharness.plugins.openclip_model import OpenClipModel
from negharness.runner import EvalContext, RunSettings
from negharness.video import FrameSampling, decode_video

TINY_VIT = {"model_cfg": {"embed_dim": 256, "vision_cfg": {"image_size": 224, "layers": 4, "width": 256,
                                                           "patch_size": 32},
                          "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 256, "heads": 4,
                                       "layers": 2}}}
N_IMAGES, N_VIDEOS, BATCH = 256, 48, 32
SAMPLING = FrameSampling("segments", 4)


def write_media(folder: Path) -> tuple[list[Path], list[Path]]:
    import av
    from PIL import Image

    rng = np.random.default_rng(0)
    images = []
    for i in range(N_IMAGES):
        p = folder / f"img{i}.jpg"
        Image.fromarray(rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)).save(p, quality=90)
        images.append(p)
    videos = []
    base = rng.integers(0, 255, (240, 320, 3), dtype=np.uint8)
    for v in range(N_VIDEOS):
        p = folder / f"vid{v}.mp4"
        with av.open(str(p), "w") as out:
            s = out.add_stream("libx264", rate=25)
            s.width, s.height, s.pix_fmt, s.options = 320, 240, "yuv420p", {"g": "50"}
            for t in range(250):
                frame = np.roll(base, shift=t * 2 + v, axis=1)
                for pkt in s.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                    out.mux(pkt)
            for pkt in s.encode():
                out.mux(pkt)
        videos.append(p)
    return images, videos


def pure_rate(model, kind: str, tensors: torch.Tensor) -> float:
    start = time.perf_counter()
    with torch.inference_mode():
        for lo in range(0, len(tensors), BATCH):
            x = tensors[lo:lo + BATCH]
            model.encode_video(x) if kind == "video" else model.encode_image(x)
    return len(tensors) / (time.perf_counter() - start)


def loop_rate(model, media: MediaSet, workers: int) -> float:
    ctx = EvalContext(model, RunSettings(batch_size=BATCH, workers=workers), cache=None)
    start = time.perf_counter()
    ctx.embed_media(media)
    return len(media) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "tiny_vit.json"
        cfg.write_text(json.dumps(TINY_VIT))
        torch.manual_seed(0)
        model = OpenClipModel.create("tiny_vit", ModelOptions(arch=str(cfg)), default_pretrained=None).eval_mode()
        images, videos = write_media(Path(tmp))
        img_media = MediaSet("bench/images", "image", [p.name for p in images], lambda i: Image.open(images[i]))
        vid_media = MediaSet("bench/videos", "video", [p.name for p in videos],
                             lambda i: decode_video(videos[i], SAMPLING))
        t0 = time.perf_counter()
        img_t = torch.stack([model.preprocess_image(Image.open(p)) for p in images])
        dec_img = (time.perf_counter() - t0) / len(images)
        t0 = time.perf_counter()
        vid_t = torch.stack([model.preprocess_video(decode_video(p, SAMPLING)) for p in videos])
        dec_vid = (time.perf_counter() - t0) / len(videos)
        pure_rate(model, "image", img_t[:BATCH])  # warm-up
        print(f"torch threads {torch.get_num_threads()}; decode+preprocess alone: "
              f"{dec_img * 1e3:.2f} ms/image, {dec_vid * 1e3:.1f} ms/video ({SAMPLING.key})")
        for kind, tensors, media in (("image", img_t, img_media), ("video", vid_t, vid_media)):
            pure = max(pure_rate(model, kind, tensors) for _ in range(2))
            print(f"{kind}: pure forward {pure:.1f}/s")
            for w in args.workers:
                rate = max(loop_rate(model, media, w) for _ in range(2))
                print(f"{kind}: decoding in the loop, {w} workers: {rate:.1f}/s  ratio {rate / pure:.3f}  (goal >= 0.9)")


if __name__ == "__main__":
    main()
