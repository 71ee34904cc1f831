"""perf/gpu_check.sh's harness step: `negharness.run` of the embedded world's shapes tasks with a
random-weight open_clip model through the ``clip`` plugin (the path a user's run takes), on the given
device: its wall, the device its records name, their metrics, and the peak memory (the GPU's
``max_memory_allocated`` on CUDA, the process's peak RSS elsewhere), to JSON.

    python perf/gpu/harness.py --json FILE [--device cuda] [--precision bf16] [--arch ViT-B-32|tiny]
        [--batch-size 256] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

TASKS = ["shapes_t2i_original", "shapes_t2v_original"]
TINY = {"embed_dim": 32, "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16, "head_width": 16},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}}


def model_files(folder: Path, arch: str) -> tuple[str, str]:
    """(arch config file, checkpoint): open_clip's bundled ``arch`` via `negharness.testing.random_open_clip`,
    or for ``tiny`` a one-layer config written here, both random (seed 0)."""
    if arch != "tiny":
        from negharness.testing import random_open_clip

        opts = random_open_clip(folder, arch)
        return opts[opts.index("--arch") + 1], opts[opts.index("--checkpoint") + 1]
    import open_clip
    import torch
    from safetensors.torch import save_file

    cfg, weights = folder / "tiny.json", folder / "tiny-random.safetensors"
    cfg.write_text(json.dumps(TINY))
    torch.manual_seed(0)
    save_file({k: v.contiguous() for k, v in open_clip.model.CLIP(**TINY).state_dict().items()}, str(weights))
    return str(cfg), str(weights)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--arch", default="tiny")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--limit", type=int, help="items per task (default: all)")
    args = ap.parse_args(argv)
    import torch

    import negharness
    from negharness.io.atomic_files import atomic_write_json

    tmp = Path(tempfile.mkdtemp(prefix="gpu-check-harness-"))
    arch, checkpoint = model_files(tmp, args.arch)
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.init()
        torch.cuda.reset_peak_memory_stats()  # the model files above were made on the CPU; count the run alone
    start = time.perf_counter()
    out = negharness.run("clip", TASKS, arch=arch, checkpoint=checkpoint, model_args={"quick_gelu": "false"},
                         device=args.device, precision=args.precision, batch_size=args.batch_size, limit=args.limit,
                         output_dir=str(tmp / "res"), cache_dir=str(tmp / "cache"))
    wall = time.perf_counter() - start
    peak = (torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) / 2**20
    result = {"wall_s": wall, "peak_mib": peak, "peak_kind": "cuda max_memory_allocated" if cuda else "process maxrss",
              "device": args.device, "precision": args.precision, "arch": args.arch, "batch_size": args.batch_size,
              "limit": args.limit,
              "records": {o.task: {"device": o.record["device"], "metrics": o.record["metrics"]} for o in out}}
    print(f"{wall:.1f} s; peak memory {peak:.0f} MiB ({result['peak_kind']})")
    for o in out:
        print(o.task, o.record["device"], {k: round(v, 3) for k, v in o.record["metrics"].items() if isinstance(v, float)})
    atomic_write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
