"""`negharness.run(...)`, the library door, measures what the command measures."""

import json
import sys

import pytest

import negharness
from negharness.api import UserError
from negharness.records.results import record_files


def test_library_run_equals_the_command(tmp_path, monkeypatch, capsys):
    from negharness.cli.main import main

    args = ["--model", "shapes_clip", "--task", "shapes_t2i_original", "--limit", "40", "--seed", "3"]
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["run", *args, "--output-dir", str(tmp_path / "cli"), "--cache-dir", str(tmp_path / "c1")]) == 0
    [cli_record] = record_files(tmp_path / "cli")
    [out] = negharness.run("shapes_clip", "shapes_t2i_original", limit=40, seed=3, output_dir=str(tmp_path / "lib"),
                           cache_dir=str(tmp_path / "c2"))
    assert not out.skipped and out.path.name == cli_record.name
    cli_rec = json.loads(cli_record.read_text())
    assert out.record["metrics"] == pytest.approx(cli_rec["metrics"], abs=1e-9)
    assert out.record["config_hash"] == cli_rec["config_hash"]  # one identity, whichever door
    again = negharness.run("shapes_clip", ["shapes_t2i_original"], limit=40, seed=3, output_dir=str(tmp_path / "lib"),
                           cache_dir=str(tmp_path / "c2"))
    assert again[0].skipped


def test_a_run_is_checked_once_then_executed(tmp_path, monkeypatch):
    """`negharness run` checks the request before torch (names, the protocol, every task built, every
    input present) and hands that one value to `evaluate_request`: each task is built once, not again
    after torch; the library door, with no checked value, builds each once too."""
    from negharness.cli.main import main
    from negharness.engine import precheck

    built: list[str] = []
    real = precheck.made_task
    monkeypatch.setattr(precheck, "made_task", lambda entry, options: built.append(entry.name) or real(entry, options))
    monkeypatch.setenv("COLUMNS", "200")
    args = ["--model", "shapes_clip", "--task", "shapes_t2i_original", "--task", "shapes_mcq", "--limit", "20"]
    assert main(["run", *args, "--output-dir", str(tmp_path / "cli"), "--cache-dir", str(tmp_path / "c1")]) == 0
    assert sorted(built) == ["shapes_mcq", "shapes_t2i_original"]
    built.clear()
    negharness.run("shapes_clip", ["shapes_t2i_original", "shapes_mcq"], limit=20, output_dir=str(tmp_path / "lib"),
                   cache_dir=str(tmp_path / "c2"))
    assert sorted(built) == ["shapes_mcq", "shapes_t2i_original"]


def test_library_run_refuses_an_unknown_setting_by_name():
    with pytest.raises(UserError, match="unknown setting 'limt'"):
        negharness.run("shapes_clip", "shapes_t2i_original", limt=3)


def test_importing_negharness_imports_no_torch():
    import subprocess

    code = "import negharness, sys; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
