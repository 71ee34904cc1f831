"""Concurrent runs on one cache split the work (issue 24, item 8): an item another process is
encoding is waited for and read from the cache, not encoded again; a claimant that dies hands its
unfinished items back; merged shards keep one row per id."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from negharness.engine.runner import CachedEvalContext, RunSettings
from negharness.store.cache import EmbeddingCache, settle_merges
from negharness.store.shards import read_shard, write_shard
from negharness.store.claims import Claims
from negharness.testing import KeywordModel

THIRDPARTY = Path(__file__).parent / "thirdparty"
TEXTS = [f"a {c} shape number {i}" for i in range(40) for c in ("red", "blue")]


def _ctx(root: Path, model: KeywordModel | None = None) -> CachedEvalContext:
    return CachedEvalContext(model or KeywordModel(), RunSettings(batch_size=8, workers=0), EmbeddingCache(root))


def test_a_live_claim_is_skipped_and_a_released_one_is_not(tmp_path):
    first, second = Claims(tmp_path, "h"), Claims(tmp_path, "h")
    a = first.take(["k1", "k2"])
    b = second.take(["k2", "k3"])
    assert a.mine == ["k1", "k2"] and b.mine == ["k3"]
    assert list(b.others.values()) == [["k2"]] and b.holders() == [f"pid {os.getpid()} on h"]
    first.release(a)
    second.wait(b)  # returns at once: the claimant has released
    c = Claims(tmp_path, "h").take(["k1", "k2"])
    assert c.mine == ["k1", "k2"] and not c.others


def test_a_claim_left_by_a_killed_process_is_stale(tmp_path):
    """kill -9 while holding a claim: the kernel drops its lock, so the next taker removes it."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from negharness.store.claims import Claims;"
         f"c = Claims(Path({str(tmp_path)!r}), 'h').take(['k1', 'k2']); print('claimed', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "claimed"
        alive = Claims(tmp_path, "h").take(["k1"])
        assert alive.mine == [] and alive.holders() == [f"pid {child.pid} on h"]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    after = Claims(tmp_path, "h").take(["k1", "k2"])
    assert after.mine == ["k1", "k2"]
    assert [p.name for p in (tmp_path / "claims").iterdir()] == [after.path.name]


class _Gate(KeywordModel):
    """The first run's model: at its first batch (its claim is taken by then) it starts the second
    run and encodes only once that run waits for it; after ``fail_after`` batches it raises as a
    Ctrl-C would."""

    def __init__(self, second: threading.Thread, waiting: threading.Event, fail_after: int | None) -> None:
        super().__init__()
        self.second, self.waiting, self.fail_after, self.batches = second, waiting, fail_after, 0

    def encode_text(self, texts):
        if self.batches == 0:
            self.second.start()
            assert self.waiting.wait(timeout=60), "the second run never waited"
        if self.fail_after is not None and self.batches >= self.fail_after:
            raise KeyboardInterrupt
        self.batches += 1
        return super().encode_text(texts)


def _run_beside(tmp_path: Path, first_texts: list[str], second_texts: list[str], fail_after: int | None = None):
    """Two contexts on one cache, the second starting while the first encodes (threads stand in for
    processes: claims are ``flock`` locks on separate open files, which conflict within a process too)."""
    out: dict[str, torch.Tensor | None] = {}
    waiting = threading.Event()
    second = _ctx(tmp_path)
    thread = threading.Thread(target=lambda: out.__setitem__("second", second.embed_texts(second_texts)))
    first = _ctx(tmp_path, _Gate(thread, waiting, fail_after))
    store = second._collection("text")
    real_wait = store.claims.wait

    def wait(claim):
        waiting.set()
        real_wait(claim)

    store.claims.wait = wait
    try:
        out["first"] = first.embed_texts(first_texts)
    except KeyboardInterrupt:
        out["first"] = None
    thread.join(timeout=120)
    assert not thread.is_alive()
    return first, second, out


def test_a_second_run_waits_for_the_first_and_encodes_only_what_it_alone_needs(tmp_path):
    extra = ["a green shape alone", "a cyan shape alone"]
    first, second, out = _run_beside(tmp_path, TEXTS, TEXTS[:30] + extra)
    assert first.counters.texts_encoded == len(TEXTS)
    assert second.counters.texts_encoded == len(extra)  # only what nobody else was encoding
    assert second.counters.texts_cached == 30
    assert torch.allclose(out["second"][:30], out["first"][:30])
    assert torch.allclose(out["second"][30:], KeywordModel().encode_text(extra))


def test_what_a_failed_claimant_did_not_deliver_is_encoded_by_the_waiter(tmp_path):
    first, second, out = _run_beside(tmp_path, TEXTS, TEXTS, fail_after=3)
    assert out["first"] is None
    kept = 3 * 8  # the failed run's finished batches are in the cache
    assert first.counters.texts_encoded == kept
    assert second.counters.texts_cached == kept and second.counters.texts_encoded == len(TEXTS) - kept
    assert torch.allclose(out["second"], KeywordModel().encode_text(TEXTS))


