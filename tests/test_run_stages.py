"""Where a run's time goes: stage times in every record (`negharness.engine.stages`) and a cProfile
of the whole command (``--profile FILE`` / ``$NEGHARNESS_PROFILE``) that survives the console
script's fast exit. Sanity only, never speed: parts fit in their wholes, with a tolerance."""

from __future__ import annotations

import json
import pstats
import threading
from types import SimpleNamespace

import pytest

from negharness.engine.stages import RUN_WIDE, STAGES, StageClock, stage_timings

TOLERANCE = 0.05  # seconds: each figure is rounded to the millisecond and read off its own clock


def _records(folder):
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*/*.json"))
            if not p.name.endswith(".perquery.json")}


def test_every_record_has_its_stage_times_and_parts_fit_the_whole(cli, tmp_path):
    res = cli("run", "--model", "shapes_clip", "--task", "shapes_t2?_original", "--limit", "8", "--output-dir",
              str(tmp_path / "res"))
    assert res.returncode == 0, res.stderr
    records = _records(tmp_path / "res")
    assert len(records) == 2
    run_wide = None
    for name, rec in records.items():
        t = rec["timings"]
        named = {k[:-2] for k in t} - {"total", "encode", "wall"}
        assert named <= set(STAGES), (name, t)  # no stage spelt outside `STAGES`
        for stage in (*RUN_WIDE, "embed", "score", "write", "decode", "tokenise"):  # the loops report their waits
            assert f"{stage}_s" in t, (name, stage, t)
        assert all(v >= 0 for v in t.values()), t
        assert t.get("forward_s", 0) + t.get("decode_s", 0) + t.get("tokenise_s", 0) <= t["embed_s"] + TOLERANCE
        assert t["embed_s"] + t["score_s"] == pytest.approx(t["total_s"], abs=TOLERANCE)
        assert t.get("encode_s", 0) <= t["embed_s"] + TOLERANCE
        outside = sum(t[f"{s}_s"] for s in RUN_WIDE)
        assert outside + t["total_s"] + t["write_s"] <= t["wall_s"] + TOLERANCE
        shared = {s: t[f"{s}_s"] for s in RUN_WIDE}
        assert run_wide in (None, shared)  # one run: the same start-up, imports, data and model in every record
        run_wide = shared
    assert any(rec["timings"].get("forward_s", 0) > 0 for rec in records.values())  # something was encoded


def test_the_loops_report_decode_and_tokenise_through_the_context_clock():
    """What the runner's media and text loops call; a misspelt stage is refused, not recorded."""
    from negharness.engine.evaluate import _timings

    stages = StageClock()
    workers = [threading.Thread(target=stages.add, args=("decode", 0.25)) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    with stages.timed("embed"):
        stages.add("tokenise", 0.5)
    stages.add("embed", 2.0)
    with pytest.raises(KeyError, match="unknown stage 'decoding'"):
        stages.add("decoding", 1.0)
    run = StageClock()
    run.add("model_build", 3.0)
    counts = {"encode_seconds": 1.5, "texts_encoded": 2}
    t = _timings(2.5, counts, run, SimpleNamespace(stages=stages))
    assert t["decode_s"] == 1.0 and t["tokenise_s"] == 0.5 and t["model_build_s"] == 3.0 and t["encode_s"] == 1.5
    assert t["score_s"] == pytest.approx(2.5 - t["embed_s"], abs=1e-3)
    assert counts == {"texts_encoded": 2}  # the loop's seconds are a timing, not a count
    assert list(stage_timings({"write": 1, "startup": 2})) == ["startup_s", "write_s"]  # `STAGES` order


def test_a_profile_of_the_whole_command_survives_the_fast_exit(cli_subprocess, tmp_path):
    """The console script ends a torch run with os._exit; the profile is written before it."""
    target = tmp_path / "run.prof"
    res = cli_subprocess("run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "--limit", "4",
                         "--output-dir", str(tmp_path / "res"), env={"NEGHARNESS_PROFILE": str(target)})
    assert res.returncode == 0, res.stderr[-2000:]
    stats = pstats.Stats(str(target))
    functions = {(path, name) for path, _line, name in stats.stats}  # type: ignore[attr-defined]
    assert any(path.endswith("engine/evaluate.py") and name == "execute" for path, name in functions)  # the CLI's road
    assert any(path.endswith("engine/runner.py") and name == "embed_texts" for path, name in functions)
    assert not list(tmp_path.glob(".run.prof.*"))  # written atomically: no temporary file left


def test_the_profile_flag_names_a_file_in_a_folder_that_exists(cli, tmp_path):
    res = cli("--profile", str(tmp_path / "nope" / "run.prof"), "list", "--brief")
    assert res.returncode == 2 and "--profile" in res.stderr and "does not exist" in res.stderr
    res = cli("--profile", str(tmp_path), "list", "--brief")
    assert res.returncode == 2 and "is a folder" in res.stderr
    res = cli("--profile", str(tmp_path / "list.prof"), "list", "--brief")
    assert res.returncode == 0, res.stderr
    assert pstats.Stats(str(tmp_path / "list.prof")).total_calls > 0  # type: ignore[attr-defined]
