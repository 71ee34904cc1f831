"""Hub weights known before torch (issue 53 item 2): a model whose open_clip tag or transformers id is
neither in the Hugging Face cache nor downloadable (HF_HUB_OFFLINE) is refused before torch loads,
naming the file, where it comes from and the `negharness fetch` that brings it; that fetch lands the
files in the cache's own layout, where the hub's client (so open_clip and transformers) finds them
offline. Never the internet: a loopback server stands for the hub (``HF_ENDPOINT``)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

from negharness.contracts.model_options import ModelOptions
from negharness.engine.precheck import weights_problems
from negharness.fetch import hub_models

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache of the test's own, with downloads off (as the test suite runs)."""
    cache = tmp_path / "hf"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def _place(cache: Path, repo: str, files: dict[str, bytes], commit: str = COMMIT) -> Path:
    """Files put where the hub's client keeps them: ``refs/main`` and ``snapshots/<commit>/``."""
    folder = cache / ("models--" + repo.replace("/", "--"))
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(commit)
    for name, data in files.items():
        (folder / "snapshots" / commit / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "snapshots" / commit / name).write_bytes(data)
    return folder


def _problems(model_name: str, **options: str) -> list:
    """`weights_problems` for a request of ``model_name``, with the registry's answer for the built-ins."""
    from negharness.discovery.registry import Entry

    registry = SimpleNamespace(names=lambda kind: ["clip", "hf_clip"] if kind == "model" else [],
                               get=lambda kind, name: Entry(kind, name, "no_module:factory", "", "test"))
    extra = {k: v for k, v in options.items() if k not in ("arch", "pretrained")}
    req = SimpleNamespace(model=model_name, model_options=ModelOptions(options.get("arch"), options.get("pretrained"),
                                                                   None, extra))
    return weights_problems(SimpleNamespace(registry=registry), req, Path("/nonexistent-model-cache"))


HF_FILES = {"config.json": b'{"c": 1}', "model.safetensors": b"w", "tokenizer.json": b'{"t": 1}',
            "preprocessor_config.json": b'{"p": 1}'}


def test_uncached_hub_weights_offline_are_named_with_their_source_and_fetch(hf_cache):
    (clip,) = _problems("clip")
    assert not clip.data
    for needle in ("model clip: its weights ViT-B-32/openai", str(hf_cache), "timm/vit_base_patch32_clip_224.openai",
                   "open_clip_model.safetensors", "605.1 MB",
                   "https://huggingface.co/timm/vit_base_patch32_clip_224.openai/resolve/", "HF_HUB_OFFLINE",
                   "`negharness fetch clip --arch ViT-B-32 --pretrained openai`", "--checkpoint PATH"):
        assert needle in clip.summary, needle
    (hf,) = _problems("hf_clip", arch="org/name")
    for needle in ("model hf_clip: its weights org/name", "config.json", "model.safetensors",
                   "`negharness fetch hf_clip --arch org/name`"):
        assert needle in hf.summary, needle
    assert "openai/clip-vit-base-patch32" in _problems("hf_clip")[0].summary  # hf_clip's default id


def test_a_cached_file_or_a_network_lets_the_run_go_on(hf_cache, monkeypatch, tmp_path):
    _place(hf_cache, "timm/vit_base_patch32_clip_224.openai", {"open_clip_pytorch_model.bin": b"w"})
    _place(hf_cache, "org/name", HF_FILES)
    assert _problems("clip") == [] and _problems("clip", arch="ViT-B-32", pretrained="openai") == []
    assert _problems("hf_clip", arch="org/name") == [] and _problems("hf_clip", model="org/name") == []
    assert _problems("hf_clip", arch=str(tmp_path)) == []  # a folder: read from there
    assert len(_problems("clip", arch="ViT-B-16", pretrained="openai")) == 1  # another tag: not cached
    assert _problems("clip", arch="ViT-B-32", pretrained="some_tag_not_pinned") == []  # only open_clip knows it
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    assert _problems("clip", arch="ViT-B-16", pretrained="openai") == []  # online: the loader downloads it
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")  # huggingface_hub reads it as HF_HUB_OFFLINE
    assert len(_problems("clip", arch="ViT-B-16", pretrained="openai")) == 1


