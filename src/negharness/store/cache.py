"""On-disk embedding cache: every text, image and video is encoded once per model fingerprint.

Layout: ``<root>/embeddings/<namespace>/<collection>/shard-*.safetensors`` (`negharness.store.shards`). The namespace hashes
everything about the model that changes an embedding (fingerprint, precision); the collection says
how items become pixels (``text``; or a media kind with its frame source, decoder and sampling), and
the ids inside are content hashes (see `negharness.store.content`), so one file reached through two tasks
or two data roots is one entry and a replaced file is a new one.

Nothing finished is lost: encoded rows are written as a shard (write and rename) as soon as they hold
`FLUSH_SECONDS` of the model's work (the runner says what each batch cost) or `FLUSH_ROWS` rows, so a
kill -9 loses at most that, or the one batch in flight where a batch takes longer (a shard per batch of a
fast GPU cost more host time than the batch); shards are fsync'd at least every few seconds (a power cut
loses at most those seconds). Every shard carries a checksum of its ids and embedding bytes, checked
on read: a damaged shard is moved aside into ``damaged/`` with a warning naming it, and its items
are encoded again. Many small shards are merged into one, keeping one row per id: by the process that
wrote them when it finishes a collection, in a thread beside the run that `settle_merges` waits for, or on
load when a folder holds more than `COMPACT_OVER`; the merged shard is written first, then its parts are
removed under the collection's mutex. Concurrent runs split a collection's work through claims
(`negharness.store.claims`): each item is encoded by one of them and read by the others.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar, cast

import numpy as np
import torch

from negharness.io.atomic_files import atomic_write_json
from negharness.store.claims import Claim, Claims, folder_mutex
from negharness.store.content import FileHasher
from negharness.store.shards import (
    HOST,
    DamagedShard,
    ForeignShard,
    fsync_entry,
    host_table,
    new_shard_name,
    read_shard,
    remove_orphans,
    write_shard,
)

COMPACT_OVER = 16  # shards in one collection folder before a load merges them
SYNC_SECONDS = 2.0  # the longest a written shard waits for an fsync
FLUSH_SECONDS = 0.025  # the model's work (seconds) that added rows hold at most before they are written
FLUSH_ROWS = 16_384  # rows added before they are written, whatever they cost
LIST_AGAIN = 4  # listings of a folder while shards vanish under a read (merged by another process)


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _safe_name(collection: str) -> str:
    readable = "".join(c if c.isalnum() or c in "-_." else "_" for c in collection)[:60]
    return f"{readable}-{hashlib.sha1(collection.encode()).hexdigest()[:10]}"


Shard = tuple[Path, list[str], list[torch.Tensor]]  # a shard written by this process: its path, ids and table's parts


def _unique_rows(shards: Sequence[Shard]) -> tuple[list[str], list[torch.Tensor]]:
    """The shards' ids and rows (as table parts, not stacked), each id once (its first row: every copy
    encodes the same content)."""
    ids = [k for _, keys, _ in shards for k in keys]
    tables = [t for _, _, parts in shards for t in parts]
    first = dict(zip(reversed(ids), range(len(ids) - 1, -1, -1)))
    if len(first) == len(ids):
        return ids, tables
    keep = sorted(first.values())
    return [ids[i] for i in keep], [_stacked(tables)[torch.tensor(keep, dtype=torch.long)]]

def _stacked(tables: list[torch.Tensor]) -> torch.Tensor:
    """The (n, D) float32 tables one under the other, in numpy: torch's ``cat`` woke its OpenMP threads
    for the copy (tens of ms for 8,192 rows on two loaded cores)."""
    if len(tables) == 1:
        return tables[0].contiguous()
    return torch.from_numpy(np.concatenate([t.numpy() for t in tables]))


_Method = TypeVar("_Method", bound=Callable[..., Any])


def _locked(method: _Method) -> _Method:
    """``method`` under its collection's lock (`CollectionCache` is used from two threads at once)."""
    @functools.wraps(method)
    def run(self: "CollectionCache", *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)
    return cast(_Method, run)