def test_merging_keeps_one_row_per_id(tmp_path):
    cache = EmbeddingCache(tmp_path)
    store = cache.collection("ns", "text")
    rows = torch.eye(4)
    for part in ([0, 1, 2], [1, 2, 3], [3, 0]):  # two runs that both encoded some items
        write_shard(store.folder / f"shard-{part[0]}{len(part)}.safetensors", [f"k{i}" for i in part], rows[part], sync=False)
    store.compact_over = 2
    pos, vecs = store.lookup([f"k{i}" for i in range(4)])
    assert pos == [0, 1, 2, 3] and torch.equal(vecs, rows)
    shards = list(store.folder.glob("shard-*.safetensors"))
    assert len(shards) == 1
    ids, emb = read_shard(shards[0])
    assert sorted(ids) == ["k0", "k1", "k2", "k3"] and torch.equal(emb[[ids.index(f"k{i}") for i in range(4)]], rows)


# four identical `negharness run` commands on one cache -----------------------------------------
TASK = "shapes_t2i_original"


def _records_and_encodes(tmp_path: Path, n: int) -> tuple[list[dict], dict[str, int]]:
    env = dict(os.environ, NEGHARNESS_SLOW_LOG=str(tmp_path / "encoded.log"), NEGHARNESS_SLOW_SLEEP="0.5",
               PYTHONPATH=os.pathsep.join([str(THIRDPARTY / "slowmodel"), os.environ.get("PYTHONPATH", "")]))
    procs = [subprocess.Popen([sys.executable, "-m", "negharness.cli", "run", "--model", "slow_shapes", "--task", TASK,
                               "--device", "cpu", "--cache-dir", str(tmp_path / "cache"),
                               "--output-dir", str(tmp_path / f"out{i}")],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for i in range(n)]
    for p in procs:
        assert p.wait(timeout=600) == 0, p.stdout.read().decode()[-2000:]
    records = [json.loads(next((tmp_path / f"out{i}").rglob(f"{TASK}.json")).read_text()) for i in range(n)]
    encodes = {"image": 0, "text": 0}
    for line in (tmp_path / "encoded.log").read_text().splitlines():
        kind, count = line.split()
        encodes[kind] += int(count)
    return records, encodes


@pytest.mark.heavy  # tens of seconds: scheduled first (tests/conftest.py)
def test_four_identical_runs_encode_each_item_once_and_agree(tmp_path):
    records, encodes = _records_and_encodes(tmp_path, 4)
    distinct_texts = records[0]["counts"]["texts_encoded"] + records[0]["counts"]["texts_cached"]
    assert sum(r["counts"]["media_encoded"] for r in records) == encodes["image"] == 500
    assert sum(r["counts"]["texts_encoded"] for r in records) == encodes["text"] == distinct_texts
    for r in records[1:]:
        assert r["metrics"] == pytest.approx(records[0]["metrics"], abs=1e-6)
    for folder in (tmp_path / "cache").rglob("shard-*.safetensors"):
        ids, _ = read_shard(folder)
        assert len(ids) == len(set(ids))
    stored = [k for shard in (tmp_path / "cache").rglob("shard-*.safetensors") for k in read_shard(shard)[0]]
    assert len(stored) == len(set(stored)) == 500 + distinct_texts


def test_a_filesystem_without_locks_claims_nothing_and_still_encodes(tmp_path, monkeypatch):
    import errno

    from negharness.store import claims

    def no_locks(*_args):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(claims.fcntl, "flock", no_locks)
    ctx = _ctx(tmp_path)
    out = ctx.embed_texts(TEXTS)
    assert ctx.counters.texts_encoded == len(TEXTS) and torch.allclose(out, KeywordModel().encode_text(TEXTS))
    assert not list((tmp_path / "embeddings").rglob("*.claim"))
    again = _ctx(tmp_path)
    again.embed_texts(TEXTS)
    assert again.counters.texts_cached == len(TEXTS)


class _Shifted(KeywordModel):
    """Another model with the same dimension: its embeddings must never be served as KeywordModel's."""

    name = "shifted_model"

    def describe(self):
        return {"arch": "shifted", "dim": self.dim}

    def encode_text(self, texts):
        return torch.roll(super().encode_text(texts), 1, dims=1)


def test_a_shard_copied_from_another_models_folder_is_not_served(tmp_path):
    """Every shard names its collection (namespace and collection folders) under its checksum: one
    moved or copied into another model's folder is set aside, and the items are encoded again."""
    mine, other = _ctx(tmp_path), _ctx(tmp_path, _Shifted())
    want = mine.embed_texts(TEXTS)
    other.embed_texts(TEXTS)
    settle_merges()  # each pass's shards merged into one
    (own,) = mine._collection("text").folder.glob("shard-*.safetensors")
    (foreign,) = other._collection("text").folder.glob("shard-*.safetensors")
    own.unlink()
    import shutil

    shutil.copyfile(foreign, own)  # same file name, other model's rows, a valid checksum
    again = _ctx(tmp_path)
    with pytest.warns(UserWarning, match=r"cache shard not this collection's .*written for .*another model"):
        got = again.embed_texts(TEXTS)
    assert again.counters.texts_encoded == len(TEXTS) and torch.allclose(got, want)
