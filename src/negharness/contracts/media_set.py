"""The media a task hands the host: a `MediaSet`, which the run context embeds (`EvalContext.embed_media`).

A type of the ground floor, which names it; `negharness.io.media` builds file-backed sets and batches
them for a DataLoader, and re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence


@dataclass
class MediaSet:
    """A collection of images or videos with stable ids.

    ``key`` identifies the collection *and* how its items are produced (e.g. frame sampling): two
    tasks over the same key share cached embeddings. ``load(i)`` returns the raw item: an image
    (PIL or uint8 HxWx3 array) or a video's frames (T x H x W x 3 array or list of images).
    ``cheap`` marks in-memory items, where worker processes would cost more than they save.
    ``load_batch(positions)``, where given, returns a whole batch at once as one array (equal-length
    videos), so preprocessing runs vectorised instead of item by item.

    The cache keys an item by its content: ``sources[i]`` is the file (or, for a pre-extracted
    video, the sampled frame files in order) that item ``i`` is decoded from, and ``recipe`` says how
    (frame source, decoder and version, frame sampling); build file-backed sets with
    `negharness.io.media`'s `image_files`, `video_files` or `frame_folders`, which fill both. In-memory (``cheap``) items are keyed by a
    hash of their array. Where the task knows a cheaper key that still changes with the pixels,
    ``content_keys[i]`` is item i's (e.g. the world's per-item pixel hashes, computed once per
    process instead of on every embedding call); it wins over the others and is looked up among the
    sets of the same ``key`` only. A set with none is keyed by ``(key, id)``
    only, as third-party tasks built before content keys were. ``parts[i]``, where given, says which
    part of its source item ``i`` is (a crop box: two crops of one file are two items); it joins the
    file's content hash in the item's key. ``plain_files`` says that ``load(i)`` is no more than
    opening ``sources[i]`` (as `image_files` without a ``load`` of its own), so the runner may decode
    the files its own way (``-M decode=tensor``, `negharness.io.tensor_images`).
    """

    key: str
    kind: str  # "image" | "video"
    ids: list[str]
    load: Callable[[int], Any]
    cheap: bool = False
    load_batch: Callable[[list[int]], Any] | None = None
    sources: Sequence[Any] | None = None
    recipe: str | None = None
    content_keys: Sequence[str] | None = None
    parts: Sequence[str] | None = None
    plain_files: bool = False  # item i is the whole of the image file sources[i]: a runner may decode it itself

    def __post_init__(self) -> None:
        if self.kind not in ("image", "video"):
            raise ValueError(f"MediaSet kind must be image or video, not {self.kind!r}")
        if self.content_keys is not None and len(self.content_keys) != len(self.ids):
            raise ValueError(f"MediaSet {self.key}: {len(self.content_keys)} content_keys for {len(self.ids)} ids")
        if self.parts is not None and (self.sources is None or len(self.parts) != len(self.ids)):
            raise ValueError(f"MediaSet {self.key}: parts name parts of sources, one per id")

    def __len__(self) -> int:
        return len(self.ids)