def test_a_cache_without_the_ref_a_loader_reads_is_not_taken_for_cached(hf_cache):
    folder = _place(hf_cache, "timm/vit_base_patch32_clip_224.openai", {"open_clip_model.safetensors": b"w"})
    (folder / "refs" / "main").unlink()  # offline, the hub's client finds a snapshot only through refs/main
    assert len(_problems("clip")) == 1


def test_the_refusal_comes_before_torch(tmp_path):
    """The whole command, in a fresh interpreter: exit 2, one error naming the weights and the fetch, and
    no torch in ``-X importtime``'s listing (the run used to retry the hub, import torch, then fail)."""
    from test_cli_imports import TORCH_LINE, said

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hf"), "COLUMNS": "200"}
    for args, needle in ((["--model", "clip"], "negharness fetch clip --arch ViT-B-32 --pretrained openai"),
                         (["--model", "hf_clip", "--arch", "org/name"], "negharness fetch hf_clip --arch org/name"),
                         # a wrapper's weights are its base's: checked as the base's, before torch, as for the base
                         (["--model", "boolean", "-M", "base=clip"], "model clip: its weights ViT-B-32/openai"),
                         (["--model", "steer", "-M", "base=clip", "-M", "alpha=0.2", "--arch", "ViT-B-16",
                           "--pretrained", "openai"], "negharness fetch clip --arch ViT-B-16 --pretrained openai")):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "negharness.cli", "run", *args, "--task",
                               "shapes_t2i_original", "--limit", "2"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)
        lines = said(done.stderr)
        assert done.returncode == 2 and lines[0].startswith("error: model "), done.stderr[-2000:]
        assert needle in lines[0]
        assert not TORCH_LINE.search(done.stderr), "torch was imported before the missing weights were told"


def test_pinned_tags_are_open_clips_own(hf_cache):
    """Each row of the torch-free table says what open_clip's live table says: the hub repository, with
    open_clip's default file names (no file of its own), so the cache check and the fetch look where
    open_clip reads."""
    from open_clip.pretrained import get_pretrained_cfg

    for (arch, tag), row in hub_models.TAGS.items():
        cfg = get_pretrained_cfg(arch, tag)
        assert cfg and cfg.get("hf_hub") == row.repo + "/", (arch, tag, cfg)
        assert row.file is None or (row.file.path in hub_models.OPEN_CLIP_FILES and hub_models.is_commit_pin(row))


def test_fetch_list_says_what_it_would_download_and_downloads_nothing(cli, hf_cache):
    r = cli("fetch", "clip", "--list")
    assert r.returncode == 0, r.stderr
    assert ("timm/vit_base_patch32_clip_224.openai@a6f597a30f7b/open_clip_model.safetensors  hub file  605.1 MB  "
            "sha256  missing  https://huggingface.co/timm/vit_base_patch32_clip_224.openai/resolve/"
            "a6f597a30f7b82c51704746581f9a4e41421e878/open_clip_model.safetensors") in r.stdout
    assert f"Hugging Face cache {hf_cache}/models--timm--vit_base_patch32_clip_224.openai" in r.stdout
    r = cli("fetch", "hf_clip", "--arch", "org/name", "--list")
    assert r.returncode == 0 and "org/name@main  hub files  config.json + model.safetensors" in r.stdout
    assert not hf_cache.exists()
    r = cli("fetch", "clip")  # offline: nothing started, the file, its URL and the folder named
    assert r.returncode == 2 and "cannot download ViT-B-32/openai" in r.stderr and "resolve/a6f597a" in r.stderr
    assert not hf_cache.exists()
    r = cli("fetch", "negbench", "--pretrained", "openai")
    assert r.returncode == 2 and "--arch/--pretrained" in r.stderr


# the loopback hub ----------------------------------------------------------------------------------
@pytest.fixture
def hub_server(monkeypatch):
    from test_fetch import Handler

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.files, srv.modes, srv.seen, srv.dropped, srv.headers_for, srv.delay = {}, {}, [], {}, {}, 0.0
    srv.auth, srv.redirects = [], {}
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{srv.server_address[1]}")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    yield srv
    srv.shutdown()
    srv.server_close()


