"""perf/gpu_check.sh's media step: image and video encoding with decoding in the loop against the pure
forward pass, by perf/bench_decode_throughput.py's own code, at the check's sizes, its figures to JSON.

That script is run in this process (its ``main``) with three things set from here: its sizes (module
constants: images, video files and items, batch), its stand-in videos written with OpenCV instead of
PyAV (the GPU machine has no PyAV; `standin_video`), and its printed figures read back. A GPU-decode
setup is asked for only if the script's ``--setups`` help names one (another change adds it); if it
names none, or that setup fails, the figure is left out with the reason, and the rest still runs.
With a GPU-decode setup, the decoding is also timed apart from the model (`decoding_alone`): nvjpeg alone
(the project's `decode_jpegs` on batches of bytes already read) and the runner's decoding pipeline alone
(reads, nvjpeg, resize; nothing encoded): the rates perf/gpu_sim.py's stand-ins assume (``--nvjpeg-rate``).

    python perf/gpu/media.py --json FILE [--device cuda] [--precision bf16] [--model ViT-B-32]
        [--images 2048] [--videos 48] [--video-items 768] [--batch 256] [--rounds 3] [--gpu-setup NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

PERF = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(PERF), str(Path(__file__).resolve().parent)]

import bench_decode_throughput as bdt  # noqa: E402
from standin_video import write_videos  # noqa: E402

NEEDED = ("N_IMAGES", "N_VIDEOS", "VIDEO_ITEMS", "BATCH", "SAMPLING", "write_videos", "write_coco", "FIGURES", "main")
GPU_SETUP = re.compile(r"\b(tensor|gpu-decode|gpu_decode|nvjpeg|gpu|device)(:(?:auto|\d+))?\b")
PURE = re.compile(r"^\s*([\w+]+): pure forward ([\d.]+|nan)/s", re.M)
LOOP = re.compile(r"^\s*([\w+]+): in the loop, (\S+)\s+([\d.]+|nan)/s ratio ([\d.]+|nan)", re.M)


def cv2_videos(folder: Path) -> list[Path]:
    """bench_decode_throughput's stand-in clips (10 s, 320x240, 25 fps, a noise image sliding) written
    with OpenCV."""
    base = np.random.default_rng(0).integers(0, 255, (240, 320, 3), dtype=np.uint8)

    def frames(v: int):
        return (np.roll(base, shift=t * 2 + v, axis=1) for t in range(250))

    return write_videos([folder / f"vid{v}" for v in range(bdt.N_VIDEOS)], frames, 25)


def gpu_setup_named() -> str | None:
    """The GPU-decode setup bench_decode_throughput.py's ``--setups`` help names, if any."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        bdt.main(["--help"])
    entry = re.search(r"^  --setups\b(.*\n(?:\s{8,}\S.*\n?)*)", out.getvalue(), re.M)  # its line + continuations
    found = GPU_SETUP.search(entry.group(1)) if entry else None
    if found is None:
        return None
    return found.group(0) if found.group(2) else f"{found.group(1)}:auto"  # "tensor:N" in the help: N is a count


class Tee(io.StringIO):
    """Captures what the script prints and passes it on (the check's log shows it)."""

    def write(self, s: str) -> int:
        sys.__stdout__.write(s)
        return super().write(s)


def run_bench(argv: list[str]) -> str:
    out = Tee()
    with contextlib.redirect_stdout(out):
        bdt.main(argv)
    return out.getvalue()


def parse(text: str) -> dict[str, Any]:
    """{kind: {"pure": rate, "loop": {setup: {"rate", "ratio"}}}} from the script's printed lines; the COCO-like
    images (kind ``coco``) are the check's images."""
    got: dict[str, Any] = {}
    for kind, rate in PURE.findall(text):
        got.setdefault("image" if kind == "coco" else kind, {"loop": {}})["pure"] = float(rate)
    for kind, setup, rate, ratio in LOOP.findall(text):
        got.setdefault("image" if kind == "coco" else kind, {"loop": {}})["loop"][setup] = {"rate": float(rate),
                                                                                         "ratio": float(ratio)}
    return got


