"""Atomic writes, result records, and a leaderboard that is byte-identical for the same records."""

import json
import os
from pathlib import Path

import pytest

from negharness.atomic import atomic_write, atomic_write_json
from negharness.leaderboard import build_tables, to_markdown
from negharness.results import ModelConfig, iter_records, record_path, write_record


def test_failed_write_leaves_old_file_and_no_temp(tmp_path):
    target = tmp_path / "rec.json"
    atomic_write_json(target, {"v": 1})

    def half_then_crash(tmp: Path) -> None:
        tmp.write_text('{"v": 2, "trunc')
        raise OSError("disk full")

    with pytest.raises(OSError):
        atomic_write(target, half_then_crash)
    assert json.loads(target.read_text()) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.json"]


def _record(model: ModelConfig, task: str, value: float, created: str, limited: bool = False, family="fam"):
    return {
        "schema_version": 1, "created_at": created, "limited": limited,
        "model": {"name": model.name, "label": model.label, "options": model.options},
        "task": {"name": task, "family": family, "leaderboard_metrics": ["MIR", "MeanR"]},
        "metrics": {"MIR": value, "MeanR": 10 - value * 10},
        "metric_info": {"MIR": {"higher_is_better": True, "fmt": ".3f"},
                        "MeanR": {"higher_is_better": False, "fmt": ".1f"}},
        "main_score": {"name": "MIR", "value": value},
    }


def _write_set(root: Path):
    a, b = ModelConfig("clip", {}), ModelConfig("clip", {"arch": "ViT-L-14"}, "bf16")
    write_record(record_path(root, a, "t1"), _record(a, "t1", 0.5, "2026-01-01T00:00:00+00:00"))
    write_record(record_path(root, b, "t1"), _record(b, "t1", 0.7, "2026-01-02T00:00:00+00:00"))
    write_record(record_path(root, a, "t2"), _record(a, "t2", 0.2, "2026-01-01T00:00:00+00:00"))
    limited = ModelConfig("quick", {})
    write_record(record_path(root, limited, "t1"), _record(limited, "t1", 0.99, "2026-01-03T00:00:00+00:00", True))
    return a, b


def test_leaderboard_is_deterministic_and_marks_best_by_direction(tmp_path):
    root = tmp_path / "results"
    _write_set(root)
    out = tmp_path / "leaderboard" / "README.md"
    md1 = to_markdown(build_tables(iter_records(root)), out)
    md2 = to_markdown(build_tables(iter_records(root)), out)
    assert md1 == md2
    assert "quick" not in md1  # --limit runs never enter
    row_l = next(line for line in md1.splitlines() if line.startswith("| clip (arch=ViT-L-14, bf16)"))
    assert "**[0.700](../results/clip@" in row_l  # higher MIR is best
    assert "**[3.0](../results/clip@" in row_l  # lower MeanR is best: 3.0 beats 5.0
    row_b = next(line for line in md1.splitlines() if line.startswith("| clip |"))
    assert "| [0.500](../results/clip/t1.json) | [5.0](../results/clip/t1.json) |" in row_b
    assert "**[0.200](../results/clip/t2.json)**" in row_b  # the only value in its column
    assert "| – |" in row_l  # no t2 record for the large model


def test_newest_record_wins_and_rewrites_are_byte_identical(tmp_path):
    root = tmp_path / "results"
    a, _ = _write_set(root)
    out = tmp_path / "README.md"
    before = to_markdown(build_tables(iter_records(root)), out)
    path = record_path(root, a, "t1")
    write_record(path, _record(a, "t1", 0.9, "2026-02-01T00:00:00+00:00"))
    after = to_markdown(build_tables(iter_records(root)), out)
    assert before != after and "0.900" in after and "0.500" not in after
    write_record(path, _record(a, "t1", 0.5, "2026-01-01T00:00:00+00:00"))
    assert to_markdown(build_tables(iter_records(root)), out) == before


def test_leaderboard_cli_output_is_byte_identical(cli, tmp_path):
    _write_set(tmp_path / "results")
    first = cli("leaderboard")
    assert first.returncode == 0, first.stderr
    text1 = (tmp_path / "results" / "README.md").read_bytes()  # beside the records it reads
    os.utime(tmp_path / "results")  # nothing changed but time
    cli("leaderboard")
    assert (tmp_path / "results" / "README.md").read_bytes() == text1
    assert "clip (arch=ViT-L-14, bf16)" in first.stdout


def test_the_committed_leaderboard_matches_its_records():
    """leaderboard/README.md is generated: a record added or changed without refreshing the board
    (`negharness leaderboard --results-dir leaderboard/results --out leaderboard/README.md`) fails CI."""
    board = Path(__file__).resolve().parents[1] / "leaderboard"
    expected = to_markdown(build_tables(iter_records(board / "results")), board / "README.md")
    assert (board / "README.md").read_text(encoding="utf-8") == expected