def _git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _serve_repo(srv, repo: str, files: dict[str, bytes], lfs: tuple[str, ...]) -> None:
    """``/api/models/REPO/revision/main`` lists the files as the hub does; each is served at the commit."""
    siblings = []
    for name, data in files.items():
        srv.files[f"/{repo}/resolve/{COMMIT}/{name}"] = data
        srv.headers_for[f"/{repo}/resolve/{COMMIT}/{name}"] = {"X-Repo-Commit": COMMIT}
        entry = {"rfilename": name, "size": len(data), "blobId": _git_blob(data)}
        if name in lfs:
            entry["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        siblings.append(entry)
    srv.files[f"/api/models/{repo}/revision/main"] = json.dumps({"sha": COMMIT, "siblings": siblings}).encode()


def test_fetch_of_a_hub_id_lands_where_the_hub_client_finds_it_offline(cli, hub_server, tmp_path, monkeypatch):
    cache = tmp_path / "hf"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    weights = os.urandom(50_000)
    files = {**HF_FILES, "model.safetensors": weights, "merges.txt": b"#v", "pytorch_model.bin": b"old",
             "onnx/model.onnx": b"no"}
    _serve_repo(hub_server, "org/name", files, lfs=("model.safetensors", "pytorch_model.bin"))
    r = cli("fetch", "hf_clip", "--arch", "org/name")
    assert r.returncode == 0, r.stderr
    fetched = {p for p, _ in hub_server.seen if "/resolve/" in p}
    assert fetched == {f"/org/name/resolve/{COMMIT}/{n}" for n in (*HF_FILES, "merges.txt")}  # no .bin, no onnx/
    folder = cache / "models--org--name"
    assert (folder / "refs" / "main").read_text() == COMMIT
    assert (folder / "blobs" / hashlib.sha256(weights).hexdigest()).read_bytes() == weights
    from huggingface_hub import hf_hub_download  # the loaders' own route, offline (conftest sets HF_HUB_OFFLINE)

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    found = hf_hub_download("org/name", "model.safetensors", cache_dir=str(cache))
    assert Path(found).read_bytes() == weights and f"snapshots/{COMMIT}/" in found
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert _problems("hf_clip", arch="org/name") == []  # the refusal is gone
    recorded = json.loads((folder / "negharness-manifest.json").read_text())["sources"]["org/name"]
    assert recorded["revision"] == COMMIT and recorded["files"]["model.safetensors"] == hashlib.sha256(weights).hexdigest()
    r = cli("fetch", "hf_clip", "--arch", "org/name")  # in place: the hub is not asked again, even offline
    assert r.returncode == 0 and "present" in r.stdout


def test_a_pinned_tag_is_held_to_its_hash(cli, hub_server, tmp_path, monkeypatch):
    cache = tmp_path / "hf"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    good, served = b"pinned weights", b"other weights!"
    hub_server.files[f"/org/clip/resolve/{COMMIT}/open_clip_model.safetensors"] = served
    row = hub_models.Tag("org/clip", COMMIT, hub_models.HubFile("open_clip_model.safetensors", len(good),
                                                                  hashlib.sha256(good).hexdigest()))
    monkeypatch.setitem(hub_models.TAGS, ("ViT-B-32", "loopback"), row)
    r = cli("fetch", "clip", "--pretrained", "loopback")
    assert r.returncode == 2 and "not the expected" in r.stderr and "refused" in r.stderr
    assert not (cache / "models--org--clip" / "refs").exists()  # nothing a loader would read
    hub_server.files[f"/org/clip/resolve/{COMMIT}/open_clip_model.safetensors"] = good
    r = cli("fetch", "clip", "--pretrained", "loopback")
    assert r.returncode == 0, r.stderr
    assert [p for p, _ in hub_server.seen if "/api/" in p] == []  # pinned: no listing asked of the hub
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert _problems("clip", pretrained="loopback") == []
    snap = cache / "models--org--clip" / "snapshots" / COMMIT / "open_clip_model.safetensors"
    assert snap.read_bytes() == good
