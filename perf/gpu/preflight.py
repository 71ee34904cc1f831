"""perf/gpu_check.sh's preflight: in seconds, before any step spends device time, everything the steps
need that a bare machine can lack, each with the reason it would stop the check.

Checked: the modules the steps import (found, with their versions; torch and torchvision imported, the
rest located: importing open_clip alone took 12 s of a fresh H100 machine's 18), negharness's entry
points (its built-in plugins: without the project's wheel they are not found), CUDA (``--device cuda``:
``torch.cuda.is_available()``, the device's name), one ``torchvision.io.decode_jpeg(device="cuda")``
(nvjpeg: reported, not fatal; the media step's GPU-decode row is then unmeasured, said why), NLTK's two
resources (BNL's negated captions, the training step) and real captions (the text step). One line per
check; the figures to ``--json``; the exit code is the number of fatal findings (0: go).

    python perf/gpu/preflight.py --json FILE [--device cuda] [--shared DIR]
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import importlib.util
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

MODULES = {"torch": "torch", "torchvision": "torchvision", "open_clip": "open_clip_torch", "nltk": "nltk",
           "lemminflect": "lemminflect", "ftfy": "ftfy", "cv2": None, "PIL": "pillow", "numpy": "numpy",
           "safetensors": "safetensors", "pluggy": "pluggy"}
OPTIONAL = {"clip_benchmark": "clip-benchmark", "pycocotools": "pycocotools"}  # the peer step skips without them
CAPTIONS = "data/negbench/negbench_eval_csvs/images/COCO_val_retrieval.csv"
NLTK_RESOURCES = ("tokenizers/punkt_tab/english/", "taggers/averaged_perceptron_tagger_eng/")


def version(module: str, dist: str | None) -> str | None:
    """The installed version, or None where the module is not found at all."""
    if importlib.util.find_spec(module) is None:
        return None
    if dist is None:
        mod = __import__(module)
        return str(getattr(mod, "__version__", "?"))
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "? (no dist-info)"


def check_modules() -> tuple[dict[str, Any], list[str]]:
    found = {m: version(m, d) for m, d in {**MODULES, **OPTIONAL}.items()}
    missing = [m for m in MODULES if found[m] is None]
    return found, [f"modules missing: {', '.join(missing)} (carry their wheels: perf/gpu_wheels.sh)"] if missing else []


def check_entry_points() -> tuple[dict[str, Any], list[str]]:
    names = sorted(e.name for e in metadata.entry_points(group="negharness"))
    if not {"builtin_models", "builtin_tasks"} <= set(names):
        return {"entry_points": names}, ["negharness's entry points not found: install the project's own wheel "
                                         "(perf/gpu_wheels.sh builds it)"]
    return {"entry_points": names}, []


def check_cuda(device: str) -> tuple[dict[str, Any], list[str]]:
    import torch

    got: dict[str, Any] = {"torch": torch.__version__, "cuda_build": torch.version.cuda,
                           "cuda_available": torch.cuda.is_available()}
    if not device.startswith("cuda"):
        return got, []
    if not got["cuda_available"]:
        return got, [f"torch.cuda.is_available() is False (torch {torch.__version__}, built for CUDA {torch.version.cuda})"]
    got["device_name"] = torch.cuda.get_device_name(0)
    got["devices"] = torch.cuda.device_count()
    return got, []


def tiny_jpeg() -> bytes:
    import numpy as np
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((32, 48, 3), 128, np.uint8)).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def check_nvjpeg(device: str) -> tuple[dict[str, Any], list[str]]:
    """One JPEG decoded on the device (nvjpeg). Not fatal: reported, and the GPU-decode row says why."""
    if not device.startswith("cuda"):
        return {"nvjpeg": "not tried (cpu)"}, []
    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    try:
        out = decode_jpeg(torch.frombuffer(bytearray(tiny_jpeg()), dtype=torch.uint8), mode=ImageReadMode.RGB,
                          device=device)
        torch.cuda.synchronize()
        ok = tuple(out.shape) == (3, 32, 48) and out.device.type == "cuda"
        return {"nvjpeg": "yes" if ok else f"decoded to {tuple(out.shape)} on {out.device}"}, []
    except Exception as exc:  # noqa: BLE001 - the finding itself
        return {"nvjpeg": f"no: {type(exc).__name__}: {str(exc)[:200]}"}, []


def nltk_dirs() -> list[Path]:
    """Where NLTK looks (``nltk.data.path``'s rule), without importing NLTK (seconds on a loaded machine)."""
    env = [Path(p) for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    prefixes = [Path(sys.prefix), Path("/usr/share"), Path("/usr/local/share"), Path("/usr/lib"), Path("/usr/local/lib")]
    return [*env, Path.home() / "nltk_data", *(p / "nltk_data" for p in prefixes), Path(sys.prefix) / "share/nltk_data",
            Path(sys.prefix) / "lib/nltk_data"]


def check_nltk() -> tuple[dict[str, Any], list[str]]:
    """Each resource as a folder or as its published zip (NLTK reads both) in one of NLTK's folders."""
    dirs = nltk_dirs()
    missing = [path for path in NLTK_RESOURCES
               if not any((d / path).is_dir() or (d / f"{path.split('/')[0]}/{path.split('/')[1]}.zip").is_file()
                          for d in dirs)]
    got = {"nltk_data": os.environ.get("NLTK_DATA"), "nltk_missing": missing}
    return got, [f"NLTK data missing: {', '.join(missing)} (NLTK_DATA={os.environ.get('NLTK_DATA')}; perf/gpu_wheels.sh "
                 "copies it into the carried folder)"] if missing else []


def check_captions(shared: Path | None, device: str) -> tuple[dict[str, Any], list[str]]:
    """Fatal on the GPU only: the CPU smoke falls back to generated captions, said in its table."""
    path = shared / CAPTIONS if shared else None
    if (path is None or not path.is_file()) and device.startswith("cuda"):
        return {"captions": None}, [f"no real captions ({path or 'NEGHARNESS_SHARED unset'}): the text row would be "
                                    "unmeasured (perf/gpu_wheels.sh copies the CSVs' first rows into the carried folder)"]
    return {"captions": str(path) if path is not None and path.is_file() else None}, []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--shared", type=Path, default=Path(os.environ["NEGHARNESS_SHARED"]) if os.environ.get(
        "NEGHARNESS_SHARED") else None)
    args = ap.parse_args(argv)
    start = time.perf_counter()
    found: dict[str, Any] = {"device_asked": args.device, "python": sys.version.split()[0]}
    fatal: list[str] = []
    checks: list[tuple[str, Callable[[], tuple[dict[str, Any], list[str]]]]] = [
        ("modules", check_modules), ("entry points", check_entry_points), ("cuda", lambda: check_cuda(args.device)),
        ("nvjpeg", lambda: check_nvjpeg(args.device)), ("nltk", check_nltk), ("captions", lambda: check_captions(args.shared, args.device))]
    for name, check in checks:
        t0 = time.perf_counter()
        try:
            got, problems = check()
        except Exception as exc:  # noqa: BLE001 - a check that cannot run is a finding
            got, problems = {}, [f"{name}: {type(exc).__name__}: {exc}"]
        found[name] = got
        fatal += problems
        print(f"preflight {name:12s} {time.perf_counter() - t0:5.1f} s  {'FAIL: ' + '; '.join(problems) if problems else 'ok'}"
              f"  {json.dumps(got, default=str)[:300]}")
    found["fatal"], found["seconds"] = fatal, round(time.perf_counter() - start, 2)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.json.with_suffix(".tmp")
    tmp.write_text(json.dumps(found, indent=1, default=str))
    tmp.replace(args.json)
    print(f"preflight: {'GO' if not fatal else 'STOP: ' + ' | '.join(fatal)} ({found['seconds']:.1f} s)")
    return len(fatal)


if __name__ == "__main__":
    sys.exit(main())
