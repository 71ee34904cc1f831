"""A simulated GPU: negharness's real runner (CachedEvalContext: reading, batching, copying, checking,
caching, tokenising) driven with the GPU's work replaced by timed stand-ins that release the GIL as CUDA
work does (``time.sleep``), so what the host path costs shows against the device's own rates.

Stand-ins (everything else runs for real, on this machine's CPU):
  image forward  ViT-B-32 bf16 at 19,886 img/s per batch, the pure rate recorded on one H100
                 (../shared/gpu/h100-2026-11-28.md, median of 3, batch 256).
  text forward   not recorded on the H100 without its host work, so scaled from the image tower by
                 multiply-adds per item (`macs`: ViT-B-32's image tower 50 tokens x 12 layers x width 768,
                 ~4.4 G; its text tower 12 layers x width 512, ~2.9 G at the full 77 tokens): ~28,700
                 texts/s at full context, and in proportion to the tokens kept where the runner cuts
                 texts to their length (``-M text_lengths=on``). Calibrated on one H200 (2026-11-30,
                 perf/bench_text_lengths.py's ``pure`` paths, 16,384 real COCO captions, batch 1,024, bf16):
                 full context 29,776-29,908 texts/s (the scaling is 4% low); cut to each length-sorted
                 batch's longest text 56,835-93,249 (rounds after the first), where the scaling says
                 ~160,000: short batches use the device less well than their multiply-adds say, so the
                 text_lengths=on row's pure rate here is optimistic, up to ~1.7x.
  nvjpeg decode  ``--nvjpeg-rate`` images/s in the runner's producer thread, beside the forward: default
                 21,900, measured on one H200 (2026-11-30, a device call of its own running
                 perf/gpu/media.py's `decoding_alone` at 4,096 images, 3 rounds: the project's
                 `decode_jpegs` on batches of 256 COCO-like JPEGs of mixed sizes already read, rounds
                 20,098 / 22,202 / 21,947 img/s, median 21,947); the H100 has the same chip's 7 NVJPG engines. The
                 12,000 assumed before (no published H100 figure found) was 0.55 of it. The goal is taken
                 against min(pure, nvjpeg), the loop's own ceiling.
  resize         on the device, bandwidth-bound: 2 bytes moved per decoded byte at 3 TB/s (H100 HBM3).
Each text row's pure rate is what its own batches cost the stand-in tower (`TEXT_TOWER`): the table judges
images and full-context texts as a share of their pure rates, since the full-context tower alone (~28,700
texts/s) is below the issue's 50,000/s, a goal no host could meet; the text_lengths=on row keeps 50,000/s
where its pure rate allows it (printed beside it). The warm tokenizer's own time per text is printed beside
the GIL per text: it is pure Python, GIL-held time the text path pays whatever else is cut.
A pass's cache merge (its shards rewritten as one, fsync'd) runs in a thread beside the next work
(`negharness.store.cache.CollectionCache.close`); what was left of it after each row's loop is printed under
the table, since nothing follows a row here as a task's next pass or scoring follows it in a run.
The runner takes its CUDA decisions (batched decoding in a producer thread, full-context texts as
`lengths_pay` decides on CUDA); a second text row forces ``text_lengths=on``, and a second images row runs with
no cache (no keys hashed), as perf/gpu_check.sh's media step times the device's loop: reported, not judged, the
figure to set beside the device's (the H200's 7,065 img/s, 2026-11-30).

GIL-held time: a probe thread sleeps for random 0.5-1.5 ms spans and times how late it wakes; a wake-up
later than its idle baseline by > 100 us found the GIL held (sleep releases it; waking needs it back).
The share of late wake-ups, sampled at random moments, estimates the share of the wall the GIL was held
(time averages seen by random arrivals); times the wall, over the items, it is the GIL-held time per item.
The process's CPU seconds (all threads: decoders, hashing and copies that release the GIL too) per
item are printed beside it, an upper bound.

Each row runs ``--repeat`` rounds (3; ``--quick``: 1), each on a fresh model, tokenizer and cache (a first
pass as a run makes it, in an interpreter whose imports the first round made; the no-cache images row follows
the cached one on the same model, its files in the page cache as the cached row's are after the keys' reads); a row keeps its fastest
round's rate and its rounds' least GIL and CPU time per item (another process on the machine only lowers
the one and raises the others), every round's rate printed under the table. One round's figures moved by
up to a third between runs on this shared machine (GIL per text 8.6-25 us, images 6,000-7,900/s), enough
to flip a row's verdict.

Under the table, where each row's wall went (`wall_went`), from the runner's own stage clock: the forward, the
loop's waits for decoded batches (and, inside the decoder, its waits for the cache keys the hashing pool
resolves: `ChunkFeed.__next__` timed) or for tokens, and the rest (keys, lookups and claims before the loop, a
length pre-pass, the last batch kept after it): the largest part is what limits the row.

The measured run is a fresh interpreter under the CLI's thread policy (``OMP_WAIT_POLICY=PASSIVE`` unless
set: `negharness.cli.process.prefer_passive_waiting`, so torch's idle OpenMP threads sleep instead of
spinning into the CPU figures), its imports timed: "before the first batch" is from its start
to the first stand-in forward, minus ``import torch, open_clip``; it holds the model's build, the plan,
hashing every file for the cache key, the loader's start.

    python perf/gpu_sim.py [--quick] [--images 16384] [--texts 16384] [--repeat 3] [--nvjpeg-rate 21900] [--json FILE] [--threads]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import csv
import io
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

START = time.perf_counter()
IMAGE_RATE = 19_886.0  # img/s, ViT-B-32 bf16 pure forward, one H100 (2026-11-28)
SIZES = [(640, 480), (480, 640), (640, 427), (427, 640), (500, 375), (612, 612), (640, 512), (375, 500)]  # COCO's common
HBM_BYTES_S = 3.0e12
SHARED = Path(os.environ.get("NEGHARNESS_SHARED") or Path(__file__).resolve().parents[2] / "shared")
CAPTIONS = SHARED / "data/negbench/negbench_eval_csvs/images/COCO_val_retrieval.csv"


def macs(tokens: int, width: int, layers: int) -> float:
    """Multiply-adds of one item through a transformer tower: 12 d^2 per token per layer (qkv, out, 4x MLP)
    plus attention's 2 n^2 d per layer."""
    return layers * (12 * width * width * tokens + 2 * tokens * tokens * width)


