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
from types import SimpleNamespace
from pathlib import Path

import pytest

from negharness.api import ModelOptions
from negharness.records.fake import write_fake_record
from negharness.records.results import ModelConfig

TORCH_LINE = re.compile(r"^import time:.*\|\s*torch$", re.MULTILINE)
HEARTBEAT = re.compile(r"^\.\.\. .* \(\d+ s\)$")  # `negharness.cli.heartbeat`: a long stage, said every 2 s


def said(stderr: str) -> list[str]:
    """The lines a command said on stderr, without ``-X importtime``'s listing and the heartbeat's lines
    (which a loaded machine adds to any stage that lasts 2 s: never a test's concern)."""
    return [line for line in stderr.splitlines()
            if line.strip() and not line.startswith("import time:") and not HEARTBEAT.match(line)]


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
    """The first run (the normal way) remembers the model's fingerprint; the same command again, and any
    subset of its tasks in another order, reads its records and prints the table without importing torch."""
    from negharness.cli.main import main

    args = ["run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "--task", "shapes_mcq", "--limit", "8"]
    monkeypatch.chdir(tmp_path)  # the records go to ./results, as for a user
    assert main(args) == 0
    subset = ["run", "--model", "shapes_clip", "--task", "shapes_mcq", "--limit", "8"]
    for again_args, tasks in ((args, 2), (subset, 1)):
        again = console_script(again_args, tmp_path)
        assert again.returncode == 0, again.stderr[-2000:]
        assert not TORCH_LINE.search(again.stderr), f"a cached rerun imported torch: {again_args}"
        assert again.stdout.count("(cached)") == tasks and "shapes_mcq [limit=8, n_items=8] (cached)" in again.stdout
    assert "shapes_t2i_original" not in again.stdout


def _plan(host, req):
    from negharness.engine.plan import make_plan

    return make_plan(host, req)


def test_records_stand_without_the_model_only_while_everything_they_rest_on_holds(tmp_path):
    """Another request, --overwrite, reduced precision, no cache, a record's fingerprint changed: the
    normal way decides (`standing` is None); the same request answers from the records."""
    import dataclasses
    import json

    from negharness.discovery.manager import make_host
    from negharness.engine.evaluate import evaluate_request
    from negharness.engine.fingerprints import standing
    from negharness.engine.request import RunRequest
    from negharness.records.results import read_record

    host = make_host()
    req = RunRequest(model="shapes_clip", tasks=["shapes_t2i_original"], limit=6, output_dir=str(tmp_path / "res"),
                     cache_dir=str(tmp_path / "cache"))
    (first,) = evaluate_request(host, req)
    (answer,) = standing(host, _plan(host, req))
    assert answer.skipped and answer.path == first.path and answer.record == read_record(first.path)
    for other in ({"limit": 7}, {"overwrite": True}, {"precision": "bf16"}, {"use_cache": False},
                  {"cache_dir": str(tmp_path / "other-cache")}):
        assert standing(host, _plan(host, dataclasses.replace(req, **other))) is None, other
    rec = json.loads(first.path.read_text())
    rec["model"]["fingerprint"] = "0" * 16
    first.path.write_text(json.dumps(rec))
    assert standing(host, _plan(host, req)) is None  # the model the record measured is not this one


def test_no_fingerprint_is_remembered_for_a_third_partys_model(tmp_path):
    """``boolean -M base=NAME``: the wrapped model is a plugin of the answer too; a third party's (whose edits
    no package stamp sees) leaves the decision to the normal way, a built-in base is remembered."""
    from negharness.discovery.manager import make_host
    from negharness.engine.fingerprints import memo_key
    from negharness.engine.request import RunRequest
    from negharness.testing import keyword_model

    host = make_host()
    host.registry.add("model", "kw", keyword_model, "a third party's model", plugin="elsewhere")

    def request(base: str) -> RunRequest:
        return RunRequest(model="boolean", tasks=["shapes_t2i_original"], output_dir=str(tmp_path / "res"),
                          model_options=ModelOptions(extra={"base": base}), cache_dir=str(tmp_path / "c"))

    assert memo_key(host, _plan(host, request("shapes_clip"))) is not None
    assert memo_key(host, _plan(host, request("kw"))) is None


def test_a_damaged_or_non_regular_fingerprint_memo_is_no_memo(tmp_path):
    """A memo file that is not JSON, holds another key, or is a FIFO: the run decides (never a hang)."""
    import os

    from negharness.discovery.manager import make_host
    from negharness.engine.fingerprints import FOLDER, recalled, remember
    from negharness.engine.request import RunRequest

    host = make_host()
    plan = _plan(host, RunRequest(model="shapes_clip", tasks=["shapes_mcq"], output_dir=str(tmp_path / "res"),
                                  cache_dir=str(tmp_path / "cache")))
    remember(host, plan, "abc")
    assert recalled(host, plan) == "abc"
    (memo,) = (tmp_path / "cache" / FOLDER).glob("*.json")
    memo.write_text("{not json")
    assert recalled(host, plan) is None
    memo.unlink()
    os.mkfifo(memo)
    assert recalled(host, plan) is None


def test_the_plan_names_tasks_device_and_existing_records(tmp_path):
    from negharness.discovery.manager import make_host
    from negharness.engine.plan import plan_lines
    from negharness.engine.request import RunRequest, plan_head

    req = RunRequest(model="shapes_clip", tasks=["shapes_t2*"], output_dir=str(tmp_path), cache_dir=str(tmp_path / "c"))
    (tmp_path / "shapes_clip").mkdir()
    (tmp_path / "shapes_clip" / "shapes_t2i_original.json").write_text("{}")
    assert plan_head(req).startswith("negharness run: model shapes_clip, task shapes_t2*; device auto, precision fp32")
    tasks, records = plan_lines(_plan(make_host(), req))
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


def test_no_fingerprint_is_remembered_for_weights_a_hub_cache_holds(tmp_path):
    """clip's pretrained tag and hf_clip's hub id are read from a hub cache whose snapshot may move under the
    same options: the key cannot see those bytes, so such a model is always built and checked."""
    from negharness.discovery.manager import make_host
    from negharness.engine.fingerprints import _weights_in_key

    host = make_host()
    for model, extra in (("clip", {}), ("hf_clip", {}), ("boolean", {"base": "clip"})):
        named = [e for e in host.registry.entries("model") if e.name in extra.values()]
        plan = SimpleNamespace(names_weights=False, model_entry=host.registry.get("model", model))
        assert not _weights_in_key(plan, named), model
    plan = SimpleNamespace(names_weights=False, model_entry=host.registry.get("model", "boolean"))
    assert _weights_in_key(plan, [host.registry.get("model", "shapes_clip")])
