"""The embedding cache: zero encodes on a rerun (counted), resume after a crash, keys that separate precision."""

import os
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import negharness.discovery.hookspecs as hs
from negharness.api import UserError
from negharness.api import ModelOptions
from negharness.discovery.manager import PluginHost
from negharness.engine.evaluate import RunRequest, evaluate_request
from negharness.engine.embedding_contract import EmbeddingContract, ModelOrigin
from negharness.engine.runner import CachedEvalContext, RunSettings
from negharness.io.media import MediaSet
from negharness.store.cache import EmbeddingCache, settle_merges
from negharness.store.shards import read_shard
from negharness.testing import (
    ColourRetrievalTask,
    KeywordModel,
    host_with_models,
    keyword_model,
    solid_image,
)


def _media(n=6):
    colours = ["red", "green", "blue", "yellow", "cyan", "magenta"][:n]
    imgs = [solid_image(c) for c in colours]
    return MediaSet("test/colours", "image", colours, lambda i: imgs[i], cheap=True)


def test_rerun_encodes_nothing_and_returns_the_same(tmp_path):
    cache = EmbeddingCache(tmp_path)
    model = KeywordModel()
    first = CachedEvalContext(model, RunSettings(batch_size=4), cache)
    a_img, a_txt = first.embed_media(_media()), first.embed_texts(["a red thing", "blue", "a red thing"])
    assert first.counters.media_encoded == 6 and first.counters.texts_encoded == 2  # duplicates once
    again = CachedEvalContext(model, RunSettings(batch_size=4), EmbeddingCache(tmp_path))  # a new process's view
    b_img, b_txt = again.embed_media(_media()), again.embed_texts(["a red thing", "blue", "a red thing"])
    assert again.counters.media_encoded == 0 and again.counters.texts_encoded == 0
    assert again.counters.media_cached == 6 and again.counters.texts_cached == 2
    assert torch.equal(a_img, b_img) and torch.equal(a_txt, b_txt)
    assert model.encoded == {"text": 2, "image": 6}


def test_content_keys_from_the_task_key_items_without_reading_them(tmp_path):
    """A set that brings its own content keys is looked up by them, among the sets of its key: a
    warm run reads no pixels, other keys over the same pixels are other entries, and another set's
    equal keys are not this set's."""
    colours = ["red", "green", "blue"]
    imgs = [solid_image(c) for c in colours]
    reads = []

    def load(i):
        reads.append(i)
        return imgs[i]

    def keyed(keys):
        return MediaSet("test/keyed", "image", colours, load, cheap=True, content_keys=keys)

    model = KeywordModel()
    first = CachedEvalContext(model, RunSettings(batch_size=4), EmbeddingCache(tmp_path)).embed_media(keyed(["a", "b", "c"]))
    assert sorted(reads) == [0, 1, 2]
    reads.clear()
    again = CachedEvalContext(model, RunSettings(batch_size=4), EmbeddingCache(tmp_path))
    assert torch.equal(again.embed_media(keyed(["a", "b", "c"])), first) and reads == []
    assert again.counters.media_cached == 3
    again.embed_media(keyed(["a", "b", "z"]))
    assert reads == [2] and again.counters.media_encoded == 1
    other = MediaSet("test/other", "image", colours, load, cheap=True, content_keys=["a", "b", "c"])
    reads.clear()
    again.embed_media(other)
    assert sorted(reads) == [0, 1, 2]
    with pytest.raises(ValueError, match="2 content_keys for 3 ids"):
        keyed(["a", "b"])


class _Crash(RuntimeError):
    pass


class _CrashingModel(KeywordModel):
    """Dies on its third image batch, as a killed run would."""

    def __init__(self):
        super().__init__()
        self.batches = 0

    def encode_image(self, pixels):
        self.batches += 1
        if self.batches == 3:
            raise _Crash()
        return super().encode_image(pixels)


