"""A board's pass over a results folder (issue 51, item 3): the per-query checks answered together,
from one memo file per results folder (`check_memo.BoardMemo`), else computed in this process or in a
process pool (`board_pass.Checker`). Whichever road, the same records, the same refusals and the same
board, byte for byte, as each record read alone (`read_checked`); a damaged board memo is no memo."""

from __future__ import annotations

import json
import os
import shutil
import signal
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable

import pytest

from negharness.records import board_pass, check_memo, schema
from negharness.records.board_pass import checked_records, duplicate_problems
from negharness.records.check import RecordError, read_checked
from negharness.records.fake import write_fake_record
from negharness.records.results import ModelConfig
from negharness.records.schema import record_files
from negharness.report.leaderboard import build_tables, to_markdown
from negharness.scoring import perquery

HITS = [100.0, 0.0, 0.0, 100.0, 0.0] * 4


def _write(root: Path, name: str, rate: int = 0, **kwargs: Any) -> Path:
    hits = HITS[rate:] + HITS[:rate]
    return write_fake_record(root, ModelConfig(name, {}), kwargs.pop("task", "t1"),
                             {"R@1": hits, "MIR": [1 / (1 + (i + rate) % 7) for i in range(20)]},
                             leaderboard=["R@1", "MIR"], resamples=120, **kwargs)


