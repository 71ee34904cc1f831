"""Media into batches of pixels for the encoding loop: which decoder a set goes through (the model's
tensor decode, batched on the device or one item per thread on the CPU; else its preprocessing, in
worker processes or threads), how many threads and workers decode, and at what priority. The loop
(`negharness.engine.runner.CachedEvalContext`) asks `MediaBatches.batches` and encodes what comes.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Iterable, Iterator, Protocol, cast

import torch

from negharness.contracts.model import EmbeddingModel
from negharness.io.held_bytes import HeldBytes
from negharness.io.media import MediaSet, PreprocessedItems, collate_images, collate_videos
from negharness.io.tensor_images import DecodedBatches, DecodedFiles, PixelTransform, decode_device
from negharness.io.unreadable import UnreadableMedia


def default_workers(device: torch.device) -> int:
    """Decoding workers when the user does not say: on a GPU, half the cores (the forward pass
    needs few); on the CPU, only the cores torch's own threads leave free, since a worker that
    competes with the forward pass for a core slows both (measured: perf/bench_decode_throughput.py)."""
    cores = os.cpu_count() or 1
    if device.type == "cuda":
        return min(8, max(1, cores // 2))
    return min(4, max(0, cores - torch.get_num_threads()))


def batched_decoding(device: torch.device) -> bool:
    """Whether tensor-decoded image files go through `DecodedBatches` (one batched decode per batch, in
    threads beside the forward pass; their cache keys resolved beside it too, `KeyStream`): where they
    decode on the device (`decode_device`: CUDA). On the CPU a batched call would decode on one core, so
    there items go one per decode thread or worker (`DecodedFiles`)."""
    return decode_device(device).type != "cpu"


DECODE_NICENESS = 10


def lower_priority(_worker_id: int | None = None) -> None:
    """Make the calling decode thread (a pool ``initializer``) or worker process (a DataLoader
    ``worker_init_fn``, hence the unused id) yield to the forward pass: it then runs on the cycles the
    model leaves idle, and on all of them while the model waits for a batch. On Linux the nice value
    is per thread; where it is not (or not allowed) decoding keeps normal priority."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), DECODE_NICENESS)
    except (AttributeError, OSError):
        pass


class LoadSettings(Protocol):
    """What of a run's settings (`negharness.engine.runner.RunSettings`) decoding reads."""

    device: torch.device
    batch_size: int
    workers: int | None
    decode_threads: int | None


