"""The embedding cache serves only what it measured: keys by content and decoding recipe, checksummed
shards, and a kill -9 at any moment loses at most the batch being encoded (issue 13, items 1, 3, 5, 6)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import run_cli

from negharness.api import ModelOptions
from negharness.engine.runner import CachedEvalContext, RunSettings
from negharness.io.media import MediaSet, frame_folders, image_files, video_files
from negharness.io.video import (
    FrameSampling,
    available_decoders,
    decoder_identity,
    video_recipe,
)
from negharness.store import content
from negharness.store.cache import EmbeddingCache, settle_merges
from negharness.store.shards import read_shard
from negharness.testing import COLOURS, KeywordModel, solid_image

THIRDPARTY = Path(__file__).parent / "thirdparty"
COLOUR_NAMES = list(COLOURS)


def _jpegs(folder: Path, colours: list[str]) -> list[Path]:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, c in enumerate(colours):
        path = folder / f"{i:03d}.jpg"
        Image.fromarray(solid_image(c, 16)).save(path, quality=95)
        paths.append(path)
    return paths


def _ctx(cache_root: Path, model=None, **settings) -> CachedEvalContext:
    return CachedEvalContext(model or KeywordModel(), RunSettings(batch_size=2, workers=0, **settings), EmbeddingCache(cache_root))


def _images(paths: list[Path], key: str = "test/images") -> MediaSet:
    return image_files(key, [p.name for p in paths], paths)


def test_replaced_image_is_encoded_again(tmp_path):
    paths = _jpegs(tmp_path / "root", COLOUR_NAMES[:4])
    first = _ctx(tmp_path / "c")
    before = first.embed_media(_images(paths))
    _jpegs(tmp_path / "tmp", ["cyan"])[0].replace(paths[1])  # the user fixes one image in place
    again = _ctx(tmp_path / "c")
    after = again.embed_media(_images(paths))
    assert again.counters.media_encoded == 1 and again.counters.media_cached == 3
    fresh = CachedEvalContext(KeywordModel(), RunSettings(workers=0)).embed_media(_images(paths))
    assert torch.allclose(after, fresh, atol=1e-6) and not torch.allclose(after[1], before[1], atol=1e-3)


def test_edit_in_place_with_restored_mtime_misses_the_memo(tmp_path, monkeypatch):
    """Same path, inode, size and mtime: the changed ctime still sends the file to be hashed again."""
    monkeypatch.setattr(content, "RACY_SECONDS", -1.0)  # memoise even files written a moment ago
    path = tmp_path / "f.bin"
    path.write_bytes(b"a" * 1000)
    hasher = content.FileHasher(tmp_path / "memo")
    first = hasher.many([path])
    st = os.stat(path)
    time.sleep(0.01)
    with open(path, "r+b") as fh:
        fh.write(b"b")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns
    again = content.FileHasher(tmp_path / "memo")  # a new process: the memo is read from disk
    assert again.many([path]) != first and again.hashed == 1
    untouched = content.FileHasher(tmp_path / "memo")
    assert untouched.many([path]) == again.many([path]) and untouched.hashed == 0 and untouched.memo_hits == 1


@pytest.mark.parametrize("task", [content.HASH_TASK, 3])
def test_file_hashes_equal_sha256_of_the_bytes_in_order(tmp_path, monkeypatch, task):
    """Empty, small and multi-chunk files, read by the calling thread (one task's worth) or (3 files a
    task) by the pool: each hash is the SHA-256 of the file's bytes, and the answer keeps the sources' order."""
    import hashlib

    monkeypatch.setattr(content, "HASH_TASK", task)
    rng = np.random.default_rng(3)
    sizes = [0, 1, content.CHUNK, content.CHUNK + 1, 3 * content.CHUNK + 5] + [int(s) for s in rng.integers(1, 5000, 40)]
    paths = []
    for i, size in enumerate(sizes):
        paths.append(tmp_path / f"{i:03d}.bin")
        paths[-1].write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
    expected = [hashlib.sha256(p.read_bytes()).hexdigest()[:content.DIGEST_HEX] for p in paths]
    order = list(rng.permutation(len(paths)))
    got = content.FileHasher(None).many([paths[i] for i in order], threads=4)
    assert got == [expected[i] for i in order]


def _memoised_files(tmp_path: Path, n: int, monkeypatch) -> tuple[list[Path], list[str | None], Path]:
    """``n`` small distinct files, hashed once into a memo (memoised at once: no racy window)."""
    monkeypatch.setattr(content, "RACY_SECONDS", -1.0)
    paths = [tmp_path / f"{i}.bin" for i in range(n)]
    for i, p in enumerate(paths):
        p.write_bytes(bytes([i]) * 100)
    return paths, content.FileHasher(tmp_path / "memo").many(paths), tmp_path / "memo" / "memo.jsonl"


def test_damaged_or_foreign_memo_lines_are_never_trusted(tmp_path, monkeypatch):
    """Each memo line carries its checksum: a torn line, a flipped digit, a line of the older
    format or junk is skipped (its file is hashed again), and the sound lines around it still serve."""
    paths, truth, memo = _memoised_files(tmp_path, 4, monkeypatch)
    lines = memo.read_bytes().splitlines(keepends=True)
    assert len(lines) == 4
    digest = truth[1].encode()
    flipped = lines[1].replace(digest, bytes([digest[0] ^ 1]) + digest[1:])  # trusted, it would serve a wrong hash
    old_format = b"0123456789ab " + lines[2][9:]  # the SHA-256 checks of earlier versions
    memo.write_bytes(lines[0] + flipped + old_format + b"garbage\n" + lines[3][:30])
    again = content.FileHasher(tmp_path / "memo")
    assert again.many(paths) == truth and again.memo_hits == 1 and again.hashed == 3


def test_a_memo_grown_stale_is_rewritten_one_line_per_file(tmp_path, monkeypatch):
    """At the default slack: 10,500 lines for 5 files (stale identities, junk, a torn tail) are
    rewritten as 5, and the rewritten memo still serves every file without reading it."""
    paths, truth, memo = _memoised_files(tmp_path, 5, monkeypatch)
    current = memo.read_bytes()
    stale = []
    for n in range(2000):
        for p in paths:
            st = os.stat(p)
            key = (str(p), st.st_size, st.st_mtime_ns - 10**9 * (n + 1), st.st_ctime_ns, st.st_ino, st.st_dev)
            stale.append(content._format_line(key, "0" * content.DIGEST_HEX))
    memo.write_bytes("".join(stale).encode() + b"junk\n" * 500 + current + b"3f2a torn")
    assert len(memo.read_bytes().splitlines()) > 5 + content.COMPACT_SLACK
    again = content.FileHasher(tmp_path / "memo")
    assert again.many(paths) == truth and again.hashed == 0
    assert len(memo.read_bytes().splitlines()) == 5
    third = content.FileHasher(tmp_path / "memo")
    assert third.many(paths) == truth and third.hashed == 0 and third.memo_hits == 5


def test_two_roots_with_the_same_ids_do_not_share(tmp_path):
    a = _jpegs(tmp_path / "a", ["red", "green", "blue"])
    b = _jpegs(tmp_path / "b", ["red", "cyan", "magenta"])  # same names, two of them different
    _ctx(tmp_path / "c").embed_media(_images(a))
    ctx = _ctx(tmp_path / "c")
    got = ctx.embed_media(_images(b))
    assert ctx.counters.media_encoded == 2 and ctx.counters.media_cached == 1
    fresh = CachedEvalContext(KeywordModel(), RunSettings(workers=0)).embed_media(_images(b))
    assert torch.allclose(got, fresh, atol=1e-6)


def test_the_same_file_through_two_roots_and_two_tasks_is_encoded_once(tmp_path):
    a = _jpegs(tmp_path / "a", ["red", "green", "blue"])
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    b = sorted((tmp_path / "b").glob("*.jpg"))
    first = _ctx(tmp_path / "c")
    first.embed_media(_images(a, "task-one/images"))
    second = _ctx(tmp_path / "c")
    second.embed_media(_images(b, "task-two/images"))
    assert second.counters.media_encoded == 0 and second.counters.media_cached == 3
    dup = _ctx(tmp_path / "c2")  # within one set, equal files are encoded once too
    dup.embed_media(image_files("dups", ["x", "y", "z"], [a[0], b[0], a[1]]))
    assert dup.counters.media_encoded == 2 and dup.counters.media_cached == 1


def test_in_memory_media_are_keyed_by_their_pixels(tmp_path):
    red = [solid_image("red")] * 2
    other = [solid_image("red"), solid_image("blue")]
    _ctx(tmp_path).embed_media(MediaSet("world", "image", ["0", "1"], lambda i: red[i], cheap=True))
    ctx = _ctx(tmp_path)
    ctx.embed_media(MediaSet("world", "image", ["0", "1"], lambda i: other[i], cheap=True))
    assert ctx.counters.media_encoded == 1 and ctx.counters.media_cached == 1


def test_two_random_models_do_not_share(tmp_path):
    from negharness.plugins.openclip_model import OpenClipModel
    from negharness.plugins.shapes_clip import CONFIG

    torch.manual_seed(1)
    one = OpenClipModel.create("r", ModelOptions(arch=str(CONFIG)), default_pretrained=None)
    torch.manual_seed(2)
    two = OpenClipModel.create("r", ModelOptions(arch=str(CONFIG)), default_pretrained=None)
    torch.manual_seed(1)
    same = OpenClipModel.create("r", ModelOptions(arch=str(CONFIG)), default_pretrained=None)
    assert one.fingerprint() != two.fingerprint() and one.fingerprint() == same.fingerprint()
    paths = _jpegs(tmp_path / "root", ["red", "green"])
    _ctx(tmp_path / "c", one).embed_media(_images(paths))
    ctx = _ctx(tmp_path / "c", two)
    ctx.embed_media(_images(paths))
    assert ctx.counters.media_encoded == 2


def _flip_payload_bit(shard: Path) -> None:
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0x10  # inside the embedding bytes: the header still parses
    shard.write_bytes(bytes(data))


def test_a_flipped_bit_in_a_shard_is_detected_named_and_encoded_again(tmp_path):
    paths = _jpegs(tmp_path / "root", COLOUR_NAMES)
    first = _ctx(tmp_path / "c")
    expected = first.embed_media(_images(paths))
    settle_merges()  # the pass's shard as it stays
    (shard,) = list((tmp_path / "c").rglob("image*/shard-*.safetensors"))
    _flip_payload_bit(shard)
    ctx = _ctx(tmp_path / "c")
    with pytest.warns(UserWarning, match=f"damaged cache shard .*{shard.name}.*checksum mismatch"):
        got = ctx.embed_media(_images(paths))
    assert ctx.counters.media_encoded == len(paths) and ctx.counters.media_cached == 0
    assert torch.allclose(got, expected, atol=1e-6)
    assert (shard.parent / "damaged" / shard.name).is_file() and not shard.exists()
    third = _ctx(tmp_path / "c")  # the re-encoded shard is served, silently
    third.embed_media(_images(paths))
    assert third.counters.media_cached == len(paths)


def test_a_shard_of_an_older_format_is_set_aside_not_served(tmp_path):
    """v3 shards (SHA-256 checksums) live in another namespace (CACHE_KEYS 3): one found here was
    moved in by hand, so it is set aside as foreign, and the v4 rows beside it still serve."""
    from safetensors.torch import save_file

    store = EmbeddingCache(tmp_path).collection("ns", "col")
    store.add(["a"], torch.tensor([[1.0, 2]]))
    owner = f"{store.folder.parent.name}/{store.folder.name}"
    save_file({"emb": torch.tensor([[5.0, 6]])}, str(store.folder / "shard-1-h-1.safetensors"),
              metadata={"format": "negharness-shard-v3", "owner": owner, "ids": '["c"]', "checksum": "0" * 32})
    reader = EmbeddingCache(tmp_path).collection("ns", "col")
    with pytest.warns(UserWarning, match="shard-1-h-1.*older negharness"):
        pos, vecs = reader.lookup(["a", "c"])
    assert pos == [0] and vecs.tolist() == [[1, 2]]


def test_a_reader_keeps_no_second_copy_of_rows_it_has(tmp_path):
    """Another process merges shards this one already read: the merged shard adds no table."""
    mine = EmbeddingCache(tmp_path).collection("ns", "col")
    other = EmbeddingCache(tmp_path).collection("ns", "col")
    other.add(["a", "b"], torch.tensor([[1.0, 1], [2, 2]]))
    other.add(["c"], torch.tensor([[3.0, 3]]))
    mine.refresh()
    tables = len(mine._tables)
    other.close()  # merges its two shards into one (beside this thread)
    settle_merges()
    other2 = EmbeddingCache(tmp_path).collection("ns", "col")
    other2.add(["d"], torch.tensor([[4.0, 4]]))
    mine.refresh()
    assert len(mine._tables) == tables + 1 and mine._tables[-1].shape[0] == 1
    assert mine.lookup(["d", "a", "c"])[1][:, 0].tolist() == [4, 1, 3]
    with pytest.raises(ValueError, match="3 keys for embeddings of shape"):
        mine.add(["x", "y", "z"], torch.zeros(2, 2))


def test_many_small_shards_are_merged(tmp_path):
    paths = _jpegs(tmp_path / "root", COLOUR_NAMES)
    cache = EmbeddingCache(tmp_path / "c")
    store = cache.collection("ns", "col")
    for i in range(20):  # twenty shards written by crashed runs (no close)
        store.add([f"k{i}"], torch.full((1, 4), float(i)))
    folder = store.folder
    assert len(list(folder.glob("shard-*.safetensors"))) == 20
    reader = EmbeddingCache(tmp_path / "c").collection("ns", "col")
    pos, vecs = reader.lookup([f"k{i}" for i in range(20)])
    assert pos == list(range(20)) and all(float(v[0]) == i for i, v in enumerate(vecs))
    (merged,) = list(folder.glob("shard-*.safetensors"))
    assert sorted(read_shard(merged)[0]) == sorted(f"k{i}" for i in range(20))
    ctx = _ctx(tmp_path / "c2")  # a finished pass leaves one shard per collection
    ctx.embed_media(_images(paths))
    settle_merges()
    assert len(list((tmp_path / "c2").rglob("image*/shard-*.safetensors"))) == 1


def test_lookup_gathers_rows_across_shards_in_key_order(tmp_path):
    """Rows come from several shards (tables); the answer follows the keys asked, skips misses,
    and a key added again in this process serves its newest row."""
    store = EmbeddingCache(tmp_path).collection("ns", "col")
    store.add(["a", "b"], torch.tensor([[1.0, 1], [2, 2]]))
    store.add(["c"], torch.tensor([[3.0, 3]]))
    store.add(["d", "e"], torch.tensor([[4.0, 4], [5, 5]]))
    pos, vecs = store.lookup(["e", "x", "a", "c", "b", "y"])
    assert pos == [0, 2, 3, 4] and vecs[:, 0].tolist() == [5, 1, 3, 2]
    store.add(["a"], torch.tensor([[9.0, 9]]))
    assert store.lookup(["a"])[1].tolist() == [[9, 9]]
    assert store.lookup(["x"])[0] == [] and store.lookup(["x"])[1].shape == (0, 2)
    reader = EmbeddingCache(tmp_path).collection("ns", "col")  # a later process reads the shards
    pos, vecs = reader.lookup(["d", "a", "e"])
    assert pos == [0, 1, 2] and vecs[:, 0].tolist() == [4, 1, 5]


def _write_video(path: Path, shade: int, n_frames: int = 8) -> Path:
    import av

    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=8)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
        stream.options = {"crf": "0"}
        for i in range(n_frames):
            frame = np.full((32, 32, 3), (shade + 7 * i) % 256, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


@pytest.mark.skipif("av" not in available_decoders(), reason="needs PyAV to write test videos")
def test_replaced_video_is_encoded_again_and_the_decoder_is_in_the_key(tmp_path):
    sampling = FrameSampling("segments", 2)
    paths = [_write_video(tmp_path / f"v{i}.mp4", 40 * i) for i in range(3)]
    ids = [p.stem for p in paths]
    _ctx(tmp_path / "c").embed_media(video_files("vids", ids, paths, sampling))
    _write_video(tmp_path / "new.mp4", 200).replace(paths[2])
    ctx = _ctx(tmp_path / "c")
    ctx.embed_media(video_files("vids", ids, paths, sampling))
    assert ctx.counters.media_encoded == 1 and ctx.counters.media_cached == 2
    # the decoder and its version, and the frame source, are part of the key
    assert decoder_identity("av").startswith("av-") and "libavcodec" in decoder_identity("av")
    assert video_recipe(sampling, "av") != video_recipe(sampling, "cv2")
    other_decoder = video_files("vids", ids, paths, sampling)
    other_decoder.recipe = video_recipe(sampling, "cv2")
    ctx = _ctx(tmp_path / "c")
    ctx.embed_media(other_decoder)
    assert ctx.counters.media_encoded == 3
    frames = _jpegs(tmp_path / "frames", ["red", "green"])
    as_frames = frame_folders("vids", ["f"], [frames], sampling)
    as_images = _images(frames)
    assert as_frames.recipe.startswith("jpeg-frames|") and as_frames.recipe != video_recipe(sampling)
    assert as_images.recipe != as_frames.recipe


# kill -9 at three moments of a real `negharness run` -------------------------------------------
TASK = "shapes_t2i_original"
BATCH = 64  # the CLI's default batch size: nothing lowered for the test


RUN = ["run", "--model", "slow_shapes", "--task", TASK, "--device", "cpu"]


def _run(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    """The run that gets killed: its own process, so SIGKILL ends it mid-write."""
    full = dict(os.environ)
    full.update(env)
    full["PYTHONPATH"] = os.pathsep.join([str(THIRDPARTY / "slowmodel"), full.get("PYTHONPATH", "")])
    return subprocess.Popen([sys.executable, "-m", "negharness.cli", *RUN, *args], env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _run_here(args: list[str], cwd: Path) -> None:
    """A run nobody kills: in this process (the same command, without a torch import per run), its model
    not slowed down (only a run to be killed needs time to be caught mid-way)."""
    res = run_cli([*RUN, *args], cwd, [THIRDPARTY / "slowmodel"], env={"NEGHARNESS_SLOW_SLEEP": "0"})
    assert res.returncode == 0, res.stderr[-2000:]


def _stored(cache: Path, kind: str) -> int:
    n = 0
    for shard in cache.rglob(f"{kind}*/shard-*.safetensors"):
        try:
            n += len(read_shard(shard)[0])
        except Exception:  # a shard being renamed into place
            pass
    return n


def _logged(log: Path, kind: str) -> int:
    if not log.exists():
        return 0
    return sum(int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith(kind + " "))


def _record(out: Path) -> dict:
    return json.loads(next(out.rglob(f"{TASK}.json")).read_text())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict:
    """The record of a run that nobody killed (the reference every resumed run must equal)."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    _run_here(["--cache-dir", str(folder / "cache"), "--output-dir", str(folder / "out")], folder)
    return _record(folder / "out")


