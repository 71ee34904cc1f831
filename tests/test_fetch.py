"""`negharness fetch` against a loopback HTTP server (never the internet): resume after a dropped
connection or a kill -9, wrong bytes refused and kept aside, progress outside a terminal, archives
unpacked only as far as tasks need, hashes pinned at first download, offline, manual sources, hub
files through HF_ENDPOINT, released weights."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from negharness.api import UserError
from negharness.cli.process import LogProgress
from negharness.fetch import manifest, weights
from negharness.fetch.download import Meter
from negharness.fetch.select import fetch_hint, select
from negharness.fetch.session import fetch_sources
from negharness.fetch.sources import SOURCES, Source, Unpack


class Handler(BaseHTTPRequestHandler):
    """Serves ``server.files`` with Range support; ``server.modes[path]``: "drop" (the first answer
    stops half-way), "wrong" (other bytes), "slow" (small chunks with pauses), "401" (refused, as a
    gated hub file without a token). ``server.auth`` keeps each request's Authorization header;
    ``server.redirects[path] = (location, headers)`` answers 302 (the hub sending a large file to its CDN)."""

    def log_message(self, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        srv = self.server
        path = self.path.split("?")[0]
        rng = self.headers.get("Range")
        srv.seen.append((path, rng))  # type: ignore[attr-defined]
        srv.auth.append(self.headers.get("Authorization"))  # type: ignore[attr-defined]
        if path in srv.redirects:  # type: ignore[attr-defined]
            location, extra = srv.redirects[path]  # type: ignore[attr-defined]
            self.send_response(302)
            self.send_header("Location", location)
            for key, value in extra.items():
                self.send_header(key, value)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = srv.files.get(path)  # type: ignore[attr-defined]
        if body is None:
            self.send_error(404)
            return
        mode = srv.modes.get(path, "")  # type: ignore[attr-defined]
        if mode == "401":
            self.send_error(401)
            return
        if mode == "wrong":
            body = bytes(reversed(body))
        start = int(rng.split("=")[1].split("-")[0]) if rng else 0
        self.send_response(206 if rng else 200)
        self.send_header("Content-Length", str(len(body) - start))
        for key, value in srv.headers_for.get(path, {}).items():  # type: ignore[attr-defined]
            self.send_header(key, value)
        self.end_headers()
        data = body[start:]
        if mode == "drop" and not srv.dropped.get(path):  # type: ignore[attr-defined]
            srv.dropped[path] = True  # type: ignore[attr-defined]
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        step = 4096 if mode == "slow" else len(data) or 1
        for i in range(0, len(data), step):
            self.wfile.write(data[i:i + step])
            if mode == "slow":
                self.wfile.flush()
                time.sleep(srv.delay)  # type: ignore[attr-defined]


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.files, srv.modes, srv.seen, srv.dropped, srv.headers_for, srv.delay = {}, {}, [], {}, {}, 0.02
    srv.auth, srv.redirects = [], {}
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(autouse=True)
def online(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _serve(server, path: str, data: bytes, mode: str = "") -> str:
    server.files[path] = data
    if mode:
        server.modes[path] = mode
    return server.url + path


PAYLOAD = os.urandom(300_000)


def test_a_pinned_file_is_fetched_verified_and_recorded(server, tmp_path):
    src = Source("bench/a.json", _serve(server, "/a.json", PAYLOAD), _sha(PAYLOAD), len(PAYLOAD), ("bench_a",))
    (out,) = fetch_sources([src], tmp_path)
    assert out.state == "fetched"
    assert (tmp_path / "bench/a.json").read_bytes() == PAYLOAD
    assert not list(tmp_path.rglob("*.part"))
    entry = manifest.read_manifest(tmp_path)["bench/a.json"]
    assert entry["sha256"] == _sha(PAYLOAD) and entry["pinned"] == "sha256"
    assert fetch_sources([src], tmp_path)[0].state == "present"  # a second fetch downloads nothing
    assert len(server.seen) == 1


def test_a_dropped_connection_is_resumed_with_a_range_request(server, tmp_path):
    src = Source("bench/a.bin", _serve(server, "/a.bin", PAYLOAD, "drop"), _sha(PAYLOAD), len(PAYLOAD))
    fetch_sources([src], tmp_path)
    assert (tmp_path / "bench/a.bin").read_bytes() == PAYLOAD
    assert server.seen[0] == ("/a.bin", None)
    assert server.seen[1] == ("/a.bin", f"bytes={len(PAYLOAD) // 2}-")


def test_wrong_bytes_are_refused_and_kept_aside(server, tmp_path):
    src = Source("bench/a.bin", _serve(server, "/a.bin", PAYLOAD, "wrong"), _sha(PAYLOAD), len(PAYLOAD))
    with pytest.raises(UserError, match="refused and kept aside") as info:
        fetch_sources([src], tmp_path)
    assert _sha(PAYLOAD) in str(info.value)
    assert not (tmp_path / "bench/a.bin").exists()
    assert (tmp_path / "bench/a.bin.rejected").read_bytes() == bytes(reversed(PAYLOAD))
    assert not (tmp_path / "bench/a.bin.part").exists()


def test_a_web_page_instead_of_the_file_is_never_pinned(server, tmp_path):
    """A Drive quota or virus-scan page must not become the "first download" a later check trusts."""
    src = Source("drive/a.json", _serve(server, "/a.json", b"<html>quota exceeded</html>"), None, None)
    server.headers_for["/a.json"] = {"Content-Type": "text/html; charset=utf-8"}
    with pytest.raises(UserError, match="answered a web page"):
        fetch_sources([src], tmp_path)
    assert not (tmp_path / "drive/a.json").exists()
    assert "drive/a.json" not in manifest.read_manifest(tmp_path)


def test_without_a_checksum_the_first_download_pins_it(server, tmp_path):
    src = Source("drive/a.json", _serve(server, "/a.json", PAYLOAD), None, None)
    fetch_sources([src], tmp_path)
    assert manifest.read_manifest(tmp_path)["drive/a.json"]["pinned"] == "first download"
    (tmp_path / "drive/a.json").unlink()
    server.files["/a.json"] = b"re-hosted, changed"  # the host now serves other bytes
    with pytest.raises(UserError, match="refused"):
        fetch_sources([src], tmp_path)
    assert not (tmp_path / "drive/a.json").exists()


def test_a_changed_file_is_refused_when_a_run_reads_it(server, tmp_path):
    src = Source("drive/a.json", _serve(server, "/a.json", PAYLOAD), None, None)
    fetch_sources([src], tmp_path)
    path = tmp_path / "drive/a.json"
    manifest.verify_files(tmp_path, [path])  # unchanged: fine
    path.write_bytes(b"edited")
    with pytest.raises(UserError, match="changed since"):
        manifest.verify_files(tmp_path, [path])
    from negharness.store.content import FileHasher

    with pytest.raises(UserError, match="changed since"):  # a run's memoised 128-bit hashes, compared as a prefix
        manifest.verify_files(tmp_path, [path], FileHasher(None).file)
    path.write_bytes(PAYLOAD)
    manifest.verify_files(tmp_path, [path], FileHasher(None).file)


def test_a_run_refuses_a_file_changed_since_fetch_recorded_it(server, tmp_path):
    """The run's data check, the way `negharness run` reaches it."""
    from negharness.engine.precheck import check_data

    class OneFile:
        name = "t"
        data_help = ""

        def required_files(self):
            return [tmp_path / "drive/a.json"]

    src = Source("drive/a.json", _serve(server, "/a.json", PAYLOAD), None, None)
    fetch_sources([src], tmp_path)
    check_data([OneFile()], tmp_path, "--data-root")
    (tmp_path / "drive/a.json").write_bytes(b"edited")
    with pytest.raises(UserError, match="changed since"):
        check_data([OneFile()], tmp_path, "--data-root")