IMAGE_MACS = macs(50, 768, 12)  # ViT-B-32 at 224 px: 7 x 7 patches + class token


def text_seconds(rows: int, length: int) -> float:
    """Simulated seconds of ``rows`` texts through ViT-B-32's text tower at ``length`` tokens."""
    return rows * macs(length, 512, 12) / IMAGE_MACS / IMAGE_RATE


TEXT_TOWER = [0.0]  # simulated seconds the text tower's stand-ins slept: a row's pure rate is its texts over it
KEYS_WAIT = [0.0]  # seconds the image decoder waited on the cache keys (`ChunkFeed`: the hashing) in a row


def text_forward(rows: int, length: int) -> None:
    """The text tower's stand-in: its simulated time slept (the GIL let go) and counted."""
    seconds = text_seconds(rows, length)
    TEXT_TOWER[0] += seconds
    time.sleep(seconds)


# ---- inputs (parent process: no torch) ---------------------------------------------------------------
def unique_jpeg(base: bytes, i: int) -> bytes:
    """``base`` with a comment segment naming ``i`` after its SOI: a valid, distinct file (the cache keys
    by content) for the price of a copy."""
    note = f"negharness gpu_sim {i}".encode()
    return base[:2] + b"\xff\xfe" + (len(note) + 2).to_bytes(2, "big") + note + base[2:]


