"""`negharness fetch` covers the whole field (issue 46 item 4): every built-in task has a source (or
manual steps) for each file it reads, hub-hosted sets included; hub revisions with slashes
(``refs/convert/parquet``) are pinned at first download and held; gated sets and offline runs say
what to do and where each file goes; a model name fetches its released weights into the model
cache. Offline: the loopback server of test_fetch stands for the hub."""

from __future__ import annotations

import functools
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from negharness.api import UserError
from negharness.api import TaskOptions
from negharness.fetch import hub, manifest
from negharness.fetch.select import plan, select, sources_of_task
from negharness.fetch.session import fetch_sources
from negharness.fetch.sources import SOURCES, Source, Unpack
from test_fetch import PAYLOAD, _serve, _sha, _zip, online, server  # noqa: F401 - fixtures and helpers


@functools.cache
def _tasks() -> tuple[Any, ...]:
    """The built-in task entries (one plugin host for the module: building it is the slow part)."""
    from negharness.discovery.manager import make_host

    return tuple(make_host().registry.entries("task"))


def _task_names() -> list[str]:
    return [e.name for e in _tasks()]


def _covered(rel: str, sources: list[Source], media: bool = False) -> bool:
    """A source puts ``rel`` where the task reads it: the file itself, or a folder it lies in (a
    snapshot, an unpacked archive, a manual target). A media template's fixed prefix may also hold
    the source's folder (``coco/{image}`` with ``coco/val2014``)."""
    for s in sources:
        place = s.lands.rstrip("/")
        if rel == place or rel.startswith(place + "/") or (media and place.startswith(rel + "/")):
            return True
    return False


def _reads(task, root: Path) -> tuple[list[str], list[str]]:
    """(files under the data root the task requires on an empty root, the fixed folders of its media
    templates): what a user must have for the task to run."""
    files = [p.relative_to(root).as_posix() for p in task.required_files()]
    media = (getattr(task, "spec", None) or {}).get("media") or {}
    templates = [t for key in ("path", "members") for t in (media.get(key) or []) if isinstance(t, str)]
    return files, [t.split("{")[0].rstrip("/").rsplit("/", 1)[0] if "/" in t.split("{")[0] else t.split("{")[0]
                   for t in templates]


def _negbench_alternatives(rel: str) -> list[str]:
    """NegBench's find_csv reads negbench/NAME, else negbench/images/NAME or negbench/videos/NAME."""
    head, _, name = rel.partition("/")
    if head != "negbench" or "/" in name:
        return [rel]
    return [rel, f"negbench/images/{name}", f"negbench/videos/{name}"]


def test_every_builtin_task_has_a_source_or_manual_steps_for_each_file_it_reads(tmp_path):
    """Fails on fc4bba0: Winoground, MMVP-VLM, SugarCrepe++, BiVLC, VisMin, NaturalBench, Vinoground,
    MRMR and NegRefCOCOg had no source; nT2VR's manual entry pointed at <root>/nt2vr, which no task reads."""
    lacking = []
    for entry in _tasks():
        task = entry.load()(TaskOptions(tmp_path))
        files, media = _reads(task, tmp_path)
        mine = sources_of_task(entry.name, SOURCES)
        lacking += [f"{entry.name}: {f}" for f in files
                    if not any(_covered(alt, mine) for alt in _negbench_alternatives(f))]
        lacking += [f"{entry.name}: media {m}/" for m in media if not _covered(m, mine, media=True)]
    assert not lacking, "\n".join(lacking)


FIELD = {  # task -> where its sources put the files the task YAML reads (the data_help's layout)
    "winoground": {"winoground/default/test/0000.parquet"},
    "mmvp_vlm": {"mmvp_vlm"},
    "sugarcrepepp_swap_obj_itt": {"sugarcrepepp/swap_obj.json", "coco/val2017"},
    "sugarcrepepp_swap_obj_tot": {"sugarcrepepp/swap_obj.json"},
    "bivlc": {"bivlc/default/test/0000.parquet"},
    "vismin_object": {f"vismin/data/test/data-0000{k}-of-00003.arrow" for k in range(3)},
    "naturalbench_retrieval": {"naturalbench/NaturalBench-Retrieval"},
    "vinoground": {"vinoground/vinoground.csv", "vinoground/vinoground_videos"},
    "mrmr_negation": {f"mrmr_negation/{p}/test/0000.parquet" for p in ("query", "corpus", "qrels")},
    "negrefcocog": {"negrefcocog/NegRefCOCOg.json", "coco/train2014"},
}