def test_a_file_in_place_that_differs_from_its_pin_is_moved_aside_and_fetched_anew(server, tmp_path):
    src = Source("bench/a.bin", _serve(server, "/a.bin", PAYLOAD), _sha(PAYLOAD), len(PAYLOAD))
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench/a.bin").write_bytes(b"stale copy")
    assert fetch_sources([src], tmp_path)[0].state == "fetched"
    assert (tmp_path / "bench/a.bin").read_bytes() == PAYLOAD
    assert (tmp_path / "bench/a.bin.rejected").read_bytes() == b"stale copy"


def test_a_slow_download_logs_bytes_rate_and_time_left(server, tmp_path):
    data = os.urandom(120_000)
    src = Source("bench/slow.bin", _serve(server, "/slow.bin", data, "slow"), _sha(data), len(data))
    stream = io.StringIO()
    fetch_sources([src], tmp_path, progress=LogProgress(stream, interval=0.05), log=lambda _: None)
    lines = stream.getvalue().splitlines()
    assert lines, "no progress line in a download of about half a second"
    assert all(" of 120 kB (" in line and "/s" in line and " left" in line for line in lines), lines


def test_several_files_at_once_share_one_bar(server, tmp_path):
    files = {f"/f{i}.bin": os.urandom(50_000 + i) for i in range(5)}
    srcs = [Source(f"bench{p}", _serve(server, p, d), _sha(d), len(d)) for p, d in files.items()]

    class Bar:
        def __init__(self):
            self.tasks, self.done = 0, 0

        def add_task(self, *a, **k):
            self.tasks += 1
            return 0

        def advance(self, task, n):
            self.done += n

        def update(self, *a, **k):
            pass

    bar = Bar()
    fetch_sources(srcs, tmp_path, jobs=3, progress=bar)
    assert bar.tasks == 1 and bar.done == sum(len(d) for d in files.values())
    assert all((tmp_path / f"bench{p}").read_bytes() == d for p, d in files.items())


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_an_archive_is_unpacked_only_as_far_as_tasks_need(server, tmp_path):
    data = _zip({"val2017/000000000139.jpg": b"jpeg", "annotations/big.json": b"{}", "val2017/x/y.jpg": b"j2"})
    src = Source("coco/val2017.zip", _serve(server, "/zips/val2017.zip", data), None, len(data),
                 md5=hashlib.md5(data).hexdigest(), unpack=Unpack("coco", only="val2017/"), done="coco/val2017")
    (out,) = fetch_sources([src], tmp_path)
    assert out.state == "fetched"
    assert (tmp_path / "coco/val2017/000000000139.jpg").read_bytes() == b"jpeg"
    assert (tmp_path / "coco/val2017/x/y.jpg").exists()
    assert not (tmp_path / "coco/annotations").exists()
    assert not list((tmp_path / ".downloads").iterdir())  # the archive goes once unpacked
    assert manifest.read_manifest(tmp_path)["coco/val2017.zip"]["archive_sha256"] == _sha(data)
    assert fetch_sources([src], tmp_path)[0].state == "present"


