"""Image and video encoding throughput with decoding in the loop, against the pure forward pass.

Issue #4's goal: >= 0.9 of the pure rate on CPU with a tiny model. Stand-in media are written here:
JPEG images (256x256 noise, the costliest content to decode) and H.264 clips (10 s, 320x240, 25 fps,
keyframe every 2 s, B-frames: x264 defaults), like MSR-VTT's. "Pure" runs the same model on the
same inputs already decoded and preprocessed; "in the loop" is the runner's path (decode +
preprocess, encode, cache off). Models have random weights: ``micro`` (4 layers, width 256, patch
32 at 224 px: cheaper than decoding its own input), and open_clip's ViT-S-32 and ViT-B-32 configs.

Decoding costs CPU time that the forward pass then lacks, so on a CPU-only machine with C cores no
pipeline beats ``C / (F + D)`` items per second, F and D being the forward's (on one thread) and the
decoder's CPU seconds per item (measured here): ``ceiling`` is that rate over the pure one, and
``efficiency`` = ratio / ceiling says what the pipeline itself wastes.

Setup ``tensor:N`` (N reader threads, ``auto`` the runner's default) runs the same model with
``-M decode=tensor`` on files read by the runner itself (`negharness.io.tensor_images`): on CUDA,
batched nvjpeg decoding and resizing on the GPU beside the forward pass; on the CPU, libjpeg-turbo
and torch's resize, one item per decode thread. On the CPU, ``decoding alone`` is the runner's
batches taken without encoding them, and ``of cores x 1-core decode`` that rate over (cores / the
path's CPU seconds per item, measured on one thread): issue 44's CPU goal is >= 0.8. The last line is a JSON
object of every figure (``{"bench": "decode_throughput", ...}``) for scripts.

Run: python perf/bench_decode_throughput.py [--models micro ViT-S-32 ViT-B-32]
     [--setups threads:1 threads:auto processes:1 tensor:auto] [--rounds 3]
GPU: python perf/bench_decode_throughput.py --device cuda --precision bf16 --models ViT-B-32 --kinds image photo
     --setups threads:auto processes:8 tensor:auto --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from negharness.cli.process import prefer_passive_waiting

PASSIVE = prefer_passive_waiting()  # as the CLI does; before torch loads (OMP_WAIT_POLICY=ACTIVE to compare)
import torch  # noqa: E402

from negharness.api import ModelOptions  # noqa: E402
from negharness.api import PRECISIONS  # noqa: E402
from negharness.engine.devices import resolve_device  # noqa: E402
from negharness.engine.runner import CachedEvalContext, RunSettings  # noqa: E402
from negharness.io.media import MediaSet, image_files  # noqa: E402
from negharness.io.tensor_images import DecodedFiles  # noqa: E402
from negharness.io.video import FrameSampling, decode_video  # noqa: E402
from negharness.plugins.openclip_model import OpenClipModel  # noqa: E402

MICRO_VIT = {"model_cfg": {"embed_dim": 256, "vision_cfg": {"image_size": 224, "layers": 4, "width": 256,
                                                            "patch_size": 32},
                           "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 256, "heads": 4,
                                        "layers": 2}}}
N_IMAGES, N_VIDEOS, BATCH = 256, 48, 32
VIDEO_ITEMS = 192  # the 48 files, each listed 4 times: the first batch's decoding (the pipeline's fill) amortises
SAMPLING = FrameSampling("segments", 4)
FIGURES: list[dict[str, Any]] = []  # every figure printed, for the JSON line


def write_images(folder: Path) -> list[Path]:
    from PIL import Image

    rng = np.random.default_rng(0)
    images = []
    for i in range(N_IMAGES):
        p = folder / f"img{i}.jpg"
        Image.fromarray(rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)).save(p, quality=90)
        images.append(p)
    return images


COCO_SIZES = [(640, 480), (480, 640), (640, 427), (427, 640), (500, 375), (612, 612), (640, 512), (375, 500)]
POOL = 256  # the pure forward's inputs: this many decoded images, cycled (its time does not depend on content)


def write_coco(folder: Path) -> list[Path]:
    """``N_IMAGES`` COCO-like JPEGs: 32 photos of COCO's common sizes (smooth content, grain, quality 90), each
    file one of them with a comment segment naming it: distinct bytes (the cache keys by content) for the
    price of a copy, so 16,384 items take seconds to write."""
    from PIL import Image, ImageFilter

    rng = np.random.default_rng(2)
    bases = []
    for k in range(32):
        w, h = COCO_SIZES[k % len(COCO_SIZES)]
        small = Image.fromarray(rng.integers(0, 255, (6, 8, 3), dtype=np.uint8)).resize((w, h), Image.BICUBIC)
        noisy = np.asarray(small, dtype=np.int16) + rng.integers(-6, 7, (h, w, 3))
        p = folder / f"coco-base{k}.jpg"
        Image.fromarray(noisy.clip(0, 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(0.6)).save(p, quality=90)
        bases.append(p.read_bytes())
    paths = []
    for i in range(N_IMAGES):
        note = f"item {i}".encode()
        base = bases[i % len(bases)]
        p = folder / f"coco{i:06d}.jpg"
        p.write_bytes(base[:2] + b"\xff\xfe" + (len(note) + 2).to_bytes(2, "big") + note + base[2:])
        paths.append(p)
    return paths


def write_videos(folder: Path) -> list[Path]:
    import av

    videos = []
    base = np.random.default_rng(0).integers(0, 255, (240, 320, 3), dtype=np.uint8)
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
    return videos


def write_photos(folder: Path) -> list[Path]:
    """COCO-sized (640x480) JPEGs with photo-like content: gradients, blurred shapes, mild grain."""
    from PIL import Image, ImageDraw, ImageFilter

    rng = np.random.default_rng(1)
    y, x = np.mgrid[0:480, 0:640]
    photos = []
    for i in range(N_IMAGES):
        base = np.stack([x * 255 / 640, y * 255 / 480, np.full_like(x, 40 * (i % 6))], -1).astype(np.float32)
        im = Image.fromarray(np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8))
        draw = ImageDraw.Draw(im)
        for _ in range(6):
            x0, y0 = rng.integers(0, 560), rng.integers(0, 400)
            draw.ellipse((x0, y0, x0 + rng.integers(20, 80), y0 + rng.integers(20, 80)),
                         fill=tuple(int(c) for c in rng.integers(0, 255, 3)))
        p = folder / f"photo{i}.jpg"
        im.filter(ImageFilter.GaussianBlur(1)).save(p, quality=90)
        photos.append(p)
    return photos


def make_model(name: str, folder: Path, device: torch.device, draft: bool = False, decode: str = "pil") -> OpenClipModel:
    """The same random weights (seed 0) whatever the decoding options."""
    arch = name
    if name == "micro":
        arch = str(folder / "micro_vit.json")
        Path(arch).write_text(json.dumps(MICRO_VIT))
    torch.manual_seed(0)
    extra = {"jpeg_draft": "true"} if draft else {}
    options = ModelOptions(arch=arch, extra={**extra, "decode": decode} if decode != "pil" else extra)
    return OpenClipModel.create(name, options, default_pretrained=None).eval_mode().to(device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def pure_rate(model, kind: str, tensors: torch.Tensor, precision: str = "fp32", items: int | None = None) -> float:
    """Forward passes only, on inputs already on the model's device; ``items`` more than the tensors: they
    are cycled (a pool of decoded images standing for thousands)."""
    device = model.device
    dtype = PRECISIONS[precision]
    items = items or len(tensors)
    with torch.inference_mode(), torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
        _sync(device)
        start = time.perf_counter()
        for lo in range(0, items, BATCH):
            at = lo % len(tensors)
            x = tensors[at:at + min(BATCH, items - lo)]
            model.encode_video(x) if kind == "video" else model.encode_image(x)  # photo* and coco are images
        _sync(device)
    return items / (time.perf_counter() - start)


def run_settings(model, setup: str, precision: str = "fp32") -> RunSettings:
    """``setup``: ``threads:N`` (N decode threads; ``auto`` = the runner's default), ``processes:N``,
    or ``tensor:N`` (a ``-M decode=tensor`` model on plain image files, N reader/decode threads)."""
    how, _, n = setup.partition(":")
    count = None if n == "auto" else int(n)
    common = {"device": model.device, "precision": precision, "batch_size": BATCH}
    return (RunSettings(workers=count, **common) if how == "processes"
            else RunSettings(workers=0, decode_threads=count, **common))


def loop_rate(model, media: MediaSet, setup: str, precision: str = "fp32") -> float:
    ctx = CachedEvalContext(model, run_settings(model, setup, precision), cache=None)
    start = time.perf_counter()
    ctx.embed_media(media)
    return len(media) / (time.perf_counter() - start)


def pipeline_rate(model, media: MediaSet, setup: str) -> float:
    """The runner's decoding alone (its batches taken, nothing encoded): on the CPU, what the
    decoders reach on all cores, to set against cores x the single-core decode rate."""
    ctx = CachedEvalContext(model, run_settings(model, setup), cache=None)
    start = time.perf_counter()
    for _ in ctx.loading.batches(media, list(range(len(media)))):
        pass
    return len(media) / (time.perf_counter() - start)


def cpu_seconds(fn: Callable[[], Any], n: int) -> tuple[Any, float]:
    """``fn``'s result and its CPU seconds (all threads: the video decoder's own included) per item,
    for ``n`` items, with torch on one thread (its most CPU-efficient setting); after a warm-up call."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fn()
        start = time.process_time()
        result = fn()
        return result, (time.process_time() - start) / n
    finally:
        torch.set_num_threads(threads)


