"""The console script's quick commands never import torch, from start to exit.

Run as a user runs them (`python -m negharness.cli`, the console script's entry point, in a fresh
process) under ``-X importtime``, which lists every module the process imported, the exit path
included: an in-process call would miss what ``main`` imports once the command is over (the
torchrun check at exit, the one-line error's rank label).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from negharness.records.fake import write_fake_record
from negharness.records.results import ModelConfig

TORCH_LINE = re.compile(r"^import time:.*\|\s*torch$", re.MULTILINE)


def console_script(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "negharness.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


QUICK = {  # command -> its exit code
    "list --brief": (["list", "--brief"], 0),
    "leaderboard": (["leaderboard"], 0),
    "--help": (["--help"], 0),
    "usage error": (["run", "--model", "shapes_clip"], 2),  # argparse: --task is required
    "one-line error": (["-p", "shapes", "list"], 2),  # a UserError, printed by main's error path
}


@pytest.mark.parametrize("name", list(QUICK))
def test_quick_commands_never_import_torch(name, tmp_path):
    args, code = QUICK[name]
    write_fake_record(tmp_path / "results", ModelConfig("clip", {}), "t1", {"acc": [100.0, 0.0, 100.0]})
    done = console_script(args, tmp_path)
    errors = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("import time:"))
    assert done.returncode == code, errors
    assert "import time:" in done.stderr  # the listing is there to read
    assert not TORCH_LINE.search(done.stderr), f"`negharness {' '.join(args)}` imported torch"