def test_an_archive_left_whole_by_a_failed_unpack_is_checked_not_downloaded_again(server, tmp_path):
    data = _zip({"val2017/a.jpg": b"jpeg"})
    src = Source("coco/val2017.zip", _serve(server, "/zips/val2017.zip", data), _sha(data), len(data),
                 unpack=Unpack("coco", only="val2017/"), done="coco/val2017")
    (tmp_path / ".downloads").mkdir()
    (tmp_path / ".downloads/val2017.zip").write_bytes(data)
    fetch_sources([src], tmp_path)
    assert (tmp_path / "coco/val2017/a.jpg").read_bytes() == b"jpeg"
    assert server.seen == [("/zips/val2017.zip", f"bytes={len(data)}-")]  # asked for nothing more


@pytest.mark.parametrize("kind, field", [("MD5", "md5"), ("SHA-1", "sha1")])
def test_an_archive_with_a_wrong_published_checksum_is_refused(server, tmp_path, kind, field):
    data = _zip({"val2017/a.jpg": b"jpeg"})
    src = Source("coco/val2017.zip", _serve(server, "/v.zip", data), None, len(data), **{field: "0" * 32},
                 unpack=Unpack("coco", only="val2017/"), done="coco/val2017")
    with pytest.raises(UserError, match=f"has {kind} "):
        fetch_sources([src], tmp_path)
    assert not (tmp_path / "coco/val2017").exists()
    assert (tmp_path / ".downloads/v.zip.rejected").exists()


