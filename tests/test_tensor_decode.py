"""Tensor image decoding (``-M decode=tensor``, negharness.io.tensor_images): pixels and embeddings close
to open_clip's PIL transform, rankings equal, a cache namespace of its own, and broken files refused or
skipped as on the PIL path. The GPU's batched path (`DecodedBatches`) runs here on the CPU."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from negharness.api import MediaError, UserError
from negharness.api import ModelOptions
from negharness.engine import media_batches
from negharness.engine.runner import CachedEvalContext, RunSettings
from negharness.io.media import image_files
from negharness.io.tensor_images import (
    DecodedBatches,
    DecodedFiles,
    PixelTransform,
    plain_jpeg,
    tensor_recipe,
)
from negharness.plugins.openclip_model import OpenClipModel
from negharness.store.cache import EmbeddingCache, settle_merges
from negharness.store.shards import read_shard

MICRO = {"embed_dim": 64, "vision_cfg": {"image_size": 224, "layers": 2, "width": 64, "patch_size": 32},
         "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 1}}
SIZES = [(480, 640), (480, 640), (640, 480), (300, 200), (224, 224), (100, 150), (333, 500), (250, 250)]


def _photo(h: int, w: int, seed: int) -> np.ndarray:
    """Photo-like content (gradients, a bright disc, mild grain): what resizing differences show on."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 / w, y * 255 / h, np.full_like(x, 30 * (seed % 8))], -1).astype(np.float32)
    cy, cx, r = rng.integers(0, h), rng.integers(0, w), rng.integers(10, max(11, min(h, w) // 3))
    img[(y - cy) ** 2 + (x - cx) ** 2 < r * r] = rng.integers(0, 255, 3)
    return np.clip(img + rng.normal(0, 6, img.shape), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> list[Path]:
    """JPEGs of many sizes (down- and upscaled, one at the model's size), plus a PNG, a grey, a CMYK
    and a progressive JPEG: every branch of the decoder choice."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("images")
    paths = []
    for i, (h, w) in enumerate(SIZES * 3):
        p = folder / f"img{i:02d}.jpg"
        Image.fromarray(_photo(h, w, i)).save(p, quality=90)
        paths.append(p)
    extra = Image.fromarray(_photo(240, 320, 99))
    for name, image, kw in (("png.png", extra, {}), ("grey.jpg", extra.convert("L"), {}),
                            ("cmyk.jpg", extra.convert("CMYK"), {}), ("prog.jpg", extra, {"progressive": True})):
        image.save(folder / name, **kw)
        paths.append(folder / name)
    return paths


@pytest.fixture(scope="module")
def arch(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("arch") / "micro.json"
    path.write_text(json.dumps(MICRO))
    return str(path)


@pytest.fixture(scope="module")
def pil_model(arch: str) -> OpenClipModel:
    return _model(arch)


@pytest.fixture(scope="module")
def tensor_model(arch: str) -> OpenClipModel:
    return _model(arch, decode="tensor")


def _model(arch: str, **extra: str) -> OpenClipModel:
    torch.manual_seed(0)
    return OpenClipModel.create("clip", ModelOptions(arch=arch, extra=extra), default_pretrained=None).eval_mode()


def _embed(model, media, cache=None, **settings):
    ctx = CachedEvalContext(model, RunSettings(batch_size=8, **settings), cache)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ctx.embed_media(media), ctx


def test_which_files_the_tensor_decoder_takes(files):
    taken = {p.name: plain_jpeg(p.read_bytes()) for p in files}
    assert taken["img00.jpg"] and taken["grey.jpg"] and taken["prog.jpg"]
    assert not taken["png.png"] and not taken["cmyk.jpg"]  # Pillow decodes these, as on the PIL path
    data = files[0].read_bytes()
    assert not plain_jpeg(data[: len(data) // 2])  # truncated: Pillow names it


@pytest.mark.parametrize("size", [(480, 640), (640, 480), (99, 224), (224, 500), (250, 250), (224, 224), (37, 41)])
def test_resized_size_is_torchvisions(size):
    from torchvision.transforms.functional import _compute_resized_output_size

    transform = PixelTransform((224, 224), (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    assert list(transform.resized_size(*size)) == _compute_resized_output_size(size, [224])


def test_pixels_within_a_few_levels_of_open_clips_pil_transform(files, tensor_model):
    """Same decoder output on the CPU; torch's uint8 antialiased resize differs from Pillow's by a
    level here and there (2/255 at most, measured on the shapes world), and an image at the model's
    size is exact."""
    from PIL import Image

    pil = torch.stack([tensor_model.preprocess_image(Image.open(p)) for p in files])
    decoded = DecodedFiles(files, list(range(len(files))), tensor_model.pixel_transform())
    tensor = torch.stack([decoded[i][1] for i in range(len(files))])
    levels = (pil - tensor).abs() * tensor_model._std * 255
    assert float(levels.max()) <= 2.01
    assert float(levels.mean()) < 0.05
    assert float(levels[SIZES.index((224, 224))].max()) < 1e-3


def test_float_resize_a_gpu_runs_is_close_to_the_cpus_uint8_one(files, tensor_model):
    """CUDA resizes in float32 (rounded); the CPU in uint8 fixed point. Both run here on the CPU, on the
    downscaled, upscaled and square sizes: a level or two apart at most (4 on a sharp edge, measured
    against Pillow), a fraction of a level on average."""
    from negharness.io import tensor_images

    transform = tensor_model.pixel_transform()
    images = [tensor_images.pil_pixels(p.read_bytes(), p) for p in files[:8]]
    levels = (transform(images, uint8=False) - transform(images, uint8=True)).abs() * torch.tensor(transform.std).view(1, 3, 1, 1) * 255
    assert float(levels.max()) <= 4.01 and float(levels.mean()) < 0.2


def test_embeddings_close_and_rankings_equal(files, pil_model, tensor_model):
    """Each tensor-decoded image's nearest PIL-decoded embedding is its own, and text queries rank
    the images identically at the top (R@1 and R@5 equal for any relevance)."""
    media = image_files("t/images", [p.name for p in files], files)
    pil, _ = _embed(pil_model, media)
    tensor, _ = _embed(tensor_model, media)
    assert float((pil - tensor).abs().max()) < 1e-3
    assert torch.equal((tensor @ pil.t()).argmax(1), torch.arange(len(files)))
    texts = pil_model.encode_text([f"a photo of thing number {i}" for i in range(12)])
    for k in (1, 5):
        assert torch.equal((texts @ pil.t()).topk(k).indices.sort().values,
                           (texts @ tensor.t()).topk(k).indices.sort().values)


def test_batched_gpu_path_equals_per_item_path_on_cpu(files, tensor_model, monkeypatch):
    """`DecodedBatches` (what a CUDA run takes) through the runner gives the per-item path's numbers."""
    media = image_files("t/images", [p.name for p in files], files)
    model = tensor_model
    per_item, _ = _embed(model, media, workers=0)
    monkeypatch.setattr(media_batches, "batched_decoding", lambda device: True)
    batched, _ = _embed(model, media, workers=0)
    torch.testing.assert_close(batched, per_item, atol=1e-5, rtol=0)


def test_cache_never_mixes_decoders(files, pil_model, tensor_model, tmp_path):
    media = image_files("t/images", [p.name for p in files], files)
    assert pil_model.fingerprint() != tensor_model.fingerprint()
    assert "image_decode" not in pil_model.describe()  # PIL embeddings keep the fingerprint they had
    _embed(pil_model, media, EmbeddingCache(tmp_path))
    _, ctx = _embed(tensor_model, media, EmbeddingCache(tmp_path))
    assert ctx.counters.media_cached == 0 and ctx.counters.media_encoded == len(files)
    _, again = _embed(tensor_model, media, EmbeddingCache(tmp_path))
    assert again.counters.media_cached == len(files) and again.counters.media_encoded == 0
    collection, _ = ctx.media_keys(media)
    assert collection == f"image|{tensor_recipe(tensor_model.pixel_transform(), torch.device('cpu'))}"
    assert "nvjpeg" in tensor_recipe(tensor_model.pixel_transform(), torch.device("cuda"))  # no GPU used
    assert ctx.media_keys(media)[0] != CachedEvalContext(pil_model, RunSettings(), EmbeddingCache(tmp_path)).media_keys(media)[0]


@pytest.mark.parametrize("batched", [False, True])
def test_broken_files_are_skipped_or_refused_as_on_the_pil_path(files, pil_model, tensor_model, tmp_path, monkeypatch,
                                                                 batched):
    monkeypatch.setattr(media_batches, "batched_decoding", lambda device: batched)
    data = files[0].read_bytes()
    (tmp_path / "truncated.jpg").write_bytes(data[: len(data) // 2])
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "folder.jpg").mkdir()
    bad = [tmp_path / "truncated.jpg", tmp_path / "empty.jpg", tmp_path / "missing.jpg", tmp_path / "folder.jpg"]
    paths = files[:3] + bad + files[3:5]
    media = image_files("t/broken", [p.name for p in paths], paths)
    skipped = {}
    for decode, model in (("pil", pil_model), ("tensor", tensor_model)):
        out, ctx = _embed(model, media, workers=0, skip_broken_media=True)
        skipped[decode] = sorted(ctx.broken["t/broken"])
        assert torch.isnan(out).any(1).sum() == len(bad)
    assert skipped["tensor"] == skipped["pil"] == sorted(p.name for p in bad)
    for p in bad:
        one = image_files("t/one", ["x", p.name], [files[0], p])
        with pytest.raises(MediaError, match=p.name):
            _embed(tensor_model, one, workers=0)


def _headers_only_jpeg(path: Path) -> Path:
    """A JPEG cut after its frame header and closed with EOI: it looks plain to `plain_jpeg`, so the
    tensor decoder gets it, refuses it, and Pillow (the fallback) cannot read it either."""
    from io import BytesIO

    from PIL import Image

    buf = BytesIO()
    Image.fromarray(np.full((64, 64, 3), 100, np.uint8)).save(buf, "JPEG")
    data = buf.getvalue()
    path.write_bytes(data[: data.index(b"\xff\xda")] + b"\xff\xd9")
    assert plain_jpeg(path.read_bytes())
    return path


@pytest.mark.parametrize("batched", [False, True])
def test_a_jpeg_no_decoder_reads_is_skipped_on_both_roads(files, tensor_model, tmp_path, monkeypatch, batched):
    """Before, the batched (CUDA) road ran Pillow's fallback outside its skip rule: this file stopped a
    --skip-broken-media run there (MediaError) while the per-item road skipped it."""
    monkeypatch.setattr(media_batches, "batched_decoding", lambda device: batched)
    bad = _headers_only_jpeg(tmp_path / "headers_only.jpg")
    paths = [files[0], bad, files[1]]
    media = image_files("t/undecodable", [p.name for p in paths], paths)
    out, ctx = _embed(tensor_model, media, workers=0, skip_broken_media=True)
    assert ctx.broken == {"t/undecodable": ["headers_only.jpg"]} and ctx.counters.media_skipped == 1
    assert torch.isnan(out[1]).all() and torch.isfinite(out[[0, 2]]).all()
    with pytest.raises(MediaError, match="headers_only.jpg"):
        _embed(tensor_model, media, workers=0)


def test_decoded_batches_stop_cleanly_when_the_consumer_stops(files, tensor_model):
    transform = tensor_model.pixel_transform()
    chunks = [[i] for i in range(len(files))]
    batches = iter(DecodedBatches(files, chunks, transform, torch.device("cpu"), False, 2))
    first = next(batches)
    assert first[0] == [0] and first[1].shape == (1, 3, 224, 224)
    batches.close()  # the producer thread and readers end; nothing hangs


def test_refused_option_values_name_the_option(arch):
    with pytest.raises(UserError, match="decode"):
        _model(arch, decode="nvjpeg")
    with pytest.raises(UserError, match="jpeg_draft"):
        _model(arch, decode="tensor", jpeg_draft="true")
    with pytest.raises(ValueError, match="longest"):
        PixelTransform((224, 224), (0.5,) * 3, (0.5,) * 3, resize_mode="longest")  # type: ignore[arg-type]


def test_images_of_a_run_on_a_device_torchvision_cannot_decode_on_are_labelled_as_decoded_on_the_cpu():
    """On MPS (or any device but CUDA) the runner decodes and resizes image files on the CPU (`DecodedFiles`:
    libjpeg-turbo, a uint8 resize) and moves the pixels: the cache's recipe says so, the CPU's own. It said
    ``resize-float32`` (the device's rule), so one decoding had two labels; one rule now (`decode_device`)."""
    import negharness.io.tensor_images as ti
    from negharness.engine.media_batches import batched_decoding

    transform = PixelTransform((32, 32), (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    mps, cpu, cuda = torch.device("mps"), torch.device("cpu"), torch.device("cuda")
    assert ti.decode_device(mps) == cpu and ti.decode_device(cuda) == cuda
    assert ti.tensor_recipe(transform, mps) == ti.tensor_recipe(transform, cpu)
    assert "resize-uint8" in ti.tensor_recipe(transform, mps) and "libjpeg-turbo" in ti.tensor_recipe(transform, mps)
    assert "resize-float32" in ti.tensor_recipe(transform, cuda) and "nvjpeg" in ti.tensor_recipe(transform, cuda)
    assert not batched_decoding(mps) and not batched_decoding(cpu) and batched_decoding(cuda)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_the_reader_reads_files_whole_and_never_waits_on_a_fifo(files, tmp_path):
    """`file_bytes` reads straight into one buffer (the tensor decoder takes it without a copy); a FIFO is
    seen after a non-blocking open and goes to the checked road, which names it (opening it to read would
    block forever), as a missing file or a folder does."""
    from negharness.io.tensor_images import file_bytes, read_item

    assert file_bytes(files[0]) == files[0].read_bytes()
    for path in files:  # its buffer (uninitialised memory the read fills) reads as the file's bytes do
        data = file_bytes(path)
        assert data is not None and not data.readonly and plain_jpeg(data) == plain_jpeg(path.read_bytes())
    encoded = read_item(files[0])
    assert isinstance(encoded, tuple) and encoded[0].numpy().tobytes() == files[0].read_bytes()
    os.mkfifo(tmp_path / "pipe.jpg")
    (tmp_path / "folder.jpg").mkdir()
    for name, why in (("pipe.jpg", "FIFO"), ("folder.jpg", "folder"), ("missing.jpg", "not found")):
        assert file_bytes(tmp_path / name) is None
        with pytest.raises(MediaError, match=f"{name}.*{why}|{why}.*{name}"):
            read_item(tmp_path / name)


def test_keys_resolved_beside_the_batched_loop_give_what_keys_hashed_first_give(files, tensor_model, tmp_path,
                                                                               monkeypatch):
    """On the batched (CUDA) road with a cache, the files' keys are resolved run by run while the first
    batches encode (`KeyStream`): the same embeddings, counts, skipped files and cache rows as hashing every
    file first; with a file's twin, a path given twice, an unreadable file, and a third of the set cached."""
    import shutil

    from negharness.engine.streamed_keys import KeyStream
    from negharness.store import content

    monkeypatch.setattr(media_batches, "batched_decoding", lambda device: True)
    monkeypatch.setattr(content, "HASH_TASK", 4)  # runs of 4 keys: several runs for this small set
    shutil.copy(files[2], tmp_path / "twin.jpg")
    (tmp_path / "empty.jpg").write_bytes(b"")
    paths = files + [tmp_path / "twin.jpg", tmp_path / "empty.jpg", files[5]]
    media = image_files("t/stream", [f"{i}:{p.name}" for i, p in enumerate(paths)], paths)
    streamed = []
    real_enter = KeyStream.__enter__
    monkeypatch.setattr(KeyStream, "__enter__", lambda self: streamed.append(1) or real_enter(self))
    got = {}
    for how in ("streamed", "hashed first"):
        if how == "hashed first":
            monkeypatch.setattr(CachedEvalContext, "_streams_keys", lambda self, m: False)
        cache = EmbeddingCache(tmp_path / how)
        _embed(tensor_model, image_files("t/stream", [p.name for p in files[:10]], files[:10]), cache)
        out, ctx = _embed(tensor_model, media, cache, workers=0, skip_broken_media=True)
        settle_merges()  # no shard vanishes under the read below
        rows = {k: r for shard in (tmp_path / how).rglob("shard-*.safetensors") for k, r in zip(*read_shard(shard))}
        got[how] = (out, dict(ctx.counters), ctx.broken, rows)
    assert len(streamed) == 2  # the set and the third cached before it, both streamed; then none
    (a, count_a, broken_a, rows_a), (b, count_b, broken_b, rows_b) = got["streamed"], got["hashed first"]
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    assert torch.isnan(a[len(files) + 1]).all() and torch.equal(a[2], a[len(files)])  # the broken file; the twin
    assert {k: count_a[k] for k in CachedEvalContext.COUNTED} == {k: count_b[k] for k in CachedEvalContext.COUNTED}
    assert count_a["media_cached"] == 10 + 2 and count_a["media_encoded"] == len(files) - 10
    assert broken_a == broken_b == {"t/stream": [f"{len(files) + 1}:empty.jpg"]}
    assert rows_a.keys() == rows_b.keys() and all(torch.equal(rows_a[k], rows_b[k]) for k in rows_a)



def test_on_the_streamed_road_each_file_is_read_once_and_what_is_held_stays_bounded(files, tensor_model, tmp_path,
                                                                                   monkeypatch):
    """The bytes read to hash a file for its key are the bytes decoded (`HeldBytes`): each file opened once
    where it was twice (hash, then decode), the numbers those of keys hashed first. With room for about one
    file, what is held never passes the limit and the files that find no room are read again, as before."""
    from negharness.io import held_bytes
    from negharness.store import content

    monkeypatch.setattr(media_batches, "batched_decoding", lambda device: True)
    monkeypatch.setattr(content, "HASH_TASK", 4)
    media = image_files("t/once", [p.name for p in files], files)
    names = {os.fspath(p) for p in files}
    opened: dict[str, int] = {}
    real_open = os.open

    def counting_open(path, *args, **kwargs):
        if os.fspath(path) in names:
            opened[os.fspath(path)] = opened.get(os.fspath(path), 0) + 1
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    once, ctx = _embed(tensor_model, media, EmbeddingCache(tmp_path / "once"), workers=0)
    assert ctx.counters.media_encoded == len(files) and sorted(opened.values()) == [1] * len(files)

    most: list[int] = []
    real_put = held_bytes.HeldBytes.put_each

    def watched_put(self, offered):
        real_put(self, offered)
        most.append(self.held)

    small = max(p.stat().st_size for p in files) + 1
    monkeypatch.setattr(held_bytes.HeldBytes.__init__, "__defaults__", (small,))
    monkeypatch.setattr(held_bytes.HeldBytes, "put_each", watched_put)
    opened.clear()
    tight, _ = _embed(tensor_model, media, EmbeddingCache(tmp_path / "tight"), workers=0)
    assert most and max(most) <= small and sum(opened.values()) > len(files)  # bounded; some read twice
    monkeypatch.setattr(CachedEvalContext, "_streams_keys", lambda self, m: False)
    first, _ = _embed(tensor_model, media, EmbeddingCache(tmp_path / "first"), workers=0)
    torch.testing.assert_close(once, first, rtol=0, atol=0)
    torch.testing.assert_close(tight, first, rtol=0, atol=0)


def test_held_bytes_stay_within_their_room_and_are_handed_over_once():
    """`HeldBytes`: a file is kept only where it fits (the hasher then hashes without keeping it), its bytes
    are taken once, dropped ones are gone, and after `close` a read still in flight keeps nothing and gives
    its room back (the count of held bytes returns to 0, so no later set inherits a full holder)."""
    from negharness.io.held_bytes import HeldBytes

    held = HeldBytes(limit=10)
    assert held.reserve(6) and not held.reserve(5)  # 6 + 5 > 10: that file is hashed without keeping it
    held.put(0, bytearray(b"abcdef"), 6)
    assert held.reserve(4)
    held.put(1, bytearray(b"ghij"), 4)
    assert held.pressed() and held.take([1, 0, 2]) == [bytearray(b"ghij"), bytearray(b"abcdef"), None]
    assert held.take([0]) == [None] and held.held == 0 and held.taken == 2
    assert held.reserve(3)
    held.put(2, bytearray(b"xyz"), 3)
    held.drop([2])
    assert held.take([2]) == [None] and held.held == 0
    assert held.reserve(5)  # a read in flight when the set ends
    held.close()
    held.put(3, bytearray(b"12345"), 5)
    assert held.take([3]) == [None] and held.held == 0 and not held.reserve(1)
    run = HeldBytes(limit=10)  # a hashing thread's run of files: room asked in turn, the bytes offered at once
    assert run.reserve_each([4, 7, 4, 3]) == [True, False, True, False] and run.held == 8
    run.put_each([(0, bytearray(b"abc"), 4), (2, None, 4)])  # one read shorter than its stat, one failed
    assert run.held == 3 and run.take([0, 2]) == [bytearray(b"abc"), None] and run.held == 0


def test_a_cache_filled_with_held_bytes_answers_the_road_that_hashes_first(files, tensor_model, tmp_path, monkeypatch):
    """The keys made from held bytes (`store.content._hashes_kept`) are `hash_open_file`'s: a cache the
    streamed road filled answers the road that hashes every key first without encoding anything, and a
    fresh memo (every file hashed again) gives the same keys."""
    monkeypatch.setattr(media_batches, "batched_decoding", lambda device: True)
    media = image_files("t/seam", [p.name for p in files], files)
    cache = tmp_path / "cache"
    streamed, ctx = _embed(tensor_model, media, EmbeddingCache(cache), workers=0)
    assert ctx.counters.media_encoded == len(files)
    monkeypatch.setattr(CachedEvalContext, "_streams_keys", lambda self, m: False)
    memo = cache / "content-hashes" / "memo.jsonl"  # the stat memo gone: each key hashed from the file again
    assert memo.is_file()
    memo.unlink()
    again, other = _embed(tensor_model, media, EmbeddingCache(cache), workers=0)
    assert other.counters.media_encoded == 0 and other.counters.media_cached == len(files)
    assert other.cache is not None and other.cache.hasher.hashed == len(files)
    torch.testing.assert_close(again, streamed, rtol=0, atol=0)


def test_a_hashing_run_gives_back_the_room_of_files_it_did_not_keep(files, tmp_path, monkeypatch):
    """`_hashes_kept` asks room for a run of files at once: a file gone since its stat gives its room back
    (its hash None), and an error escaping mid-run gives back the room of every file not yet read, once."""
    from negharness.io.held_bytes import HeldBytes
    from negharness.store import content

    paths = [os.fspath(files[0]), os.fspath(tmp_path / "gone.jpg"), os.fspath(files[1])]
    sizes = [files[0].stat().st_size, 1234, files[1].stat().st_size]
    held = HeldBytes()
    got = content._hashes_kept(paths, sizes, held, [0, 1, 2])
    assert got[1] is None and got[0] == content.hash_open_file(paths[0]) and got[2] == content.hash_open_file(paths[2])
    assert held.held == sizes[0] + sizes[2] and held.take([0, 1, 2])[1] is None and held.held == 0

    calls = []

    def breaks_on_second(path):
        calls.append(path)
        if len(calls) == 2:
            raise MemoryError("no room")
        return real(path)

    real = content.file_bytes
    monkeypatch.setattr(content, "file_bytes", breaks_on_second)
    held = HeldBytes()
    with pytest.raises(MemoryError):
        content._hashes_kept([paths[0], paths[2], paths[0]], [sizes[0], sizes[2], sizes[0]], held, [0, 1, 2])
    assert held.held == sizes[0] and held.take([0])[0] is not None and held.held == 0
