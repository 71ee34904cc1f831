"""The record checker's memo (issue 51, item 3): the board verifies a record by a digest of its
per-query file and recomputes intervals only when something the answer depends on changed; the memo
lives under the run's own cache root; a damaged or odd memo file is rebuilt, never trusted."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any, Callable

import pytest

from negharness.records import check, check_memo
from negharness.records.check import RecordError, read_checked
from negharness.records.fake import write_fake_record
from negharness.records.results import ModelConfig
from negharness.scoring import perquery

A, B = ModelConfig("clip", {}), ModelConfig("negclip", {})


def _record(root: Path, model: ModelConfig = A, rate: int = 10) -> Path:
    hits = [100.0] * rate + [0.0] * (20 - rate)
    return write_fake_record(root, model, "t1", {"R@1": hits, "MIR": [1 / (1 + i % 7) for i in range(20)]},
                             leaderboard=["R@1", "MIR"], resamples=200)


def _memos(cache: Path) -> list[Path]:
    """The record memos (a single read's, a run's) under ``cache``."""
    return sorted(p for p in (cache / check_memo.MEMO_FOLDER).glob("*.json") if not p.name.startswith(check_memo.BOARD_PREFIX))


def _board_answers(cache: Path) -> int:
    """How many answers the board memos (a board's, export's, --check's pass) under ``cache`` hold."""
    return sum(len(check_memo.read_board_memo(p)) for p in (cache / check_memo.MEMO_FOLDER).glob(f"{check_memo.BOARD_PREFIX}*.json"))


def _problems(path: Path, cache: Path) -> list[str]:
    try:
        read_checked(path, cache_dir=cache)
    except RecordError as exc:
        return exc.lines
    return []


def _edit_record(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    rec = json.loads(path.read_text())
    edit(rec)
    path.write_text(json.dumps(rec))


def _swap_values_in_place(record: Path) -> None:
    """Two per-query R@1 values swapped (the metric, the size, the inode and the mtime unchanged): only
    the bytes say the file changed, and the intervals they give are not the record's."""
    side = perquery.sidecar_path(record)
    before = side.stat()
    body = json.loads(side.read_text())
    vals = body["values"]["R@1"]
    vals[0], vals[-1] = vals[-1], vals[0]
    body["values"]["MIR"] = body["values"]["MIR"][::-1]  # same mean, other resampled means
    text = json.dumps(body, separators=(",", ":"), sort_keys=True) + "\n"
    assert len(text.encode()) == before.st_size
    with open(side, "r+b") as fh:  # in place: the same inode
        fh.write(text.encode())
    os.utime(side, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert side.stat().st_ino == before.st_ino and side.stat().st_mtime_ns == before.st_mtime_ns


def _seed(rec: dict[str, Any]) -> None:
    rec["interval_method"]["seed"] = 1


def _resamples(rec: dict[str, Any]) -> None:
    rec["interval_method"]["resamples"] = 300


def _interval(rec: dict[str, Any]) -> None:
    rec["intervals"]["R@1"] = [0.0, 100.0]


def _leaderboard_metrics(rec: dict[str, Any]) -> None:
    rec["task"]["leaderboard_metrics"] = ["R@1"]  # MIR's interval is then not checked, R@1's still is
    rec["intervals"]["R@1"] = [1.0, 2.0]


@pytest.mark.parametrize("change", [
    lambda record, mp: _swap_values_in_place(record),  # the per-query file's bytes
    lambda record, mp: _edit_record(record, _seed),  # the interval method: seed
    lambda record, mp: _edit_record(record, _resamples),  # ... resamples
    lambda record, mp: _edit_record(record, _interval),  # the record's own intervals
    lambda record, mp: _edit_record(record, _leaderboard_metrics),  # which metrics the intervals cover
    lambda record, mp: mp.setattr(check_memo, "code_version", lambda: "another checker"),  # the checking code
], ids=["per-query-bytes", "seed", "resamples", "interval", "task", "code-version"])
def test_changing_any_input_of_the_answer_misses_the_memo(tmp_path, monkeypatch, change):
    """A forged answer planted under the record's key is returned while nothing changed (the memo is
    used) and never once one input of the answer changed (the key is everything it depends on)."""
    cache = tmp_path / "cache"
    record = _record(tmp_path / "results")
    assert _problems(record, cache) == []
    [memo] = _memos(cache)
    check_memo.write_memo(memo, memo.stem, ["forged answer"])
    assert any("forged answer" in p for p in _problems(record, cache))
    change(record, monkeypatch)
    assert not any("forged answer" in p for p in _problems(record, cache))


def test_the_memo_key_reads_the_source_of_every_checking_module():
    """`code_version` hashes each `MEMO_CODE` module's source; a module it cannot find (a rename) would be
    hashed as its bare name, so an edit there would no longer make remembered answers lapse."""
    import importlib.util

    for name in check_memo.MEMO_CODE:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin and Path(spec.origin).is_file(), name
    assert {"negharness.records.check", "negharness.records.board_pass"} <= set(check_memo.MEMO_CODE)


def test_changed_inputs_give_the_new_answer_and_a_restored_one_the_old(tmp_path):
    cache = tmp_path / "cache"
    record = _record(tmp_path / "results")
    good = record.read_bytes()
    assert _problems(record, cache) == []
    _edit_record(record, _seed)
    assert any("is not what its per-query values give" in p for p in _problems(record, cache))
    record.write_bytes(good)
    assert _problems(record, cache) == []
    _swap_values_in_place(record)
    assert any("is not what its per-query values give" in p for p in _problems(record, cache))


def test_a_memo_hit_parses_no_per_query_values_and_resamples_nothing(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    record = _record(tmp_path / "results")
    assert _problems(record, cache) == []

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("recomputed on a memo hit")
    monkeypatch.setattr(perquery, "parse_sidecar", forbidden)
    monkeypatch.setattr(perquery, "intervals", forbidden)
    assert _problems(record, cache) == []


def test_the_memo_lives_under_the_commands_cache_dir(cli, tmp_path, monkeypatch):
    """--cache-dir, then $NEGHARNESS_CACHE: the memo goes where the run's cache goes, never elsewhere."""
    env_cache, explicit = tmp_path / "env-cache", tmp_path / "explicit"
    monkeypatch.setenv("NEGHARNESS_CACHE", str(env_cache))
    _record(tmp_path / "results")
    _record(tmp_path / "results", B, rate=14)
    done = cli("leaderboard", "--results-dir", "results", "--cache-dir", str(explicit))
    assert done.returncode == 0, done.stderr
    assert _board_answers(explicit) == 2 and not env_cache.exists()
    shutil.rmtree(explicit)
    done = cli("compare", "clip", "negclip", "--results-dir", "results", "--resamples", "50",
               "--cache-dir", str(explicit))
    assert done.returncode == 0, done.stderr
    assert len(_memos(explicit)) == 2 and not env_cache.exists()
    done = cli("leaderboard", "--results-dir", "results", "--check")  # no --cache-dir: $NEGHARNESS_CACHE
    assert done.returncode == 0, done.stdout + done.stderr
    assert _board_answers(env_cache) == 2
    assert check_memo.memo_folder(explicit) == explicit / check_memo.MEMO_FOLDER
    assert check_memo.memo_folder() == env_cache / check_memo.MEMO_FOLDER


def test_another_records_memo_copied_over_this_ones_is_not_trusted(tmp_path):
    """A memo file renamed or copied onto another key (a synced cache, a hand-made file) answers for
    the record it was made for only: a refused record's answer never lets another through, nor the
    reverse."""
    good, bad = _record(tmp_path / "results"), _record(tmp_path / "results", B, rate=14)
    _edit_record(bad, _interval)
    assert _problems(good, tmp_path / "c1") == [] and _problems(bad, tmp_path / "c2") != []
    [good_memo], [bad_memo] = _memos(tmp_path / "c1"), _memos(tmp_path / "c2")
    good_text, bad_text = good_memo.read_bytes(), bad_memo.read_bytes()
    good_memo.write_bytes(bad_text)
    bad_memo.write_bytes(good_text)
    assert _problems(good, tmp_path / "c1") == []
    assert any("interval of 'R@1'" in p for p in _problems(bad, tmp_path / "c2"))


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.unlink()
    (path / "inner").mkdir(parents=True)


def _forged_link(path: Path) -> None:
    forged = path.with_name("elsewhere.txt")
    check_memo.write_memo(forged, path.stem, [])
    path.unlink()
    path.symlink_to(forged)


@pytest.mark.parametrize("damage", [
    lambda p: p.write_bytes(p.read_bytes()[:-9]),  # torn
    lambda p: p.write_text("[]\n"),  # an answer with no key (the old memo's form)
    lambda p: p.write_text(json.dumps({"format": check_memo.MEMO_FORMAT, "key": p.stem, "problems": [1, 2]})),
    lambda p: p.write_bytes(b"\x00" * 100),
    lambda p: p.write_bytes(b" " * (check_memo.MEMO_MAX_BYTES + 10)),  # too large to be a memo
    _fifo, _folder, _forged_link,
], ids=["torn", "keyless", "not-lines", "zeros", "huge", "fifo", "folder", "symlink"])
def test_a_damaged_or_odd_memo_is_rebuilt_silently(tmp_path, damage):
    """Never trusted, never a hang (a FIFO is opened without blocking and refused by its type), never
    an error: the answer is recomputed and, where the name can be replaced, written again atomically."""
    cache = tmp_path / "cache"
    bad = _record(tmp_path / "results", B)
    _edit_record(bad, _interval)
    want = _problems(bad, cache)
    assert want and not any(".tmp" in p.name for p in (cache / check_memo.MEMO_FOLDER).iterdir())
    [memo] = _memos(cache)
    damage(memo)
    signal.signal(signal.SIGALRM, lambda *a: pytest.fail("reading the memo blocked"))
    signal.alarm(20)
    try:
        assert _problems(bad, cache) == want
    finally:
        signal.alarm(0)
    if not memo.is_dir():
        assert memo.is_file() and not memo.is_symlink()
        assert check_memo.read_memo(memo, memo.stem) == [p.removeprefix(f"{bad}: ").removesuffix(f"; {check.FIX}")
                                                    for p in want]