class CollectionCache:
    """The cached embeddings of one (namespace, collection).

    Added rows are buffered until they hold ``flush_seconds`` of the model's work (each `add` says what
    its rows cost; an add that does not say is written at once) or ``flush_every`` rows, then written as
    one shard: a batch that takes longer is written as it comes, faster ones together.
    """

    def __init__(self, folder: Path, flush_every: int = FLUSH_ROWS, sync_seconds: float = SYNC_SECONDS,
                 compact_over: int = COMPACT_OVER, flush_seconds: float = FLUSH_SECONDS) -> None:
        self.folder = folder
        self.flush_every = flush_every
        self.flush_seconds = flush_seconds
        self.sync_seconds = sync_seconds
        self.compact_over = compact_over
        self._index: dict[str, int] | None = None  # key -> row of the tables stacked: no tensor per row
        self._tables: list[torch.Tensor] = []
        self._starts: list[int] = []  # each table's first row
        self._pending_ids: list[str] = []
        self._pending: list[torch.Tensor] = []
        self._pending_seconds = 0.0  # the model's work the pending rows hold
        self._written: list[Shard] = []  # this process's shards not yet merged
        self._unsynced = False
        self._last_sync = time.monotonic()
        self._seen: set[str] = set()  # shard names already in the index
        self.damaged: list[Path] = []
        self.claims = Claims(folder, HOST)
        self._lock = threading.RLock()  # the encoding loop's keeper adds while a key stream looks up

    def _load(self) -> dict[str, int]:
        if self._index is None:
            self._index = {}
            remove_orphans(self.folder)  # once per collection and process, as its shards are first listed
            good = self._read_new()
            if len(good) > self.compact_over:
                self._merge(good)
        return self._index

    def _read_new(self) -> list[Shard]:
        """Read the shards not read before into the index (damaged ones set aside); returns them. A shard
        that vanished between listing and reading was merged by a process (the merged one is renamed into
        place before its parts are removed), so the folder is listed again: a run that waited for another's
        claim reads everything that run wrote, even while its merge is under way."""
        assert self._index is not None
        good: list[Shard] = []
        for _ in range(LIST_AGAIN):
            vanished = False
            for shard in sorted(self.folder.glob("shard-*.safetensors")):
                if shard.name in self._seen:
                    continue
                try:
                    ids, emb = read_shard(shard)
                except FileNotFoundError:
                    vanished = True
                    continue
                except (DamagedShard, OSError) as exc:
                    self._set_aside(shard, str(exc), isinstance(exc, ForeignShard))
                    continue
                self._seen.add(shard.name)
                good.append((shard, ids, [emb]))
                self._take_new_rows(ids, emb)
            if not vanished:
                break
        return good

    def _take_new_rows(self, ids: list[str], emb: torch.Tensor) -> None:
        """Index the rows whose ids are not indexed yet (the first row of an id wins), keeping only
        those: a shard another process merged from ones already read adds nothing to memory."""
        assert self._index is not None
        fresh: dict[str, int] = {}
        for i, key in enumerate(ids):
            if key not in self._index and key not in fresh:
                fresh[key] = i
        if not fresh:
            return
        if len(fresh) < len(ids):
            emb = emb[torch.tensor(list(fresh.values()), dtype=torch.long)]
        start = self._append_table(emb)
        self._index.update(zip(fresh, range(start, start + len(fresh))))

    def _append_table(self, emb: torch.Tensor) -> int:
        """Keep ``emb`` as the next table; returns its first row's number."""
        start = self._starts[-1] + len(self._tables[-1]) if self._tables else 0
        self._tables.append(emb)
        self._starts.append(start)
        return start

    def _gather(self, rows: np.ndarray) -> torch.Tensor:
        """The embeddings at ``rows`` (numbers across all tables), a table at a time. In numpy: a
        lookup is small, and torch would wake its idle OpenMP threads for it (passive waiting)."""
        if len(self._tables) == 1:
            return torch.from_numpy(self._tables[0].numpy()[rows])
        which = np.searchsorted(np.asarray(self._starts), rows, side="right") - 1
        out = np.empty((len(rows), self._tables[0].shape[1]), dtype=np.float32)
        for table in np.unique(which).tolist():
            sel = which == table
            out[sel] = self._tables[table].numpy()[rows[sel] - self._starts[table]]
        return torch.from_numpy(out)

    @_locked
    def refresh(self) -> None:
        """Take in what other processes wrote since this one last looked (after waiting for them)."""
        if self._index is None:
            self._load()
        else:
            self._read_new()

    def claim(self, keys: Sequence[str]) -> Claim:
        """Claim the keys no other live process is encoding (see `negharness.store.claims`)."""
        return self.claims.take(keys)

    def _set_aside(self, shard: Path, why: str, foreign: bool = False) -> None:
        """Move a damaged or foreign shard into ``damaged/`` (delete it if that fails) and say so."""
        self.damaged.append(shard)
        target = self.folder / "damaged" / shard.name
        try:
            target.parent.mkdir(exist_ok=True)
            os.replace(shard, target)
            where = f"moved to {target}"
        except OSError:
            try:
                shard.unlink()
                where = "deleted"
            except OSError:
                where = "left in place"
        what = "cache shard not this collection's" if foreign else "damaged cache shard"
        warnings.warn(f"{what} {shard} ({why}): {where}; its embeddings will be encoded again", stacklevel=3)

    def _merge(self, shards: Sequence[Shard], force: bool = False) -> None:
        """Write the shards' entries as one shard (fsync'd), one row per id, then remove them. The shard is
        written before the collection's mutex is taken (a claim waits on that mutex, and the rewrite and its
        fsync took up to a second): until the parts are removed its rows are there twice, which readers
        take once. Under the mutex, a load's merge (not ``force``) that finds a part gone (another process
        merged them first) removes its own copy instead. A crash in between leaves duplicates, never a gap
        (the next merge drops them); a reader that listed a removed shard lists again (`_read_new`)."""
        present = [s for s in shards if s[0].exists()]
        if (len(present) < len(shards) and not force) or len(present) < (1 if force else 2):
            return  # another process merged them first, or nothing to merge
        ids, tables = _unique_rows(present)
        merged = self.folder / new_shard_name()
        self._seen.add(merged.name)  # its rows are indexed: never read back (set before it can be listed)
        try:
            write_shard(merged, ids, tables, sync=True)
        except OSError:
            return
        with folder_mutex(self.folder):
            if not force and not all(path.exists() for path, _, _ in present):
                merged.unlink(missing_ok=True)  # theirs holds these rows; ours is a copy
                return
            for path, _, _ in present:
                try:
                    path.unlink(missing_ok=True)
                except OSError:
                    pass

    @_locked
    def lookup(self, keys: Sequence[str]) -> tuple[list[int], torch.Tensor]:
        """Positions of ``keys`` that are cached (ascending), and their embeddings as one (n, D)
        table: gathered by row numbers, never a Python object per row."""
        index = self._load()
        rows = np.array([index.get(k, -1) for k in keys], dtype=np.int64)
        hit = np.flatnonzero(rows >= 0)
        if not len(hit):
            return [], torch.empty(0, self._tables[0].shape[1] if self._tables else 0)
        return hit.tolist(), self._gather(rows[hit])

    @_locked
    def add(self, keys: Sequence[str], emb: torch.Tensor, seconds: float = math.inf) -> None:
        """Rows for ``keys``, served by `lookup` at once and written to disk with the rows added before them
        once they hold ``flush_seconds`` of work (``seconds``: what these cost to compute; not said, they
        are written now) or ``flush_every`` rows."""
        emb = host_table(emb)
        if emb.ndim != 2 or emb.shape[0] != len(keys):
            raise ValueError(f"cache add: {len(keys)} keys for embeddings of shape {tuple(emb.shape)}")
        if not len(keys):
            return  # nothing to serve or write (a part of no rows cannot be written as bytes)
        index = self._load()
        start = self._append_table(emb)
        index.update(zip(keys, range(start, start + len(keys))))
        self._pending_ids.extend(keys)
        self._pending.append(emb)
        self._pending_seconds += seconds
        if len(self._pending_ids) >= self.flush_every or self._pending_seconds >= self.flush_seconds:
            self.flush()

    @_locked
    def flush(self, sync: bool = False) -> None:
        """Write what is pending as a shard; fsync when asked or when the last fsync is
        `sync_seconds` old (earlier unsynced shards are then synced with the folder)."""
        if self._pending_ids:
            due = sync or time.monotonic() - self._last_sync >= self.sync_seconds
            self._write_pending(sync=due and not self._unsynced)
            self._unsynced = self._unsynced or not due
            sync = due
        if sync and self._unsynced:
            for path, _, _ in self._written:
                fsync_entry(path)
            fsync_entry(self.folder)
            self._unsynced = False
        if sync:
            self._last_sync = time.monotonic()

    def _write_pending(self, sync: bool) -> None:
        """The pending rows as a shard of this process's (their tables written in turn, not stacked)."""
        ids, tables = self._pending_ids, self._pending
        self._pending_ids, self._pending, self._pending_seconds = [], [], 0.0
        path = self.folder / new_shard_name()
        write_shard(path, ids, tables, sync=sync)
        self._seen.add(path.name)
        self._written.append((path, ids, tables))

    @_locked
    def close(self) -> None:
        """End of a run's pass over this collection. What is pending is written now (unsynced: a run waiting
        for this one's claim reads it as soon as the claim ends); then this pass's shards become one shard,
        fsync'd once (the small ones are then removed, so they need no fsync), in a thread beside the run:
        the rewrite and its fsync cost 20-35% of a fast text pass on the main thread. `settle_merges` waits for it;
        a kill meanwhile leaves the small shards, which the next merge takes."""
        if self._pending_ids:
            self._write_pending(sync=False)
            self._unsynced = True
        shards, self._written = self._written, []
        unsynced, self._unsynced, self._last_sync = self._unsynced, False, time.monotonic()
        if len(shards) > 1 or (shards and unsynced):
            _start_merge(self, shards)

    def _merge_beside(self, shards: list[Shard]) -> None:
        """`close`'s merge, in its thread: one shard left, fsync'd. A failure loses nothing (the parts stay,
        read as they are, merged by a later load): it is said as a warning, never raised into a run."""
        try:
            if len(shards) == 1:
                fsync_entry(shards[0][0])
                fsync_entry(self.folder)
            else:
                self._merge(shards, force=True)
        except Exception as exc:  # noqa: BLE001 - the run goes on with its shards unmerged
            warnings.warn(f"cache shards in {self.folder} left unmerged ({type(exc).__name__}: {exc}); they are "
                          "read as they are, and a later load merges them", UserWarning, stacklevel=1)