def decoded(preprocess: Callable[[Path], torch.Tensor], paths: list[Path]) -> tuple[torch.Tensor, float]:
    """The pure forward's inputs, and what decoding and preprocessing them cost per item in CPU seconds."""
    return cpu_seconds(lambda: torch.stack([preprocess(p) for p in paths]), len(paths))


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def tensor_decode_seconds(model, paths: list[Path]) -> float:
    """CPU seconds per item of the CPU tensor path (read, libjpeg-turbo decode, torch resize), one thread."""
    files = DecodedFiles(paths, list(range(len(paths))), model.pixel_transform())
    return cpu_seconds(lambda: [files[i] for i in range(len(files))], len(paths))[1]


def report(model, kind: str, tensors: torch.Tensor, media: MediaSet, decode_s: float, setups: list[str],
           rounds: int, precision: str = "fp32", tensor: tuple[Any, MediaSet, float] | None = None) -> None:
    """Rounds interleave the pure forward and every setup, and each ratio is taken within its round:
    a shared machine's load drifts by more than the differences measured here. The CPU ceiling is
    printed for CPU runs only (on a GPU the forward does not share the cores). ``tensor``: the
    ``-M decode=tensor`` model, its plain-file media and its decoding's CPU seconds per item, for the
    ``tensor:N`` setups (skipped, said, where there is none: videos)."""
    on_cpu = model.device.type == "cpu"
    skipped = [s for s in setups if s.startswith("tensor") and tensor is None]
    if skipped:
        print(f"  {kind}: {', '.join(skipped)} not run (tensor decoding: image files, without jpeg_draft)")
    setups = [s for s in setups if s not in skipped]
    forward_s = cpu_seconds(lambda: pure_rate(model, kind, tensors[:BATCH]), min(BATCH, len(tensors)))[1] if on_cpu else 0.0
    tensors = tensors.to(model.device)
    pures, ratios, alone = [], {s: [] for s in setups}, {s: [] for s in setups}
    for _ in range(rounds):
        pure = pure_rate(model, kind, tensors, precision, len(media))
        pures.append(pure)
        for s in setups:
            m, items = (tensor[0], tensor[1]) if s.startswith("tensor") and tensor else (model, media)
            ratios[s].append(loop_rate(m, items, s, precision) / pure)
            if on_cpu:
                alone[s].append(pipeline_rate(m, items, s))
    pure = float(np.median(pures))
    threads = torch.get_num_threads()
    ceiling = min(1.0, threads / (forward_s + decode_s) / pure) if on_cpu else 1.0
    cost = (f"CPU per item: forward {forward_s * 1e3:.1f} ms, decode+preprocess {decode_s * 1e3:.1f} ms -> "
            f"ceiling {ceiling:.3f}" if on_cpu else f"decode+preprocess {decode_s * 1e3:.1f} ms CPU per item")
    if tensor is not None:
        cost += f"; tensor path (CPU) {tensor[2] * 1e3:.1f} ms"
    print(f"  {kind}: pure forward {pure:.1f}/s (median of {rounds}, {model.device.type}, {precision}); {cost}")
    for s in setups:
        r = float(np.median(ratios[s]))
        item_s = tensor[2] if s.startswith("tensor") and tensor else decode_s
        decoding = float(np.median(alone[s])) if on_cpu else 0.0
        decode_bound = decoding * item_s / cores()  # decoding alone over cores x the single-core decode rate
        line = (f"  {kind}: in the loop, {s:<12} {pure * r:.1f}/s ratio {r:.3f} (goal >= 0.9; rounds {min(ratios[s]):.3f}-"
                f"{max(ratios[s]):.3f})")
        print(line + (f"  efficiency {r / ceiling:.3f}; decoding alone {decoding:.1f}/s = {decode_bound:.3f} of cores x "
                      "1-core decode (goal >= 0.8)" if on_cpu else ""))
        FIGURES.append({"model": getattr(model, "bench_name", model.name), "kind": kind, "setup": s,
                        "device": model.device.type, "precision": precision, "pure_per_s": round(pure, 2),
                        "loop_per_s": round(pure * r, 2), "ratio": round(r, 4),
                        "ratio_range": [round(min(ratios[s]), 4), round(max(ratios[s]), 4)],
                        "decode_cpu_ms": round(item_s * 1e3, 3), "cores": cores(), "torch_threads": threads,
                        **({"ceiling": round(ceiling, 4), "decoding_alone_per_s": round(decoding, 2),
                            "of_cores_x_decode": round(decode_bound, 4)} if on_cpu else {})})


