"""`negharness.testing.run_cli` and `run`: the CLI and the library in the test process, answering as
the console script would (exit code, output, records) and leaving the process as it found it (folder,
environment, sys.path, plugin modules), so the CLI tests need no interpreter and torch import each."""

from __future__ import annotations

import os
import sys

from conftest import THIRDPARTY

from negharness.testing import run, run_cli

RUN = ["run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "--limit", "8", "--device", "cpu"]


def test_exit_codes_and_output_are_the_console_scripts(tmp_path):
    usage = run_cli(["run", "--model"], cwd=tmp_path)  # argparse exits (SystemExit 2) with usage on stderr
    assert usage.returncode == 2 and "usage: negharness" in usage.stderr and usage.stdout == ""
    unknown = run_cli(["run", "--model", "no_such_model", "--task", "shapes_t2i_original"], cwd=tmp_path)
    assert unknown.exit_code == 2 and "error:" in unknown.stderr and "no_such_model" in unknown.stderr
    assert "Traceback" not in unknown.stderr and unknown.records == []
    listed = run_cli(["list", "--brief"], cwd=tmp_path)
    assert listed.returncode == 0 and "shapes_clip" in listed.stdout


def test_records_written_are_returned_and_a_cached_rerun_writes_none(tmp_path):
    first = run_cli(RUN, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    [record] = first.records
    assert record.parent == tmp_path.resolve() / "results" / "shapes_clip" and record.is_file()
    assert "negharness run: shapes_clip" in first.stdout
    again = run_cli(RUN, cwd=tmp_path)
    assert again.returncode == 0 and again.records == [] and "(cached)" in again.stdout
    elsewhere = run_cli([*RUN, "--output-dir", "out"], cwd=tmp_path)
    assert [p.parent.parent for p in elsewhere.records] == [tmp_path.resolve() / "out"]


def test_folder_environment_and_sys_path_are_restored(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGHARNESS_KEPT", "before")
    monkeypatch.delenv("NEGHARNESS_DEBUG", raising=False)
    cwd, path = os.getcwd(), list(sys.path)
    res = run_cli(["list", "--brief"], cwd=tmp_path, env={"NEGHARNESS_KEPT": None, "NEGHARNESS_DEBUG": "1"},
                  paths=[THIRDPARTY / "good"])
    assert res.returncode == 0, res.stderr
    assert os.getcwd() == cwd and sys.path == path
    assert os.environ["NEGHARNESS_KEPT"] == "before" and "NEGHARNESS_DEBUG" not in os.environ


def test_a_plugin_from_one_run_does_not_answer_in_the_next(tmp_path, monkeypatch):
    """The plugin folder's module is forgotten after the run: a later run without the folder neither
    lists its model nor finds the module already imported. (Another test in this worker may have
    imported the module itself, tests/test_relations.py does: it is set aside here and put back after.)"""
    monkeypatch.delitem(sys.modules, "negharness_example", raising=False)
    args = ["run", "--model", "mean_colour", "--task", "example_colours"]
    with_plugin = run_cli(args, cwd=tmp_path, paths=[THIRDPARTY / "good"])
    assert with_plugin.returncode == 0 and len(with_plugin.records) == 1, with_plugin.stderr
    assert "negharness_example" not in sys.modules
    listed = run_cli(["list", "--brief"], cwd=tmp_path)
    assert listed.returncode == 0 and "shapes_clip" in listed.stdout and "mean_colour" not in listed.stdout
    again = run_cli([*args, "--overwrite"], cwd=tmp_path)
    assert again.returncode == 2 and "example_colours" in again.stderr and again.records == []


def test_a_plugin_module_imported_before_the_run_stays(tmp_path, monkeypatch):
    """A test that imported the plugin itself (tests/test_relations.py does) keeps its module."""
    import importlib

    monkeypatch.syspath_prepend(str(THIRDPARTY / "good"))
    monkeypatch.delitem(sys.modules, "negharness_example", raising=False)  # put back as it was, after
    module = importlib.import_module("negharness_example")
    res = run_cli(["run", "--model", "mean_colour", "--task", "example_colours"], cwd=tmp_path,
                  paths=[THIRDPARTY / "good"])
    assert res.returncode == 0, res.stderr
    assert sys.modules.get("negharness_example") is module


def test_library_run_in_a_folder_writes_where_the_command_would(tmp_path):
    [outcome] = run("shapes_clip", "shapes_t2i_original", cwd=tmp_path, limit=8, device="cpu")
    assert (tmp_path / outcome.path).parent == tmp_path / "results" / "shapes_clip"  # relative, as in a shell
    assert run_cli(RUN, cwd=tmp_path).records == []  # the command reuses what the library wrote