@pytest.mark.heavy  # tens of seconds: scheduled first (tests/conftest.py)
@pytest.mark.parametrize("moment", [("image", 1), ("image", 5), ("text", 3)])
def test_kill_9_mid_run_resumes_losing_at_most_one_batch(tmp_path, moment, uninterrupted):
    """`negharness run` at default settings, killed with SIGKILL once the cache holds ``n`` batches
    of ``kind``; a rerun encodes only what was not kept, and its record equals an uninterrupted run's."""
    kind, batches = moment
    cache, log = tmp_path / "cache", tmp_path / "encoded.log"
    env = {"NEGHARNESS_SLOW_LOG": str(log)}
    proc = _run(["--cache-dir", str(cache), "--output-dir", str(tmp_path / "killed")], env)
    deadline = time.monotonic() + 240
    while _logged(log, kind) < batches * BATCH or _stored(cache, kind) < batches * BATCH:
        assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = {k: _stored(cache, k) for k in ("image", "text")}
    encoded = {k: _logged(log, k) for k in ("image", "text")}
    for k in ("image", "text"):  # what was encoded but not kept: at most the batch in flight
        assert 0 <= encoded[k] - kept[k] <= BATCH, (k, encoded, kept)
    _run_here(["--cache-dir", str(cache), "--output-dir", str(tmp_path / "rerun")], tmp_path)
    resumed, reference = _record(tmp_path / "rerun"), uninterrupted
    counts = resumed["counts"]
    assert counts["media_cached"] == kept["image"] and counts["media_encoded"] == 500 - kept["image"]
    assert counts["texts_cached"] == kept["text"]
    assert resumed["metrics"].keys() == reference["metrics"].keys()
    for name, value in reference["metrics"].items():
        assert resumed["metrics"][name] == pytest.approx(value, abs=1e-6), name


