"""Sharded evaluation (`negharness run` under torchrun): ranks encode their shares into the shared
cache, rank 0 scores; numbers equal a single process's, every item encoded once in all."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from negharness.engine.runner import CachedEvalContext, RunSettings
from negharness.engine.sharding import ShardEvalContext, media_subset, torchrun_env
from negharness.io.media import MediaSet
from negharness.store.cache import EmbeddingCache
from negharness.testing import COLOURS, KeywordModel, solid_image

COLOUR_NAMES = list(COLOURS)


def _colours() -> MediaSet:
    images = [solid_image(c) for c in COLOUR_NAMES]
    return MediaSet("testing/colours", "image", list(COLOUR_NAMES), lambda i: images[i], cheap=True,
                    load_batch=lambda ps: [images[p] for p in ps])


def test_torchrun_env() -> None:
    assert torchrun_env({}) is None
    assert torchrun_env({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1"}) == (4, 3, 1)
    with pytest.raises(Exception, match="outside WORLD_SIZE"):
        torchrun_env({"WORLD_SIZE": "2", "RANK": "2"})
    with pytest.raises(Exception, match="must be integers"):
        torchrun_env({"WORLD_SIZE": "two"})
    assert torchrun_env({"WORLD_SIZE": "2", "RANK": "1"}) == (2, 1, 0)  # srun, one process per node: cuda:0


def test_training_and_evaluation_read_torchrun_alike() -> None:
    from negharness.engine.distributed import Dist, from_env

    assert from_env({}) == Dist() and from_env({"RANK": "3"}) == Dist()  # a stray RANK is no distributed run
    assert from_env({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1"}) == Dist(3, 4, 1)


def test_media_subset_keeps_key_and_items() -> None:
    media = _colours()
    sub = media_subset(media, [1, 4])
    assert (sub.key, sub.kind, sub.ids) == (media.key, media.kind, ["green", "cyan"])
    assert (sub.load(1) == solid_image("cyan")).all()
    assert [(x == solid_image(c)).all() for x, c in zip(sub.load_batch([1, 0]), ["cyan", "green"])] == [True, True]
    keyed = dataclasses.replace(media, content_keys=[f"k{i}" for i in range(len(media))])
    assert media_subset(keyed, [1, 4]).content_keys == ["k1", "k4"]  # a rank's items keep the full set's keys


def test_two_simulated_ranks_fill_the_cache_once(tmp_path: Path) -> None:
    """Each rank encodes its share, gets finite placeholders for the rest; then one ordinary context
    finds everything cached and returns exactly what an uncached run computes."""
    media, texts = _colours(), [f"a {c} picture" for c in COLOUR_NAMES] + ["a red picture"]
    settings = RunSettings(batch_size=4)
    encoded = []
    for rank in (0, 1):
        model = KeywordModel()
        ctx = ShardEvalContext(model, settings, EmbeddingCache(tmp_path), rank=rank, world=2)
        m, t = ctx.embed_media(media), ctx.embed_texts(texts)
        assert m.shape == (6, 8) and t.shape == (7, 8)
        assert torch.isfinite(m).all() and torch.isfinite(t).all()  # never NaN: NaN means broken media
        assert torch.allclose(m.norm(dim=1), torch.ones(6))
        encoded.append(dict(model.encoded))
    assert encoded == [{"image": 3, "text": 3}, {"image": 3, "text": 3}]  # 6 distinct texts, 3 each

    model = KeywordModel()
    warm = CachedEvalContext(model, settings, EmbeddingCache(tmp_path))
    sims = warm.embed_texts(texts) @ warm.embed_media(media).t()
    assert model.encoded == {"image": 0, "text": 0}
    cold = CachedEvalContext(KeywordModel(), settings, None)
    assert torch.allclose(sims, cold.embed_texts(texts) @ cold.embed_media(media).t(), atol=1e-6)


def test_rank_with_nothing_to_encode_gets_empty_rows() -> None:
    ctx = ShardEvalContext(KeywordModel(), RunSettings(), None, rank=3, world=4)
    assert ctx.embed_texts(["a red picture", "a blue picture"]).shape == (2, 0)
    ctx.embed_media(_colours())  # learns the width from its share
    assert ctx.embed_texts(["a red picture"]).shape == (1, 8)


def _fake_gather(monkeypatch: pytest.MonkeyPatch, others: list) -> None:
    """torch.distributed.all_gather_object as if the other ranks sent ``others`` (rank 0 sends its own)."""
    import torch.distributed as dist

    def gather(out: list, obj: object, group: object = None) -> None:
        out[:] = [obj, *others]

    monkeypatch.setattr(dist, "all_gather_object", gather)


def test_ranks_out_of_step_fail_naming_what_each_saw(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from negharness.api import UserError
    from negharness.engine.sharding import ShardSession

    _fake_gather(monkeypatch, [("end of run", None)])
    with pytest.raises(UserError, match=r"rank 0: task shapes_mcq, rank 1: end of run.*share"):
        ShardSession(2, 0, 0, tmp_path)._gather("task shapes_mcq")


def test_cache_dir_not_shared_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from negharness.api import UserError
    from negharness.engine.sharding import ShardSession

    answers = iter([[("cache probe", None)], [("cache probe written", None)],
                    [("cache probe read", (False, "node7"))], [("cache probe checked", None)]])
    import torch.distributed as dist

    monkeypatch.setattr(dist, "all_gather_object", lambda out, obj, group=None: out.__setitem__(slice(None), [obj, *next(answers)]))
    with pytest.raises(UserError, match=r"--cache-dir .*rank 1 on node7 cannot see"):
        ShardSession(2, 0, 0, tmp_path / "cache")._check_shared_cache()
    assert not list((tmp_path / "cache").glob(".negharness-shard-probe-*"))  # rank 0 cleans up


# concurrent writers and readers of one cache folder -----------------------------------------------
def _vector(i: int) -> torch.Tensor:
    return torch.arange(16, dtype=torch.float32) + 1000.0 * i


def _writer(root: str, start: int, n: int) -> None:
    store = EmbeddingCache(root).collection("ns", "image:shared")
    for lo in range(start, start + n, 5):
        keys = [f"k{i}" for i in range(lo, min(lo + 5, start + n))]
        store.add(keys, torch.stack([_vector(int(k[1:])) for k in keys]))
        store.flush()


def test_readers_never_see_a_torn_shard_while_two_processes_write(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")  # two other processes, as two ranks are
    writers = [ctx.Process(target=_writer, args=(str(tmp_path), s, 150)) for s in (0, 150)]
    for w in writers:
        w.start()
    keys = [f"k{i}" for i in range(300)]
    reads = 0
    while any(w.is_alive() for w in writers) or reads == 0:
        pos, vecs = EmbeddingCache(tmp_path).collection("ns", "image:shared").lookup(keys)
        for p, v in zip(pos, vecs):
            assert torch.equal(v, _vector(p)), f"item {p} read wrong while being written"
        reads += 1
    for w in writers:
        w.join()
        assert w.exitcode == 0
    pos, _ = EmbeddingCache(tmp_path).collection("ns", "image:shared").lookup(keys)
    assert pos == list(range(300))


# torchrun with two gloo ranks on the CPU ---------------------------------------------------------
TASKS = ["--task", "shapes_t2v_composed", "--task", "shapes_mcq"]


def _run(args: list[str], cwd: Path, ranks: int) -> subprocess.CompletedProcess:
    """`negharness ARGS` under torchrun with ``ranks`` CPU processes on a free port."""
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env.update(OMP_NUM_THREADS="1", COLUMNS="200")
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
              "-m", "negharness.cli"]
    return subprocess.run(launch + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _records(folder: Path) -> dict[str, dict]:
    """Records by task name (a --limit run's file name also says its variant)."""
    recs = [json.loads(p.read_text()) for p in sorted(folder.rglob("*.json")) if not p.name.endswith(".perquery.json")]
    return {r["task"]["name"]: r for r in recs if "task" in r and "metrics" in r}


@pytest.mark.heavy  # tens of seconds: scheduled first (tests/conftest.py)
def test_two_gloo_ranks_equal_one_process(tmp_path: Path) -> None:
    common = ["run", "--model", "shapes_clip", *TASKS, "--device", "cpu", "--limit", "41", "--batch-size", "16"]
    from negharness.cli.main import main

    assert main([*common, "--cache-dir", str(tmp_path / "c1"), "--output-dir", str(tmp_path / "r1")]) == 0
    two = _run([*common, "--cache-dir", str(tmp_path / "c2"), "--output-dir", str(tmp_path / "r2")], tmp_path, 2)
    assert two.returncode == 0, two.stderr[-3000:]
    assert two.stdout.count("negharness run") == 1  # one summary: rank 0's

    single, sharded = _records(tmp_path / "r1"), _records(tmp_path / "r2")
    assert set(single) == set(sharded) == {"shapes_t2v_composed", "shapes_mcq"}
    for name, rec in single.items():
        other = sharded[name]
        assert other["metrics"].keys() == rec["metrics"].keys()
        for key, value in rec["metrics"].items():
            assert other["metrics"][key] == pytest.approx(value, abs=1e-6), (name, key)
        assert other["n_items"] == rec["n_items"]
        shares = other["counts"].pop("sharded")
        assert shares["ranks"] == 2
        assert other["counts"] == rec["counts"]  # what a single process would count
        for key in ("media_encoded", "texts_encoded"):  # each item encoded by exactly one rank
            assert sum(shares[key]) == rec["counts"][key]
            assert rec["counts"][key] == 0 or min(shares[key]) > 0
    assert single["shapes_t2v_composed"]["counts"]["media_encoded"] == 41
    assert single["shapes_mcq"]["counts"]["media_encoded"] == 41


@pytest.mark.heavy  # tens of seconds: scheduled first (tests/conftest.py)
def test_no_cache_under_torchrun_is_one_clear_error(tmp_path: Path) -> None:
    out = _run(["run", "--model", "shapes_clip", "--task", "shapes_mcq", "--device", "cpu", "--no-cache",
                "--output-dir", str(tmp_path / "r")], tmp_path, 2)
    assert out.returncode != 0
    assert "error: --no-cache: under torchrun" in out.stderr
    import negharness

    # no traceback through negharness's code (torchrun prints its own, from its own files), whatever
    # the checkout's folder is called
    assert str(Path(negharness.__file__).parent) not in out.stderr
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").rglob("*.json"))


def _judged_layout(root: Path) -> Path:
    """SimpleNeg's layout (`tests/test_judged.py`): three queries, six solid-colour pool images."""
    import numpy as np
    from PIL import Image

    from test_judged import ROWS

    (root / "simpleneg").mkdir(parents=True)
    (root / "simpleneg" / "simpleneg.json").write_text(json.dumps(ROWS))
    (root / "coco" / "val2014").mkdir(parents=True)
    for i, rgb in enumerate(COLOURS.values()):
        Image.fromarray(np.full((8, 8, 3), rgb, dtype=np.uint8)).save(
            root / "coco" / "val2014" / f"COCO_val2014_{i:012d}.png")
    return root


def _colour_endpoint() -> tuple[Any, list[str]]:
    """An OpenAI-compatible loopback judge answering by the image's colour: verification questions
    ("v...") "yes" for warm colours, negation questions "no" for yellow alone. Returns (server, asked)."""
    import base64
    import io
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from PIL import Image

    asked: list[str] = []

    class Colours(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            image, text = body["messages"][0]["content"]
            data = base64.b64decode(image["image_url"]["url"].split(",", 1)[1])
            rgb = tuple(Image.open(io.BytesIO(data)).convert("RGB").getpixel((0, 0)))
            colour = next(n for n, v in COLOURS.items() if tuple(v) == rgb)
            asked.append(f"{colour}:{text['text'][:2]}")
            warm = colour in ("red", "yellow", "green")
            said = ("yes" if warm else "no") if text["text"].startswith("v") else ("no" if colour == "yellow" else "yes")
            reply = json.dumps({"choices": [{"message": {"role": "assistant", "content": said}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Colours)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, asked


@pytest.mark.heavy  # tens of seconds: scheduled first (tests/conftest.py)
def test_a_judged_task_under_torchrun_is_judged_once_by_rank_0(tmp_path: Path) -> None:
    """simpleneg on two gloo ranks: the ranks share the encoding, rank 0 alone asks the judge (as many
    requests as one process makes, none from rank 1, no "stopped early" warning), and the numbers equal
    one process's."""
    data = _judged_layout(tmp_path / "data")
    server, asked = _colour_endpoint()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        common = ["run", "--model", "shapes_clip", "--task", "simpleneg", "-T", "pool_size=6", "-T", "top_k=2",
                  "--data-root", str(data), "--device", "cpu", "--judge", "openai_judge", "-J", f"url={url}",
                  "-J", "model=fake-vlm"]
        from negharness.cli.main import main

        assert main([*common, "--cache-dir", str(tmp_path / "c1"), "--output-dir", str(tmp_path / "r1")]) == 0
        alone = list(asked)
        asked.clear()
        two = _run([*common, "--cache-dir", str(tmp_path / "c2"), "--output-dir", str(tmp_path / "r2")], tmp_path, 2)
    finally:
        server.shutdown()
        server.server_close()
    assert two.returncode == 0, two.stderr[-3000:]
    assert "stopped early" not in two.stderr
    assert sorted(asked) == sorted(alone) and len(alone) >= 6  # each retrieved image's questions, asked once
    single, sharded = _records(tmp_path / "r1")["simpleneg"], _records(tmp_path / "r2")["simpleneg"]
    assert sharded["metrics"] == pytest.approx(single["metrics"])
    assert sharded["counts"]["judge_asked"] == single["counts"]["judge_asked"] == len(alone)
    assert sum(sharded["counts"]["sharded"]["media_encoded"]) == single["counts"]["media_encoded"] == 6
