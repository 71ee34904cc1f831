"""Image files decoded and preprocessed as tensors on the run's device (``-M decode=tensor``).

PIL decoding and open_clip's PIL transforms cost ~3.5 ms of CPU per photo: a GPU that encodes 20,000
images/s would need 70 cores to keep up. Here file bytes are read by threads (cheap), JPEGs are
decoded in one batched call, ``torchvision.io.decode_jpeg(list, device=...)`` (nvjpeg on CUDA,
libjpeg-turbo on the CPU), and resized, cropped and normalised as tensor ops on that device. On CUDA
(`DecodedBatches`) a decoder thread decodes batch k+2 and a transform thread transforms batch k+1, each on
a stream of its own, while the model encodes batch k.

The resize is torch's antialiased bicubic (ported from Pillow's): on the CPU in uint8 fixed point, on
CUDA in float32 rounded to uint8 as Pillow's output is. What is left of the difference from open_clip's
PIL transform is measured (perf/bench_tensor_decode_difference.py), and the cache keys such embeddings
apart (`tensor_recipe`). Files that are not plain 8-bit
YCbCr/grey JPEGs (PNG, CMYK, 12-bit, arithmetic-coded, truncated, ...) are decoded by Pillow,
item by item, through `negharness.io.image_files.read_rgb`: an unreadable file raises the same named
`MediaError` as the PIL path, skippable with ``--skip-broken-media``.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from io import BytesIO
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import torch

from negharness.contracts.errors import MediaError
from negharness.contracts.pixel_transform import (  # their home: a model's contract names the transform
    INTERPOLATIONS as INTERPOLATIONS,
    RESIZE_MODES as RESIZE_MODES,
    PixelTransform as PixelTransform,
)
from negharness.io.held_bytes import HeldBytes
from negharness.io.held_bytes import file_bytes as file_bytes  # the readers' one read of a file
from negharness.io.image_files import image_decoder_identity, read_rgb
from negharness.io.media import regular_media
from negharness.io.unreadable import UnreadableMedia

SOF_MARKERS = (0xC0, 0xC1, 0xC2)  # baseline, extended and progressive Huffman: what both decoders take
AHEAD = 2  # batches read and decoded ahead of the one the model encodes


def decode_device(device: torch.device) -> torch.device:
    """Where image files are decoded and resized for a run on ``device``: on CUDA itself (nvjpeg, batched,
    a float32 resize), else on the CPU (libjpeg-turbo, a uint8 resize; torchvision decodes on no other
    device, MPS included), the pixels then moved to ``device``. The one rule of the runner's decoding
    (`negharness.engine.media_batches.batched_decoding`) and of its label in the cache (`tensor_recipe`)."""
    return device if device.type == "cuda" else torch.device("cpu")


def tensor_decoder_identity(device: torch.device) -> str:
    """Which decoder turns a JPEG's bytes into pixels on ``device`` (nvjpeg's IDCT and chroma upsampling
    differ from libjpeg-turbo's by a unit here and there), and Pillow's, which decodes the rest."""
    import torchvision

    jpeg = "nvjpeg" if decode_device(device).type == "cuda" else "libjpeg-turbo"
    return f"torchvision-{torchvision.__version__.split('+')[0]}+{jpeg}|{image_decoder_identity()}"


def tensor_recipe(transform: PixelTransform, device: torch.device) -> str:
    """The cache collection's recipe for images decoded this way on ``device``: decoder and resize, so
    embeddings of the PIL path (``image-file|pillow-...``) and of each decoder never share an entry."""
    resize = "uint8" if transform.uint8_resize(decode_device(device)) else "float32"
    return f"image-tensor|{tensor_decoder_identity(device)}|{transform.identity()}|resize-{resize}"


def plain_jpeg(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` is a JPEG both tensor decoders take as Pillow does: Huffman-coded (baseline,
    extended or progressive), 8-bit, grey or 3-component, ending in its EOI marker (a truncated file
    goes to Pillow, which names it). Reads the markers up to the frame header only."""
    n = len(data)
    if n < 4 or data[0] != 0xFF or data[1] != 0xD8 or data[n - 2] != 0xFF or data[n - 1] != 0xD9:
        return False
    i = 2
    while i + 4 <= n:
        if data[i] != 0xFF:
            return False
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if 0xD0 <= marker <= 0xD7 or marker == 0x01:
            i += 2
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a frame header: the one that says
            if i + 10 > n:
                return False
            return marker in SOF_MARKERS and data[i + 4] == 8 and data[i + 9] in (1, 3)
        if marker == 0xDA:  # scan before any frame header
            return False
        i += 2 + (data[i + 2] << 8 | data[i + 3])
    return False


