"""Cache keys resolved beside the encoding loop, for a set of image files decoded in batches.

An image's cache key is the SHA-256 of its file, and what to encode (not cached, not equal to an item
already taken, not claimed by another run) is known only from the keys. Hashing every file first put a
full read of the set before the first batch: on perf/gpu_sim.py's two cores half of the images' wall time.
Here a `KeyStream` resolves the keys in runs as a pool hashes them (`FileHasher.runs`), in a thread of
its own: each run is looked up in the cache, its equal-content items noted, its keys claimed
(`negharness.store.claims`), and its positions to encode handed to the decoder through a `ChunkFeed`, which
cuts them into the same batches as the whole list would give. The loop starts once the first batch's
keys are known; what other runs claimed is waited for afterwards, as `CachedEvalContext` does for a
set whose keys were hashed first.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Iterator

from negharness.engine.embedding_contract import EmbeddingContract
from negharness.engine.kept_batches import Rows
from negharness.store.cache import CollectionCache
from negharness.store.claims import Claim

RUN_GROWTH = 2  # each run of keys resolved at once is this many times the last, from one batch ...
RUN_MOST = 32  # ... up to this many batches (claims per set stay few: each claim reads the live ones)


class ChunkFeed:
    """Positions to encode, handed over as they are resolved and taken as batches of ``size`` (the last
    one shorter): an iterator the decoder thread waits on. `close` ends it early (the loop stopped)."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._ready = threading.Condition()
        self._positions: list[int] = []
        self._ended = self._closed = False
        self._error: BaseException | None = None

    def put(self, positions: list[int]) -> None:
        with self._ready:
            self._positions.extend(positions)
            self._ready.notify_all()

    def end(self, error: BaseException | None = None) -> None:
        """No more positions (``error``: resolving them failed; the waiting decoder raises it)."""
        with self._ready:
            self._ended, self._error = True, error
            self._ready.notify_all()

    def close(self) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    def __iter__(self) -> Iterator[list[int]]:
        return self

    def __next__(self) -> list[int]:
        with self._ready:
            self._ready.wait_for(lambda: self._closed or self._ended or len(self._positions) >= self.size)
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            if self._closed or not self._positions:
                raise StopIteration
            chunk, self._positions = self._positions[:self.size], self._positions[self.size:]
            return chunk


class KeyStream:
    """The keys of one set's files, resolved run by run in a thread beside the loop (see the module's
    docstring). A context manager: entering starts the thread; leaving stops it and ends its claims.
    Afterwards ``keys`` holds every item's key (None: unreadable), ``cached`` the items served by the
    cache, ``same_as`` the items of equal content to an earlier one, ``rest`` those other runs claimed."""

    def __init__(self, runs: Iterator[list[str | None]], store: CollectionCache, contract: EmbeddingContract,
                 kind: str, emb: Rows, batch_size: int) -> None:
        self.runs, self.store, self.contract, self.kind, self.emb = runs, store, contract, kind, emb
        self.feed = ChunkFeed(batch_size)
        self.keys: list[str | None] = []
        self.cached = 0
        self.same_as: dict[int, int] = {}  # item -> the earlier item of equal content that is encoded
        self.rest: list[int] = []  # items another run claimed
        self.claims: list[Claim] = []
        self._first: dict[str, int] = {}  # content key -> the first item with it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._resolve, name="negharness-keys", daemon=True)

    def __enter__(self) -> "KeyStream":
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self.feed.close()
        self._thread.join()
        for claim in self.claims:  # also on an error: what was encoded is in the cache, and waiters move on
            self.store.claims.release(claim)

    def _resolve(self) -> None:
        try:
            want, waiting = self.feed.size, []
            for run in self.runs:
                if self._stop.is_set():
                    break
                waiting += run
                if len(waiting) >= want:
                    self._take(waiting)
                    waiting, want = [], min(want * RUN_GROWTH, self.feed.size * RUN_MOST)
            else:
                if waiting:
                    self._take(waiting)
            self.feed.end()
        except BaseException as exc:  # noqa: BLE001 - handed to the decoder, so to the loop's thread
            self.feed.end(exc)
        finally:
            close = getattr(self.runs, "close", None)
            if close is not None:
                close()  # the hashing pool stops (this thread is the one iterating it)

    def _take(self, run: list[str | None]) -> None:
        """One run of keys: looked up, equal items noted, claimed, and the positions to encode fed."""
        lo = len(self.keys)
        self.keys.extend(run)
        known = [lo + j for j, key in enumerate(run) if key is not None]
        pos, vecs = self.store.lookup([key for key in run if key is not None])  # the keys at ``known``
        if vecs.shape[1]:
            self.contract.expect_dim(vecs.shape[1], f"its cached {self.kind} embeddings")
        self.emb.add([known[p] for p in pos], vecs)
        self.cached += len(pos)
        todo: list[int] = []
        for i in range(lo, len(self.keys)):
            key = self.keys[i]
            if i in self.emb:
                continue
            if key is not None and key in self._first:
                self.same_as[i] = self._first[key]
                continue
            if key is not None:
                self._first[key] = i
            todo.append(i)
        claim = self.store.claim([k for k in (self.keys[i] for i in todo) if k is not None])
        self.claims.append(claim)
        claimed = set(claim.mine)
        self.rest += [i for i in todo if self.keys[i] is not None and self.keys[i] not in claimed]
        self.feed.put([i for i in todo if self.keys[i] is None or self.keys[i] in claimed])

    def others(self) -> Claim:
        """One claim listing every other run that holds items of ``rest`` (to wait for them all)."""
        merged = Claim([])
        for claim in self.claims:
            for path, keys in claim.others.items():
                merged.others.setdefault(path, []).extend(keys)
        return merged