def write_images(folder: Path, n: int) -> list[Path]:
    """``n`` COCO-like JPEGs of mixed sizes (`SIZES`), smooth content and grain, quality 90."""
    import numpy as np
    from PIL import Image, ImageFilter

    rng = np.random.default_rng(0)
    bases = []
    for k in range(32):
        w, h = SIZES[k % len(SIZES)]
        small = Image.fromarray(rng.integers(0, 255, (6, 8, 3), dtype=np.uint8)).resize((w, h), Image.BICUBIC)
        noisy = np.asarray(small, dtype=np.int16) + rng.integers(-6, 7, (h, w, 3))
        buf = io.BytesIO()
        Image.fromarray(noisy.clip(0, 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(0.6)).save(buf, "JPEG",
                                                                                                       quality=90)
        bases.append(buf.getvalue())
    paths = []
    for i in range(n):
        p = folder / f"{i:06d}.jpg"
        p.write_bytes(unique_jpeg(bases[i % len(bases)], i))
        paths.append(p)
    return paths


def load_texts(n: int) -> tuple[list[str], str]:
    if CAPTIONS.is_file():
        with CAPTIONS.open(newline="", encoding="utf-8") as f:
            caps = [c for row in csv.DictReader(f) for c in ast.literal_eval(row["captions"]) if c.strip()]
        if caps:
            return [caps[i % len(caps)] + ("" if i < len(caps) else f" {i}") for i in range(n)], "real COCO captions"
    rng = random.Random(0)
    words = "a the man woman dog cat red blue sofa kitchen table street car standing on near with".split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(8, 20))) + f" {i}" for i in range(n)], "generated"


# ---- the measured run (child process) ---------------------------------------------------------------------
class GilProbe:
    """Estimates the share of the wall the GIL was held (see the module's docstring)."""

    def __init__(self) -> None:
        self.late = self.samples = 0
        self.stop = threading.Event()
        self.baseline = self._baseline()
        self.thread = threading.Thread(target=self._run, daemon=True, name="gil-probe")

    @staticmethod
    def _lateness(span: float) -> float:
        t = time.perf_counter()
        time.sleep(span)
        return time.perf_counter() - t - span

    def _baseline(self) -> float:
        return statistics.median(self._lateness(0.001) for _ in range(200))

    def _run(self) -> None:
        rng = random.Random(1)
        while not self.stop.is_set():
            self.samples += 1
            self.late += self._lateness(rng.uniform(0.0005, 0.0015)) > self.baseline + 100e-6

    def __enter__(self) -> "GilProbe":
        self.late = self.samples = 0
        self.thread = threading.Thread(target=self._run, daemon=True, name="gil-probe")
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join()
        self.stop.clear()

    @property
    def share(self) -> float:
        return self.late / max(1, self.samples)


class ThreadClock:
    """CPU seconds per thread group over a span (``--threads``): a sampler reads each live thread's
    /proc/self/task/<id>/stat every 20 ms and files it under its Python name's stem ("negharness-read_3"
    -> "negharness-read"); a thread that ended between samples loses at most its last 20 ms. Linux only."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[str, float]] = {}  # native id -> (group, CPU seconds last read)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="thread-clock")
        self.tick = os.sysconf("SC_CLK_TCK")

    def _cpu(self, tid: int) -> float | None:
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / self.tick  # utime, stime

    def sample(self) -> None:
        for t in threading.enumerate():
            if t.native_id is None or t is self.thread:
                continue
            cpu = self._cpu(t.native_id)
            if cpu is not None:
                group = "main" if t is threading.main_thread() else t.name.split("_")[0].split(" ")[0]
                self.seen[t.native_id] = (group, cpu)

    def _run(self) -> None:
        while not self.stop.wait(0.02):
            self.sample()

    def __enter__(self) -> "ThreadClock":
        self.sample()
        self.start = {tid: cpu for tid, (_, cpu) in self.seen.items()}
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join()
        self.sample()

    def groups(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for tid, (group, cpu) in self.seen.items():
            out[group] = out.get(group, 0.0) + cpu - self.start.get(tid, 0.0)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


_OUTPUTS: list[Any] = []


def outputs(n: int) -> Any:
    """A stand-in forward's (n, 512) output: rows of one random table drawn once, copied as the copy back
    from the device would be. Drawing ``torch.randn`` per batch cost the host ~4 us per item, a cost
    of the stand-in that a real run never pays, which the host path's figures then carried."""
    import torch

    if not _OUTPUTS or _OUTPUTS[0].shape[0] < n:
        _OUTPUTS[:] = [torch.randn(max(n, 4096), 512)]
    return _OUTPUTS[0][:n].clone()