def pil_pixels(data: bytes | bytearray | memoryview, path: Path) -> torch.Tensor:
    """A file Pillow decodes (any format it reads), as uint8 (3, H, W); failures are its `MediaError`."""
    rgb = np.asarray(read_rgb(BytesIO(data), path))
    return torch.from_numpy(rgb.copy()).permute(2, 0, 1)


def decoded_or_pil(encoded: torch.Tensor, pixels: torch.Tensor | None, path: Path) -> torch.Tensor:
    """A plain JPEG's pixels as the tensor decoder gave them, or, where it refused the file (None),
    as Pillow decodes its bytes: a file no decoder reads raises Pillow's `MediaError` naming it."""
    return pixels if pixels is not None else pil_pixels(encoded.numpy().tobytes(), Path(path))


def checked_bytes(path: Path) -> bytes:
    """A file's bytes, or the `MediaError` that names why it cannot be read (`regular_media`'s checks)."""
    try:
        return regular_media(Path(path)).read_bytes()
    except FileNotFoundError:
        raise MediaError(f"image not found: {path}") from None
    except OSError as exc:
        raise MediaError(f"cannot read image {path}: {exc.strerror or exc}") from None


def read_item(path: Path, data: bytearray | memoryview | None = None) -> torch.Tensor | tuple[torch.Tensor]:
    """One file: a plain JPEG's bytes as a (1-tuple of a) uint8 tensor for the tensor decoder, or any
    other file's pixels (3, H, W) from Pillow. ``data``: its bytes read already (for its cache key,
    `HeldBytes`). Runs in reader threads; errors are `MediaError`s."""
    if data is None:
        data = file_bytes(path)
    if data is None:  # the checked road: the same read, or the error that names the file
        data = bytearray(checked_bytes(path))
    if plain_jpeg(data):
        return (torch.frombuffer(data, dtype=torch.uint8),)
    return pil_pixels(data, Path(path))


def read_items(paths: Sequence[Path], positions: Sequence[int], unreadable: UnreadableMedia,
               held: HeldBytes | None = None) -> list[tuple[int, Any]]:
    """`read_item` of each position (its bytes from ``held`` where the hasher left them), under the run's
    rule for unreadable files: one reader task reads a run of files (a task per file cost more of the GIL
    in futures than the reads themselves)."""
    out: list[tuple[int, Any]] = []
    found = held.take(positions) if held is not None else [None] * len(positions)
    for pos, data in zip(positions, found):
        try:
            out.append((pos, read_item(paths[pos], data)))
        except MediaError as exc:  # raised again unless media are skipped (`UnreadableMedia.message`)
            out.append((pos, unreadable.message(exc)))
    return out


def decode_jpegs(encoded: list[torch.Tensor], device: torch.device) -> list[torch.Tensor | None]:
    """uint8 (3, H, W) RGB images on ``device`` from JPEG bytes (CPU tensors), in one batched call; when
    the batch fails, item by item, with None for an item the decoder refuses (Pillow then decodes it)."""
    from torchvision.io import ImageReadMode, decode_jpeg

    if not encoded:
        return []
    try:
        return list(decode_jpeg(encoded, mode=ImageReadMode.RGB, device=device))
    except RuntimeError:
        pass
    out: list[torch.Tensor | None] = []
    for data in encoded:
        try:
            out.append(decode_jpeg(data, mode=ImageReadMode.RGB, device=device))
        except RuntimeError:
            out.append(None)
    return out