def _edit(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    rec = json.loads(path.read_text())
    edit(rec)
    path.write_text(json.dumps(rec))


def _results(root: Path) -> Path:
    """Records of every kind a pass meets: plain, clustered, with uncovered queries, a --limit one,
    one refused by its intervals, one by its per-query values, one unreadable, and a copy of a
    record under another model (the same per-query check: one answer for both)."""
    results = root / "results"
    for i in range(4):
        _write(results, f"model{i}", rate=i)
    _write(results, "clustered", rate=1, clusters=[f"img{i // 3}" for i in range(20)], cluster="image")
    write_fake_record(results, ModelConfig("mcq", {}), "t2", {"acc": [100.0, None, 0.0, 100.0] * 5,
                                                                   "acc_neg": [None, 0.0, None, 100.0] * 5},
                      leaderboard=["acc", "acc_neg"], resamples=120)
    _write(results, "limited", limit=10)
    _edit(_write(results, "wide", rate=2), lambda rec: rec["intervals"].update({"R@1": [0.0, 100.0]}))
    side = perquery.sidecar_path(_write(results, "swapped", rate=3))
    body = json.loads(side.read_text())
    body["values"]["R@1"] = body["values"]["R@1"][::-1][:-1] + [50.0]
    side.write_text(json.dumps(body))
    (results / "torn").mkdir()
    (results / "torn" / "t1.json").write_text('{"schema_version": 1, "model"')
    copy = results / "model0-copy"
    shutil.copytree(results / "model0", copy)
    _edit(copy / "t1.json", lambda rec: rec["model"].update({"label": "model0-copy", "name": "model0-copy"}))
    return results


def _alone(results: Path, cache: Path) -> tuple[list[tuple[Path, dict[str, Any]]], list[str]]:
    """Each record read alone (`read_checked`, the road reuse and compare take), as a board would
    list them: what the pass must give."""
    records, problems = [], []
    for path in record_files(results):
        try:
            records.append((path, read_checked(path, results, cache_dir=cache)))
        except RecordError as exc:
            problems.extend(exc.lines)
    return records, problems + duplicate_problems(records)


def _board(results: Path, cache: Path, out: Path) -> tuple[list[tuple[Path, dict[str, Any]]], list[str], str]:
    problems: list[str] = []
    records = list(checked_records(results, problems, cache))
    return records, problems, to_markdown(build_tables(records, published=False), out / "README.md")


class _SpyPool(board_pass.ProcessPoolExecutor):
    """The real pool, counting what it was given."""

    started = 0
    parts = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        type(self).started += 1
        super().__init__(*args, **kwargs)

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        type(self).parts += 1
        return super().submit(*args, **kwargs)


ROADS = ["reads pooled", "checks pooled"]


def _force_pool(monkeypatch: pytest.MonkeyPatch, road: str, pool: type = _SpyPool) -> None:
    """The pool on ``road``: the whole board read by workers in parts (`board_pass.pooled_reads`), or read
    here with the per-query checks computed by workers (`board_pass.Checker`)."""
    _SpyPool.started = _SpyPool.parts = 0
    if road == "reads pooled":
        monkeypatch.setattr(board_pass, "POOL_MIN_RECORDS", 0)
        monkeypatch.setattr(board_pass, "POOL_MIN_WORK", 10**18)
        monkeypatch.setattr(board_pass, "PART_RECORDS", 3)
    else:
        monkeypatch.setattr(board_pass, "POOL_MIN_RECORDS", 10**9)
        monkeypatch.setattr(board_pass, "POOL_MIN_WORK", 0)
        monkeypatch.setattr(board_pass, "PART_JOBS", 2)
    monkeypatch.setattr(board_pass, "pool_workers", lambda: 2)
    monkeypatch.setattr(board_pass, "ProcessPoolExecutor", pool)


@pytest.mark.parametrize("road", ROADS)
def test_cold_warm_pooled_or_not_the_same_board_as_each_record_read_alone(tmp_path, monkeypatch, road):
    results = _results(tmp_path)
    want_records, want_problems = _alone(results, tmp_path / "alone")
    assert len(want_problems) == 3 and len(want_records) == 8  # wide, swapped, torn refused

    with monkeypatch.context() as mp:  # this process's road
        mp.setattr(board_pass, "POOL_MIN_RECORDS", 10**9)
        mp.setattr(board_pass, "POOL_MIN_WORK", 10**18)
        here = _board(results, tmp_path / "here", tmp_path)
        assert here[:2] == (want_records, want_problems)
        assert here == _board(results, tmp_path / "here", tmp_path)  # warm: from the board memo

    _force_pool(monkeypatch, road)
    pooled = _board(results, tmp_path / "pooled", tmp_path)
    assert _SpyPool.started == 1 and _SpyPool.parts >= 3  # the pool did the work, in parts
    assert pooled == here
    assert pooled == _board(results, tmp_path / "pooled", tmp_path)  # warm
    assert "](results/model0/t1.json)" in here[2] and "](results/clustered/t1.json)" in here[2]  # a real board


@pytest.mark.parametrize("road", ROADS)
@pytest.mark.parametrize("broken", ["cannot start", "worker died"])
def test_a_pool_that_cannot_run_gives_the_same_answers_from_this_process(tmp_path, monkeypatch, broken, road):
    results = _results(tmp_path)
    want = _alone(results, tmp_path / "alone")

    class NoPool:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if broken == "cannot start" and road == "reads pooled":
                raise OSError("no processes here")

        def submit(self, *args: Any, **kwargs: Any) -> Future[Any]:
            if broken == "cannot start":
                raise OSError("no processes here")
            future: Future[Any] = Future()
            future.set_exception(BrokenProcessPool("a worker died"))
            return future

        def map(self, *args: Any, **kwargs: Any) -> Any:
            raise BrokenProcessPool("a worker died")

        def shutdown(self, *args: Any, **kwargs: Any) -> None:
            pass

    _force_pool(monkeypatch, road, NoPool)
    assert _board(results, tmp_path / "cache", tmp_path)[:2] == want


def _board_memos(cache: Path) -> list[Path]:
    return sorted((cache / check_memo.MEMO_FOLDER).glob(f"{check_memo.BOARD_PREFIX}*"))


def test_one_memo_file_per_board_rewritten_only_when_its_answers_change(tmp_path, monkeypatch):
    results, cache = _results(tmp_path), tmp_path / "cache"
    _board(results, cache, tmp_path)
    [memo] = _board_memos(cache)
    assert sorted(p.name for p in (cache / check_memo.MEMO_FOLDER).iterdir()) == [memo.name]  # no file per record
    answers = check_memo.read_board_memo(memo)
    assert len(answers) == 8  # eleven records: the --limit and torn ones unchecked, the copy shares model0's
    assert sum(bool(found) for found in answers.values()) == 2
    before = memo.stat()

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("recomputed on a warm pass")
    with monkeypatch.context() as mp:
        mp.setattr(perquery, "parse_sidecar", forbidden)
        mp.setattr(perquery, "intervals", forbidden)
        _board(results, cache, tmp_path)
    assert (memo.stat().st_ino, memo.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    shutil.rmtree(results / "wide")
    _board(results, cache, tmp_path)
    assert len(check_memo.read_board_memo(memo)) == 7  # the answers of records no longer there are dropped


def test_a_board_uses_the_record_memos_a_run_left(tmp_path, monkeypatch):
    """`remember_written` seeds a record memo after a run: the first board verifies by a hash."""
    results, cache = tmp_path / "results", tmp_path / "cache"
    paths = [_write(results, f"model{i}", rate=i) for i in range(3)]
    for path in paths:
        check_memo.remember_written(path, json.loads(path.read_text()), cache)

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("recomputed")
    monkeypatch.setattr(perquery, "intervals", forbidden)
    assert [p for p, _ in checked_records(results, None, cache)] == paths


def _swap_values_in_place(record: Path) -> None:
    """Two per-query values swapped, the file's size, inode and time unchanged: only its bytes changed."""
    side = perquery.sidecar_path(record)
    before = side.stat()
    body = json.loads(side.read_text())
    vals = body["values"]["R@1"]
    other = next(i for i, v in enumerate(vals) if v != vals[0])
    vals[0], vals[other] = vals[other], vals[0]
    with open(side, "r+b") as fh:
        fh.write(json.dumps(body, separators=(",", ":"), sort_keys=True).encode() + b"\n")
    os.utime(side, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (side.stat().st_size, side.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def test_a_forged_board_answer_is_used_only_while_nothing_it_depends_on_changed(tmp_path):
    results, cache = tmp_path / "results", tmp_path / "cache"
    record = _write(results, "model0", rate=1)
    assert _board(results, cache, tmp_path)[1] == []
    [memo] = _board_memos(cache)
    forged = {key: ["forged answer"] for key in check_memo.read_board_memo(memo)}
    memo.write_text(json.dumps({"format": check_memo.BOARD_FORMAT, "answers": forged}))
    assert any("forged answer" in p for p in _board(results, cache, tmp_path)[1])  # the memo is read
    _swap_values_in_place(record)
    found = _board(results, cache, tmp_path)[1]
    assert found and not any("forged answer" in p for p in found)  # recomputed: the bytes changed


from test_record_memo import _fifo, _folder  # noqa: E402  (a memo made a FIFO or a folder: the same damage)


def _forged_link(path: Path) -> None:
    forged = path.with_name("elsewhere.txt")
    forged.write_text(json.dumps({"format": check_memo.BOARD_FORMAT,
                                  "answers": {k: ["forged"] for k in check_memo.read_board_memo(path)}}))
    path.unlink()
    path.symlink_to(forged)


def _answers(path: Path, value: Any) -> None:
    path.write_text(json.dumps({"format": check_memo.BOARD_FORMAT, "answers": value}))


@pytest.mark.parametrize("damage", [
    lambda p: p.write_bytes(p.read_bytes()[:-9]),  # torn
    lambda p: p.write_text(json.dumps({"format": "another", "answers": {}})),
    lambda p: _answers(p, ["not", "a", "mapping"]),
    lambda p: _answers(p, {k: [1, 2] for k in check_memo.read_board_memo(p)}),  # not lines: each left out
    lambda p: _answers(p, {k: "forged" for k in check_memo.read_board_memo(p)}),
    lambda p: p.write_bytes(b"\x00" * 100),
    _fifo, _folder, _forged_link,
], ids=["torn", "format", "not-a-mapping", "not-lines", "not-a-list", "zeros", "fifo", "folder", "symlink"])
def test_a_damaged_board_memo_is_no_memo(tmp_path, damage):
    """Never trusted, never a hang, never an error: the answers are recomputed, the same as fresh
    ones, and the memo written again where its name can be replaced."""
    results, cache = _results(tmp_path), tmp_path / "cache"
    want = _board(results, cache, tmp_path)
    [memo] = _board_memos(cache)
    damage(memo)
    signal.signal(signal.SIGALRM, lambda *a: pytest.fail("reading the board memo blocked"))
    signal.alarm(30)
    try:
        assert _board(results, cache, tmp_path) == want
    finally:
        signal.alarm(0)
    if not memo.is_dir():
        assert memo.is_file() and not memo.is_symlink() and len(check_memo.read_board_memo(memo)) == 8


def test_each_results_folder_has_its_own_board_memo(tmp_path):
    cache = tmp_path / "cache"
    one, two = tmp_path / "one" / "results", tmp_path / "two" / "results"
    _write(one, "model0")
    _write(two, "model1", rate=2)
    _board(one, cache, tmp_path)
    _board(two, cache, tmp_path)
    assert [len(check_memo.read_board_memo(p)) for p in _board_memos(cache)] == [1, 1]


@pytest.mark.parametrize("vals", [
    [1, None, 2.5], [True, 0], [None, None], [100, 0, 100], ["1.5", 2], [float("nan"), 1], [float("inf"), 1],
    [float("-inf"), float("inf")], [1e308, 1e308], [[1], 2], [-0.0, None], [10**400, 1], ["word", 1],
], ids=["plain", "bool", "none-covered", "ints", "text-number", "nan", "inf", "inf-inf", "overflow", "list",
        "minus-zero", "huge-int", "word"])
def test_the_contracts_fast_road_answers_as_the_value_by_value_one(vals, monkeypatch):
    """`perquery.problems` sums a metric's values in C when they are plain numbers; whatever they are,
    the answer is the value-by-value road's, and a value that is no number is named, never a crash."""
    pq = {"ids": [f"q{i}" for i in range(len(vals))], "values": {"m": vals}}
    fast = perquery.problems(pq, {"m": 1.75})
    monkeypatch.setattr(perquery, "_plain_mean", lambda v: None)
    assert fast == perquery.problems(pq, {"m": 1.75})
    assert (fast == []) == (vals in ([1, None, 2.5], ["1.5", 2]))
    if vals in ([[1], 2], ["word", 1]):
        assert fast == [f"'m': per-query value {str(vals[0])!r} for id 'q0' is not a number"]


@pytest.mark.parametrize("rec", [
    {"metrics": {"a": 1.0, "b": 2}, "main_score": {"value": 1.0}, "intervals": {"a": [0.5, 1.5]}},
    {"metrics": {"a": float("nan")}}, {"metrics": {"a": 1}, "intervals_rows": {"a": [0, float("inf")]}},
    {"metrics": {}, "main_score": {"value": None}, "standard_errors": {"a": float("-inf")}},
    {"metrics": {"a": 1e308, "b": 1e308}}, {"metrics": "x", "intervals": {"a": ["x", None]}}, {},
], ids=["finite", "nan", "inf", "none-and-inf", "overflowing-sum", "odd", "empty"])
def test_the_records_finite_numbers_fast_road_answers_as_the_value_by_value_one(rec, monkeypatch):
    fast = schema.nonfinite_fields(rec)
    monkeypatch.setattr(schema, "_all_finite", lambda r: False)
    assert fast == schema.nonfinite_fields(rec)


def test_a_single_read_after_a_board_takes_the_boards_answer_while_nothing_changed(tmp_path, monkeypatch):
    """Reuse and `compare` read records one at a time: after a board they verify each by its hash
    from the board's memo (no record memo was written), and recompute once the per-query file changed."""
    results, cache = tmp_path / "results", tmp_path / "cache"
    record = _write(results, "model0", rate=1)
    _board(results, cache, tmp_path)
    [memo] = _board_memos(cache)
    memo.write_text(json.dumps({"format": check_memo.BOARD_FORMAT,
                                "answers": {k: ["forged answer"] for k in check_memo.read_board_memo(memo)}}))
    with pytest.raises(RecordError, match="forged answer"):
        read_checked(record, cache_dir=cache)
    _swap_values_in_place(record)
    with pytest.raises(RecordError) as refused:
        read_checked(record, cache_dir=cache)
    assert "forged answer" not in str(refused.value) and "is not what its per-query values give" in str(refused.value)