def test_a_git_blob_id_checks_a_file_whose_bytes_no_mirror_had(server, tmp_path):
    blob = hashlib.sha1(f"blob {len(PAYLOAD)}\0".encode() + PAYLOAD).hexdigest()
    ok = Source("crepe/a.bin", _serve(server, "/a.bin", PAYLOAD), git_blob=blob)
    fetch_sources([ok], tmp_path)
    bad = Source("crepe/b.bin", _serve(server, "/b.bin", PAYLOAD), git_blob="1" * 40)
    with pytest.raises(UserError, match="git blob id"):
        fetch_sources([bad], tmp_path)


def test_a_hub_file_comes_through_hf_endpoint_and_its_revision_is_pinned(server, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    commit = "c0ffee" * 6 + "abcd"
    _serve(server, "/datasets/owner/neg/resolve/main/q.jsonl", PAYLOAD)
    server.headers_for["/datasets/owner/neg/resolve/main/q.jsonl"] = {"X-Repo-Commit": commit}
    _serve(server, f"/datasets/owner/neg/resolve/{commit}/q.jsonl", PAYLOAD)
    src = Source("negvqa/q.jsonl", "hf://datasets/owner/neg@main/q.jsonl")
    fetch_sources([src], tmp_path)
    assert manifest.read_manifest(tmp_path)["negvqa/q.jsonl"]["revision"] == commit
    (tmp_path / "negvqa/q.jsonl").unlink()
    fetch_sources([src], tmp_path)
    assert server.seen[-1][0] == f"/datasets/owner/neg/resolve/{commit}/q.jsonl"  # the pinned commit, not main


def test_a_hub_snapshot_is_pinned_and_flattened(tmp_path, monkeypatch):
    """Mocked at the huggingface_hub boundary (HfApi and snapshot_download): a local hub that speaks
    their API is more than this test needs."""
    import types

    calls = {}

    def snapshot_download(repo_id, repo_type, revision, allow_patterns, local_dir, endpoint):
        calls.update(revision=revision, patterns=allow_patterns, endpoint=endpoint, repo_type=repo_type)
        Path(local_dir, "data").mkdir(parents=True, exist_ok=True)
        Path(local_dir, "data/validation-00000.parquet").write_bytes(calls.get("bytes", b"parquet"))
        return local_dir

    fake = types.SimpleNamespace(snapshot_download=snapshot_download, HfApi=lambda endpoint: types.SimpleNamespace(
        dataset_info=lambda repo, revision: types.SimpleNamespace(sha="abc123")))
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    src = Source("nein", "hf://datasets/o/NeIn@main", patterns=("*validation*.parquet",), flat=True)
    fetch_sources([src], tmp_path)
    assert (tmp_path / "nein/validation-00000.parquet").read_bytes() == b"parquet"
    assert calls == {"revision": "abc123", "patterns": ["*validation*.parquet"], "endpoint": "http://127.0.0.1:9",
                     "repo_type": "dataset"}
    entry = manifest.read_manifest(tmp_path)
    assert entry["nein"]["revision"] == "abc123"
    assert entry["nein/validation-00000.parquet"]["sha256"] == _sha(b"parquet")
    import shutil

    shutil.rmtree(tmp_path / "nein")
    calls["bytes"] = b"re-uploaded"  # the hub now serves other bytes under the same name
    with pytest.raises(UserError, match="not the .* of its first download"):
        fetch_sources([src], tmp_path)
    assert not (tmp_path / "nein/validation-00000.parquet").exists()


def _sources_file(tmp_path: Path, *sources: dict) -> Path:
    path = tmp_path / "sources.json"
    path.write_text(json.dumps(list(sources)))
    return path


def test_offline_names_the_file_its_url_and_size_and_writes_nothing(cli, tmp_path):
    table = _sources_file(tmp_path, {"name": "sugarcrepe/add_obj.json", "url": "http://127.0.0.1:9/add_obj.json",
                                     "size": 484593, "tasks": ["sugarcrepe_add_obj"]})
    root = tmp_path / "root"
    r = cli("fetch", "sugarcrepe_add_obj", "--sources", str(table), "--data-root", str(root),
            env={"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "sugarcrepe/add_obj.json" in lines[0] and "http://127.0.0.1:9/add_obj.json" in lines[0]
    assert "485 kB" in lines[0]
    assert not any(p.is_file() for p in root.rglob("*")) if root.exists() else True


def test_no_network_is_the_same_one_line(tmp_path):
    """Nothing listens on the port: the host is unreachable, said as offline, nothing written."""
    src = Source("a/b.json", "http://127.0.0.1:9/b.json", size=1000)
    with pytest.raises(UserError, match=r"offline .*a/b.json from http://127.0.0.1:9/b.json \(1 kB\)"):
        fetch_sources([src], tmp_path)
    assert not (tmp_path / "a/b.json").exists()


def test_kill_9_mid_download_then_rerun_resumes(server, tmp_path):
    data = os.urandom(400_000)
    server.delay = 0.05
    url = _serve(server, "/big.bin", data, "slow")
    table = _sources_file(tmp_path, {"name": "big/big.bin", "url": url, "sha256": _sha(data), "size": len(data)})
    root = tmp_path / "root"
    args = [sys.executable, "-m", "negharness.cli", "fetch", "big/big.bin", "--sources", str(table),
            "--data-root", str(root)]
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    part = root / "big/big.bin.part"
    deadline = time.monotonic() + 120
    while not (part.exists() and part.stat().st_size > 20_000) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (root / "big/big.bin").exists()  # never a partial file under the final name
    have = part.stat().st_size
    assert 0 < have < len(data)
    server.modes.pop("/big.bin")
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert (root / "big/big.bin").read_bytes() == data
    resumed = [rng for path, rng in server.seen if rng]
    assert resumed and int(resumed[-1].split("=")[1].rstrip("-")) >= have


def test_a_manual_source_prints_the_steps_then_checks_what_was_put_there(cli, tmp_path):
    table = _sources_file(tmp_path, {"name": "flickr30k/flickr30k-images", "tasks": ["aro_flickr_order"],
                                     "done": "flickr30k/flickr30k-images",
                                     "manual": "sign the form, then unpack the images into {target}/"})
    root = tmp_path / "root"
    r = cli("fetch", "flickr30k/flickr30k-images", "--sources", str(table), "--data-root", str(root))
    assert r.returncode == 1, r.stderr
    assert f"unpack the images into {root / 'flickr30k/flickr30k-images'}/" in r.stdout
    (root / "flickr30k/flickr30k-images").mkdir(parents=True)
    (root / "flickr30k/flickr30k-images/1.jpg").write_bytes(b"jpeg")
    r = cli("fetch", "flickr30k/flickr30k-images", "--sources", str(table), "--data-root", str(root))
    assert r.returncode == 0, r.stderr
    assert "placed by hand" in r.stdout


def test_patterns_name_tasks_globs_benchmarks_and_sources():
    names = ["sugarcrepe_add_obj", "sugarcrepe_swap_obj", "valse_existence", "shapes_t2i_original"]
    picked = {s.name for s in select(["sugarcrepe_add_obj"], names, SOURCES)}
    assert picked == {"sugarcrepe/add_obj.json", "coco/val2017.zip"}
    assert {s.name for s in select(["sugarcrepe"], names, SOURCES)} == {
        "sugarcrepe/add_obj.json", "sugarcrepe/swap_obj.json", "coco/val2017.zip"}
    assert [s.name for s in select(["coco/train2014.zip"], names, SOURCES)] == ["coco/train2014.zip"]
    with pytest.raises(UserError, match="reads no file that can be fetched"):
        select(["shapes_*"], names, SOURCES)
    with pytest.raises(UserError, match="did you mean sugarcrepe"):
        select(["sugarcrepo"], names, SOURCES)


def test_the_table_pins_github_files_to_a_commit_with_a_sha256():
    for s in SOURCES:
        if "raw.githubusercontent.com" in s.url:
            commit = s.url.split("/")[5]
            assert len(commit) == 40, s.name
            assert s.sha256 or s.git_blob, s.name
        assert s.url or s.manual, s.name
    assert len({s.name for s in SOURCES}) == len(SOURCES)


@pytest.mark.needs("data/sugarcrepe")
def test_pinned_hashes_match_the_shared_copies():
    from conftest import SHARED

    for s in SOURCES:
        local = SHARED / "data" / s.name
        if s.sha256 and local.is_file():
            assert hashlib.sha256(local.read_bytes()).hexdigest() == s.sha256, s.name


def test_the_missing_data_error_names_the_fetch_command_and_size(cli, tmp_path):
    root = tmp_path / "empty-root"
    root.mkdir()
    r = cli("run", "--model", "shapes_clip", "--task", "sugarcrepe_add_obj", "--data-root", str(root))
    assert r.returncode == 2
    assert "`negharness fetch sugarcrepe_add_obj` downloads them (816.1 MB)" in r.stderr
    assert fetch_hint("shapes_t2i_original", SOURCES) == ""


def test_list_names_the_fetch_command_and_sizes(cli):
    r = cli("list", "--brief")
    assert r.returncode == 0, r.stderr
    assert "negharness fetch TASK|GLOB|BENCHMARK" in r.stdout and "sugarcrepe 817.3 MB" in r.stdout
    released = next(line for line in r.stdout.splitlines() if line.startswith("released weights"))
    for shown in ("negclip size unknown", "negationclip size unknown", "tripletclip size unknown",
                  "clip_bnl --pretrained nt2vr-msrvtt by hand", "conclip by hand"):
        assert shown in released, released


def test_released_weights_are_fetched_into_the_model_cache(server, tmp_path, monkeypatch):
    data = os.urandom(10_000)
    url = _serve(server, "/negclip.pth", data)
    monkeypatch.setitem(weights.WEIGHTS, ("negclip", None), replace(weights.WEIGHTS[("negclip", None)], url=url))
    path = weights.released_checkpoint("negclip", None, tmp_path)
    assert path == tmp_path / "models/negclip/negclip.pth" and path.read_bytes() == data
    assert manifest.read_manifest(tmp_path)["models/negclip/negclip.pth"]["sha256"] == _sha(data)
    assert weights.released_checkpoint("negclip", None, tmp_path) == path and len(server.seen) == 1
    assert weights.released_checkpoint("clip", None, tmp_path) is None


def _at_once(call: Any, n: int = 2) -> list[Any]:
    """``call`` in ``n`` threads started 0.1 s apart (each opens its own lock, as a process would):
    what each returned or raised, in the order they ended."""
    got: list[Any] = []

    def one() -> None:
        try:
            got.append(call())
        except Exception as e:  # noqa: BLE001 - shown by the caller's assertion
            got.append(e)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
        time.sleep(0.1)
    for t in threads:
        t.join(60)
    return got


def test_two_ranks_fetching_the_same_weights_at_once_download_them_once(server, tmp_path, monkeypatch):
    """torchrun ranks (here two threads, each opening its own lock as a process would) asking for the
    same released weights at once: one downloads, the other waits and finds the file; before, both
    wrote one .part side by side."""
    data = os.urandom(200_000)
    url = _serve(server, "/negclip.pth", data, "slow")  # ~1 s of transfer: the second asks meanwhile
    monkeypatch.setitem(weights.WEIGHTS, ("negclip", None), replace(weights.WEIGHTS[("negclip", None)], url=url))
    got = _at_once(lambda: weights.released_checkpoint("negclip", None, tmp_path))
    path = tmp_path / "models/negclip/negclip.pth"
    assert got == [path, path] and path.read_bytes() == data
    assert [p for p, _ in server.seen] == ["/negclip.pth"]  # one transfer, from its start
    assert not list(tmp_path.rglob("*.part"))


def test_two_fetches_of_one_source_at_once_download_it_once(server, tmp_path):
    """Two `negharness fetch` runs on one data root (two threads here, each opening its own lock as a
    process would): one downloads, the other waits and finds the file in place."""
    src = Source("bench/a.json", _serve(server, "/a.json", PAYLOAD, "slow"), _sha(PAYLOAD), len(PAYLOAD), ("bench_a",))
    got = _at_once(lambda: fetch_sources([src], tmp_path)[0].state)
    assert sorted(map(str, got)) == ["fetched", "present"]
    assert (tmp_path / "bench/a.json").read_bytes() == PAYLOAD and [p for p, _ in server.seen] == ["/a.json"]
    assert not list(tmp_path.rglob("*.part"))


def test_weights_no_program_may_fetch_name_the_steps_and_the_path(tmp_path):
    with pytest.raises(UserError, match="Baidu Pan") as info:
        weights.released_checkpoint("clip_bnl", "nt2vr-msrvtt", tmp_path)
    assert str(tmp_path / "models/clip_bnl/clip_bnl_msrvtt.pth.tar") in str(info.value)
    placed = tmp_path / "models/clip_bnl/clip_bnl_msrvtt.pth.tar"
    placed.parent.mkdir(parents=True)
    placed.write_bytes(b"x")
    assert weights.released_checkpoint("clip_bnl", "nt2vr-msrvtt", tmp_path) == placed


def test_a_run_without_checkpoint_offline_names_the_weights(cli, tmp_path):
    r = cli("run", "--model", "negclip", "--task", "shapes_t2i_original", "--limit", "2", env={"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 2
    assert "cannot download models/negclip/negclip.pth from https://drive.usercontent.google.com" in r.stderr


def test_meter_without_a_bar_is_silent():
    Meter().advance(10)


TINY_TRAIN = {"epochs": "1", "steps_per_epoch": "1", "lr": "1e-4"}  # -O: the trainer's
TINY_SET = {"n_train": "32", "n_val": "32"}  # -T: the training set's
COMMANDS = {  # every command that builds a model, as a user types it (the released weights: --pretrained loopback)
    "run": lambda out: ["run", "--task", "shapes_t2i_original", "--limit", "20", "--output-dir", str(out)],
    "fire": lambda out: ["fire", "--task", "shapes_t2i_original", "-T", "n_items=20", "--sizes", "10",
                         "--resamples", "20", "--out", str(out / "fire.svg")],
    "diagnose": lambda out: ["diagnose", "--objects", "red circle,blue square", "--out", str(out / "d.png"),
                             "--results-dir", str(out)],
    "train": lambda out: ["train", "--trainer", "bnl", "--task", "shapes", "--out", str(out / "trained"),
                          "--workers", "0", "--max-steps", "1", "--batch-size", "16",
                          *[a for k, v in TINY_TRAIN.items() for a in ("-O", f"{k}={v}")],
                          *[a for k, v in TINY_SET.items() for a in ("-T", f"{k}={v}")]],
}


@pytest.mark.parametrize("command", ["run", "fire", "diagnose", pytest.param("train", marks=pytest.mark.needs("nltk"))])
def test_every_command_that_builds_a_model_fetches_its_released_weights(command, cli, server, tmp_path, monkeypatch):
    """`run` used to be the only command that fetched released weights: `diagnose` and `train` built
    the model without them (the plugin asked for --checkpoint). All now build it through the plugin
    lookup, which fetches the file once into the model cache and passes it as the checkpoint."""
    from negharness.plugins.shapes_clip import WEIGHTS as BUNDLED

    url = _serve(server, "/shapes_clip.safetensors", BUNDLED.read_bytes())
    monkeypatch.setitem(weights.WEIGHTS, ("shapes_clip", "loopback"), weights.Weights("released.safetensors", url))
    r = cli(*COMMANDS[command](tmp_path), "--model", "shapes_clip", "--pretrained", "loopback")
    assert r.returncode == 0, r.stderr
    cached = Path(os.environ["NEGHARNESS_CACHE"]) / "models/shapes_clip/released.safetensors"
    assert cached.read_bytes() == BUNDLED.read_bytes()
    assert server.seen == [("/shapes_clip.safetensors", None)]


def test_negationclip_and_tripletclip_have_released_weights():
    for model in ("negationclip", "tripletclip"):
        w = weights.weights_for(model, None)
        assert w is not None and w.url.startswith("https://") and not w.manual, model
        assert w.sha256 is None and "first download" in w.origin, model  # no published checksum: pinned at first use
    assert "huggingface.co/jerryray/negationclip" in weights.weights_for("negationclip", None).url
    assert "14mupW26LMh6U4FQPa74FOIMEg8MndxCh" in weights.weights_for("tripletclip", None).url


def test_a_run_of_the_new_models_offline_names_their_weights(cli):
    for model, url in (("negationclip", "https://huggingface.co/jerryray"), ("tripletclip", "https://drive.")):
        r = cli("run", "--model", model, "--task", "shapes_t2i_original", "--limit", "2", env={"HF_HUB_OFFLINE": "1"})
        assert r.returncode == 2
        assert f"cannot download models/{model}/" in r.stderr and url in r.stderr, r.stderr


def test_archive_sizes_are_exact_where_published():
    """Only NeIn's hub snapshot keeps an approximate size; the COCO and VOC archives carry the
    SHA-256 that TFDS / torchvision publish."""
    by_name = {s.name: s for s in SOURCES}
    approx = sorted(s.name for s in SOURCES if "~" in s.origin)
    assert approx == ["nein"]
    for name in ("coco/val2017.zip", "coco/val2014.zip", "coco/train2014.zip", "voc2007/VOCtest_06-Nov-2007.tar"):
        assert by_name[name].sha256 and len(by_name[name].sha256) == 64 and by_name[name].size, name


def test_diagnose_files_its_picture_in_the_folder_of_the_models_records(cli, server, tmp_path, monkeypatch):
    """A model run on its released weights files its records under ``name@<hash>`` (the weights are its
    checkpoint); `diagnose` put its picture under ``name/``, a folder no record of that model was in, so
    the board's page never met the two. Both now take the folder from `PluginLookup.identified`."""
    from negharness.plugins.shapes_clip import WEIGHTS as BUNDLED

    url = _serve(server, "/shapes_clip.safetensors", BUNDLED.read_bytes())
    monkeypatch.setitem(weights.WEIGHTS, ("shapes_clip", "loopback"), weights.Weights("released.safetensors", url))
    for command in ("run", "diagnose"):
        r = cli(*COMMANDS[command](tmp_path), "--model", "shapes_clip", "--pretrained", "loopback")
        assert r.returncode == 0, r.stderr
    records = {p.parent.name for p in tmp_path.glob("*/shapes_t2i_original*.json")}
    pictures = {p.parent.name for p in tmp_path.glob("*/*.diagnosis.json")}
    assert len(records) == 1 and records == pictures and records.pop().startswith("shapes_clip@"), (records, pictures)
