"""The leaderboard workflow (.github/workflows/leaderboard.yml) cannot run here; what can be checked
is that GitHub can read it (valid YAML; an unquoted ": " in a step name once made it invalid) and that
every negharness command it runs is one the CLI accepts, options included."""

from __future__ import annotations

import shlex
from pathlib import Path

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