def test_a_crash_halfway_keeps_finished_shards_and_resumes(tmp_path):
    cache = EmbeddingCache(tmp_path, flush_every=2)
    with pytest.raises(_Crash):
        CachedEvalContext(_CrashingModel(), RunSettings(batch_size=2), cache).embed_media(_media())
    resumed_model = KeywordModel()
    ctx = CachedEvalContext(resumed_model, RunSettings(batch_size=2), EmbeddingCache(tmp_path))
    out = ctx.embed_media(_media())
    assert ctx.counters.media_cached == 4 and ctx.counters.media_encoded == 2
    fresh = CachedEvalContext(KeywordModel(), RunSettings(batch_size=2), None).embed_media(_media())
    assert torch.allclose(out, fresh)


class _BreaksAtBatch(KeywordModel):
    """Returns a NaN row in its ``at``-th image batch, as a checkpoint that diverges mid-run would."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.batches = at, 0

    def encode_image(self, pixels):
        self.batches += 1
        out = super().encode_image(pixels)
        if self.batches == self.at:
            out[0] = float("nan")
        return out


def test_a_batch_that_breaks_the_contract_stops_the_run_and_nothing_after_it_is_cached(tmp_path):
    """The check runs one batch behind the forward (batch 3 is computed meanwhile): batch 2's error still
    stops the run, batch 1 stays cached, and neither batch 2 nor the batch after it reaches the cache."""
    with pytest.raises(UserError, match="non-finite"):
        CachedEvalContext(_BreaksAtBatch(2), RunSettings(batch_size=2), EmbeddingCache(tmp_path)).embed_media(_media())
    again = CachedEvalContext(KeywordModel(), RunSettings(batch_size=2), EmbeddingCache(tmp_path))
    again.embed_media(_media())
    assert again.counters.media_cached == 2 and again.counters.media_encoded == 4


def test_batch_bookkeeping_runs_beside_the_next_forward_one_batch_behind(tmp_path, monkeypatch):
    """Checking and caching batch k happen in a thread of their own while batch k+1's forward runs; when
    batch k+1's forward starts, every batch before k is kept."""
    import threading

    from negharness.store.cache import CollectionCache

    in_main, kept_at_forward = [], []
    real_add = CollectionCache.add

    def add(self, keys, emb, *args):
        in_main.append(threading.current_thread() is threading.main_thread())
        real_add(self, keys, emb, *args)

    class Watching(KeywordModel):
        def encode_image(self, pixels):
            kept_at_forward.append(len(in_main))
            return super().encode_image(pixels)

    monkeypatch.setattr(CollectionCache, "add", add)
    out = CachedEvalContext(Watching(), RunSettings(batch_size=1), EmbeddingCache(tmp_path)).embed_media(_media())
    assert in_main == [False] * 6
    assert all(kept >= k - 1 for k, kept in enumerate(kept_at_forward))
    fresh = CachedEvalContext(KeywordModel(), RunSettings(batch_size=1), None).embed_media(_media())
    assert torch.equal(out, fresh)


def test_rows_are_kept_as_blocks_and_assembled_in_place():
    from negharness.engine.kept_batches import Rows

    rows = Rows()
    rows.add([2, 0], torch.tensor([[2.0, 2.5], [0.0, 0.5]]))
    rows.share(3, 2)  # equal content: position 3 gets position 2's row
    assert 1 not in rows and 3 in rows and rows.missing(4) == [1]
    out = rows.table(4)
    assert out[[0, 2, 3]].tolist() == [[0.0, 0.5], [2.0, 2.5], [2.0, 2.5]] and torch.isnan(out[1]).all()
    rows.add([1], torch.tensor([[1.0, 1.5]]))
    assert rows.table(4)[1].tolist() == [1.0, 1.5] and Rows().table(2).shape == (2, 1)