@pytest.mark.parametrize("task", sorted(FIELD))
def test_fetch_of_a_field_task_resolves_to_its_sources(task):
    """`negharness fetch winoground` answered "did you mean winoground, vinoground?" on fc4bba0."""
    data, weights = plan([task], _task_names(), SOURCES)
    assert {s.lands for s in data} == FIELD[task] and not weights


def test_benchmark_names_of_the_field():
    names = _task_names()
    for bench, expect in (("vismin", "vismin/data/test/data-00000-of-00003.arrow"),
                          ("sugarcrepepp", "sugarcrepepp/replace_rel.json"), ("mrmr", "mrmr_negation/qrels/test/0000.parquet"),
                          ("naturalbench", "naturalbench/NaturalBench-Retrieval.zip")):
        assert expect in {s.name for s in select([bench], names, SOURCES)}, bench


def test_hub_sources_are_pinned_or_say_how_the_first_download_pins_them():
    for s in SOURCES:
        if not hub.is_hub(s.url):
            continue
        rev = hub.parse(s.url).revision
        assert hub.is_commit(rev) or "first download records the commit" in s.origin or s.name in (
            "negvqa/NegVQA-7379.jsonl", "nein"), s.name
        assert rev != "main" or "revision not pinned" in s.origin or s.name in ("negvqa/NegVQA-7379.jsonl", "nein")
    github = [s for s in SOURCES if "raw.githubusercontent.com" in s.url and s.name.startswith(("sugarcrepepp", "negref"))]
    assert len(github) == 6 and all(s.sha256 and s.size for s in github)


def test_a_refs_revision_keeps_its_slashes_and_is_quoted_in_the_url(monkeypatch):
    """On fc4bba0 ``@refs/convert/parquet/default/...`` parsed as revision "refs", path "convert/...". """
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.test")
    ref = hub.parse("hf://datasets/facebook/winoground@refs/convert/parquet/default/test/0000.parquet")
    assert (ref.repo, ref.revision, ref.path) == ("facebook/winoground", "refs/convert/parquet", "default/test/0000.parquet")
    assert hub.resolve_url(ref) == ("http://hub.test/datasets/facebook/winoground/resolve/refs%2Fconvert%2Fparquet/"
                                    "default/test/0000.parquet")
    with pytest.raises(UserError, match="three parts"):
        hub.parse("hf://datasets/o/n@refs")


COMMIT = "0123456789abcdef" * 2 + "01234567"
OTHER = "f" * 40
PARQUET_PATH = "/datasets/o/wino/resolve/refs%2Fconvert%2Fparquet/default/test/0000.parquet"


def test_a_parquet_conversion_file_is_pinned_to_the_commit_it_came_from(server, tmp_path, monkeypatch):
    """The first download records the commit the hub answered; later fetches ask for that commit,
    and a file the hub serves from another commit is refused and kept aside."""
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    _serve(server, PARQUET_PATH, PAYLOAD)
    server.headers_for[PARQUET_PATH] = {"X-Repo-Commit": COMMIT}
    pinned = f"/datasets/o/wino/resolve/{COMMIT}/default/test/0000.parquet"
    _serve(server, pinned, PAYLOAD)
    src = Source("wino/default/test/0000.parquet", "hf://datasets/o/wino@refs/convert/parquet/default/test/0000.parquet")
    fetch_sources([src], tmp_path)
    entry = manifest.read_manifest(tmp_path)[src.name]
    assert entry["revision"] == COMMIT and entry["sha256"] == _sha(PAYLOAD)
    (tmp_path / src.name).unlink()
    server.headers_for[pinned] = {"X-Repo-Commit": OTHER}  # a hub that answers from another commit
    with pytest.raises(UserError, match=f"commit {OTHER}, not the pinned {COMMIT}"):
        fetch_sources([src], tmp_path)
    assert server.seen[-1][0] == pinned
    assert not (tmp_path / src.name).exists() and (tmp_path / f"{src.name}.rejected").exists()