def test_shards_written_here_are_safetensors_files_that_safetensors_reads(tmp_path):
    """`write_shard` writes the safetensors layout itself (no copies of the table): safetensors' own
    reader takes the file, with its metadata and table, and the header is padded to 8 bytes as it pads."""
    from safetensors import safe_open

    from negharness.store.shards import write_shard

    folder = tmp_path / "ns" / "coll"
    folder.mkdir(parents=True)
    rows = torch.randn(5, 3)
    ids = ["a", 'q"uote', "é", "x\\y", "e"]
    write_shard(folder / "shard-1.safetensors", ids, rows, sync=True)
    with safe_open(str(folder / "shard-1.safetensors"), "pt") as f:
        assert json.loads(f.metadata()["ids"]) == ids and f.metadata()["owner"] == "ns/coll"
        assert torch.equal(f.get_tensor("emb"), rows)
    assert int.from_bytes((folder / "shard-1.safetensors").read_bytes()[:8], "little") % 8 == 0
    got_ids, got = read_shard(folder / "shard-1.safetensors")
    assert got_ids == ids and torch.equal(got, rows)


def test_memo_lines_are_the_json_of_their_entry(tmp_path):
    """The memo's lines are written out by hand (a tenth of json.dumps' time): the same text as before."""
    for key in [("/d/a\"b\\é.jpg", 10, 1_700_000_000_123_456_789, 1_700_000_000_123_456_789, 42, 2049),
                ("rel/x.jpg", 0, 0, 0, 0, 0), ("odd", 1.5, True, None, 3, 4)]:
        body = json.dumps([*key, "ab" * 16], separators=(",", ":"))
        assert content._format_line(key, "ab" * 16) == f"{content._line_check(body.encode()):08x} {body}\n"
