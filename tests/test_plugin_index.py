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
from negharness.api.model import ModelOptions
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


def _host_with(folder: Path, cache: Path):
    sys.path.insert(0, str(folder))
    try:
        return make_host(cache_dir=cache)
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


def test_a_failed_import_is_remembered_until_the_environment_changes(tmp_path, marks, monkeypatch):
    folder = tmp_path / "plugin"
    shutil.copytree(THIRDPARTY / "hookcount", folder)
    module = folder / "negharness_hookcount.py"
    module.write_text(module.read_text().replace("\n\n@hookimpl", "\nraise ImportError('missing dependency')\n\n@hookimpl", 1))
    cache = tmp_path / "cache"
    for _ in range(2):
        monkeypatch.delitem(sys.modules, "negharness_hookcount", raising=False)
        host = _host_with(folder, cache)
        host.registry
        assert [p.name for p in host.failures()] == ["hookcount"] and "missing dependency" in host.failures()[0].error
    assert _imports(marks) == ["hookcount"]
    os.utime(folder, ns=(1, 1))  # the dependency installed into the same folder
    monkeypatch.delitem(sys.modules, "negharness_hookcount", raising=False)
    _host_with(folder, cache).registry
    assert _imports(marks) == ["hookcount", "hookcount"]


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
