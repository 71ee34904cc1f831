"""Plugins cost nothing until used (issue 46 item 1): entries declared in entry-point metadata are
listed without importing their module, and a hook-style plugin is imported once, then replayed from
the plugin index until its module or the installed distributions change."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import THIRDPARTY
from negharness.api import ModelOptions
from negharness.discovery.manager import make_host
from negharness.discovery.plugin_index import INDEX_FILE, environment_stamp, read_index


@pytest.fixture
def marks(tmp_path, monkeypatch) -> Path:
    """The file each test plugin appends its name to when its module is imported."""
    mark = tmp_path / "imports.txt"
    mark.write_text("")
    monkeypatch.setenv("NEGHARNESS_TEST_IMPORT_MARK", str(mark))
    return mark


def _imports(mark: Path) -> list[str]:
    return mark.read_text().split()


def test_a_declared_plugin_whose_import_fails_is_never_imported_by_the_commands_that_do_not_use_it(cli, marks):
    """list --brief, leaderboard, compare, export, a usage error and a cached rerun: none imports it."""
    plugins = ("lazyfail",)
    run = ["run", "--model", "shapes_clip", "--task", "shapes_t2i_original"]
    assert cli(*run, plugins=plugins).returncode == 0
    cached = cli(*run, plugins=plugins)
    assert cached.returncode == 0 and "cached" in cached.stdout + cached.stderr
    brief = cli("list", "--brief", plugins=plugins)
    assert brief.returncode == 0 and "lazyfail_model" in brief.stdout and "lazyfail_task" in brief.stdout
    assert "negharness-lazyfail" in brief.stdout  # the plugin is its distribution
    assert cli("leaderboard", "--results-dir", "results", plugins=plugins).returncode == 0
    assert cli("compare", "results/shapes_clip", "results/shapes_clip", plugins=plugins).returncode == 0
    assert cli("export", "--format", "mteb", "results", "out", plugins=plugins).returncode == 0
    typo = cli("run", "--model", "lazyfail_modle", "--task", "shapes_t2i_original", plugins=plugins)
    assert typo.returncode == 2 and "lazyfail_model" in typo.stderr  # the closest match, from the metadata
    assert _imports(marks) == []
    used = cli("run", "--model", "lazyfail_model", "--task", "shapes_t2i_original", plugins=plugins)
    assert used.returncode == 2 and "negharness-lazyfail" in used.stderr and "fails on purpose" in used.stderr
    assert "Traceback" not in used.stderr and _imports(marks) == ["lazyfail"]


def _host_with(folder: Path, cache: Path, **options):
    sys.path.insert(0, str(folder))
    try:
        return make_host(cache_dir=cache, **options)
    finally:
        sys.path.remove(str(folder))


def test_a_hook_plugin_is_imported_once_then_replayed_from_the_index(tmp_path, marks, monkeypatch):
    folder = tmp_path / "plugin"
    shutil.copytree(THIRDPARTY / "hookcount", folder)
    monkeypatch.delitem(sys.modules, "negharness_hookcount", raising=False)
    first = _host_with(folder, tmp_path / "cache")
    assert {"hookcount_kw", "hookcount_str"} <= set(first.registry.names("model"))
    assert _imports(marks) == ["hookcount"] and (tmp_path / "cache" / INDEX_FILE).is_file()
    monkeypatch.delitem(sys.modules, "negharness_hookcount", raising=False)
    second = _host_with(folder, tmp_path / "cache")
    kw = second.registry.get("model", "hookcount_kw")
    assert _imports(marks) == ["hookcount"]  # replayed: not imported again
    assert (kw.description, kw.plugin, kw.meta) == ("keyword model, a callable target", "hookcount", {"note": "kept"})
    assert second.registry.get("model", "hookcount_str").target == "negharness.testing:keyword_model"
    assert second.plugins["hookcount"].status == "loaded" and second.distributions()["negharness-hookcount"] == "0.1"
    sys.path.insert(0, str(folder))
    try:  # a callable target: the plugin is imported when the entry is used, and gives the same factory
        model = kw.load()(ModelOptions())
    finally:
        sys.path.remove(str(folder))
    assert type(model).__name__ == "KeywordModel" and _imports(marks) == ["hookcount", "hookcount"]


def test_the_index_is_voided_by_an_edit_of_the_module_and_by_an_install(tmp_path, marks, monkeypatch):
    folder = tmp_path / "plugin"
    shutil.copytree(THIRDPARTY / "hookcount", folder)
    cache = tmp_path / "cache"
    monkeypatch.delitem(sys.modules, "negharness_hookcount", raising=False)
    _host_with(folder, cache).registry
    module = folder / "negharness_hookcount.py"
    module.write_text(module.read_text().replace('"hookcount_str"', '"hookcount_renamed"'))
    monkeypatch.delitem(sys.modules, "negharness_hookcount", raising=False)
    edited = _host_with(folder, cache)
    assert "hookcount_renamed" in edited.registry.names("model") and "hookcount_str" not in edited.registry.names("model")
    assert _imports(marks) == ["hookcount", "hookcount"]
    (folder / "another_dist-1.0.dist-info").mkdir()  # an install into a sys.path folder changes its mtime
    monkeypatch.delitem(sys.modules, "negharness_hookcount", raising=False)
    _host_with(folder, cache).registry
    assert _imports(marks) == ["hookcount"] * 3
    monkeypatch.delitem(sys.modules, "negharness_hookcount", raising=False)
    _host_with(folder, cache).registry
    assert _imports(marks) == ["hookcount"] * 3


def test_a_damaged_or_foreign_index_is_ignored(tmp_path, marks, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / INDEX_FILE).write_text("{not json")
    assert read_index(cache, environment_stamp()) == {}
    (cache / INDEX_FILE).write_text('{"environment": [0], "plugins": {"x": {"entries": [{"kind": "model"}]}}}')
    assert read_index(cache, environment_stamp()) == {}
    folder = tmp_path / "plugin"
    shutil.copytree(THIRDPARTY / "hookcount", folder)
    monkeypatch.delitem(sys.modules, "negharness_hookcount", raising=False)
    assert "hookcount_kw" in _host_with(folder, cache).registry.names("model")
    assert _imports(marks) == ["hookcount"] and environment_stamp()


# issue 51 item 3: the index replays only what still holds ------------------------------------------
def _package(folder: Path, dist: str, entry_points: str, files: dict[str, str]) -> Path:
    """A throwaway installed distribution in ``folder``: its dist-info (``entry_points.txt``) and files."""
    info = folder / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def _forget(monkeypatch, *tops: str) -> None:
    """A fresh process's view: the package's modules not yet imported."""
    for name in [m for m in sys.modules if m.split(".")[0] in tops]:
        monkeypatch.delitem(sys.modules, name)


NAMES_HOOK = '''
from negharness.api import hookimpl


@hookimpl
def negharness_register_models(registry):
    from subnames.names import MODELS

    for name in MODELS:
        registry.add(name, "negharness.testing:keyword_model", "a keyword model")
'''


def test_a_model_added_in_the_plugins_own_submodule_is_seen(tmp_path, monkeypatch):
    """The hook lists names from another module of its package: editing that module voids the entry
    (the index used to be keyed by the hook module's file only: `run --model new_one` was unknown)."""
    folder = _package(tmp_path / "plugin", "negharness-subnames", "[negharness]\nsubnames = subnames.hooks\n",
                      {"subnames/__init__.py": "", "subnames/hooks.py": NAMES_HOOK,
                       "subnames/names.py": 'MODELS = ["old_one"]\n'})
    cache = tmp_path / "cache"
    _forget(monkeypatch, "subnames")
    assert "old_one" in _host_with(folder, cache).registry.names("model")
    (folder / "subnames" / "names.py").write_text('MODELS = ["old_one", "new_one"]\n')
    _forget(monkeypatch, "subnames")
    again = _host_with(folder, cache)
    assert {"old_one", "new_one"} <= set(again.registry.names("model")) and not again.failures()
    _forget(monkeypatch, "subnames")
    monkeypatch.setitem(sys.modules, "subnames", None)  # replayed now: an import would fail (ModuleNotFoundError)
    replayed = _host_with(folder, cache)
    assert {"old_one", "new_one"} <= set(replayed.registry.names("model")) and not replayed.failures()


FLAKY_HOOK = '''
import os

from negharness.api import hookimpl

if os.environ.get("TEST_NATIVE_ABSENT"):
    raise ImportError("libnative.so: cannot open shared object file")


@hookimpl
def negharness_register_models(registry):
    registry.add("flaky_model", "negharness.testing:keyword_model", "a keyword model")
'''


def test_an_import_failure_is_never_replayed(tmp_path, monkeypatch):
    """A native library absent on the login node and present on the GPU node sharing the cache: the
    plugin loads there (the failure used to be replayed until the cache was deleted)."""
    folder = _package(tmp_path / "plugin", "negharness-flaky", "[negharness]\nflaky = negharness_flaky\n",
                      {"negharness_flaky.py": FLAKY_HOOK})
    cache = tmp_path / "cache"
    monkeypatch.setenv("TEST_NATIVE_ABSENT", "1")
    _forget(monkeypatch, "negharness_flaky")
    login = _host_with(folder, cache)
    login.registry
    assert [p.name for p in login.failures()] == ["flaky"] and "libnative" in login.failures()[0].error
    monkeypatch.delenv("TEST_NATIVE_ABSENT")
    _forget(monkeypatch, "negharness_flaky")
    gpu = _host_with(folder, cache)
    assert not gpu.failures() and "flaky_model" in gpu.registry.names("model")


@pytest.mark.parametrize("damage", [
    lambda raw: {**raw, "plugins": []},
    lambda raw: {**raw, "plugins": {k: None for k in raw["plugins"]}},
    lambda raw: {**raw, "plugins": {k: {"entries": [None], "files": v["files"]} for k, v in raw["plugins"].items()}},
    lambda raw: {**raw, "plugins": {k: {"entries": v["entries"], "files": "x"} for k, v in raw["plugins"].items()}},
    lambda raw: {**raw, "plugins": {k: {**v, "entries": [{**e, "meta": []} for e in v["entries"]]}
                                    for k, v in raw["plugins"].items()}},
    lambda raw: [raw],
])
def test_a_hand_edited_index_is_rebuilt_silently(tmp_path, marks, monkeypatch, damage):
    """Each damage used to make every command exit 1 with "unexpected AttributeError" naming no file."""
    import json

    folder = tmp_path / "plugin"
    shutil.copytree(THIRDPARTY / "hookcount", folder)
    cache = tmp_path / "cache"
    _forget(monkeypatch, "negharness_hookcount")
    _host_with(folder, cache).registry
    index = cache / INDEX_FILE
    index.write_text(json.dumps(damage(json.loads(index.read_text()))))
    _forget(monkeypatch, "negharness_hookcount")
    host = _host_with(folder, cache)
    assert "hookcount_kw" in host.registry.names("model") and not host.failures()
    assert _imports(marks) == ["hookcount", "hookcount"]  # imported again, and indexed again
    _forget(monkeypatch, "negharness_hookcount")
    _host_with(folder, cache).registry
    assert _imports(marks) == ["hookcount", "hookcount"]


def test_a_fifo_at_the_index_path_is_never_opened(tmp_path, marks, monkeypatch):
    """`list --brief` used to hang reading it; now the index is rebuilt in its place."""
    import threading

    folder = tmp_path / "plugin"
    shutil.copytree(THIRDPARTY / "hookcount", folder)
    cache = tmp_path / "cache"
    cache.mkdir()
    fifo = cache / INDEX_FILE
    os.mkfifo(fifo)
    _forget(monkeypatch, "negharness_hookcount")
    found: list[list[str]] = []
    worker = threading.Thread(target=lambda: found.append(_host_with(folder, cache).registry.names("model")),
                              daemon=True)
    worker.start()
    worker.join(60)  # a guard against a hang, not a measurement
    try:
        assert not worker.is_alive() and "hookcount_kw" in found[0]
    finally:
        if worker.is_alive():  # release the blocked reader: a writer opens and closes the FIFO
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert fifo.is_file()  # the rebuilt index replaced it


def test_the_index_lives_under_the_runs_cache_dir(cli, tmp_path, marks, monkeypatch, _private_cache):
    """--cache-dir used to leave the index under the default cache root."""
    _forget(monkeypatch, "negharness_hookcount")
    res = cli("run", "--model", "hookcount_str", "--task", "no_such_task", "--cache-dir", str(tmp_path / "mine"),
              plugins=("hookcount",))
    assert res.returncode == 2 and "no_such_task" in res.stderr
    assert (tmp_path / "mine" / INDEX_FILE).is_file() and not (_private_cache / INDEX_FILE).exists()
    cli("list", "--brief", plugins=("hookcount",))
    assert (_private_cache / INDEX_FILE).is_file()  # without --cache-dir: $NEGHARNESS_CACHE


MIXED_HOOK = '''
from negharness.api import hookimpl


@hookimpl
def negharness_register_models(registry):
    registry.add("mixed_hooked", "negharness.testing:keyword_model", "from the hook")
'''


def test_one_distribution_may_use_both_plugin_forms(tmp_path, monkeypatch):
    """A hook entry point named as its distribution, and a declared model: both are the one plugin
    (the declared one used to be lost: "plugin name ... is used by two distributions")."""
    folder = _package(tmp_path / "plugin", "negharness-mixed",
                      "[negharness]\nnegharness-mixed = negharness_mixed\n\n"
                      "[negharness.models]\nmixed_declared = negharness.testing:keyword_model\n",
                      {"negharness_mixed.py": MIXED_HOOK})
    for round_ in ("imported", "replayed"):
        _forget(monkeypatch, "negharness_mixed")
        host = _host_with(folder, tmp_path / "cache")
        assert not host.failures(), (round_, host.failures())
        got = {e.name: e.plugin for e in host.registry.entries("model") if e.name.startswith("mixed_")}
        assert got == {"mixed_hooked": "negharness-mixed", "mixed_declared": "negharness-mixed"}, round_
        assert host.distributions()["negharness-mixed"] == "0.1"
    blocked = _host_with(folder, tmp_path / "cache", blocked=["negharness-mixed"])
    assert not {"mixed_hooked", "mixed_declared"} & set(blocked.registry.names("model"))


def test_a_yaml_task_added_to_a_hook_plugins_shipped_folder_is_seen(tmp_path, monkeypatch):
    """`register_yaml_folder` keys the plugin by the folder it read (its files and their list) too: a
    task file added there or edited is seen by the next command, as an edited module is."""
    folder = tmp_path / "plugin"
    shutil.copytree(THIRDPARTY / "choicefake", folder)
    shipped = folder / "choicefake_tasks"
    cache = tmp_path / "cache"
    _forget(monkeypatch, "negharness_choicefake")
    assert "shipped_colours" in _host_with(folder, cache).registry.names("task")
    text = (shipped / "shipped.yaml").read_text()
    (shipped / "added.yaml").write_text(text.replace("name: shipped_colours", "name: added_colours"))
    _forget(monkeypatch, "negharness_choicefake")
    assert {"shipped_colours", "added_colours"} <= set(_host_with(folder, cache).registry.names("task"))
    (shipped / "added.yaml").write_text(text.replace("name: shipped_colours", "name: renamed_colours"))
    _forget(monkeypatch, "negharness_choicefake")
    names = set(_host_with(folder, cache).registry.names("task"))
    assert "renamed_colours" in names and "added_colours" not in names
    _forget(monkeypatch, "negharness_choicefake")
    monkeypatch.setitem(sys.modules, "negharness_choicefake", None)  # replayed: an import would fail
    assert "renamed_colours" in _host_with(folder, cache).registry.names("task")


def test_the_index_stays_small_enough_to_be_read(tmp_path, monkeypatch):
    """Plugins beyond MAX_PLUGINS, or file stamps beyond MAX_FILES, drop others than this command's."""
    from negharness.discovery import plugin_index as pi

    stamp = environment_stamp()
    here = pi.path_stamp(str(Path(pi.__file__).resolve()))
    one = pi.IndexedPlugin((pi.IndexedEntry("model", "m", "a:b", "", {}),), (here,))
    monkeypatch.setattr(pi, "MAX_PLUGINS", 3)
    for n in range(5):
        pi.write_index(tmp_path, stamp, {f"p{n}": one})
    kept = read_index(tmp_path, stamp)
    assert len(kept) == 3 and "p4" in kept
    monkeypatch.setattr(pi, "MAX_FILES", 1)
    pi.write_index(tmp_path, stamp, {"p5": one})
    assert list(read_index(tmp_path, stamp)) == ["p5"]