def stand_ins(nvjpeg_rate: float, first: list[float]) -> None:
    """The device's work replaced in the runner's modules (see the module's docstring)."""
    import torch

    import negharness.engine.media_batches as media_batches
    import negharness.engine.streamed_keys as streamed_keys
    import negharness.io.tensor_images as tensor_images
    import negharness.plugins.openclip_model as openclip_model

    frame = torch.empty((3, 480, 640), dtype=torch.uint8)  # one image's pixels, handed back for each item

    def decode_jpegs(encoded: list[torch.Tensor], device: torch.device) -> list[torch.Tensor | None]:
        """nvjpeg's time, and its output without a host cost of its own: nvjpeg leaves the pixels on the device,
        where a fresh 0.9 MB host tensor per image cost the stand-in ~12 us of GIL an image (mmap and munmap
        of each), charged to the host path (py-spy --gil on 98,304 images)."""
        time.sleep(len(encoded) / nvjpeg_rate)
        return [frame] * len(encoded)

    def encode_cut_tokens(model: Any, tokens: torch.Tensor) -> torch.Tensor:
        text_forward(tokens.shape[0], tokens.shape[1])
        return outputs(tokens.shape[0])

    media_batches.batched_decoding = lambda device: True  # CUDA's decision: batched decode in a producer thread
    feed_next = streamed_keys.ChunkFeed.__next__

    def waited_next(self: Any) -> list[int]:
        """The decoder's next batch of positions, its wait for their cache keys counted (`KEYS_WAIT`)."""
        start = time.perf_counter()
        try:
            return feed_next(self)
        finally:
            KEYS_WAIT[0] += time.perf_counter() - start

    streamed_keys.ChunkFeed.__next__ = waited_next
    tensor_images.decode_jpegs = decode_jpegs
    openclip_model.encode_cut_tokens = encode_cut_tokens


