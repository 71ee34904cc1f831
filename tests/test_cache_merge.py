"""A closed pass's shards are merged into one beside the run (`CollectionCache.close`): nothing waits on
the main thread for the rewrite and its fsync, nothing written is lost or hidden meanwhile, and a finished run
leaves one shard per pass."""

from __future__ import annotations

import threading

import pytest
import torch

import negharness
from negharness.store import cache as cache_module
from negharness.store.cache import EmbeddingCache, settle_merges
from negharness.store.shards import read_shard, write_shard


def _rows(n: int, start: int = 0) -> torch.Tensor:
    return torch.arange(start, start + 2 * n, dtype=torch.float32).reshape(n, 2)


def _shards(store) -> list[list[str]]:
    return sorted(read_shard(p)[0] for p in store.folder.glob("shard-*.safetensors"))


def test_close_hands_the_merge_to_a_thread_and_every_row_is_readable_meanwhile(tmp_path, monkeypatch):
    """While the merge waits, `close` has returned, the pass's rows (the pending ones too) are on disk for a
    reader in another cache object (as a run waiting for this one's claim reads them); `settle` then leaves
    one shard of them all."""
    store = EmbeddingCache(tmp_path).collection("ns", "col")
    store.add(["a", "b"], _rows(2))  # written at once (no cost said)
    store.add(["c"], _rows(1, 4))
    store.add(["d"], _rows(1, 6), seconds=0.0)  # pending: costs nothing yet
    release, merging_in = threading.Event(), []
    real = cache_module.CollectionCache._merge

    def held_merge(self, shards, force=False):
        merging_in.append(threading.current_thread().name)
        assert release.wait(30)
        real(self, shards, force)

    monkeypatch.setattr(cache_module.CollectionCache, "_merge", held_merge)
    store.close()  # returns with the merge held (a close that merged in this thread would wait, then fail)
    reader = EmbeddingCache(tmp_path).collection("ns", "col")
    pos, vecs = reader.lookup(["a", "b", "c", "d"])
    assert pos == [0, 1, 2, 3] and torch.equal(vecs, torch.cat([_rows(2), _rows(1, 4), _rows(1, 6)]))
    release.set()
    settle_merges()
    assert merging_in == ["negharness-merge"]
    assert _shards(store) == [["a", "b", "c", "d"]]


def test_a_reader_lists_the_folder_again_when_a_shard_is_merged_away_under_it(tmp_path, monkeypatch):
    """Another process merges the shards this one listed (renaming the merged one in, then removing the parts):
    the reader lists again and serves every row, instead of missing the vanished part's rows (which would
    have been claimed and encoded again)."""
    writer = EmbeddingCache(tmp_path).collection("ns", "col")
    writer.add(["a"], _rows(1))
    writer.add(["b"], _rows(1, 2))
    parts = list(writer._written)
    real = cache_module.read_shard
    merged: list[bool] = []

    def read_while_merged(path):
        if not merged:
            merged.append(True)
            writer._merge(parts, force=True)  # the listed shards vanish, one merged shard appears
        return real(path)

    monkeypatch.setattr(cache_module, "read_shard", read_while_merged)
    reader = EmbeddingCache(tmp_path).collection("ns", "col")
    pos, vecs = reader.lookup(["a", "b"])
    assert merged and pos == [0, 1] and torch.equal(vecs, torch.cat([_rows(1), _rows(1, 2)]))


def test_a_merge_that_fails_is_a_warning_its_parts_stay_and_nothing_outlives_it(tmp_path, monkeypatch):
    """A merge that breaks loses nothing (its parts stay, read as they are) and is never raised into a run, this
    one or a later one: it is a warning naming the folder; its thread leaves the process's list as it ends."""
    store = EmbeddingCache(tmp_path).collection("ns", "col")
    store.add(["a"], _rows(1))
    store.add(["b"], _rows(1, 2))

    def broken(self, shards, force=False):
        raise RuntimeError("merge broke")

    monkeypatch.setattr(cache_module.CollectionCache, "_merge", broken)
    with pytest.warns(UserWarning, match=r"cache shards in .*col.* left unmerged \(RuntimeError: merge broke\)"):
        store.close()
        settle_merges()
    assert not cache_module._MERGING
    assert _shards(store) == [["a"], ["b"]]
    assert EmbeddingCache(tmp_path).collection("ns", "col").lookup(["a", "b"])[0] == [0, 1]


def test_the_merge_writes_its_shard_before_it_takes_the_collections_mutex(tmp_path, monkeypatch):
    """A claim waits on the collection's mutex: the merge holds it only to remove the parts, not while it
    writes and fsyncs the merged shard (up to a second for a large pass)."""
    import fcntl

    store = EmbeddingCache(tmp_path).collection("ns", "col")
    store.add(["a"], _rows(1))
    store.add(["b"], _rows(1, 2))
    free_while_writing: list[bool] = []
    real = cache_module.write_shard

    def watched(path, ids, emb, sync):
        with open(store.folder / ".lock", "ab") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                free_while_writing.append(False)
            else:
                fcntl.flock(fh, fcntl.LOCK_UN)
                free_while_writing.append(True)
        real(path, ids, emb, sync)

    monkeypatch.setattr(cache_module, "write_shard", watched)
    store.close()
    settle_merges()
    assert free_while_writing == [True] and _shards(store) == [["a", "b"]]