def test_the_cache_writes_added_rows_once_they_hold_enough_work(tmp_path):
    """A batch that costs less than ``flush_seconds`` waits for the next; together they are one shard. An add
    that does not say what its rows cost is written at once (the old rule, for callers outside the runner)."""
    store = EmbeddingCache(tmp_path).collection("ns", "rows")
    rows = torch.nn.functional.normalize(torch.randn(5, 4), dim=1)

    def shards():
        return sorted(read_shard(p)[0] for p in store.folder.glob("shard-*.safetensors"))

    store.add(["a", "b"], rows[:2], store.flush_seconds / 4)
    assert shards() == [] and store.lookup(["b", "a"])[0] == [0, 1]  # served at once, not yet written
    store.add(["c", "d"], rows[2:4], store.flush_seconds)
    assert shards() == [["a", "b", "c", "d"]]
    store.add(["e"], rows[4:])
    assert shards() == [["a", "b", "c", "d"], ["e"]]


def test_precision_and_fingerprint_separate_namespaces(tmp_path):
    model = KeywordModel()
    fp32 = CachedEvalContext(model, RunSettings(precision="fp32"), EmbeddingCache(tmp_path))
    bf16 = CachedEvalContext(model, RunSettings(precision="bf16"), EmbeddingCache(tmp_path))
    other = CachedEvalContext(KeywordModel(dim=16), RunSettings(precision="fp32"), EmbeddingCache(tmp_path))
    assert len({fp32.namespace, bf16.namespace, other.namespace}) == 3
    fp32.embed_media(_media())
    bf16.embed_media(_media())
    assert bf16.counters.media_encoded == 6  # never served the fp32 embeddings


def test_reduced_precision_embeddings_of_another_device_type_are_another_namespace(tmp_path):
    """CPU and CUDA autocast cast different ops: their bf16 embeddings once shared cache entries. At fp32
    (no autocast) a device's rounding is not told apart, so a CPU run still reads a GPU run's cache."""
    model = KeywordModel()

    def namespace(device: str, precision: str) -> str:
        return CachedEvalContext(model, RunSettings(torch.device(device), precision), EmbeddingCache(tmp_path)).namespace

    assert namespace("cpu", "bf16") != namespace("cuda", "bf16") != namespace("cuda", "fp16")
    assert namespace("cpu", "fp32") == namespace("cuda", "fp32")


def test_a_describe_entry_named_like_the_fingerprints_own_keys_is_never_overwritten(tmp_path):
    """Two models that differ only in a ``frames`` entry of describe() (a third party's frame count) had
    one fingerprint (the frame sampling overwrote it) and shared cached embeddings; now they differ, while a
    describe() without such keys keeps the fingerprint it always had (computed here by the old rule)."""
    from negharness.contracts.hashing import hash_json

    class Framed(KeywordModel):
        def __init__(self, frames: int) -> None:
            super().__init__()
            self.frames = frames

        def describe(self):
            return {**super().describe(), "frames": self.frames}

    assert Framed(8).fingerprint() != Framed(16).fingerprint()
    plain = KeywordModel()
    assert plain.fingerprint() == hash_json({"name": plain.name, **plain.describe(), "frames": None})
    ctx8 = CachedEvalContext(Framed(8), RunSettings(), EmbeddingCache(tmp_path))
    ctx16 = CachedEvalContext(Framed(16), RunSettings(), EmbeddingCache(tmp_path))
    ctx8.embed_media(_media())
    ctx16.embed_media(_media())
    assert ctx16.counters.media_encoded == 6  # never served the other model's embeddings


def test_damaged_shard_is_recomputed_not_trusted(tmp_path):
    ctx = CachedEvalContext(KeywordModel(), RunSettings(), EmbeddingCache(tmp_path))
    ctx.embed_media(_media())
    settle_merges()
    for shard in tmp_path.rglob("shard-*.safetensors"):
        shard.write_bytes(b"garbage")
    again = CachedEvalContext(KeywordModel(), RunSettings(), EmbeddingCache(tmp_path))
    again.embed_media(_media())
    assert again.counters.media_encoded == 6


