"""What content keys, checksums and per-batch shards cost, against the cache before them, same inputs, same run.

Part 1, hashing: content hashes of 3,000 synthetic video files (600 KB each, MSR-VTT's average) and
5,000 synthetic JPEG-sized files (160 KB, COCO val2017's average): first sight (the page cache
emptied with posix_fadvise, so the bytes come from disk) and a later run (stat + memo only).

Part 2, runs: the embedding calls of a run over 300 JPEG files, 80 MP4 files and the embedded
world (500 images, texts), cold cache and warm cache, with today's cache (content keys, checksummed
shards written per batch) and with the previous one kept here as the baseline (ids as keys, no
checksum, one shard per 4,096 items or per collection). Also the whole `run_evaluation` of the
embedded world's original-caption tasks (model load, world, ranking and metrics in) with each.
The model is the embedded world's tiny CLIP, so cache overheads are as visible as they can be.
Goals (issue 13): cold <= 1.05x, warm <= 1.2x the baseline.

Run: python perf/bench_cache_integrity.py [--skip-hashing] [--repeats 3]
     [--tiny: 4 JPEGs, 2 MP4s, 16 world items, one repeat, no hashing part: a check of the script only]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from unittest import mock

from negharness.cli.process import prefer_passive_waiting

prefer_passive_waiting()  # as `negharness run` does, before torch loads: idle OpenMP threads sleep, not spin

import numpy as np  # noqa: E402
import torch  # noqa: E402

from negharness.api import ModelOptions  # noqa: E402
from negharness.discovery.manager import make_host  # noqa: E402
from negharness.engine import evaluate as evaluate_module  # noqa: E402
from negharness.engine.evaluate import RunRequest, evaluate_request  # noqa: E402
from negharness.engine.runner import CachedEvalContext, RunSettings  # noqa: E402
from negharness.io.media import MediaSet, image_files, video_files  # noqa: E402
from negharness.io.paths import data_root  # noqa: E402
from negharness.io.video import FrameSampling  # noqa: E402
from negharness.plugins.shapes_clip import shapes_clip  # noqa: E402
from negharness.io.atomic_files import atomic_write  # noqa: E402
from negharness.store.cache import EmbeddingCache  # noqa: E402
from negharness.store.claims import Claim, Claims  # noqa: E402
from negharness.store.content import FileHasher  # noqa: E402
from negharness.world.media import load_world  # noqa: E402

N_JPEGS, N_VIDEOS = 300, 80
LIMIT: int | None = None  # --tiny: world items per task


# the previous cache, as it was before content keys (baseline only) ----------------------------
class LegacyCollection:
    """Ids as keys, no checksum, a shard per 4,096 items or at the end of a collection."""

    def __init__(self, folder: Path, flush_every: int = 4096) -> None:
        self.folder, self.flush_every = folder, flush_every
        self._index: dict | None = None
        self._pending_ids: list[str] = []
        self._pending: list[torch.Tensor] = []

    def _load(self) -> dict:
        if self._index is None:
            from safetensors import safe_open
            from safetensors.torch import load_file

            index = {}
            for shard in sorted(self.folder.glob("shard-*.safetensors")):
                with safe_open(str(shard), framework="pt") as fh:
                    ids = json.loads((fh.metadata() or {})["ids"])
                emb = load_file(str(shard))["emb"]
                for i, key in enumerate(ids):
                    index[key] = emb[i]
            self._index = index
        return self._index

    claims = Claims  # release and wait do nothing for a claim without a file: the old cache claimed nothing

    def claim(self, keys):
        return Claim(list(keys))

    def refresh(self):
        pass

    def lookup(self, keys):
        index = self._load()
        found = [(i, index[k]) for i, k in enumerate(keys) if k in index]  # a tensor per row, as it was
        return [i for i, _ in found], torch.stack([e for _, e in found]) if found else torch.empty(0, 0)

    def add(self, keys, emb, seconds=None):  # seconds: the model's time for the rows (the cache's flush rule)
        emb = emb.detach().float().cpu()
        index = self._load()
        for i, k in enumerate(keys):
            index[k] = emb[i]
        self._pending_ids.extend(keys)
        self._pending.append(emb)
        if len(self._pending_ids) >= self.flush_every:
            self.close()

    def close(self):
        if not self._pending_ids:
            return
        from safetensors.torch import save_file

        emb = torch.cat(self._pending).contiguous()
        meta = {"ids": json.dumps(self._pending_ids)}
        name = f"shard-{time.time_ns()}-{os.getpid()}.safetensors"
        atomic_write(self.folder / name, lambda tmp: save_file({"emb": emb}, str(tmp), metadata=meta))
        self._pending_ids, self._pending = [], []


class LegacyCache(EmbeddingCache):
    def collection(self, namespace, collection, describe=None):
        key = (namespace, collection)
        if key not in self._open:
            folder = self.root / namespace / collection.replace("/", "_").replace("|", "_").replace(":", "_")
            folder.mkdir(parents=True, exist_ok=True)
            self._open[key] = LegacyCollection(folder)
        return self._open[key]


class LegacyContext(CachedEvalContext):
    def media_keys(self, media):
        return f"{media.kind}:{media.key}", list(media.ids)


# part 1: hashing ------------------------------------------------------------------------------
def _write_files(folder: Path, n: int, size: int, suffix: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    block = rng.integers(0, 256, size=size + n, dtype=np.uint8).tobytes()
    paths = []
    for i in range(n):
        path = folder / f"{i:05d}{suffix}"
        with open(path, "wb") as fh:
            fh.write(block[i:i + size])  # every file different
            fh.flush()
            os.fsync(fh.fileno())
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        paths.append(path)
    return paths


def _evict(paths: list[Path]) -> None:
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def hash_throughput() -> None:
    import hashlib

    data = os.urandom(64 << 20)
    rates = {}
    for name in ("sha256", "blake2b", "sha1"):
        start = time.perf_counter()
        hashlib.new(name, data).hexdigest()
        rates[name] = 64 * 1.048576 / (time.perf_counter() - start)
    print("hash throughput, one thread: " + ", ".join(f"{k} {v:.0f} MB/s" for k, v in rates.items()))


def hashing_cost(tmp: Path) -> None:
    hash_throughput()
    for label, n, size, suffix in (("videos", 3000, 600_000, ".mp4"), ("JPEGs", 5000, 160_000, ".jpg")):
        paths = _write_files(tmp / label, n, size, suffix)
        time.sleep(2.5)  # past the memo's racy window, as any real dataset is
        _evict(paths)
        memo = tmp / f"memo-{label}"
        first = FileHasher(memo)
        t0 = time.perf_counter()
        first.many(paths)
        cold = time.perf_counter() - t0
        warm = float("inf")
        for _ in range(3):  # min of 3: the first can wait on the writeback of what was just written
            _evict(paths)
            t0 = time.perf_counter()
            FileHasher(memo).many(paths)  # a later run: a new process reads the memo
            warm = min(warm, time.perf_counter() - t0)
        total_mb = n * size / 1e6
        print(f"hashing {n} {label} of {size // 1000} KB ({total_mb:.0f} MB): first sight {cold:.2f} s "
              f"({cold / n * 1e3:.2f} ms/file, {total_mb / cold:.0f} MB/s), later runs {warm * 1e3:.0f} ms "
              f"({warm / n * 1e6:.0f} us/file: stat + memo)")


# part 2: runs ---------------------------------------------------------------------------------
def _media_inputs(tmp: Path) -> tuple[list[MediaSet], list[str]]:
    import av
    from PIL import Image

    rng = np.random.default_rng(1)
    (tmp / "img").mkdir(parents=True, exist_ok=True)
    (tmp / "vid").mkdir(parents=True, exist_ok=True)
    ys, xs = np.mgrid[0:256, 0:256]
    jpgs = []
    for i in range(N_JPEGS):
        base = ((xs * (i % 7 + 1) + ys * (i % 5 + 1)) % 256).astype(np.uint8)
        img = np.stack([base, np.roll(base, i, 0), np.roll(base, i, 1)], -1)
        img = np.clip(img.astype(np.int16) + rng.integers(-8, 9, img.shape), 0, 255).astype(np.uint8)
        jpgs.append(tmp / "img" / f"{i:04d}.jpg")
        Image.fromarray(img).save(jpgs[-1], quality=90)
    vids = []
    for i in range(N_VIDEOS):
        vids.append(tmp / "vid" / f"{i:04d}.mp4")
        with av.open(str(vids[-1]), "w") as out:
            stream = out.add_stream("libx264", rate=10)
            stream.width, stream.height, stream.pix_fmt = 96, 64, "yuv420p"
            for t in range(30):
                frame = np.full((64, 96, 3), (i * 13 + t * 5) % 256, dtype=np.uint8)
                frame[:, (t * 3) % 96] = 255
                for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
    time.sleep(2.5)  # past the memo's racy window
    world = load_world(0, "test", "image", 500, data_root()[0])
    pixels = world.pixels
    return [image_files("bench/jpgs", [p.name for p in jpgs], jpgs),
            video_files("bench/vids", [p.name for p in vids], vids, FrameSampling("segments", 4)),
            MediaSet("bench/world", "image", world.ids[:LIMIT], lambda i: pixels[i], cheap=True,
                     load_batch=lambda pos: pixels[pos],
                     content_keys=world.row_keys[:LIMIT])], [c for caps in world.captions[:LIMIT] for c in caps]


def _embed_all(context_cls, cache_cls, model, cache_dir: Path, media: list[MediaSet], texts: list[str]) -> tuple:
    """(wall seconds, CPU seconds of this process: all its threads) of one run's embedding calls."""
    ctx = context_cls(model, RunSettings(batch_size=64), cache_cls(cache_dir))
    start, cpu = time.perf_counter(), time.process_time()
    for m in media:
        ctx.embed_media(m)
    ctx.embed_texts(texts)
    return time.perf_counter() - start, time.process_time() - cpu