def decode_costs(result: dict[str, Any]) -> None:
    """Each image and video setup's CPU decode cost and the cores, from the script's figures (the CPU-decode
    goals' ceiling: cores / decode seconds per item)."""
    for fig in bdt.FIGURES:
        kind = {"coco": "image", "video": "video"}.get(fig["kind"])
        loop = result.get(kind, {}).get("loop", {}).get(fig["setup"]) if kind else None
        if loop is not None:
            loop.update(decode_cpu_ms=fig["decode_cpu_ms"], cores=fig["cores"])


class Fallbacks:
    """Counts what nvjpeg hands back to Pillow: `negharness.io.tensor_images.decode_jpegs` returns None for
    an item its decoder refused (after the batched call failed), which the runner then decodes with Pillow,
    one thread, silently. Wraps that function in this process."""

    def __init__(self) -> None:
        import negharness.io.tensor_images as tensor_images

        self.module, self.real = tensor_images, tensor_images.decode_jpegs
        self.counts = {"decoded": 0, "items": 0, "calls": 0}
        tensor_images.decode_jpegs = self.decode_jpegs

    def decode_jpegs(self, encoded: list[Any], device: Any) -> list[Any]:
        out = self.real(encoded, device)
        if getattr(device, "type", "cpu") != "cpu":
            self.counts["calls"] += 1
            self.counts["decoded"] += len(out)
            self.counts["items"] += sum(1 for x in out if x is None)
        return out


def nvjpeg_rate(paths: list[Path], device: Any, batch: int) -> float:
    """Images/s of the project's batched decode alone (`decode_jpegs` on ``decode_device``), the files read
    into tensors first; one synchronisation at the end."""
    from torchvision.io import read_file

    import negharness.io.tensor_images as tensor_images

    encoded = [read_file(str(p)) for p in paths]
    where = tensor_images.decode_device(device)
    tensor_images.decode_jpegs(encoded[:batch], where)  # warm-up: the decoder's handles and buffers
    bdt._sync(where)
    start = time.perf_counter()
    for lo in range(0, len(encoded), batch):
        tensor_images.decode_jpegs(encoded[lo:lo + batch], where)
    bdt._sync(where)
    return len(encoded) / (time.perf_counter() - start)