class MediaBatches:
    """A model's media decoded into batches under a run's settings; unreadable items go to ``media_policy``
    (`UnreadableMedia`: left out and counted with ``--skip-broken-media``, else the run stops naming them)."""

    def __init__(self, model: EmbeddingModel, settings: LoadSettings,
                 media_policy: UnreadableMedia) -> None:
        self.model, self.settings, self.media_policy = model, settings, media_policy

    def batched(self) -> bool:
        """Whether tensor-decoded files are decoded a batch at a time on the device (`batched_decoding`)."""
        return batched_decoding(self.settings.device)

    def tensor_decoding(self, media: MediaSet) -> PixelTransform | None:
        """The model's tensor preprocessing where this set is decoded with it (plain image files and a
        model that asks, ``-M decode=tensor``), else None: the one place that decides, for the cache
        key (`CachedEvalContext.media_keys`) and the loader (`batches`) alike."""
        if media.kind != "image" or not media.plain_files or media.sources is None:
            return None
        transform: PixelTransform | None = self.model.pixel_transform()
        return transform

    def decode_threads(self) -> int:
        return self.settings.decode_threads or min(8, os.cpu_count() or 1)

    def _loader(self, media: MediaSet, todo: list[int]) -> torch.utils.data.DataLoader[Any]:
        workers = self.settings.workers
        if workers is None:
            workers = 0 if media.cheap else default_workers(self.settings.device)
        collate = collate_videos if media.kind == "video" else collate_images
        preprocess = self.model.preprocess_video if media.kind == "video" else self.model.preprocess_image
        transform = self.tensor_decoding(media)
        items: torch.utils.data.Dataset[Any] = (
            PreprocessedItems(media, todo, preprocess, self.media_policy) if transform is None
            else DecodedFiles(list(media.sources or ()), todo, transform, self.media_policy))
        return torch.utils.data.DataLoader(
            items, batch_size=self.settings.batch_size,
            num_workers=workers, collate_fn=collate, pin_memory=self.settings.device.type == "cuda",
            worker_init_fn=lower_priority if workers and self.settings.device.type == "cpu" else None)

    def batches(self, media: MediaSet, todo: list[int], chunks: Iterable[list[int]] | None = None,
                 held: HeldBytes | None = None) -> Iterator[tuple[Any, ...]]:
        """(positions, pixels, mask or None): vectorised for in-memory sets, else a DataLoader with workers.
        ``chunks``: the batches' positions as they become known (`KeyStream`), instead of ``todo``'s;
        ``held``: files' bytes read for their keys, for the decoder (`HeldBytes`)."""
        if media.cheap and media.load_batch is not None:
            bs = self.settings.batch_size
            for lo in range(0, len(todo), bs):
                positions = todo[lo:lo + bs]
                yield positions, self.model.preprocess_batch(media.load_batch(positions), media.kind), None
        else:
            for positions, pixels, mask, broken in self._decoded(media, todo, chunks, held):
                for pos, message in broken:
                    self.media_policy.leave_out(media.key, media.ids[pos], message)
                if positions:
                    yield positions, pixels, mask

    def _decoded(self, media: MediaSet, todo: list[int], chunks: Iterable[list[int]] | None = None,
                 held: HeldBytes | None = None) -> Iterator[tuple[Any, ...]]:
        """Decoded batches: image files the model decodes as tensors go through `DecodedBatches` on a
        GPU (batched nvjpeg, overlapping the forward pass); all else, and those on the CPU (one
        item per core), through `_loaded`."""
        transform = self.tensor_decoding(media)
        if transform is None or not self.batched():
            assert chunks is None and held is None  # streamed keys are for the batched road only (`_streams_keys`)
            return self._loaded(media, todo)
        bs = self.settings.batch_size
        if chunks is None:
            chunks = [todo[lo:lo + bs] for lo in range(0, len(todo), bs)]
        return iter(DecodedBatches(list(media.sources or ()), chunks, transform, self.settings.device,
                                   self.media_policy, self.decode_threads(), held=held))

    def _loaded(self, media: MediaSet, todo: list[int]) -> Iterator[tuple[Any, ...]]:
        """Decoded batches: from worker processes when there are any, else from a pool of threads
        (one per core) that decode the next two batches item by item while the model encodes this
        one. Image and video decoders release the GIL, and with passive OpenMP waiting (see
        `negharness.cli.process.prefer_passive_waiting`) the forward pass and the decoders share the
        cores instead of fighting for them: measured in perf/bench_decode_throughput.py."""
        loader = self._loader(media, todo)
        if loader.num_workers > 0:
            yield from loader
            return
        from concurrent.futures import ThreadPoolExecutor

        # cast: `_loader`'s datasets are these two, each with a length
        items, collate = cast("PreprocessedItems | DecodedFiles", loader.dataset), loader.collate_fn
        bs = self.settings.batch_size
        chunks = [range(lo, min(lo + bs, len(items))) for lo in range(0, len(items), bs)]
        threads = self.decode_threads()
        pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="negharness-decode",
                                  initializer=lower_priority)
        try:
            ahead = [[pool.submit(items.__getitem__, i) for i in c] for c in chunks[:2]]
            for k in range(len(chunks)):
                batch = collate([f.result() for f in ahead[k]])
                if k + 2 < len(chunks):
                    ahead.append([pool.submit(items.__getitem__, i) for i in chunks[k + 2]])
                ahead[k] = []  # free the finished batch
                yield batch
        finally:  # an error or Ctrl-C does not wait for the batches queued behind it
            pool.shutdown(wait=True, cancel_futures=True)