def _whole_run(host, legacy: bool, cache_dir: str, out_dir: str) -> tuple:
    req = RunRequest(model="shapes_clip", tasks=["shapes_t2v_original", "shapes_t2i_original"], batch_size=64,
                     output_dir=out_dir, cache_dir=cache_dir, overwrite=True, device="cpu", limit=LIMIT)
    patches = ([mock.patch.object(evaluate_module, "EmbeddingCache", LegacyCache),
                mock.patch.object(evaluate_module, "CachedEvalContext", LegacyContext)] if legacy else [])
    for p in patches:
        p.start()
    try:
        start, cpu = time.perf_counter(), time.process_time()
        evaluate_request(host, req)
        return time.perf_counter() - start, time.process_time() - cpu
    finally:
        for p in patches:
            p.stop()


def runs(tmp: Path, repeats: int) -> None:
    media, texts = _media_inputs(tmp / "inputs")
    model = shapes_clip(ModelOptions()).eval_mode()
    host = make_host()
    impls = {"baseline": (LegacyContext, LegacyCache, True), "content keys": (CachedEvalContext, EmbeddingCache, False)}
    times: dict[tuple[str, str], list[tuple]] = {}
    _embed_all(CachedEvalContext, EmbeddingCache, model, tmp / "warmup", media, texts)  # threads, page cache
    for r in range(repeats):
        for name, (ctx_cls, cache_cls, legacy) in impls.items():  # interleaved: drift hits both alike
            cache = tmp / f"cache-{name}-{r}"
            times.setdefault((name, "cold"), []).append(_embed_all(ctx_cls, cache_cls, model, cache, media, texts))
            for _ in range(3):  # warm phases are short: more samples
                times.setdefault((name, "warm"), []).append(_embed_all(ctx_cls, cache_cls, model, cache, media, texts))
            whole = tempfile.mkdtemp(dir=tmp)
            times.setdefault((name, "run cold"), []).append(_whole_run(host, legacy, f"{whole}/c", f"{whole}/o"))
            for _ in range(3):
                times.setdefault((name, "run warm"), []).append(_whole_run(host, legacy, f"{whole}/c", f"{whole}/o"))
    print(f"torch threads: {torch.get_num_threads()}, repeats: {repeats} cold, {3 * repeats} warm. min (median): the "
          "minimum is the cost without interference from other load on a shared machine; CPU = this process's CPU time")
    goals = {"cold": 1.05, "warm": 1.2, "run cold": 1.05, "run warm": 1.2}
    for phase, goal in goals.items():
        what = (f"embedding calls ({N_JPEGS} JPEGs, {N_VIDEOS} MP4s, 500 world images, 1500 texts)" if "run" not in phase
                else "whole run_evaluation, embedded world t2v+t2i")
        cells = []
        for j, unit in enumerate(("wall", "CPU")):
            base, new = ([t[j] for t in times[(impl, phase)]] for impl in ("baseline", "content keys"))
            cells.append(f"{unit} {min(base) * 1e3:.1f} -> {min(new) * 1e3:.1f} ms, ratio {min(new) / min(base):.3f} "
                         f"({statistics.median(new) / statistics.median(base):.3f})")
        print(f"{phase:9s} {what}: {'; '.join(cells)} (goal <= {goal})")


def main(argv: list[str] | None = None) -> None:
    global N_JPEGS, N_VIDEOS, LIMIT
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-hashing", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args(argv)
    if args.tiny:
        N_JPEGS, N_VIDEOS, LIMIT, args.repeats, args.skip_hashing = 4, 2, 16, 1, True
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_hashing:
            hashing_cost(Path(tmp) / "hash")
        runs(Path(tmp) / "runs", args.repeats)


if __name__ == "__main__":
    main()