class Transform:
    """The runner's pixel transform on the device: bandwidth-bound time, the real one's identity."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def __call__(self, images: list[Any]) -> Any:
        import torch

        time.sleep(sum(im.numel() for im in images) * 2 / HBM_BYTES_S)
        return torch.empty((len(images), 3, 224, 224))


def make_model(first: list[float]) -> Any:
    """The clip plugin's OpenClipModel on a one-layer random model with ViT-B-32's preprocessing and
    tokenizer; its towers' forwards are the timed stand-ins."""
    import torch

    from negharness.api import ModelOptions
    from negharness.plugins.openclip_model import OpenClipModel

    torch.manual_seed(0)
    folder = Path(tempfile.mkdtemp(prefix="gpu-sim-"))
    cfg = {"embed_dim": 512, "vision_cfg": {"image_size": 224, "layers": 1, "width": 64, "patch_size": 32},
           "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 1}}
    (folder / "sim.json").write_text(json.dumps({"model_cfg": cfg}))
    model = OpenClipModel.create("clip", ModelOptions(arch=str(folder / "sim.json"), extra={"decode": "tensor"}),
                                 default_pretrained=None)
    shutil.rmtree(folder, ignore_errors=True)  # the config is read
    model.tensor_transform = Transform(model.tensor_transform)

    def encode_image(pixels: torch.Tensor, **_: Any) -> torch.Tensor:
        if not first:
            first.append(time.perf_counter())
        time.sleep(pixels.shape[0] / IMAGE_RATE)
        return outputs(pixels.shape[0])

    def encode_text(tokens: torch.Tensor, **_: Any) -> torch.Tensor:
        text_forward(tokens.shape[0], tokens.shape[1])
        return outputs(tokens.shape[0])

    model.model.encode_image, model.model.encode_text = encode_image, encode_text
    outputs(4096)  # the stand-ins' table drawn now, outside the timed rows (~50 ms here)
    return model


def timed(fn: Any, items: int, threads: bool = False) -> dict[str, Any]:
    probe = GilProbe()
    clock = ThreadClock() if threads else contextlib.nullcontext()
    cpu0, t0 = time.process_time(), time.perf_counter()
    with probe, clock:
        fn()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    got: dict[str, Any] = {"rate": items / wall, "wall_s": wall, "gil_us": probe.share * wall / items * 1e6,
                           "cpu_us": cpu / items * 1e6, "gil_share": probe.share, "probe_samples": probe.samples}
    if isinstance(clock, ThreadClock):
        got["cpu_us_by_thread"] = {g: round(s / items * 1e6, 1) for g, s in clock.groups().items()}
    return got


ROWS = ("images", "images_no_cache", "texts", "texts_lengths_on")


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Every row ``spec["repeat"]`` times, each round on a fresh model, tokenizer and cache (a first pass,
    as a run makes it). This machine is shared, and another process only ever lowers a rate and raises a
    cost (its time slices delay the GIL probe's wake-ups as a held GIL does): a row keeps its fastest
    round's rate and the least GIL and CPU time per item of its rounds, every round's rate listed."""
    from negharness.cli.process import prefer_passive_waiting  # torch-free

    prefer_passive_waiting()  # the CLI's thread policy, set before torch loads as the console script does
    t0 = time.perf_counter()
    import open_clip  # noqa: F401
    import torch  # noqa: F401

    imports = time.perf_counter() - t0
    first: list[float] = []
    stand_ins(spec["nvjpeg_rate"], first)
    rounds = [one_round(spec, first) for _ in range(spec["repeat"])]
    return {"imports_s": imports, "before_first_batch_s": first[0] - START - imports, **best_of(rounds)}


def best_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each row's fastest round (its rate, wall, pure rate, ...) with the GIL figures of its round of least
    GIL and the CPU figures of its round of least CPU per item, and every round's rate; the tokenizer's
    least time per text."""
    got: dict[str, Any] = {"tokenizer_us": min(r["tokenizer_us"] for r in rounds)}
    for row in ROWS:
        each = [r[row] for r in rounds]
        least_gil, least_cpu = min(each, key=lambda f: f["gil_us"]), min(each, key=lambda f: f["cpu_us"])
        got[row] = {**max(each, key=lambda f: f["rate"]), "rates": [f["rate"] for f in each],
                    **{k: least_gil[k] for k in ("gil_us", "gil_share", "probe_samples")},
                    **{k: least_cpu[k] for k in ("cpu_us", "cpu_us_by_thread") if k in least_cpu}}
    return got


def one_round(spec: dict[str, Any], first: list[float]) -> dict[str, Any]:
    """Each row once: images, then texts at full context and with ``text_lengths=on``."""
    import torch

    from negharness.engine.runner import CachedEvalContext, RunSettings
    from negharness.io.media import image_files
    from negharness.store.cache import EmbeddingCache

    model = make_model(first)
    paths = [Path(p) for p in spec["images"]]
    cache_root = Path(tempfile.mkdtemp(prefix="gpu-sim-cache-"))
    try:
        settings = RunSettings(device=torch.device("cpu"), precision="bf16", batch_size=spec["batch"])
        media = image_files("sim/coco", [p.stem for p in paths], paths)
        ctx = CachedEvalContext(model, settings, EmbeddingCache(cache_root / "images"))
        KEYS_WAIT[0] = 0.0
        got: dict[str, Any] = {"images": timed(lambda: ctx.embed_media(media), len(paths), spec["threads"])}
        got["images"]["split"] = {**ctx.stages.seconds(), "keys": KEYS_WAIT[0], "device": len(paths) / IMAGE_RATE,
                                  "nvjpeg": len(paths) / spec["nvjpeg_rate"]}
        got["images"]["settle_s"] = settled()
        # the same with no cache, as perf/gpu_check.sh's media step times the device's loop (no keys hashed): the
        # row to set beside that figure (a calibration, reported, not judged)
        bare = CachedEvalContext(model, settings, None)
        KEYS_WAIT[0] = 0.0
        got["images_no_cache"] = timed(lambda: bare.embed_media(media), len(paths), spec["threads"])
        got["images_no_cache"]["split"] = {**bare.stages.seconds(), "keys": KEYS_WAIT[0], "device": len(paths) / IMAGE_RATE,
                                           "nvjpeg": len(paths) / spec["nvjpeg_rate"]}
        got["images_no_cache"]["settle_s"] = settled()
        texts = spec["texts"]
        for label, lengths in (("texts", "off"), ("texts_lengths_on", "on")):
            model.text_lengths = lengths  # "off": what `lengths_pay` decides on CUDA
            tctx = CachedEvalContext(model, RunSettings(device=torch.device("cpu"), precision="bf16",
                                                        batch_size=spec["text_batch"]), EmbeddingCache(cache_root / label))
            TEXT_TOWER[0] = 0.0
            got[label] = timed(lambda c=tctx: c.embed_texts(texts), len(texts), spec["threads"])
            got[label]["split"] = {**tctx.stages.seconds(), "device": TEXT_TOWER[0]}
            got[label]["settle_s"] = settled()
            got[label]["pure_rate"] = len(texts) / TEXT_TOWER[0]  # the stand-in tower alone, on this row's batches
        got["tokenizer_us"] = tokenizer_cost(model.tokenizer, texts, spec["text_batch"])
    finally:
        settled()
        shutil.rmtree(cache_root, ignore_errors=True)  # ~100 MB of shards a round
    return got


def settled() -> float:
    """Seconds the cache's merge of the pass just timed still took after its loop returned: it runs in a
    thread beside what follows (the next pass, scoring), and a run waits for what is left at its end."""
    from negharness.store.cache import settle_merges

    t0 = time.perf_counter()
    settle_merges()
    return time.perf_counter() - t0


def tokenizer_cost(tokenizer: Any, texts: list[str], batch: int) -> float:
    """The warm tokenizer's own CPU time per text (its word memo filled by the runs above), the least of
    three passes: pure Python, so GIL-held time the text rows cannot go below."""
    best = float("inf")
    for _ in range(3):
        cpu = time.thread_time()
        for lo in range(0, len(texts), batch):
            tokenizer(texts[lo:lo + batch])
        best = min(best, time.thread_time() - cpu)
    return best / len(texts) * 1e6


# ---- the table ---------------------------------------------------------------------------------------------
TEXT_GOAL = 50_000.0  # texts/s: the goal, kept where the simulated tower allows it (`table`)


def table(got: dict[str, Any], spec: dict[str, Any]) -> tuple[str, int]:
    """The goals, each against what the simulated device allows (no row asks what no machine can meet):
    images and full-context texts as a share of their simulated pure rate (the full-context text tower's
    pure rate, ~28,700/s, is below the issue's 50,000/s, which no host could then reach); the
    text_lengths=on row keeps 50,000/s where its own pure rate is at least 50,000 / 0.9, else 0.9 of
    pure; GIL per text is printed beside the warm tokenizer's own time, which the text path pays under
    the GIL whatever else is cut."""
    ceiling = min(IMAGE_RATE, spec["nvjpeg_rate"])
    img, bare, txt, cut = got["images"], got["images_no_cache"], got["texts"], got["texts_lengths_on"]
    cut_goal, cut_target = (TEXT_GOAL, f">= {TEXT_GOAL:,.0f}/s") if cut["pure_rate"] * 0.9 >= TEXT_GOAL else \
        (0.9 * cut["pure_rate"], ">= 0.9 of pure")
    rows = [
        ("images in the loop (nvjpeg path)", f"{img['rate']:,.0f} img/s = {img['rate'] / ceiling:.2f} of min(pure "
         f"{IMAGE_RATE:,.0f}, nvjpeg {spec['nvjpeg_rate']:,.0f})", ">= 0.9", img["rate"] >= 0.9 * ceiling),
        ("images in the loop, no cache (as the GPU check's media step)", f"{bare['rate']:,.0f} img/s = "
         f"{bare['rate'] / ceiling:.2f} of the same", "reported", True),
        ("texts in the loop (CUDA's choice: full context)", f"{txt['rate']:,.0f} texts/s = "
         f"{txt['rate'] / txt['pure_rate']:.2f} of pure {txt['pure_rate']:,.0f}", ">= 0.9 of pure",
         txt["rate"] >= 0.9 * txt["pure_rate"]),
        ("texts in the loop, text_lengths=on", f"{cut['rate']:,.0f} texts/s = {cut['rate'] / cut['pure_rate']:.2f} "
         f"of pure {cut['pure_rate']:,.0f}", cut_target, cut["rate"] >= cut_goal),
        ("GIL held per image (host path)", f"{img['gil_us']:.1f} us (CPU all threads {img['cpu_us']:.1f} us)", "<= 25 us",
         img["gil_us"] <= 25),
        ("GIL held per text (host path)", f"{txt['gil_us']:.1f} us (CPU all threads {txt['cpu_us']:.1f} us; the warm "
         f"tokenizer alone {got['tokenizer_us']:.1f} us)", "<= 10 us", txt["gil_us"] <= 10),
        ("before the first batch, minus import torch, open_clip", f"{got['before_first_batch_s']:.2f} s "
         f"(imports {got['imports_s']:.1f} s)", "reported", True),
    ]
    repeat = spec.get("repeat", 1)
    lines = [f"## perf/gpu_sim.py: {spec['n_images']:,} COCO-like images (mixed sizes), {len(spec['texts']):,} "
             f"{spec['text_source']} texts; simulated H100 (ViT-B-32 bf16); {os.cpu_count()} cores here, load "
             f"{os.getloadavg()[0]:.1f}; " + ("one round" if repeat == 1 else f"the best of {repeat} rounds per figure"), "",
             "| goal | figure | target | result |", "|---|---|---|---|"]
    lines += [f"| {g} | {f} | {t} | {'pass' if ok else 'FAIL'} |" for g, f, t, ok in rows]
    lines += ["", "A row's loop ends when its pass returns; the pass's cache merge runs on in a thread beside the next "
              "work, and a run waits for what is left at its end. Left after each loop here (nothing followed it): "
              + ", ".join(f"{got[k]['settle_s']:.2f} s ({k})" for k in ROWS) + "."]
    went = [line for line in (wall_went(k, got[k]) for k in ROWS) if line]
    if went:
        lines += ["", "Where each row's wall went (its fastest round; what limits it is the largest part):", ""] + went
    if repeat > 1:
        lines += ["", "Every round's rate (items/s): " + "; ".join(
            f"{k} " + " / ".join(f"{r:,.0f}" for r in got[k].get("rates", [])) for k in ROWS) + "."]
    return "\n".join(lines), sum(1 for *_, ok in rows if not ok)


def wall_went(row: str, figures: dict[str, Any]) -> str | None:
    """One row's wall split as the runner's clock (`negharness.engine.stages`) saw it: the forward (its
    stand-in's own time beside it), the loop's waits for decoded batches (and, inside the decoder, its waits for
    the cache keys the hashing pool resolves) or for tokens, and the rest: keys, lookups and claims before the
    loop, the last batch kept after it. None for a round that recorded no split."""
    split = figures.get("split")
    if not split:
        return None
    wall = figures["wall_s"]
    forward, decode, tokenise = (split.get(k, 0.0) for k in ("forward", "decode", "tokenise"))
    parts = [f"forward {forward:.2f} s (the stand-in device {split['device']:.2f} s)"]
    if row.startswith("images"):
        parts.append(f"waiting for decoded batches {decode:.2f} s (inside the decoder: nvjpeg's stand-in "
                     f"{split['nvjpeg']:.2f} s, waits for cache keys {split['keys']:.2f} s)")
    else:
        parts.append(f"waiting for tokens {tokenise:.2f} s")
    parts.append(f"outside the loop's waits and forwards {max(0.0, wall - forward - decode - tokenise):.2f} s")
    return f"- {row}: {wall:.2f} s = " + "; ".join(parts)


# ---- the driver --------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4,096 images and 8,192 texts (CI: under 3 minutes)")
    ap.add_argument("--images", type=int, default=16_384)
    ap.add_argument("--texts", type=int, default=16_384)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--text-batch", type=int, default=1024)
    ap.add_argument("--nvjpeg-rate", type=float, default=21_900.0, help="simulated nvjpeg images/s (see the docstring)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--threads", action="store_true", help="also CPU us per item by thread group (Linux /proc)")
    ap.add_argument("--repeat", type=int, default=None, help="rounds of every row, the best figures kept (3; --quick: 1)")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        spec = json.loads(args.child.read_text())
        args.child.with_suffix(".out.json").write_text(json.dumps(child(spec)))
        return {}
    if args.quick:
        args.images, args.texts = min(args.images, 4096), min(args.texts, 8192)
    args.repeat = args.repeat if args.repeat is not None else 1 if args.quick else 3
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: at least 1")
    with tempfile.TemporaryDirectory(prefix="gpu-sim-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        paths = write_images(folder, args.images)
        texts, source = load_texts(args.texts)
        print(f"inputs: {len(paths):,} JPEGs ({sum(p.stat().st_size for p in paths) / 2**20:.0f} MiB) and {len(texts):,} "
              f"{source} texts in {time.perf_counter() - t0:.1f} s")
        spec = {"images": [str(p) for p in paths], "texts": texts, "text_source": source, "batch": args.batch,
                "text_batch": args.text_batch, "nvjpeg_rate": args.nvjpeg_rate, "n_images": len(paths),
                "threads": args.threads, "repeat": args.repeat}
        (folder / "spec.json").write_text(json.dumps(spec))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1] / "src"),
                                                                         os.environ.get("PYTHONPATH")]))}
        done = subprocess.run([sys.executable, __file__, "--child", str(folder / "spec.json")], env=env, check=False)
        if done.returncode != 0:
            raise SystemExit(f"the simulated run failed (exit {done.returncode})")
        got = json.loads((folder / "spec.out.json").read_text())
    text, failed = table(got, spec)
    print(text)
    for label in ROWS:
        if "cpu_us_by_thread" in got[label]:
            print(f"CPU us per item by thread, {label}: " + ", ".join(f"{g} {v}" for g, v in
                                                                      got[label]["cpu_us_by_thread"].items()))
    print(json.dumps({"bench": "gpu_sim", **{k: v for k, v in got.items()}, "nvjpeg_rate": args.nvjpeg_rate,
                      "failed": failed}))
    if args.json:
        args.json.write_text(json.dumps(got, indent=1))
    return got


if __name__ == "__main__":
    main()