class DecodedBatches:
    """Batches of image files, decoded and preprocessed on ``device``: ``(positions, pixels, None,
    broken)`` as the runner's loader yields them, pixels (n, 3, h, w) float32 on ``device``, broken
    ``(position, message)`` for files that could not be read when the run's `UnreadableMedia` skips them.

    A pipeline of threads, so the caller's thread only takes finished batches (no per-image Python work
    on its path): reader threads read (and, for non-JPEGs, decode with Pillow) ``AHEAD`` batches ahead, a
    batch in one task per thread; a decoder thread decodes each batch's JPEGs in one call (Pillow for any
    the decoder refuses); a transform thread resizes and normalises them. On
    CUDA the two work on streams of their own, so batch k+1's decode overlaps batch k's transform, and
    both the model's forward on the default stream. Finished batches wait on a queue of ``AHEAD``.

    ``chunks`` (the positions of each batch) may be a list or an iterator that hands them as they become
    known (the runner's cache keys, resolved while earlier batches encode); one with a ``close`` method
    is closed when the caller stops early, so a decoder waiting on it ends. ``held``: files' bytes read
    already, for their cache keys (`HeldBytes`), taken instead of reading those files again."""

    def __init__(self, paths: Sequence[Path], chunks: Iterable[list[int]], transform: PixelTransform,
                 device: torch.device, unreadable: UnreadableMedia | bool, threads: int,
                 thread_init: Callable[[], None] | None = None, held: HeldBytes | None = None) -> None:
        self.paths, self.chunks, self.transform, self.device = paths, chunks, transform, device
        self.unreadable, self.threads, self.thread_init = UnreadableMedia.of(unreadable), threads, thread_init
        self.held = held

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        decoded: queue.Queue[Any] = queue.Queue(maxsize=1)
        done: queue.Queue[Any] = queue.Queue(maxsize=AHEAD)
        stop = threading.Event()
        readers = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="negharness-read",
                                     initializer=self.thread_init)
        stages = [threading.Thread(target=self._decode_all, args=(readers, decoded, stop), name="negharness-decode",
                                   daemon=True),
                  threading.Thread(target=self._transform_all, args=(decoded, done, stop),
                                   name="negharness-transform", daemon=True)]
        for stage in stages:
            stage.start()
        try:
            while (item := done.get()) is not _END:
                if isinstance(item, BaseException):
                    raise item
                if self.device.type == "cuda" and item[1] is not None:  # made on the transform's stream
                    item[1].record_stream(torch.cuda.current_stream(self.device))
                yield item
        finally:  # an error or Ctrl-C: the stages stop at their next batch, queued reads are dropped
            stop.set()
            close = getattr(self.chunks, "close", None)
            if close is not None:
                close()
            for stage in stages:
                stage.join()
            readers.shutdown(wait=True, cancel_futures=True)

    def _stream(self) -> Any:
        if self.thread_init is not None:
            self.thread_init()
        return torch.cuda.Stream(self.device) if self.device.type == "cuda" else None

    def _decode_all(self, readers: ThreadPoolExecutor, out: queue.Queue[Any], stop: threading.Event) -> None:
        """The decoder stage: each batch's reads gathered and its JPEGs decoded, in order; `_END` after the last."""
        stream = self._stream()
        chunks = iter(self.chunks)
        try:
            reads = deque(self._submit(readers, c) for c in itertools.islice(chunks, AHEAD))
            while reads:
                with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                    items = self._decoded(reads.popleft())
                    if stream is not None:
                        stream.synchronize()
                if not _put(out, items, stop):
                    return
                more = next(chunks, None)  # after the decode: a chunk still being made waits for nothing before it
                if more is not None:
                    reads.append(self._submit(readers, more))
            _put(out, _END, stop)
        except BaseException as exc:  # noqa: BLE001 - handed on to the caller's thread, which raises it
            _put(out, exc, stop)

    def _transform_all(self, inp: queue.Queue[Any], out: queue.Queue[Any], stop: threading.Event) -> None:
        """The transform stage: each decoded batch resized and normalised, in order (`_END` handed on)."""
        stream = self._stream()
        try:
            while (items := _get(inp, stop)) is not None:
                if isinstance(items, BaseException):
                    raise items
                if items is _END:
                    _put(out, _END, stop)
                    return
                with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                    batch = self._finished(items, stream)
                    if stream is not None:
                        stream.synchronize()
                if not _put(out, batch, stop):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, which raises it
            _put(out, exc, stop)

    def _submit(self, readers: ThreadPoolExecutor, chunk: list[int]) -> list[Future[list[tuple[int, Any]]]]:
        """One batch's reads: a run of files per reader thread (`read_items`)."""
        size = max(1, -(-len(chunk) // max(1, self.threads)))
        return [readers.submit(read_items, self.paths, chunk[lo:lo + size], self.unreadable, self.held)
                for lo in range(0, len(chunk), size)]

    def _decoded(self, reads: list[Future[list[tuple[int, Any]]]]) -> list[tuple[int, Any]]:
        """One batch's items in order, ``(position, pixels or the message of a skipped file)``: read
        results gathered, JPEGs decoded together. A file that fails to read, or that the JPEG decoder
        refuses and Pillow cannot read either, goes by the run's `UnreadableMedia` rule, as on every
        other path."""
        # (position, a plain JPEG's 1-tuple of bytes, Pillow's pixels, or the message of a skipped file)
        items: list[tuple[int, Any]] = [item for future in reads for item in future.result()]
        jpeg_at = [j for j, (_, item) in enumerate(items) if isinstance(item, tuple)]
        decoded = decode_jpegs([items[j][1][0] for j in jpeg_at], decode_device(self.device))
        for j, pixels in zip(jpeg_at, decoded):
            pos, encoded = items[j][0], items[j][1][0]
            if pixels is None:
                items[j] = self.unreadable.attempt(pos, partial(decoded_or_pil, encoded, None, self.paths[pos]))
            else:
                items[j] = (pos, pixels)
        return items

    def _finished(self, items: list[tuple[int, Any]], stream: Any) -> tuple[Any, ...]:
        """One decoded batch as the runner takes it: the readable items moved to the device and transformed."""
        broken = [(pos, item) for pos, item in items if isinstance(item, str)]
        kept = [(pos, item) for pos, item in items if not isinstance(item, str)]
        if not kept:
            return [], None, None, broken
        on_device = [im if im.device == self.device else im.to(self.device, non_blocking=True) for _, im in kept]
        if stream is not None:  # the decoder's stream made them: not reused before this stream is done with them
            for im in on_device:
                im.record_stream(stream)
        return [pos for pos, _ in kept], self.transform(on_device), None, broken


_END = object()  # after a pipeline's last batch


def _put(out: queue.Queue[Any], item: Any, stop: threading.Event) -> bool:
    """Hand ``item`` on, waiting for room; False when the pipeline was stopped meanwhile."""
    while not stop.is_set():
        with contextlib.suppress(queue.Full):
            out.put(item, timeout=0.1)
            return True
    return False


def _get(inp: queue.Queue[Any], stop: threading.Event) -> Any:
    """The next item, or None when the pipeline was stopped while waiting for it."""
    while not stop.is_set():
        with contextlib.suppress(queue.Empty):
            return inp.get(timeout=0.1)
    return None


class DecodedFiles(torch.utils.data.Dataset[Any]):
    """The same decoding one file at a time, ``(position, pixels or message)`` as `PreprocessedItems`
    gives: for the CPU, where the runner's decode threads or worker processes spread items over the
    cores (a batched call would decode on one of them)."""

    def __init__(self, paths: Sequence[Path], positions: Sequence[int], transform: PixelTransform,
                 unreadable: UnreadableMedia | bool = False) -> None:
        self.paths, self.positions, self.transform = paths, list(positions), transform
        self.unreadable = UnreadableMedia.of(unreadable)
        self.cpu = torch.device("cpu")

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor | str]:
        return self.unreadable.attempt(self.positions[i], lambda: self._pixels(self.positions[i]))

    def _pixels(self, pos: int) -> torch.Tensor:
        """File ``pos`` read, decoded (JPEG decoder, else Pillow) and transformed, on the CPU."""
        item = read_item(self.paths[pos])
        if isinstance(item, tuple):
            item = decoded_or_pil(item[0], decode_jpegs([item[0]], self.cpu)[0], self.paths[pos])
        return self.transform([item])[0]
