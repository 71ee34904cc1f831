"""The leaderboard workflow (.github/workflows/leaderboard.yml) cannot run here; what can be checked
is that GitHub can read it (valid YAML; an unquoted ": " in a step name once made it invalid) and that
every negharness command it runs is one the CLI accepts, options included."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

WORKFLOW = Path(__file__).resolve().parents[1] / ".github" / "workflows" / "leaderboard.yml"


def _commands() -> list[list[str]]:
    steps = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]["leaderboard"]["steps"]
    out = []
    for step in steps:
        for line in (step.get("run") or "").splitlines():
            line = line.strip()
            if line.startswith("negharness "):
                out.append(shlex.split(line.replace('"$RUNNER_TEMP', '"/tmp'))[1:])
    return out


def test_the_workflow_is_valid_yaml_with_the_documented_jobs():
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert "leaderboard" in data["jobs"]
    names = [s.get("name", "") for s in data["jobs"]["leaderboard"]["steps"]]
    assert any("Pull request" in n for n in names) and any("Push" in n for n in names)


def test_every_negharness_command_in_the_workflow_parses():
    from negharness.cli.parser import build_parser

    commands = _commands()
    assert {c[0] for c in commands} >= {"run", "leaderboard", "diagnose"}
    assert any("--check" in c for c in commands)
    parser = build_parser()
    for argv in commands:
        parser.parse_args(argv)  # an unknown option or a missing value exits (SystemExit) and fails


CI_RUN = WORKFLOW.parents[2] / ".ci" / "run"


def test_cis_second_pass_collects_every_file_that_holds_a_test_it_selects(request):
    """.ci/run's second pass (``-m "needs or perf"``) collects only the test files its grep names; a test marked
    `needs` in a file the grep missed would run in neither pass (the first has no ../shared). Every such test
    this session collected (pass 1 collects them all and skips them) lies in a named file. (`perf` tests are
    deselected here by the default options; the grep names every file that writes `mark.perf`.)"""
    pattern = re.search(r'grep -lE "([^"]+)" tests/test_\*\.py', CI_RUN.read_text(encoding="utf-8"))
    assert pattern, "the second pass's file list is no longer a grep: update this test"
    tests = sorted((CI_RUN.parents[1] / "tests").glob("test_*.py"))
    named = subprocess.run(["grep", "-lE", pattern.group(1), *map(str, tests)], capture_output=True, text=True,
                           check=False).stdout.split()
    marked = {Path(str(item.path)).name for item in request.session.items
              if item.get_closest_marker("needs") or item.get_closest_marker("perf")}
    if not marked:
        pytest.skip("run with the suite's other files: this session collected no test marked needs or perf")
    assert marked <= {Path(n).name for n in named}, sorted(marked - {Path(n).name for n in named})