def test_an_add_of_no_rows_leaves_the_next_write_whole(tmp_path):
    store = EmbeddingCache(tmp_path).collection("ns", "col")
    store.add(["a"], _rows(1), seconds=0.0)
    store.add([], torch.empty(0, 2), seconds=0.0)
    store.add(["b"], _rows(1, 2))
    store.close()
    settle_merges()
    assert _shards(store) == [["a", "b"]]


def test_a_pass_of_one_unsynced_shard_is_synced_where_it_lies(tmp_path, monkeypatch):
    """One shard in a pass is not rewritten: the merge thread only fsyncs it (and its folder)."""
    synced = []
    real = cache_module.fsync_entry
    monkeypatch.setattr(cache_module, "fsync_entry", lambda path: synced.append(path) or real(path))
    store = EmbeddingCache(tmp_path).collection("ns", "col")
    store.add(["a", "b"], _rows(2), seconds=0.0)  # pending until the close writes it, unsynced
    store.close()
    settle_merges()
    (shard,) = store.folder.glob("shard-*.safetensors")
    assert read_shard(shard)[0] == ["a", "b"] and synced == [shard, store.folder]


def test_a_shard_written_from_parts_is_the_shard_written_from_their_stack(tmp_path):
    """A merge writes its shards' tables in turn, without stacking them: the file (header, checksum, bytes)
    is the one the stacked table gives, so a reader cannot tell which road wrote it."""
    folder = tmp_path / "ns" / "col"
    folder.mkdir(parents=True)
    parts = [_rows(2), _rows(3, 10), _rows(1, 40)]
    write_shard(folder / "shard-1.safetensors", list("abcdef"), parts, sync=False)
    write_shard(folder / "shard-2.safetensors", list("abcdef"), torch.cat(parts), sync=False)
    one, two = (folder / "shard-1.safetensors").read_bytes(), (folder / "shard-2.safetensors").read_bytes()
    assert one == two
    ids, emb = read_shard(folder / "shard-1.safetensors")
    assert ids == list("abcdef") and torch.equal(emb, torch.cat(parts))


def test_a_finished_run_leaves_one_shard_per_pass_on_every_door(tmp_path, monkeypatch):
    """Each batch written as its own shard (no batch is worth waiting for): the run's end waits for the merges
    that ran beside it, so the library door returns with one shard per collection, every row in it."""
    real = EmbeddingCache.collection

    def every_batch_written(self, namespace, collection, describe=None):
        store = real(self, namespace, collection, describe)
        store.flush_seconds = 0.0
        return store

    monkeypatch.setattr(EmbeddingCache, "collection", every_batch_written)
    cache = tmp_path / "cache"
    [out] = negharness.run("shapes_clip", "shapes_t2i_original", limit=40, output_dir=str(tmp_path / "r"),
                           cache_dir=str(cache), batch_size=8)
    shards = sorted(cache.rglob("shard-*.safetensors"))
    folders = {p.parent for p in shards}
    assert len(folders) == 2 and len(shards) == 2  # texts and images, one shard each
    counts = out.record["counts"]
    stored = sum(len(read_shard(p)[0]) for p in shards)
    assert stored == counts["texts_encoded"] + counts["media_encoded"]


def _killed_mid_write(folder) -> "Path":
    """A process writing a shard the way `write_shard` does, killed with SIGKILL before its rename: the
    temporary file it leaves behind."""
    import signal
    import subprocess
    import sys
    import time

    code = ("import sys, time; from pathlib import Path; from negharness.store.shards import new_shard_name;"
            "from negharness.io.atomic_files import atomic_write;"
            "atomic_write(Path(sys.argv[1]) / new_shard_name(), lambda tmp: (tmp.write_bytes(b'x' * 4096), time.sleep(60)))")
    child = subprocess.Popen([sys.executable, "-c", code, str(folder)])
    deadline = time.monotonic() + 60
    while not list(folder.glob(".shard-*.tmp")):
        assert child.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    [left] = folder.glob(".shard-*.tmp")
    return left


def test_a_writer_killed_mid_write_leaves_nothing_behind_once_its_file_is_old(tmp_path):
    """A kill -9 before the rename leaves the temporary file (a merge's holds a pass's rows). The next load of
    the collection removes it once it is `ORPHAN_AGE` old and its writer (this host, its pid) is gone; a younger
    one, a live process's and another host's are left."""
    import os
    import time

    from negharness.store.shards import HOST, ORPHAN_AGE, new_shard_name

    store = EmbeddingCache(tmp_path).collection("ns", "col")
    store.add(["a"], _rows(1))
    dead = _killed_mid_write(store.folder)
    young = dead.with_name(dead.name.removesuffix(".tmp") + "y.tmp")
    young.write_bytes(b"x")  # the same dead writer's, written just now
    live = store.folder / f".{new_shard_name()}.abc123.tmp"  # this process's: it runs
    other = store.folder / f".shard-1-{HOST}x-{1}.safetensors.abc123.tmp"  # another host's
    old = time.time() - ORPHAN_AGE - 5
    for path in (dead, live, other):
        path.write_bytes(b"x")
        os.utime(path, (old, old))
    reopened = EmbeddingCache(tmp_path).collection("ns", "col")
    hit, emb = reopened.lookup(["a"])
    assert hit == [0] and torch.equal(emb, _rows(1))
    assert not dead.exists()
    assert young.exists() and live.exists() and other.exists()
