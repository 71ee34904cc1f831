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

from negharness.api.model_options import ModelOptions
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


def test_a_cached_rerun_answers_from_its_records_without_torch(tmp_path, monkeypatch):
    """The first run (the normal way) leaves a receipt; the same command again reads its records
    and prints the same table without importing torch or building the model."""
    from negharness.cli.main import main

    args = ["run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "--limit", "8"]
    monkeypatch.chdir(tmp_path)  # the records go to ./results, as for a user
    assert main(args) == 0
    again = console_script(args, tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert not TORCH_LINE.search(again.stderr), "a cached rerun imported torch"
    assert "shapes_t2i_original [limit=8, n_items=8] (cached)" in again.stdout and "R@1 100.0" in again.stdout


def test_a_receipt_answers_only_while_everything_it_rests_on_holds(tmp_path):
    """Edited record, another request, --overwrite, reduced precision: the normal way decides."""
    import dataclasses

    from negharness.discovery.manager import make_host
    from negharness.engine.evaluate import run_evaluation
    from negharness.engine.plan import RunRequest, answer_from_receipt
    from negharness.records.results import read_record

    host = make_host()
    req = RunRequest(model="shapes_clip", tasks=["shapes_t2i_original"], limit=6, output_dir=str(tmp_path / "res"))
    (first,) = run_evaluation(host, req)
    (answer,) = answer_from_receipt(host, req)
    assert answer.skipped and answer.path == first.path and answer.record == read_record(first.path)
    for other in ({"limit": 7}, {"overwrite": True}, {"precision": "bf16"}, {"use_cache": False}):
        assert answer_from_receipt(host, dataclasses.replace(req, **other)) is None, other
    first.path.write_text(first.path.read_text() + " ")
    assert answer_from_receipt(host, req) is None  # not the record the receipt vouches for


def test_no_receipt_where_an_option_names_a_third_partys_model(tmp_path):
    """``boolean -M base=NAME``: the wrapped model is a plugin of the answer too; a third party's (whose edits
    no package stamp sees) leaves the decision to the normal way, a built-in base keeps the receipt."""
    from negharness.discovery.manager import make_host
    from negharness.engine.plan import RunRequest, receipt_key
    from negharness.testing import keyword_model

    host = make_host()
    host.registry.add("model", "kw", keyword_model, "a third party's model", plugin="elsewhere")

    def request(base: str) -> RunRequest:
        return RunRequest(model="boolean", tasks=["shapes_t2i_original"], output_dir=str(tmp_path / "res"),
                          model_options=ModelOptions(extra={"base": base}))

    assert receipt_key(host, request("shapes_clip")) is not None
    assert receipt_key(host, request("kw")) is None


def test_no_receipt_for_random_weights(tmp_path):
    """A draw of random weights stands for no other draw: its run leaves no receipt."""
    from types import SimpleNamespace

    from negharness.api.task import TaskOptions
    from negharness.discovery.manager import make_host
    from negharness.engine.plan import RECEIPTS, RunOutcome, RunRequest, write_receipt

    record = tmp_path / "res" / "r.json"
    record.parent.mkdir()
    record.write_text("{}")
    task = make_host().registry.get("task", "shapes_t2i_original").load()(TaskOptions(tmp_path))
    planned = [SimpleNamespace(path=record, task=task, root=tmp_path, config_hash="c")]
    req = RunRequest(model="shapes_clip", tasks=["shapes_t2i_original"], output_dir=str(tmp_path / "res"),
                     cache_dir=str(tmp_path / "cache"))
    drawn = RunOutcome("shapes_t2i_original", record, {"model": {"random_weights": "1a2b"}})
    write_receipt(make_host(), req, planned, [drawn])
    assert not (tmp_path / "cache" / RECEIPTS).exists()
    write_receipt(make_host(), req, planned, [RunOutcome("shapes_t2i_original", record, {"model": {}})])
    assert len(list((tmp_path / "cache" / RECEIPTS).glob("*.json"))) == 1  # the same run with named weights has one


def test_the_plan_names_tasks_device_and_existing_records(tmp_path):
    from negharness.discovery.manager import make_host
    from negharness.engine.plan import RunRequest, plan_head, plan_lines

    req = RunRequest(model="shapes_clip", tasks=["shapes_t2*"], output_dir=str(tmp_path))
    (tmp_path / "shapes_clip").mkdir()
    (tmp_path / "shapes_clip" / "shapes_t2i_original.json").write_text("{}")
    assert plan_head(req).startswith("negharness run: model shapes_clip, task shapes_t2*; device auto, precision fp32")
    tasks, records = plan_lines(make_host(), req)
    assert tasks == "tasks: shapes_t2i_original, shapes_t2v_composed, shapes_t2v_negated, shapes_t2v_original"
    assert records.startswith(f"records in {tmp_path / 'shapes_clip'}: 1 of 4 exist")


def test_the_console_exit_flushes_and_runs_atexit_then_skips_the_teardown():
    """`exit_now` (the console script's end when torch is loaded; torch faked here) keeps the exit
    code, what was printed and the atexit handlers; a process without torch, or with a thread still
    working, exits as usual."""
    code = ("import sys, types, atexit; sys.modules['torch'] = types.ModuleType('torch'); "
            "atexit.register(lambda: print('atexit ran')); "
            "from negharness.cli.process import exit_now; print('out', end=''); exit_now(3); print('not reached')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (3, "outatexit ran\n")
    plain = "from negharness.cli.process import exit_now; exit_now(3); print('goes on')"
    assert subprocess.run([sys.executable, "-c", plain], capture_output=True, text=True).stdout == "goes on\n"
    working = ("import sys, types, threading; sys.modules['torch'] = types.ModuleType('torch'); "
               "go = threading.Event(); threading.Thread(target=lambda: (go.wait(), print('thread done'))).start(); "
               "from negharness.cli.process import exit_now; exit_now(3); print('goes on'); go.set()")
    done = subprocess.run([sys.executable, "-c", working], capture_output=True, text=True, timeout=60)
    assert done.stdout == "goes on\nthread done\n"  # a working thread is waited for