class _Colours(ColourRetrievalTask):
    name = "colours"  # registered as "colours": a task runs under its registered name, which its class must say


def _host():
    plugin = types.SimpleNamespace()

    @hs.hookimpl
    def negharness_register_models(registry):
        registry.add("kw", keyword_model, "keyword model")

    @hs.hookimpl
    def negharness_register_tasks(registry):
        registry.add("colours", _Colours, "colours", family="testing")

    plugin.negharness_register_models = negharness_register_models
    plugin.negharness_register_tasks = negharness_register_tasks
    host = PluginHost()
    host.register(plugin, "inline")
    return host


def test_finished_record_is_skipped_unless_overwrite(tmp_path):
    host = _host()
    req = RunRequest(model="kw", tasks=["colours"], output_dir=str(tmp_path / "res"), cache_dir=str(tmp_path / "c"))
    first = evaluate_request(host, req)
    assert not first[0].skipped and first[0].record["counts"]["media_encoded"] == 6
    second = evaluate_request(host, req)
    assert second[0].skipped
    req.overwrite = True
    third = evaluate_request(host, req)
    assert not third[0].skipped
    assert third[0].record["counts"] == {"texts_encoded": 0, "texts_cached": 6, "media_encoded": 0,
                                        "media_cached": 6, "media_skipped": 0}
    assert third[0].record["metrics"] == first[0].record["metrics"]


def test_limit_is_recorded_and_samples_logged(tmp_path):
    host = _host()
    req = RunRequest(model="kw", tasks=["colours"], output_dir=str(tmp_path / "res"), limit=3, log_samples=True,
                     use_cache=False)
    out = evaluate_request(host, req)[0]
    assert out.record["limited"] is True and out.record["n_items"] == {"images": 3}
    assert out.record["main_score"] == {"name": "R@1", "value": 100.0}
    assert out.record["metric_info"]["R@1"]["higher_is_better"] is True
    assert len(out.record["config_hash"]) == 16


def test_video_pooling_is_masked():
    model = KeywordModel()
    frames = torch.zeros(1, 3, 3, 2, 2)
    frames[0, 0, 0] = 1.0  # red frame
    frames[0, 1, 2] = 1.0  # blue frame
    frames[0, 2, 1] = 1.0  # green padding frame, masked out
    pooled = model.encode_video(frames, torch.tensor([[True, True, False]]))
    expected = torch.nn.functional.normalize(torch.tensor([1.0, 0.0, 1.0]), dim=0)
    assert torch.allclose(pooled[0, :3], expected, atol=1e-4)


class _ClipLengths(KeywordModel):
    def preprocess_video(self, frames):
        return torch.stack([self.preprocess_image(f) for f in frames])


@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_path_pads_and_masks_videos_of_different_lengths(workers):
    rng = np.random.default_rng(0)
    clips = [rng.integers(0, 255, size=(t, 4, 4, 3), dtype=np.uint8) for t in (1, 3, 2, 4, 3)]
    media = MediaSet("test/clips", "video", [f"v{i}" for i in range(5)], lambda i: clips[i], cheap=False)
    model = _ClipLengths()
    got = CachedEvalContext(model, RunSettings(batch_size=2, workers=workers)).embed_media(media)
    for i, clip in enumerate(clips):
        frames = model.preprocess_video(clip)[None]
        assert torch.allclose(got[i], model.encode_video(frames)[0], atol=1e-6)