def tensor_variant(name: str, folder: Path, device: torch.device, paths: list[Path], setups: list[str]
                   ) -> tuple[Any, MediaSet, float] | None:
    """The ``-M decode=tensor`` model, its media (plain files) and its CPU decoding cost, where a
    ``tensor:N`` setup asks for them."""
    if not any(s.startswith("tensor") for s in setups):
        return None
    model = make_model(name, folder, device, decode="tensor")
    model.bench_name = name
    media = image_files(f"bench/files/{paths[0].stem}", [p.name for p in paths], paths)
    return model, media, tensor_decode_seconds(model, paths[:POOL])


def photo_report(model, draft_model, photos: list[Path], setups: list[str], rounds: int, precision: str,
                 tensor: tuple[Any, MediaSet, float] | None = None) -> None:
    """COCO-sized photos as the model's own preprocessing reads them, then with reduced-scale JPEG
    decoding (``-M jpeg_draft=true``: approximate pixels, a fingerprint of its own)."""
    from PIL import Image

    for label, m in (("photo", model), ("photo+draft", draft_model)):
        media = MediaSet(f"bench/{label}", "image", [p.name for p in photos], lambda i: Image.open(photos[i]))
        tensors, decode_s = decoded(lambda p: m.preprocess_image(Image.open(p)), photos)
        report(m, label, tensors, media, decode_s, setups, rounds, precision, tensor if label == "photo" else None)