def decoding_alone(args: argparse.Namespace, setup: str) -> dict[str, Any]:
    """nvjpeg alone and the runner's decoding pipeline alone (``setup``, a ``-M decode=tensor`` model: reads,
    decode, resize; nothing encoded) on the check's COCO-like images, the median of ``--rounds`` rounds."""
    from negharness.engine.media_batches import MediaBatches

    device = bdt.resolve_device(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        coco = bdt.write_coco(Path(tmp))
        model = bdt.make_model(args.model, Path(tmp), device, decode="tensor")
        # plain files, as bench_decode_throughput's tensor setups take them: a set without sources goes the
        # Pillow road (on the H200 that measured Pillow's 761 img/s under the pipeline's name)
        media = bdt.image_files("bench/coco-alone", [p.name for p in coco], coco)
        if MediaBatches(model, bdt.run_settings(model, setup), None).tensor_decoding(media) is None:
            raise SystemExit(f"decoding_alone: {media.key} would not be tensor-decoded: not the pipeline it names")
        decoder = [nvjpeg_rate(coco, device, args.batch) for _ in range(args.rounds)]
        pipeline = [bdt.pipeline_rate(model, media, setup) for _ in range(args.rounds)]
    got = {"nvjpeg": statistics.median(decoder), "pipeline": statistics.median(pipeline), "setup": setup,
           "rounds": {"nvjpeg": decoder, "pipeline": pipeline}}
    print(f"  coco: decoding alone, nothing encoded: nvjpeg {got['nvjpeg']:.1f}/s (decode_jpegs on "
          f"{device.type}), the runner's pipeline ({setup}) {got['pipeline']:.1f}/s (median of {args.rounds})")
    return got


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--model", default="micro", help="micro, ViT-S-32, ViT-B-32 (bench_decode_throughput's names)")
    ap.add_argument("--images", type=int, default=16, help="COCO-like JPEGs of mixed sizes")
    ap.add_argument("--videos", type=int, default=2, help="video files written")
    ap.add_argument("--video-items", type=int, default=4, help="video items encoded (the files, repeated)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--setup", default="threads:auto", help="the CPU-decode setup")
    ap.add_argument("--gpu-setup", help="the GPU-decode setup's name (default: the one the script's help names)")
    args = ap.parse_args(argv)
    missing = [n for n in NEEDED if not hasattr(bdt, n)]
    if missing:
        raise SystemExit(f"perf/bench_decode_throughput.py has no {', '.join(missing)}: update perf/gpu/media.py")
    bdt.N_IMAGES, bdt.N_VIDEOS, bdt.VIDEO_ITEMS, bdt.BATCH = args.images, args.videos, args.video_items, args.batch
    bdt.write_videos = cv2_videos
    from negharness.io.atomic_files import atomic_write_json

    fallbacks = Fallbacks()
    common = ["--device", args.device, "--precision", args.precision, "--models", args.model, "--rounds", str(args.rounds)]
    gpu = args.gpu_setup or gpu_setup_named()
    result: dict[str, Any] = {"device": args.device, "precision": args.precision, "model": args.model,
                              "images": args.images, "image_kind": "COCO-like images of mixed sizes",
                              "video_items": args.video_items, "video_files": args.videos,
                              "frames_per_video": bdt.SAMPLING.frames, "batch": args.batch, "rounds": args.rounds,
                              "setup": args.setup, "gpu_setup": gpu, "gpu_setup_error": None if gpu else
                              "no GPU-decode setup named in bench_decode_throughput.py --setups",
                              "nvjpeg_fallbacks": fallbacks.counts}
    text = ""

    def save(part: str) -> None:  # after each part: a time limit keeps the figures already measured
        result.update(parse(text))
        decode_costs(result)
        result["parts_done"] = [*result.get("parts_done", []), part]
        atomic_write_json(args.json, result)

    text += run_bench([*common, "--kinds", "coco", "--setups", args.setup])
    save("image, CPU decode")
    if gpu:
        try:
            text += run_bench([*common, "--kinds", "coco", "--setups", gpu])
        except Exception as exc:  # noqa: BLE001 - the GPU setup's failure is a figure left out, said in the table
            traceback.print_exc()
            result["gpu_setup_error"] = f"{gpu}: {type(exc).__name__}: {exc}"[:300]
        if result["gpu_setup_error"] is None and f"in the loop, {gpu}" not in text:
            result["gpu_setup_error"] = f"{gpu}: no figure printed"
        if fallbacks.counts["items"]:
            print(f"nvjpeg fell back to Pillow for {fallbacks.counts['items']} of {fallbacks.counts['decoded']} items")
        save("image, GPU decode")
        if result["gpu_setup_error"] is None:
            in_loop = dict(fallbacks.counts)  # the loop's fallbacks: what decoding alone decodes is not the loop's
            try:
                result["decoding_alone"] = decoding_alone(args, gpu)
            except Exception as exc:  # noqa: BLE001 - a figure left out, said; the video part still runs
                traceback.print_exc()
                result["decoding_alone_error"] = f"{type(exc).__name__}: {exc}"[:300]
            except SystemExit as exc:  # decoding_alone's own refusal of a set that would not be tensor-decoded
                result["decoding_alone_error"] = str(exc)[:300]
            alone = {k: fallbacks.counts[k] - in_loop[k] for k in in_loop}
            fallbacks.counts.update(in_loop)
            if "decoding_alone" in result:
                result["decoding_alone"]["fallbacks"] = alone
            save("image, decoding alone")
    text += run_bench([*common, "--kinds", "video", "--setups", args.setup])
    save("video")
    print(f"nvjpeg fallbacks to Pillow: {fallbacks.counts['items']} of {fallbacks.counts['decoded']} items decoded on "
          f"the device ({fallbacks.counts['calls']} calls)")
    return result


if __name__ == "__main__":
    main()
