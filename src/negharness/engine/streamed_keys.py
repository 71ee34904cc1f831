"""Cache keys resolved beside the encoding loop, for a set of image files decoded in batches.

An image's cache key is the SHA-256 of its file, and what to encode (not cached, not equal to an item
already taken, not claimed by another run) is known only from the keys. Hashing every file first put a
full read of the set before the first batch: on perf/gpu_sim.py's two cores half of the images' wall time.
Here a `KeyStream` resolves the keys in runs as a pool hashes them (`FileHasher.runs`), in a thread of
its own: each run is looked up in the cache, its equal-content items noted, its keys claimed
(`negharness.store.claims`), and its positions to encode handed to the decoder through a `ChunkFeed`, which
cuts them into the same batches as the whole list would give. The loop starts once the first batch's
keys are known; what other runs claimed is waited for afterwards, as `CachedEvalContext` does for a
set whose keys were hashed first. The bytes the pool reads to hash a file are held for its decoder
(`negharness.io.held_bytes`), so each file is read once; the stream paces the hashing to keep them bounded.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Callable, Iterator

from negharness.engine.embedding_contract import EmbeddingContract
from negharness.engine.kept_batches import Rows
from negharness.io.held_bytes import HeldBytes
from negharness.io.tensor_images import AHEAD
from negharness.store.cache import CollectionCache
from negharness.store.claims import Claim

RUN_GROWTH = 2  # each run of keys resolved at once is this many times the last, from one batch ...
RUN_MOST = 32  # ... up to this many batches (claims per set stay few: each claim reads the live ones)


class ChunkFeed:
    """Positions to encode, handed over as they are resolved and taken as batches of ``size`` (the last
    one shorter): an iterator the decoder thread waits on. `close` ends it early (the loop stopped).
    ``taken`` is called after each batch is taken (what a producer waiting for the decoder listens to)."""

    def __init__(self, size: int, taken: Callable[[], None] | None = None) -> None:
        self.size = max(1, size)
        self.taken = taken
        self._ready = threading.Condition()
        self._positions: list[int] = []
        self._ended = self._closed = False
        self._error: BaseException | None = None

    def pending(self) -> int:
        """Positions fed and not yet taken (read without the lock: a waiter rechecks it)."""
        return len(self._positions)

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
        if self.taken is not None:  # outside the lock: the listener's own lock is never taken inside ours
            self.taken()
        return chunk


class KeyStream:
    """The keys of one set's files, resolved run by run in a thread beside the loop (see the module's
    docstring). A context manager: entering starts the thread; leaving stops it and ends its claims.
    Afterwards ``keys`` holds every item's key (None: unreadable), ``cached`` the items served by the
    cache, ``same_as`` the items of equal content to an earlier one, ``rest`` those other runs claimed."""

    def __init__(self, runs: Iterator[list[str | None]], store: CollectionCache, contract: EmbeddingContract,
                 kind: str, emb: Rows, batch_size: int, held: HeldBytes | None = None) -> None:
        self.runs, self.store, self.contract, self.kind, self.emb = runs, store, contract, kind, emb
        self.held = held  # the files' bytes the hasher read, left for the decoder (`negharness.io.held_bytes`)
        self.feed = ChunkFeed(batch_size, None if held is None else held.poke)
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
        if self.held is not None:  # the loop is over: nothing held is read now (and a wait for room ends)
            self.held.close()
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
                if len(waiting) >= want or (len(waiting) >= self.feed.size and self._pressed()):
                    self._take(waiting)
                    waiting, want = [], min(want * RUN_GROWTH, self.feed.size * RUN_MOST)
                    self._wait_for_room()
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

    def _pressed(self) -> bool:
        return self.held is not None and self.held.pressed()

    def _wait_for_room(self) -> None:
        """While the held bytes fill half their room and the decoder has `AHEAD` batches fed to take, hash
        no further (the hashing pool stops `FileHasher.runs`' look-ahead with this thread): what is read
        ahead stays bounded and mostly held. Never while the decoder could starve: it takes only whole
        batches, and it has them."""
        held = self.held
        if held is None:
            return

        def ready() -> bool:
            return self._stop.is_set() or not held.pressed() or self.feed.pending() < AHEAD * self.feed.size

        while not ready():
            held.wait(ready, 0.1)

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
        rest = [i for i in todo if self.keys[i] is not None and self.keys[i] not in claimed]
        self.rest += rest
        fed = [i for i in todo if self.keys[i] is None or self.keys[i] in claimed]
        if self.held is not None and len(fed) < len(self.keys) - lo:  # cached, equal or another run's: not read
            chosen = set(fed)
            self.held.drop(i for i in range(lo, len(self.keys)) if i not in chosen)
        self.feed.put(fed)

    def others(self) -> Claim:
        """One claim listing every other run that holds items of ``rest`` (to wait for them all)."""
        merged = Claim([])
        for claim in self.claims:
            for path, keys in claim.others.items():
                merged.others.setdefault(path, []).extend(keys)
        return merged