def main(argv: list[str] | None = None) -> None:
    global N_IMAGES, N_VIDEOS, VIDEO_ITEMS
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="+", default=["micro", "ViT-S-32"])
    parser.add_argument("--setups", nargs="+", default=["threads:1", "threads:auto"],
                        help="threads:N decode threads (auto: the runner's default), processes:N workers, tensor:N "
                             "(-M decode=tensor: batched nvjpeg on CUDA; N reader threads)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (a random ViT-B-32 in bf16: --models ViT-B-32 "
                        "--device cuda --precision bf16 --setups threads:auto processes:8)")
    parser.add_argument("--precision", default="fp32", choices=list(PRECISIONS))
    parser.add_argument("--kinds", nargs="+", default=["image", "video"],
                        help="image, video, photo (640x480 JPEGs, also with -M jpeg_draft=true), coco (N_IMAGES "
                             "COCO-like JPEGs of mixed sizes; the pure forward on a pool of 256, cycled)")
    parser.add_argument("--tiny", action="store_true", help="8 images, 2 videos, the micro model, one round, the first "
                        "setup: a check of the script only")
    args = parser.parse_args(argv)
    if args.tiny:
        N_IMAGES, N_VIDEOS, VIDEO_ITEMS = 8, 2, 4
        args.models, args.setups, args.rounds = ["micro"], list(dict.fromkeys([args.setups[0], "tensor:1"])), 1
    device = resolve_device(args.device)
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        images = write_images(folder) if "image" in args.kinds else []
        videos = write_videos(folder) if "video" in args.kinds else []
        photos = write_photos(folder) if "photo" in args.kinds else []
        coco = write_coco(folder) if "coco" in args.kinds else []
        coco_media = MediaSet("bench/coco", "image", [p.name for p in coco], lambda i: Image.open(coco[i]))
        img_media = MediaSet("bench/images", "image", [p.name for p in images], lambda i: Image.open(images[i]))
        vid_media = MediaSet("bench/videos", "video", [f"{k}" for k in range(VIDEO_ITEMS)],
                             lambda i: decode_video(videos[i % len(videos)], SAMPLING))
        print(f"torch threads {torch.get_num_threads()}, OMP_WAIT_POLICY passive: {PASSIVE}; {N_IMAGES} images, "
              f"{VIDEO_ITEMS} videos from {N_VIDEOS} files ({SAMPLING.key})")
        for name in args.models:
            model = make_model(name, folder, device)
            model.bench_name = name
            print(f"{name}:")
            if images:
                tensors, decode_s = decoded(lambda p: model.preprocess_image(Image.open(p)), images)
                report(model, "image", tensors, img_media, decode_s, args.setups, args.rounds, args.precision,
                       tensor_variant(name, folder, device, images, args.setups))
            if videos:
                tensors, decode_s = decoded(lambda p: model.preprocess_video(decode_video(p, SAMPLING)), videos)
                tensors = tensors.repeat(VIDEO_ITEMS // len(videos), 1, 1, 1, 1)
                report(model, "video", tensors, vid_media, decode_s, args.setups, args.rounds, args.precision)
            if coco:
                pool = coco[:POOL]
                tensors, decode_s = decoded(lambda p: model.preprocess_image(Image.open(p)), pool)
                report(model, "coco", tensors, coco_media, decode_s, args.setups, args.rounds, args.precision,
                       tensor_variant(name, folder, device, coco, args.setups))
            if photos:
                draft = make_model(name, folder, device, draft=True)
                draft.bench_name = name
                photo_report(model, draft, photos, args.setups, args.rounds, args.precision,
                             tensor_variant(name, folder, device, photos, args.setups))
    print(json.dumps({"bench": "decode_throughput", "device": args.device, "precision": args.precision,
                      "passive_wait": PASSIVE, "images": N_IMAGES, "figures": FIGURES}))

if __name__ == "__main__":
    main()
