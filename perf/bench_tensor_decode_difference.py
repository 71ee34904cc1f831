"""How far ``-M decode=tensor`` (negharness.io.tensor_images) is from open_clip's PIL preprocessing.

The same random-weight model (seed 0) embeds the same JPEG files both ways on this machine's CPU
(libjpeg-turbo and torch's uint8 resize; on CUDA nvjpeg and a float32 resize, not measured here):
the largest pixel difference in 1/255 levels (after resize and crop, before normalising), the
largest embedding difference and the lowest cosine between the two embeddings of one image, and
the retrieval metrics of text-to-image retrieval on two stand-ins, which must be equal:

- ``shapes``: the embedded world's test images (32x32, written as 256x256 JPEGs: sharp edges,
  upscaled by the model's resize) with their original captions, relevance by scene facts;
- ``photos``: photo-like JPEGs of COCO-like sizes (gradients, discs, grain), one caption each.

The float32 resize a GPU uses is also run here (on the CPU) against the uint8 one: its pixel
difference from PIL's is printed too. The last line is a JSON object of the figures.

Run: python perf/bench_tensor_decode_difference.py [--arch ViT-B-32] [--shapes 500] [--photos 200]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from negharness.api import ModelOptions
from negharness.api.scoring import Relevance
from negharness.engine.runner import CachedEvalContext, RunSettings
from negharness.io import tensor_images
from negharness.io.media import image_files
from negharness.plugins.openclip_model import OpenClipModel
from negharness.scoring.retrieval import evaluate_text_to_media
from negharness.world.media import load_world

SIZES = [(480, 640), (640, 480), (427, 640), (640, 427), (375, 500), (500, 375), (333, 500), (224, 224)]
MICRO = {"embed_dim": 64, "vision_cfg": {"image_size": 224, "layers": 2, "width": 64, "patch_size": 32},
         "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 1}}


def make_model(arch: str, decode: str) -> OpenClipModel:
    torch.manual_seed(0)
    return OpenClipModel.create("clip", ModelOptions(arch=arch, extra={"decode": decode}),
                                default_pretrained=None).eval_mode()


def photo(h: int, w: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 / w, y * 255 / h, np.full_like(x, 30 * (seed % 8))], -1).astype(np.float32)
    for _ in range(4):
        cy, cx, r = rng.integers(0, h), rng.integers(0, w), rng.integers(10, min(h, w) // 3)
        img[(y - cy) ** 2 + (x - cx) ** 2 < r * r] = rng.integers(0, 255, 3)
    return np.clip(img + rng.normal(0, 6, img.shape), 0, 255).astype(np.uint8)


def write_photos(folder: Path, n: int) -> tuple[list[Path], list[str]]:
    from PIL import Image

    paths, captions = [], []
    for i in range(n):
        h, w = SIZES[i % len(SIZES)]
        p = folder / f"photo{i:04d}.jpg"
        Image.fromarray(photo(h, w, i)).save(p, quality=90)
        paths.append(p)
        captions.append(f"a photo of item number {i}, {h} by {w}")
    return paths, captions


def write_shapes(folder: Path, n: int) -> tuple[list[Path], Any]:
    from PIL import Image

    world = load_world(0, "test", "image", n, None)
    paths = []
    for i, pixels in enumerate(world.pixels):
        p = folder / f"shape{i:04d}.jpg"
        Image.fromarray(np.asarray(pixels)).resize((256, 256), Image.NEAREST).save(p, quality=90)
        paths.append(p)
    return paths, world


def pixel_levels(model: OpenClipModel, paths: list[Path]) -> dict[str, float]:
    """Largest and mean |PIL - tensor| in 1/255 levels, with the CPU's uint8 resize and the GPU's float32 one."""
    from PIL import Image

    transform = model.pixel_transform()
    assert transform is not None
    scale = torch.tensor(transform.std).view(1, 3, 1, 1) * 255
    pil = torch.stack([model.preprocess_image(Image.open(p)) for p in paths])
    images = [tensor_images.read_item(p) for p in paths]
    decoded = [tensor_images.decode_jpegs([i[0]], torch.device("cpu"))[0] if isinstance(i, tuple) else i
               for i in images]
    out = {}
    for name, uint8 in (("uint8", True), ("float32", False)):
        levels = (pil - transform(decoded, uint8=uint8)).abs() * scale
        out[f"pixel_max_levels_{name}"] = round(float(levels.max()), 3)
        out[f"pixel_mean_levels_{name}"] = round(float(levels.mean()), 4)
    return out


def compare(label: str, pil_model: OpenClipModel, tensor_model: OpenClipModel, paths: list[Path],
            texts: list[str], relevance: Relevance, batch: int) -> dict[str, Any]:
    media = image_files(f"bench/{label}", [p.name for p in paths], paths)
    ids = [f"q{i}" for i in range(len(texts))]
    results, embs = {}, {}
    for name, model in (("pil", pil_model), ("tensor", tensor_model)):
        ctx = CachedEvalContext(model, RunSettings(batch_size=batch, workers=0))
        embs[name] = ctx.embed_media(media)
        results[name] = evaluate_text_to_media(ctx, ids, texts, relevance, media).metrics
    diff = (embs["pil"] - embs["tensor"]).abs()
    cos = (embs["pil"] * embs["tensor"]).sum(1)
    keys = [k for k in results["pil"] if k.startswith("R@") or k == "MIR"]
    gap = max(abs(results["pil"][k] - results["tensor"][k]) for k in keys if k.startswith("R@"))
    mir_gap = abs(results["pil"]["MIR"] - results["tensor"]["MIR"])  # moves with any rank, however deep
    equal = gap < 1e-9
    figures = {"set": label, "items": len(paths), "queries": len(texts), "embedding_max_abs_diff": float(diff.max()),
               "min_cosine": float(cos.min()), "metrics_pil": {k: results["pil"][k] for k in keys},
               "metrics_tensor": {k: results["tensor"][k] for k in keys}, "recall_equal": equal, "largest_recall_difference": gap, "mir_difference": mir_gap,
               **pixel_levels(tensor_model, paths)}
    print(f"{label}: {len(paths)} images, {len(texts)} queries; pixels max {figures['pixel_max_levels_uint8']} "
          f"levels (mean {figures['pixel_mean_levels_uint8']}), float32 resize max {figures['pixel_max_levels_float32']} "
          f"(mean {figures['pixel_mean_levels_float32']}); embeddings max abs diff {figures['embedding_max_abs_diff']:.2e}, "
          f"min cosine {figures['min_cosine']:.6f}")
    print(f"{label}: R@K equal: {equal} (largest R@K difference {gap:g}, MIR difference {mir_gap:.2g})  "
          f"PIL {figures['metrics_pil']}  tensor {figures['metrics_tensor']}")
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="ViT-B-32", help="open_clip architecture, random weights (seed 0)")
    parser.add_argument("--shapes", type=int, default=500, help="world test images")
    parser.add_argument("--photos", type=int, default=200, help="photo-like JPEGs")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--tiny", action="store_true", help="a micro model, 24 shapes, 8 photos: a check of the script")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", DeprecationWarning)  # torchvision 0.29 says its image decoders will move
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        arch = args.arch
        if args.tiny:
            args.shapes, args.photos, arch = 24, 8, str(folder / "micro.json")
            Path(arch).write_text(json.dumps(MICRO))
        pil_model, tensor_model = make_model(arch, "pil"), make_model(arch, "tensor")
        print(f"model {args.arch if not args.tiny else 'micro'} (random weights, seed 0), CPU, fp32, "
              f"torch threads {torch.get_num_threads()}")
        figures = []
        shape_paths, world = write_shapes(folder, args.shapes)
        texts, groups = [], []
        for caps, group in zip(world.captions, world.groups):
            texts.extend(caps)
            groups.extend([group] * len(caps))
        figures.append(compare("shapes", pil_model, tensor_model, shape_paths, texts,
                               Relevance.from_groups(groups, world.groups), args.batch))
        photo_paths, captions = write_photos(folder, args.photos)
        figures.append(compare("photos", pil_model, tensor_model, photo_paths, captions,
                               Relevance.from_groups([p.name for p in photo_paths], [p.name for p in photo_paths]),
                               args.batch))
    print(json.dumps({"bench": "tensor_decode_difference", "arch": "micro" if args.tiny else args.arch,
                      "figures": figures}))


if __name__ == "__main__":
    main()
