"""The runner: the embedding protocol's context, between tasks, the model and the embedding cache.

Tasks never call a model directly: they ask the `CachedEvalContext` for embeddings, which serves what
the cache holds and encodes only the rest, in batches, under autocast and inference mode. Which device
(`negharness.engine.devices`) and how media become batches of pixels
(`negharness.engine.media_batches`) are decided apart.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch

from negharness.contracts.context import RunContext
from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.contracts.model import ChoiceScorer, EmbeddingModel, as_encoder
from negharness.contracts.precision import autocast, numbers_made
from negharness.contracts.sampling import FrameSampling
from negharness.discovery.lookup import PluginLookup
from negharness.engine.embedding_contract import EmbeddingContract, ModelOrigin
from negharness.engine.kept_batches import BatchKeeper, Rows, staged
from negharness.engine.media_batches import MediaBatches
from negharness.engine.streamed_keys import KeyStream
from negharness.engine.stages import StageClock, timed_method
from negharness.engine.text_batches import encodes_prepared, prepared_ahead
from negharness.io.held_bytes import HeldBytes
from negharness.io.media import MediaSet
from negharness.io.tensor_images import tensor_recipe
from negharness.io.unreadable import UnreadableMedia
from negharness.store.cache import CollectionCache, EmbeddingCache, text_key
from negharness.store.content import hash_array

CACHE_KEYS = 5  # 2: media keyed by content hash and decoding recipe, shards with checksums; 3: shards name their
# collection; 4: CRC-32 shard checksums (a namespace apart, so an older negharness on the same cache never meets them);
# 5: every row passed the model contract on entry (`EmbeddingContract`), and MP4 frames are chosen by timestamp


@contextlib.contextmanager
def _exit_on_sigterm() -> Iterator[None]:
    """While encoding, SIGTERM ends the run as Ctrl-C does (``finally`` blocks keep what was encoded)
    instead of killing the process outright. Only in the main thread, and only over the default handler."""
    import signal

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def _raise(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class RunSettings:
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    precision: str = "fp32"
    batch_size: int = 64
    workers: int | None = None  # None: automatic (0 for in-memory media)
    skip_broken_media: bool = False  # count unreadable media instead of stopping the run
    decode_threads: int | None = None  # without worker processes; None: one per core, at most 8


class CachedEvalContext(RunContext):
    """The embedding protocol's context (retrieval and multiple choice), peer of
    `negharness.api.EditContext`: cached, batched embedding of texts and media by one model."""

    COUNTED = ("texts_encoded", "texts_cached", "media_encoded", "media_cached", "media_skipped")

    def __init__(self, model: EmbeddingModel | ChoiceScorer, settings: RunSettings, cache: EmbeddingCache | None = None,
                 progress: Any = None, log_samples: bool = False, plugins: PluginLookup | None = None,
                 seed: int = 0, origin: ModelOrigin | None = None) -> None:
        super().__init__(model, plugins, seed)
        self.origin = origin or ModelOrigin(model.name)
        self.contract = EmbeddingContract(self.origin)
        self.settings = settings
        self.cache = cache
        self.progress = progress
        self.log_samples = log_samples
        self.counters.update({k: 0 for k in self.COUNTED})
        self.counters.encode_seconds = 0.0
        self.stages = StageClock()  # the record's stage times (`negharness.engine.stages`): loops add decode, tokenise
        # --skip-broken-media: every decoder's rule and the one bookkeeping (shared with `EditContext`)
        self.media_policy = UnreadableMedia(settings.skip_broken_media, self.counters)
        self.broken: dict[str, list[str]] = self.media_policy.skipped  # media key -> ids skipped as unreadable
        self._fitted: dict[str, int] = {}  # "text" / "image" / "video" -> the batch size that fits after an OOM
        numbers = numbers_made(settings.device, settings.precision)
        self.namespace = hash_json({"model": model.fingerprint(), **numbers, "keys": CACHE_KEYS})
        self._namespace_info = {"model": model.name, "fingerprint": model.fingerprint(),
                                "describe": model.describe(), **numbers}

    @functools.cached_property
    def loading(self) -> MediaBatches:
        """Media into batches of pixels (`negharness.engine.media_batches`): for an encoder only, so made on
        first use, by `embed_media` (which refuses any other model first)."""
        return MediaBatches(as_encoder(self.model), self.settings, self.media_policy)

    @property
    def batch_size(self) -> int:
        return self.settings.batch_size

    @property
    def precision(self) -> str:
        return self.settings.precision

    # encoding helpers ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _autocast(self) -> Iterator[None]:
        with torch.inference_mode(), autocast(self.settings.device, self.settings.precision):
            yield

    def _collection(self, name: str) -> CollectionCache | None:
        return None if self.cache is None else self.cache.collection(self.namespace, name, self._namespace_info)

    def media_keys(self, media: MediaSet) -> tuple[str, list[str | None]]:
        """(collection, per-item cache key). File-backed sets: the content hash of each item's
        file(s) under a collection named by the decoding recipe, so the same bytes reached through
        any task or data root share one entry. In-memory sets: a hash of each item's array. Sets with
        neither: the collection key and item id. A None key (a file that cannot be read) is never
        looked up nor stored; its decoder reports it. A set with ``content_keys`` is keyed by them, in a
        collection of its own key, so a third party's weak keys never meet another set's."""
        if media.content_keys is not None:  # the task's own: no file or pixel read; scoped by the set's key
            return f"{media.kind}|content|{media.key}", list(media.content_keys)
        if media.sources is not None:
            assert self.cache is not None
            keys = self.cache.hasher.many(media.sources, self.loading.decode_threads())
            if media.parts is not None:  # a crop of a file is its own item: the part joins the file's hash
                keys = [k if k is None or not part else f"{k}|{part}" for k, part in zip(keys, media.parts)]
            return self._file_collection(media), keys
        if media.cheap:
            return f"{media.kind}|memory", self._memory_keys(media)
        return f"{media.kind}:{media.key}", list(media.ids)

    def _file_collection(self, media: MediaSet) -> str:
        """The collection of a file-backed set: its kind and how its files become pixels."""
        transform = self.loading.tensor_decoding(media)
        recipe = tensor_recipe(transform, self.settings.device) if transform is not None else media.recipe
        return f"{media.kind}|{recipe or 'file'}"

    def _memory_keys(self, media: MediaSet) -> list[str | None]:
        if media.load_batch is None:
            return [hash_array(media.load(i)) for i in range(len(media))]
        keys: list[str | None] = []
        for lo in range(0, len(media), 1024):
            keys.extend(hash_array(item) for item in media.load_batch(list(range(lo, min(lo + 1024, len(media))))))
        return keys

    def _track(self, description: str, total: int | None) -> Any:
        if self.progress is None or total == 0:
            return None
        return self.progress.add_task(description, total=total)

    def _advance(self, task_id: Any, n: int) -> None:
        if task_id is not None:
            self.progress.advance(task_id, n)

    # public API ---------------------------------------------------------------------------------
    def frame_sampling(self, task_default: "FrameSampling") -> "FrameSampling":
        """The model's explicit sampling (``-M frames=...``) wins over the task's default."""
        return self.model.frame_sampling or task_default

    def _require_encoder(self) -> None:
        """Only an encoder is embedded with: a `ChoiceScorer` on a task that embeds is refused by name."""
        as_encoder(self.model)

    @timed_method("embed")
    def embed_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """(N, D) float32 on CPU, in the order given; each distinct text is encoded at most once."""
        self._require_encoder()
        unique = list(dict.fromkeys(texts))
        if not unique:
            return torch.empty(0, 0)
        keys = [text_key(t) for t in unique]
        store = self._collection("text")
        emb = Rows()
        table = None
        if store is not None:
            pos, vecs = store.lookup(keys)
            if vecs.shape[1]:  # the cache's dimension: a batch of another one is refused, not cached
                self.contract.expect_dim(vecs.shape[1], "its cached text embeddings")
            if len(pos) == len(unique):
                table = vecs  # all cached, in order: no row-by-row assembly
            else:
                emb.add(pos, vecs)
        todo = emb.missing(len(unique)) if table is None else []
        self.counters.texts_cached += len(unique) - len(todo)
        self._encode_shared(store, keys, todo, emb, lambda idx: self._encode_texts(unique, keys, idx, emb, store), "texts")
        if table is None:
            table = emb.table(len(unique))
        if len(unique) == len(texts):  # no text twice: ``unique`` is ``texts``, in order
            return table
        where = {t: i for i, t in enumerate(unique)}
        return torch.from_numpy(table.numpy()[[where[t] for t in texts]])  # numpy: no OpenMP wake-up for a copy

    @timed_method("embed")
    def embed_media(self, media: MediaSet) -> torch.Tensor:
        """(len(media), D) float32 on CPU, in ``media.ids`` order; cached per (model, item content),
        and items with equal content (see `media_keys`) are encoded once.

        With ``skip_broken_media``, unreadable items get NaN rows and are listed in ``self.broken``;
        tasks drop them (and queries left with no relevant item) before scoring.
        """
        self._require_encoder()
        if self._streams_keys(media):
            return self._embed_streamed(media)
        store: CollectionCache | None = None
        keys: list[str | None] = [None] * len(media)
        if self.cache is not None:
            collection, keys = self.media_keys(media)
            store = self._collection(collection)
        emb = Rows()
        if store is not None:
            known = [i for i, k in enumerate(keys) if k is not None]
            pos, vecs = store.lookup([k for k in keys if k is not None])  # the keys at ``known``
            if vecs.shape[1]:
                self.contract.expect_dim(vecs.shape[1], f"its cached {media.kind} embeddings")
            if len(pos) == len(media) and len(media):
                self.counters.media_cached += len(media)
                return vecs  # every item cached, in order
            emb.add([known[p] for p in pos], vecs)
        todo: list[int] = []
        same_as: dict[int, int] = {}  # item -> the item of equal content that is encoded
        first: dict[str, int] = {}  # content key -> the first item with it
        for i in range(len(media)):
            if i in emb:
                continue
            key = keys[i]
            if key is not None and key in first:
                same_as[i] = first[key]  # equal content: encoded once, served to both
                continue
            if key is not None:
                first[key] = i
            todo.append(i)
        self.counters.media_cached += len(media) - len(todo) - len(same_as)
        self._encode_shared(store, keys, todo, emb, lambda idx: self._encode_media(media, idx, emb, store, keys), "media")
        self._serve_equal(media, emb, same_as)
        if not len(media):
            return torch.empty(0, 0)
        return emb.table(len(media))  # NaN rows for the items left out as unreadable

    def _streams_keys(self, media: MediaSet) -> bool:
        """Whether ``media``'s cache keys are resolved beside the loop (`KeyStream`) rather than all first:
        plain image files decoded in batches (`MediaBatches.batched`), more than one batch of them, a cache, and
        keys as this class makes them (a subclass that keys otherwise keeps its `media_keys`)."""
        return (self.cache is not None and type(self).media_keys is CachedEvalContext.media_keys
                and media.content_keys is None and media.parts is None and len(media) > self.settings.batch_size
                and self.loading.tensor_decoding(media) is not None and self.loading.batched())

    def _embed_streamed(self, media: MediaSet) -> torch.Tensor:
        """`embed_media` with the keys resolved run by run while the first batches encode (see
        `negharness.engine.streamed_keys`): the same items encoded in the same batches, the same counts."""
        assert self.cache is not None and media.sources is not None  # `_streams_keys`
        store = self._collection(self._file_collection(media))
        assert store is not None
        emb = Rows()
        held = HeldBytes()  # each file read once: the bytes hashed for its key are the bytes decoded
        runs = self.cache.hasher.runs(media.sources, self.loading.decode_threads(), held)
        with KeyStream(runs, store, self.contract, media.kind, emb, self.settings.batch_size, held) as stream:
            try:
                with _exit_on_sigterm():
                    self._encode_media(media, [], emb, store, stream.keys, stream.feed, held)
            finally:  # also on Ctrl-C or SIGTERM: what was encoded is kept (the stream's claims end as it closes)
                store.close()
        keys = stream.keys
        self.counters.media_cached += stream.cached
        if stream.rest:  # items other runs claimed: wait for them, take theirs, encode what they did not deliver
            self._wait_for_others(store, stream.others(), keys, stream.rest, emb, "media")
            todo = [i for i in stream.rest if i not in emb]
            self._encode_shared(store, keys, todo, emb, lambda idx: self._encode_media(media, idx, emb, store, keys),
                                "media")
        self._serve_equal(media, emb, stream.same_as)
        return emb.table(len(media))  # NaN rows for the items left out as unreadable

    def _encode_texts(self, unique: Sequence[str], keys: list[str], todo: list[int], emb: Rows, store: Any) -> None:
        bar = self._track("encoding texts", len(todo))
        start = time.perf_counter()
        batches = self.model.text_batches([unique[i] for i in todo], self.settings.batch_size)
        if sorted(b for batch in batches for b in batch) != list(range(len(todo))):
            raise UserError(f"model {self.model.name}: text_batches() must list each of the {len(todo)} texts "
                            "exactly once")
        split = encodes_prepared(self.model)
        prepare, encode = (self.model.prepare_texts, self.model.encode_prepared) if split else (list, self.model.encode_text)
        with self._keeper() as keeper:
            for idx, texts, prepared in self._waited("tokenise", prepared_ahead(
                    unique, [[todo[b] for b in batch] for batch in batches], prepare)):
                parts = self._forward_fitting(texts, "text", lambda part: encode(prepared[part]))
                kept = self._kept(idx, [keys[i] for i in idx], emb, store, "texts_encoded", bar)
                keeper.keep(texts, "text", parts, kept)
        self.counters.encode_seconds += time.perf_counter() - start

    def _keeper(self) -> BatchKeeper:
        """The bookkeeping of each computed batch, one batch behind the forward (`BatchKeeper`); the loop's
        waits for it count as forward time (the copy back from the device is in them)."""
        return BatchKeeper(self.contract, lambda seconds: self.stages.add("forward", seconds))

    def _kept(self, positions: list[int], keys: Sequence[str | None], emb: Rows, store: Any, counter: str,
              bar: Any) -> Callable[[torch.Tensor, float], None]:
        """What is done with a checked batch (in the keeper's thread): its rows kept at ``positions`` and
        cached under ``keys`` (None: an item never cached), told what the batch cost (the cache writes
        what would be lost by the seconds), counted and shown."""
        def done(rows: torch.Tensor, seconds: float) -> None:
            emb.add(positions, rows)
            if store is not None:
                keep = [j for j, key in enumerate(keys) if key is not None]
                if len(keep) == len(keys):
                    store.add(keys, rows, seconds)
                elif keep:
                    store.add([keys[j] for j in keep], rows[keep], seconds)
            self.counters[counter] += len(positions)
            self._advance(bar, len(positions))
        return done

    def _waited(self, stage: str, batches: Iterator[Any]) -> Iterator[Any]:
        """``batches``, each one's wait counted as ``stage`` (`negharness.engine.stages`): the time the
        loop stood idle for the decoders or the tokenizer, not their work done beside the forward pass."""
        try:
            while True:
                start = time.perf_counter()
                try:
                    item = next(batches)
                except StopIteration:
                    return
                finally:
                    self.stages.add(stage, time.perf_counter() - start)
                yield item
        finally:  # an error in the loop stops the decoders or the tokenizer thread now, not at collection
            close = getattr(batches, "close", None)
            if close is not None:
                close()

    def _forward_fitting(self, ids: Sequence[str], what: str,
                         encode: Callable[[slice], Any]) -> list[tuple[slice, Any]]:
        """One batch's raw outputs on their way to the host (`staged`), one per slice of ``ids`` encoded
        together: on CUDA out-of-memory the batch is halved and the half retried, down to one item; the size
        that fitted serves this task's later batches of ``what`` and is recorded (``counts.batch_size_fitted``).
        Rows are encoded independently (models are in eval mode), so the numbers are those of the full batch."""
        parts: list[tuple[slice, Any]] = []
        lo = 0
        while lo < len(ids):
            size = min(len(ids) - lo, self._fitted.get(what, len(ids)))
            try:
                with self.stages.timed("forward"), self._autocast():
                    raw = encode(slice(lo, lo + size))
            except torch.cuda.OutOfMemoryError as exc:
                if size == 1:
                    raise UserError(f"{self.origin.label()}: CUDA out of memory encoding a single {what} "
                                    f"({str(exc).splitlines()[0]}); free the GPU (another process may hold it), "
                                    "or run with --precision bf16 or on another device") from None
                failed = size  # the retry waits until the except block has let go of the failed batch
            else:
                parts.append((slice(lo, lo + size), staged(raw)))
                lo += size
                continue
            self._halve(what, failed)
        return parts

    def _halve(self, what: str, failed: int) -> None:
        """After an out-of-memory at ``failed`` items: half of it from now on, said once and recorded."""
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()  # the failed batch's blocks, back to the allocator before the retry
        self._fitted[what] = failed // 2
        self.counters.batch_size_fitted = dict(self._fitted)
        warnings.warn(f"CUDA out of memory encoding {failed} {what}s at once: retrying in batches of {failed // 2} "
                      f"(for the rest of this task's {what}s; the record says so under counts.batch_size_fitted)",
                      UserWarning, stacklevel=4)

    def _encode_shared(self, store: Any, keys: Sequence[str | None], todo: list[int], emb: Rows,
                       encode: Callable[[list[int]], None], what: str) -> None:
        """Encode the items at ``todo`` that no other run on this cache is encoding now, then wait
        for those runs and read theirs from the cache; what they did not deliver is claimed again
        (see `negharness.store.claims`). Without a cache, encode them all."""
        if not todo:
            return
        if store is None:
            with _exit_on_sigterm():
                encode(todo)
            return
        while todo:
            claim = store.claim([keys[i] for i in todo if keys[i] is not None])
            claimed = set(claim.mine)
            mine = [i for i in todo if keys[i] is None or keys[i] in claimed]
            try:
                if mine:
                    with _exit_on_sigterm():
                        encode(mine)
            finally:  # also on Ctrl-C or SIGTERM: what was encoded is kept, and the claim ends
                store.close()
                store.claims.release(claim)
            rest = [i for i in todo if keys[i] is not None and keys[i] not in claimed]
            if rest:
                self._wait_for_others(store, claim, keys, rest, emb, what)
            todo = [i for i in rest if i not in emb]

    def _wait_for_others(self, store: Any, claim: Any, keys: Sequence[str | None], rest: list[int],
                         emb: Rows, what: str) -> None:
        """Wait for the runs that claimed ``rest``, then take their embeddings from the cache."""
        bar = self._track(f"{what}: waiting for the run encoding them ({', '.join(claim.holders())})", len(rest))
        store.claims.wait(claim)
        store.refresh()
        pos, vecs = store.lookup([keys[i] for i in rest])
        emb.add([rest[p] for p in pos], vecs)
        self.counters[f"{what}_cached"] += len(pos)
        self._advance(bar, len(rest))

    def _serve_equal(self, media: MediaSet, emb: Rows, same_as: dict[int, int]) -> None:
        """Items whose content equals an encoded one's get its embedding (or share its being broken)."""
        for i, j in same_as.items():
            if j in emb:
                emb.share(i, j)
                self.counters.media_cached += 1
            else:  # its twin's failure was reported already
                self.media_policy.leave_out(media.key, media.ids[i], None)

    def _encode_media(self, media: MediaSet, todo: list[int], emb: Rows, store: Any, keys: list[str | None],
                      chunks: Iterable[list[int]] | None = None, held: HeldBytes | None = None) -> None:
        bar = self._track(f"encoding {media.kind}s", len(todo) if chunks is None else None)  # None: not known yet
        start = time.perf_counter()
        device = self.settings.device
        with self._keeper() as keeper:
            for positions, pixels, mask in self._waited("decode", self.loading.batches(media, todo, chunks, held)):
                pixels = pixels.to(device, non_blocking=True)
                mask = None if mask is None else mask.to(device)

                def encode(part: slice, pixels: torch.Tensor = pixels, mask: torch.Tensor | None = mask) -> Any:
                    if media.kind == "video":
                        return self.model.encode_video(pixels[part], None if mask is None else mask[part])
                    return self.model.encode_image(pixels[part])

                ids = [media.ids[p] for p in positions]
                parts = self._forward_fitting(ids, media.kind, encode)
                keeper.keep(ids, media.kind, parts, self._kept(positions, [keys[p] for p in positions], emb, store,
                                                               "media_encoded", bar))
        self.counters.encode_seconds += time.perf_counter() - start