_MERGING: set[threading.Thread] = set()  # merges under way in this process; each leaves the set as it ends
_MERGING_LOCK = threading.Lock()


def _start_merge(collection: CollectionCache, shards: list[Shard]) -> None:
    """`collection`'s merge of ``shards`` in a thread of its own (not a daemon: the interpreter's exit waits
    for it), listed in `_MERGING` until it ends, so nothing outlives it in memory."""
    def run() -> None:
        try:
            collection._merge_beside(shards)
        finally:
            with _MERGING_LOCK:
                _MERGING.discard(threading.current_thread())

    worker = threading.Thread(target=run, name="negharness-merge")
    with _MERGING_LOCK:
        worker.start()
        _MERGING.add(worker)


def settle_merges() -> None:
    """Wait for every merge this process started (`CollectionCache.close`), whichever cache object closed
    it: a finished run leaves each pass as one fsync'd shard. Never raises a merge's failure (a warning)."""
    with _MERGING_LOCK:
        running = list(_MERGING)
    for worker in running:
        worker.join()


class EmbeddingCache:
    """Root of the cache; `collection()` hands out per-(namespace, collection) stores, and
    `hasher` the content hashes of media files (memoised under ``<root>/content-hashes``)."""

    def __init__(self, root: str | Path, flush_every: int = FLUSH_ROWS, hasher: FileHasher | None = None) -> None:
        """``flush_every``: rows each collection buffers at most (`CollectionCache`); ``hasher``: the run's
        one `FileHasher` (its memo is this root's ``content-hashes``)."""
        self.root = Path(root) / "embeddings"
        self.flush_every = flush_every
        self.hasher = hasher if hasher is not None else FileHasher(Path(root) / "content-hashes")
        self._open: dict[tuple[str, str], CollectionCache] = {}

    def collection(self, namespace: str, collection: str, describe: dict[str, Any] | None = None) -> CollectionCache:
        key = (namespace, collection)
        if key not in self._open:
            folder = self.root / namespace / _safe_name(collection)
            folder.mkdir(parents=True, exist_ok=True)
            info = self.root / namespace / "namespace.json"
            if describe is not None and not info.exists():
                atomic_write_json(info, describe)  # for humans: what this namespace holds
            self._open[key] = CollectionCache(folder, self.flush_every)
        return self._open[key]

    def flush(self) -> None:
        """Every open collection's pass closed and its merge finished (a rank's pass before another reads it)."""
        for c in self._open.values():
            c.close()
        settle_merges()