@pytest.mark.parametrize("preset, torch_first, expected", [
    (None, False, ("True", "PASSIVE")),      # the CLI's default before torch loads
    ("active", False, ("False", "active")),  # the user's choice wins
    (None, True, ("False", "unset")),        # too late once torch is loaded: left alone, and says so
])
def test_passive_openmp_waiting_is_chosen_before_torch_loads(preset, torch_first, expected):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if preset:
        env["OMP_WAIT_POLICY"] = preset
    code = ("import os\n" + ("import torch\n" if torch_first else "")
            + "from negharness.cli.process import prefer_passive_waiting\n"
            "print(prefer_passive_waiting(), os.environ.get('OMP_WAIT_POLICY', 'unset'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert tuple(out.stdout.split()) == expected


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_decode_threads_yield_to_the_forward_pass_and_keep_the_order():
    """Decoding runs in background threads at a lower priority (nice + 10) than the encoding thread,
    and the embeddings come back in the collection's order however the threads finish."""
    import threading

    main_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: list[tuple[str, int]] = []
    colours = ["red", "green", "blue", "yellow", "cyan", "magenta"] * 5

    def load(i):
        seen.append((threading.current_thread().name, os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
        return solid_image(colours[i])

    media = MediaSet("prio", "image", [str(i) for i in range(len(colours))], load)
    ctx = CachedEvalContext(KeywordModel(), RunSettings(batch_size=4, workers=0, decode_threads=3))
    emb = ctx.embed_media(media)
    assert all(name.startswith("negharness-decode") and nice == min(19, main_nice + 10) for name, nice in seen)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main_nice
    expected = KeywordModel().encode_image(torch.stack([KeywordModel().preprocess_image(solid_image(c)) for c in colours]))
    assert torch.allclose(emb, expected)


def test_an_unreadable_item_stops_decoding_without_draining_the_queue():
    """The error names the item at once; batches queued behind it are cancelled, not decoded."""
    import time

    from negharness.api import MediaError

    loaded: list[int] = []

    def load(i):
        if i == 1:
            raise MediaError("cannot read item 1.jpg")
        time.sleep(0.01)
        loaded.append(i)
        return solid_image("red")

    media = MediaSet("broken", "image", [str(i) for i in range(200)], load)
    ctx = CachedEvalContext(KeywordModel(), RunSettings(batch_size=50, workers=0, decode_threads=2))
    with pytest.raises(MediaError, match="1.jpg"):
        ctx.embed_media(media)
    assert len(loaded) <= 10  # what the two threads had started, not the 99 items queued behind


class _ShortTextsFirst(KeywordModel):
    """Encodes texts in its own order and records each batch it was given."""

    def __init__(self, drop_one: bool = False):
        super().__init__()
        self.drop_one, self.seen = drop_one, []

    def text_batches(self, texts, batch_size):
        batches = super().text_batches(texts, batch_size)
        return [b[1:] for b in batches] if self.drop_one else batches

    def encode_text(self, texts):
        self.seen.append(list(texts))
        return super().encode_text(texts)


def test_texts_go_in_the_models_batches_and_come_back_in_order():
    texts = ["a very long text about a red car", "blue", "a green one", "red", "a yellow cup", "cyan"]
    model = _ShortTextsFirst()
    got = CachedEvalContext(model, RunSettings(batch_size=2), None).embed_texts(texts)
    assert model.seen == [["red", "blue"], ["cyan", "a green one"], ["a yellow cup", "a very long text about a red car"]]
    assert torch.allclose(got, KeywordModel().encode_text(texts))


def test_a_model_whose_batches_miss_a_text_is_refused():
    with pytest.raises(UserError, match="text_batches.. must list each of the 6 texts exactly once"):
        CachedEvalContext(_ShortTextsFirst(drop_one=True), RunSettings(batch_size=2), None).embed_texts(
            ["red", "blue", "a green one", "cyan", "magenta", "a yellow cup"])


def test_random_weight_draws_are_never_reused_and_each_has_its_own_row(tmp_path):
    """Issue 32 (7): ``--model clip --arch CONFIG.json`` draws new random weights in every process; its
    record was reused across draws, and every draw shared one folder and one board label."""
    import shutil
    from pathlib import Path

    from negharness.discovery.manager import make_host
    from negharness.report.leaderboard import build_tables
    from negharness.records.results import iter_records

    import negharness.plugins as plugins_pkg

    arch = tmp_path / "tiny.json"
    shutil.copy(Path(plugins_pkg.__file__).parent / "weights" / "shapes_clip.json", arch)
    host = make_host()
    req = RunRequest(model="clip", tasks=["shapes_t2i_original"], output_dir=str(tmp_path / "res"),
                     cache_dir=str(tmp_path / "c"), limit=20, model_options=ModelOptions(arch=str(arch)))
    with pytest.warns(UserWarning, match="drawn at random"):
        first = evaluate_request(host, req)[0]
    with pytest.warns(UserWarning, match="drawn at random"):
        second = evaluate_request(host, req)[0]
    assert not second.skipped  # a new draw, a new record: nothing of the first stands in for it
    assert first.record["model"]["random_weights"] is True
    assert first.record["model"]["fingerprint"] != second.record["model"]["fingerprint"]
    assert first.path != second.path and first.path.parent != second.path.parent  # a folder per draw
    labels = {first.record["model"]["label"], second.record["model"]["label"]}
    assert len(labels) == 2 and all("random weights" in label for label in labels)
    # both draws on the board as two rows, not one row that the newer overwrote
    req.limit = None
    req.task_extra = {"n_items": "24"}
    with pytest.warns(UserWarning):
        evaluate_request(host, req)
        evaluate_request(host, req)
    rows = [r.label for t in build_tables(iter_records(tmp_path / "res"), published=False) for r in t.rows]
    assert len(rows) == 2 and len(set(rows)) == 2


# the model contract where embeddings enter the host (round 4, item 1) ---------------------------------------------
class _Faulty(KeywordModel):
    """KeywordModel with one fault in what it returns (``fault``), as a broken plugin or checkpoint would."""

    def __init__(self, fault: str) -> None:
        super().__init__()
        self.fault = fault

    def describe(self):
        return {**super().describe(), "fault": self.fault}

    def encode_text(self, texts):
        out = super().encode_text(texts)
        if self.fault == "text_nan":  # a diverged checkpoint: NaN text projection
            out[:] = float("nan")
        elif self.fault == "text_inf":
            out[0, 5] = float("inf")
        elif self.fault == "text_row_short":
            out = out[:-1]
        return out

    def encode_image(self, pixels):
        out = super().encode_image(pixels)
        if self.fault == "image_nan":
            out[-1] = float("nan")
        elif self.fault == "image_dim":
            out = torch.nn.functional.normalize(out[:, :6], dim=-1)
        elif self.fault == "image_3d":
            out = out[:, None]
        elif self.fault == "unnormalised":  # raw features, as get_image_features returns: norms differ per row
            out = out * torch.arange(1, len(out) + 1, dtype=out.dtype)[:, None] * 3
        return out


def _colours_host(fault: str):
    """The installed plugins, the faulty model (plugin ``faulty_plugin``) and the colour task."""
    host = host_with_models({"faulty": lambda options: _Faulty(fault)}, "faulty_plugin")

    @hs.hookimpl
    def negharness_register_tasks(registry):
        registry.add("colours", _Colours, "colours", family="testing")

    host.register(types.SimpleNamespace(negharness_register_tasks=negharness_register_tasks), "colour_task")
    return host


def _cached_rows(cache: str) -> list[torch.Tensor]:
    return [read_shard(p)[1] for p in Path(cache).rglob("shard-*.safetensors")]


@pytest.mark.parametrize("fault, needle", [
    ("text_nan", "non-finite embeddings (NaN or infinity) for 6 text(s), e.g. 'a "),
    ("text_inf", "non-finite embeddings (NaN or infinity) for 1 text(s)"),
    ("text_row_short", "encoding 6 text(s) returned shape (5, 8), not (6, D)"),
    ("image_nan", "non-finite embeddings (NaN or infinity) for 1 image(s), e.g. 'magenta'"),
    ("image_dim", "image embeddings have dimension 6, but its other embeddings have 8"),
    ("image_3d", "returned shape (6, 1, 8)"),
])
def test_a_broken_embedding_is_refused_naming_model_plugin_and_checkpoint(tmp_path, fault, needle):
    """A NaN text projection scored 100 (ties as hits), +inf one coordinate gave R@1 66.7, a row too few
    or another dimension ended in torch's or the cache's words: now each is refused where the batch
    enters the host, naming the model, no record is written, and the cache holds only good rows."""
    cache = str(tmp_path / "c")
    req = RunRequest(model="faulty", tasks=["colours"], output_dir=str(tmp_path / "res"), cache_dir=cache,
                     model_options=ModelOptions(checkpoint=str(tmp_path / "w.pt")))
    (tmp_path / "w.pt").write_bytes(b"weights")
    with pytest.raises(UserError) as err:
        evaluate_request(_colours_host(fault), req)
    message = str(err.value)
    assert needle in message, message
    assert message.startswith(f"model 'faulty' (plugin 'faulty_plugin', checkpoint {tmp_path / 'w.pt'})"), message
    assert not list((tmp_path / "res").rglob("*.json"))
    for rows in _cached_rows(cache):
        assert rows.shape[1] == 8 and torch.isfinite(rows).all()
        assert torch.allclose(rows.norm(dim=1), torch.ones(len(rows)), atol=1e-3)


def test_embeddings_that_are_not_unit_norm_are_normalised_once_with_a_warning(tmp_path):
    """Raw features (norms 3, 6, ... 18) were scored on dot products: R@1 33.3 instead of 100, no word."""
    from negharness.engine import embedding_contract

    embedding_contract._NORMALISED.clear()
    req = RunRequest(model="faulty", tasks=["colours"], output_dir=str(tmp_path / "res"),
                     cache_dir=str(tmp_path / "c"))
    with pytest.warns(UserWarning, match=r"model 'faulty' \(plugin 'faulty_plugin'.*not L2-normalised") as seen:
        rec = evaluate_request(_colours_host("unnormalised"), req)[0].record
    assert rec["metrics"]["R@1"] == 100.0
    assert sum("L2-normalised" in str(w.message) for w in seen) == 1
    for rows in _cached_rows(str(tmp_path / "c")):  # the cache holds what was scored: unit rows
        assert torch.allclose(rows.norm(dim=1), torch.ones(len(rows)), atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_half_precision_rounding_of_unit_rows_is_within_the_tolerance(dtype):
    """bf16 holds 8 mantissa bits: a unit row rounded to it is ~1e-3 off; that is no violation."""
    rows = torch.nn.functional.normalize(torch.randn(512, 768, generator=torch.Generator().manual_seed(0)), dim=1)
    contract = EmbeddingContract(ModelOrigin("m"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = contract.checked(rows.to(dtype), [str(i) for i in range(512)], "text")
    assert out.dtype == torch.float32 and torch.equal(out, rows.to(dtype).float())


def test_a_warm_run_does_not_check_cached_rows_again(tmp_path, monkeypatch):
    """The contract runs on what the model computes (before caching); a warm run reads rows that passed it."""
    calls = []
    original = EmbeddingContract.checked
    monkeypatch.setattr(EmbeddingContract, "checked", lambda self, *a: calls.append(a[2]) or original(self, *a))
    req = RunRequest(model="kw", tasks=["colours"], output_dir=str(tmp_path / "res"), cache_dir=str(tmp_path / "c"))
    evaluate_request(_host(), req)
    assert sorted(set(calls)) == ["image", "text"]
    calls.clear()
    req.overwrite = True
    assert evaluate_request(_host(), req)[0].record["counts"]["media_cached"] == 6
    assert calls == []
