"""A run is never silent for long: while a long stage lasts (torch's import, the model's build, the
plan's hashing) a line says what it waits for; short stages and stages a user does not wait on say nothing."""

from __future__ import annotations

import time

from negharness.cli.heartbeat import heartbeat
from negharness.engine.stages import StageClock


def test_a_long_stage_is_said_while_it_lasts_and_a_short_one_is_not():
    lines: list[str] = []
    clock = StageClock()
    with heartbeat(clock, lines.append, interval=0.05):
        with clock.timed("model_build"):
            pass  # over before one interval: nothing to say
        with clock.timed("tokenise"):
            time.sleep(0.3)  # not a stage a user waits on at the console
        quiet = list(lines)
        with clock.timed("torch_import"):
            time.sleep(0.5)  # ten intervals
    assert quiet == []
    assert lines and all(line.startswith("... importing torch and open_clip (") for line in lines)
    assert len(lines) <= 0.5 / 0.05 + 1  # at most one line an interval
    assert clock.seconds()["torch_import"] >= 0.5  # the clock still times what it watched


def test_the_run_command_says_its_stages_when_piped(tmp_path):
    """A cold run through a pipe: the heartbeat's lines are on stderr (a log reads them)."""
    import subprocess
    import sys

    import json

    res = subprocess.run([sys.executable, "-m", "negharness.cli", "run", "--model", "shapes_clip", "--task",
                          "shapes_mcq", "--limit", "4", "--output-dir", str(tmp_path / "r"), "--cache-dir",
                          str(tmp_path / "c")], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    (record,) = [p for p in (tmp_path / "r").rglob("shapes_mcq*.json") if not p.name.endswith(".perquery.json")]
    timings = json.loads(record.read_text())["timings"]
    silent = {"torch_import": "importing torch and open_clip", "model_build": "building the model"}
    for stage, said in silent.items():  # a stage of more than two intervals was said (a quick one need not be)
        if timings.get(f"{stage}_s", 0) > 2 * 2.0 + 0.5:
            assert f"... {said}" in res.stderr, (stage, timings, res.stderr[-1500:])


def test_training_progress_when_piped_says_it_is_alive_before_any_step():
    """`negharness train` piped: plain lines every interval even before the trainer counts anything (it may
    build its data for minutes), then the newest count; none after the block ends."""
    import io

    from negharness.cli.process import LogProgress

    out = io.StringIO()
    with LogProgress(out, interval=0.05, idle_lines=True) as progress:
        time.sleep(0.4)
        bar = progress.add_task("training", total=10)
        progress.advance(bar, 3)
        time.sleep(0.4)
    lines = out.getvalue().splitlines()
    time.sleep(0.2)
    assert out.getvalue().splitlines() == lines  # the watcher stopped with the block
    assert any("working:" in line and "nothing counted yet" in line for line in lines)
    assert any(line.startswith("[negharness] training: 3/10 (30%)") for line in lines)
    assert all(line.startswith("[negharness] ") for line in lines)
