"""One reader of result records (`negharness.records.check.read_checked`) with one policy: reuse,
the leaderboard, export, compare and ``leaderboard --check`` accept and refuse the same records, and
read the same numbers (issue 45, item 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from negharness.records.check import RecordError, read_checked
from negharness.records.compare import load_runs
from negharness.records.export import export
from negharness.records.fake import write_fake_record
from negharness.records.results import ModelConfig, read_record

A, B = ModelConfig("clip", {}), ModelConfig("negclip", {})


def _hits(k: int, n: int = 20) -> list[float]:
    return [100.0] * k + [0.0] * (n - k)


def _edited(path: Path, value: float) -> None:
    """R@1 written over in the record, its per-query values untouched."""
    rec = json.loads(path.read_text())
    rec["metrics"]["R@1"] = rec["main_score"]["value"] = value
    path.write_text(json.dumps(rec))


def test_every_reader_reads_a_valid_record_as_one_number(tmp_path):
    root = tmp_path / "results"
    path = write_fake_record(root, A, "t1", {"R@1": _hits(10)})
    assert read_checked(path)["metrics"]["R@1"] == read_record(path)["metrics"]["R@1"] == 50.0
    export(root, tmp_path / "mteb", "mteb")
    [out] = [p for p in (tmp_path / "mteb").rglob("t1.json")]
    assert json.loads(out.read_text())["scores"]["test"][0]["R@1"] == 0.5  # MTEB keeps shares of 1


def test_a_record_check_refuses_leaves_the_project_by_no_road(tmp_path, cli):
    """fc4bba0: ``leaderboard --check`` named both problems of an R@1 edited from 50 to 100, while
    ``export --format mteb`` wrote "R@1": 100.0 and exited 0, the board showed 100.0 and reuse
    answered from it."""
    root = tmp_path / "results"
    path = write_fake_record(root, A, "t1", {"R@1": _hits(10)})
    write_fake_record(root, B, "t1", {"R@1": _hits(12)})
    _edited(path, 100.0)
    check = cli("leaderboard", "--results-dir", str(root), "--out", str(tmp_path / "board.md"), "--check")
    assert check.returncode == 1 and f"{path}: " in check.stdout and "R@1" in check.stdout, check.stdout
    exported = cli("export", "--format", "mteb", str(root), str(tmp_path / "mteb"))
    assert exported.returncode == 2 and str(path) in exported.stderr and "R@1" in exported.stderr, exported.stderr
    assert not list((tmp_path / "mteb").rglob("t1.json"))
    board = cli("leaderboard", "--results-dir", str(root), "--out", str(tmp_path / "board.md"))
    assert board.returncode == 2 and str(path) in board.stderr and not (tmp_path / "board.md").exists()
    assert read_record(path) is None  # reuse runs it again
    with pytest.raises(RecordError, match=r"R@1"):
        load_runs(str(path.parent), root)
    with pytest.raises(RecordError) as refused:
        read_checked(path)
    assert [line for line in check.stdout.splitlines() if line.startswith(f"{path}: ")] == refused.value.lines


def test_a_record_whose_limit_and_limited_disagree_is_refused_by_the_one_reader(tmp_path):
    """Review: `"limit": 4` with `"limited": false` made `read_checked` treat a record as a --limit run
    and skip its checks, while the board, export and compare took it as a full run: an edited metric
    reached the board."""
    root = tmp_path / "results"
    path = write_fake_record(root, A, "t1", {"R@1": _hits(10)})
    rec = json.loads(path.read_text())
    rec["metrics"]["R@1"] = rec["main_score"]["value"] = 99.0
    rec["limit"] = 4
    path.write_text(json.dumps(rec))
    with pytest.raises(RecordError, match="'limited' is False but 'limit' is 4"):
        read_checked(path)
    assert read_record(path) is None