def test_a_hub_archive_records_its_commit_and_is_unpacked_where_the_task_reads(server, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    data = _zip({"NaturalBench-Retrieval/metadata.json": b"[]", "NaturalBench-Retrieval/images/a.jpg": b"j",
                 "__MACOSX/x": b""})
    path = f"/datasets/o/nb/resolve/{COMMIT}/NaturalBench-Retrieval.zip"
    _serve(server, path, data)
    server.headers_for[path] = {"X-Repo-Commit": COMMIT}
    src = Source("naturalbench/NaturalBench-Retrieval.zip", f"hf://datasets/o/nb@{COMMIT}/NaturalBench-Retrieval.zip",
                 unpack=Unpack("naturalbench", only="NaturalBench-Retrieval/"), done="naturalbench/NaturalBench-Retrieval")
    fetch_sources([src], tmp_path)
    assert (tmp_path / "naturalbench/NaturalBench-Retrieval/metadata.json").read_bytes() == b"[]"
    assert not (tmp_path / "naturalbench/__MACOSX").exists()
    assert manifest.read_manifest(tmp_path)[src.name]["revision"] == COMMIT


def test_a_gated_file_refused_by_the_hub_says_what_to_do_and_where_it_goes(server, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    _serve(server, PARQUET_PATH, PAYLOAD, "401")
    src = Source("winoground/default/test/0000.parquet",
                 "hf://datasets/o/wino@refs/convert/parquet/default/test/0000.parquet", gated=True)
    with pytest.raises(UserError, match="HTTP 401") as info:
        fetch_sources([src], tmp_path)
    text = str(info.value)
    assert f"accept its terms at {server.url}/datasets/o/wino" in text and "HF_TOKEN" in text
    assert str(tmp_path / "winoground/default/test/0000.parquet") in text


def test_a_token_goes_to_the_hub_and_to_no_other_host(server, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    _serve(server, f"/datasets/o/wino/resolve/{COMMIT}/a.parquet", PAYLOAD)
    fetch_sources([Source("w/a.parquet", f"hf://datasets/o/wino@{COMMIT}/a.parquet")], tmp_path)
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.test")  # the loopback server is now "another host"
    fetch_sources([Source("x/b.bin", _serve(server, "/b.bin", PAYLOAD))], tmp_path)
    assert server.auth == ["Bearer hf_secret", None]


def test_offline_a_gated_source_says_so_and_where_the_file_goes(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    wino = next(s for s in SOURCES if s.name == "winoground/default/test/0000.parquet")
    with pytest.raises(UserError) as info:
        fetch_sources([wino], tmp_path)
    text = str(info.value)
    assert "gated: accept its terms at https://huggingface.co/datasets/facebook/winoground" in text
    assert f"into {tmp_path / wino.name}" in text and "refs%2Fconvert%2Fparquet" in text


def test_offline_several_files_name_where_each_goes(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    chosen = select(["vinoground", "mmvp_vlm"], _task_names(), SOURCES)
    with pytest.raises(UserError) as info:
        fetch_sources(chosen, tmp_path)
    lines = str(info.value).splitlines()
    assert len(lines) == 1 + len(chosen)
    for where in ("vinoground/vinoground.csv", "vinoground/vinoground_videos", "mmvp_vlm"):
        assert any(line.endswith(f"into {tmp_path / where}") for line in lines), where


def test_a_snapshot_keeps_the_repository_layout_and_holds_its_commit(tmp_path, monkeypatch):
    """MMVP-VLM's images lie in ``MLLM_VLM Images/<Type>/``: on fc4bba0 every snapshot was flattened."""
    state = {"sha": "c" * 40}

    def snapshot_download(repo_id, repo_type, revision, allow_patterns, local_dir, endpoint):
        Path(local_dir, "MLLM_VLM Images/Orientation").mkdir(parents=True, exist_ok=True)
        Path(local_dir, "MLLM_VLM Images/Orientation/1.jpg").write_bytes(b"jpeg")
        Path(local_dir, "Questions.csv").write_bytes(b"Question ID,Type,Statement\n")
        return local_dir

    info = types.SimpleNamespace(dataset_info=lambda repo, revision: types.SimpleNamespace(sha=state["sha"]))
    fake = types.SimpleNamespace(snapshot_download=snapshot_download, HfApi=lambda endpoint: info)
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake)
    src = next(s for s in SOURCES if s.name == "mmvp_vlm")
    fetch_sources([src], tmp_path)
    assert (tmp_path / "mmvp_vlm/MLLM_VLM Images/Orientation/1.jpg").read_bytes() == b"jpeg"
    assert (tmp_path / "mmvp_vlm/Questions.csv").is_file()
    entries = manifest.read_manifest(tmp_path)
    assert entries["mmvp_vlm/MLLM_VLM Images/Orientation/1.jpg"]["file"] == "mmvp_vlm/MLLM_VLM Images/Orientation/1.jpg"
    import shutil

    shutil.rmtree(tmp_path / "mmvp_vlm")
    state["sha"] = "d" * 40  # the hub answers another commit for the recorded one
    with pytest.raises(UserError, match="not the pinned c{40}"):
        fetch_sources([src], tmp_path)


def test_a_model_name_fetches_its_released_weights_into_the_model_cache(cli, tmp_path):
    cache = tmp_path / "cache"
    r = cli("fetch", "negclip", "--cache-dir", str(cache), "--data-root", str(tmp_path / "root"),
            env={"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 2, r.stdout + r.stderr
    assert "did you mean" not in r.stderr
    assert "https://drive.usercontent.google.com/download?id=1ooVVPxB" in r.stderr
    assert f"into {cache / 'models/negclip/negclip.pth'}" in r.stderr
    assert not (tmp_path / "root").exists() or not any((tmp_path / "root").rglob("*.pth"))
    listed = cli("fetch", "negclip", "--list", "--cache-dir", str(cache))
    assert listed.returncode == 0, listed.stderr
    assert "models/negclip/negclip.pth  file" in listed.stdout and f"model cache {cache}" in listed.stdout


def test_fetch_list_shows_the_released_weights_beside_the_data():
    data, weights = plan([], _task_names(), SOURCES)
    assert data == list(SOURCES)
    assert {s.name for s in weights} >= {"models/negclip/negclip.pth", "models/conclip/conclip_b32_openclip_version.pt"}
    assert {s.kind for s in weights if "conclip" in s.name} == {"manual"}


def test_manual_weights_name_the_model_cache_path(tmp_path):
    _, weights = plan(["conclip"], _task_names(), SOURCES)
    (out,) = fetch_sources(weights, tmp_path)
    assert out.state == "by hand" and str(tmp_path / "models/conclip/conclip_b32_openclip_version.pt") in out.note


def test_a_large_hub_file_redirected_to_a_cdn_keeps_its_commit_and_not_the_token(server, tmp_path, monkeypatch):
    """The hub answers an LFS file with a redirect carrying X-Repo-Commit; the CDN's answer has none.
    On fc4bba0 the commit was read from the last answer only (so never recorded) and urllib sent the
    token on to the CDN's host."""
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    cdn = server.url.replace("127.0.0.1", "localhost") + "/cdn/blob"  # the same server, another host name
    server.redirects["/datasets/o/wino/resolve/main/a.parquet"] = (cdn, {"X-Repo-Commit": COMMIT})
    _serve(server, "/cdn/blob", PAYLOAD)
    src = Source("wino/a.parquet", "hf://datasets/o/wino@main/a.parquet")
    fetch_sources([src], tmp_path)
    assert (tmp_path / src.name).read_bytes() == PAYLOAD
    assert manifest.read_manifest(tmp_path)[src.name]["revision"] == COMMIT
    assert [p for p, _ in server.seen] == ["/datasets/o/wino/resolve/main/a.parquet", "/cdn/blob"]
    assert server.auth == ["Bearer hf_secret", None]
