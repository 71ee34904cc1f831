"""One plan, every door: a request is planned once (`negharness.engine.plan.make_plan`), and the CLI,
`negharness.run()` and the torch-free answer give the same refusal, folder, label and verdict. A model is
named by what it is, never by where a machine caches its weights, and every file a number rests on (the
embedded world's split included) is among a record's hashed inputs."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import negharness
from negharness.api import UserError
from negharness.api import ModelOptions
from negharness.cli.main import main
from negharness.discovery.manager import make_host
from negharness.engine.evaluate import evaluate_request
from negharness.engine.fingerprints import standing
from negharness.engine.plan import make_plan
from negharness.engine.request import RunRequest
from negharness.plugins.trained_model import FORMAT

TASK = "shapes_t2i_original"


def _request(tmp_path: Path, **kw) -> RunRequest:
    settings = {"output_dir": str(tmp_path / "res"), "cache_dir": str(tmp_path / "cache"),
                "data_root": str(tmp_path / "data"), **kw}
    return RunRequest(**{"model": "shapes_clip", "tasks": [TASK], **settings})


@pytest.mark.parametrize("setting, value, message", [
    ("limit", 0, "--limit 0: must be at least 1"),
    ("limit", -3, "--limit -3: must be at least 1"),
    ("workers", -1, "--workers -1: must be 0"),
    ("batch_size", 0, "--batch-size 0: must be at least 1"),
    ("seed", "x", "--seed 'x': must be a whole number"),
    ("device", "tpu", "--device tpu: not a device"),
])
def test_the_library_refuses_what_the_cli_refuses_and_writes_nothing(tmp_path, capsys, setting, value, message):
    """`negharness.run(..., limit=0)` once scored every query and wrote a record labelled limit=0; the
    command said exit 2. Now both stop at the plan with one message, and nothing is written."""
    with pytest.raises(UserError) as lib:
        negharness.run("shapes_clip", TASK, output_dir=str(tmp_path / "lib"), cache_dir=str(tmp_path / "c"),
                       **{setting: value})
    assert str(lib.value).startswith(message)
    assert not (tmp_path / "lib").exists()
    if setting == "seed":
        return  # argparse types --seed: the command refuses "x" before the plan, naming the option
    flag = "--" + setting.replace("_", "-")
    assert main(["run", "--model", "shapes_clip", "--task", TASK, flag, str(value), "--output-dir",
                 str(tmp_path / "cli"), "--cache-dir", str(tmp_path / "c")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "cli").exists()


def test_released_weights_are_named_by_their_table_entry_not_the_cache_folder(tmp_path):
    """Two machines (two cache folders) with the authors' released file in place: one record folder, one
    row label; the file the model is built from is each machine's own."""
    plans = []
    for cache in ("cache-a", "cache-b"):
        placed = tmp_path / cache / "models" / "clip_bnl" / "clip_bnl_msrvtt.pth.tar"
        placed.parent.mkdir(parents=True)
        placed.write_bytes(b"the authors' weights")
        req = _request(tmp_path, model="clip_bnl", cache_dir=str(tmp_path / cache),
                       model_options=ModelOptions(pretrained="nt2vr-msrvtt"))
        plans.append(make_plan(make_host(), req))
    a, b = plans
    assert a.model_cfg == b.model_cfg and a.tasks[0].path == b.tasks[0].path
    assert a.model_cfg.label == "clip_bnl (pretrained=nt2vr-msrvtt)"
    assert "cache" not in str(a.tasks[0].path.relative_to(tmp_path))
    assert a.built_with.checkpoint == str(tmp_path / "cache-a" / "models/clip_bnl/clip_bnl_msrvtt.pth.tar")
    assert a.sources == b.sources  # the same bytes: one content hash, whichever folder holds them


def _trained_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "runs" / "bnl"
    folder.mkdir(parents=True)
    (folder / "model.json").write_text(json.dumps({"format": FORMAT, "base_model": "shapes_clip", "base_options": {}}))
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def test_a_fine_tunes_options_are_named_as_its_base_names_them(tmp_path):
    """`clip_bnl` passes every -M to the base its folder names: ``quick_gelu=1``, ``=YES`` and ``=true``
    are one model (one folder, one label), as for that base; so is ``boolean -M base=clip_bnl``."""
    folder = _trained_folder(tmp_path)
    host = make_host()

    def named(model: str, extra: dict[str, str]):
        req = _request(tmp_path, model=model, model_options=ModelOptions(checkpoint=str(folder), extra=extra))
        return make_plan(host, req).model_cfg

    spellings = [named("clip_bnl", {"quick_gelu": v}) for v in ("1", "YES", "true")]
    assert spellings[0] == spellings[1] == spellings[2]
    assert spellings[0].options["quick_gelu"] == "true"
    wrapped = [named("boolean", {"base": "clip_bnl", "quick_gelu": v}) for v in ("1", "YES")]
    assert wrapped[0] == wrapped[1] and wrapped[0].options["quick_gelu"] == "true"
    with pytest.raises(UserError, match="quick_gelu"):
        named("clip_bnl", {"quick_gelu": "maybe"})  # the base's binder reads it: a bad value is its error


def test_a_rewritten_world_split_is_another_input_on_every_door(tmp_path):
    """The embedded world's split file is among a record's hashed inputs: validly rewritten, the record no
    longer stands (the plan's verdict, the torch-free answer, the run), and the rerun measures the new file."""
    host = make_host()
    req = _request(tmp_path, limit=12, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = evaluate_request(host, req)[0]
        assert standing(host, make_plan(host, req)) is not None  # unchanged: it stands
        (split,) = (tmp_path / "data" / "shapes_world").glob("*-test-image-12.npz")
        with np.load(split, allow_pickle=False) as npz:
            meta, pixels = npz["meta"], npz["pixels"]
        np.savez(split.with_suffix(".tmp.npz"), pixels=pixels[::-1].copy(), meta=meta)  # the images shuffled
        split.with_suffix(".tmp.npz").replace(split)
        plan = make_plan(host, req)
        assert plan.tasks[0].verdict and "data" in plan.tasks[0].verdict
        assert standing(host, plan) is None
        again = evaluate_request(host, req)[0]
    assert not again.skipped and again.record["data"] != first.record["data"]
    assert again.record["metrics"]["R@1"] < first.record["metrics"]["R@1"]  # the images no longer match


@pytest.mark.parametrize("declared, recorded", [("0123abcd", "0123abcd"), ("refs/pr/3", "refs-pr-3"),
                                                ("../../../elsewhere", "elsewhere")])
def test_a_declared_revision_is_recorded_as_a_plain_name(declared, recorded):
    """A plugin's (or a hub config's) revision is what exporters name files by and what the checked reader
    reads: a path is made plain at run time, so the record it writes is one `leaderboard --check` accepts."""
    from types import SimpleNamespace

    from negharness.contracts.names import name_problem
    from negharness.engine.reuse import model_revision

    got = model_revision(SimpleNamespace(revision=declared, modules=lambda: []), {})
    assert got == recorded and name_problem(got) is None


def _labels(results: Path) -> dict[str, str]:
    """Record folder -> the label its records carry."""
    return {p.parent.name: json.loads(p.read_text())["model"]["label"] for p in results.glob("*/shapes_mcq*.json")
            if not p.name.endswith((".perquery.json",))}


@pytest.mark.parametrize("order, expected", [
    (["--model", "shapes_clip", "--model", "boolean", "-M", "base=shapes_clip"],
     {"shapes_clip", "boolean (base=shapes_clip)"}),
    (["-M", "quick_gelu=YES", "--model", "shapes_clip", "--model", "boolean", "-M", "base=shapes_clip"],
     {"shapes_clip (quick_gelu=true)", "boolean (base=shapes_clip, quick_gelu=true)"}),
    (["--model", "shapes_clip", "-M", "quick_gelu=YES", "--model", "boolean", "-M", "base=shapes_clip"],
     {"shapes_clip (quick_gelu=true)", "boolean (base=shapes_clip)"}),
])
def test_several_models_in_one_run_each_with_the_options_written_for_it(tmp_path, capsys, order, expected):
    """Each --model runs, in order, on the same tasks: model options after a --model are that model's, those
    before the first are every model's that takes them; the summary shows the models side by side."""
    out = tmp_path / "res"
    args = ["run", *order, "--task", "shapes_mcq", "--limit", "6", "--output-dir", str(out),
            "--cache-dir", str(tmp_path / "c"), "--data-root", str(tmp_path / "d")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(args) == 0
    assert set(_labels(out).values()) == expected
    printed = capsys.readouterr().out
    assert "2 models" in printed and printed.count("accuracy") == 2


def test_a_shared_model_option_no_model_takes_is_refused_before_anything_runs(tmp_path, capsys):
    args = ["run", "-M", "quick_gelu_typo=1", "--model", "shapes_clip", "--model", "clip", "--task", "shapes_mcq",
            "--output-dir", str(tmp_path / "res"), "--cache-dir", str(tmp_path / "c")]
    assert main(args) == 2
    assert "-M quick_gelu_typo (given before the first --model): none of the models shapes_clip, clip takes it" \
        in capsys.readouterr().err
    assert not (tmp_path / "res").exists()


def test_the_library_takes_a_list_of_models_as_the_command_does(tmp_path):
    """`negharness.run([a, b])` writes the records `--model a --model b` writes, in the same folders."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcomes = negharness.run(["shapes_clip", "boolean"], "shapes_mcq", model_args={"base": "shapes_clip"},
                                  limit=6, output_dir=str(tmp_path / "lib"), cache_dir=str(tmp_path / "c"),
                                  data_root=str(tmp_path / "d"))
        assert main(["run", "--model", "shapes_clip", "--model", "boolean", "-M", "base=shapes_clip", "--task",
                     "shapes_mcq", "--limit", "6", "--output-dir", str(tmp_path / "cli"), "--cache-dir",
                     str(tmp_path / "c"), "--data-root", str(tmp_path / "d")]) == 0
    assert [o.record["model"]["label"] for o in outcomes] == ["shapes_clip", "boolean (base=shapes_clip)"]
    assert _labels(tmp_path / "lib") == _labels(tmp_path / "cli")


def test_a_model_of_the_other_kind_is_named_as_such(tmp_path, capsys):
    """`--model identity` (an editor) on a choice task said "unknown model" though `list` shows it."""
    assert main(["run", "--model", "identity", "--task", "shapes_mcq", "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "identity is an editor, and task(s) shapes_mcq take a model" in err and "unknown" not in err


def test_a_missing_checkpoint_folder_is_among_the_missing_inputs(tmp_path, capsys):
    """clip_bnl reads a folder `negharness train` wrote: a missing one is said with the missing data, at once."""
    assert main(["run", "--model", "clip_bnl", "--checkpoint", str(tmp_path / "runs" / "bnl"), "--task",
                 "msrvtt3k_composed", "--data-root", str(tmp_path / "nodata"), "--output-dir", str(tmp_path)]) == 2
    from test_cli_imports import said

    first = said(capsys.readouterr().err)[0]
    assert "2 inputs missing" in first and f"--checkpoint {tmp_path / 'runs' / 'bnl'}: no such file or folder" in first


def test_a_missing_data_message_says_fetch_or_by_hand_not_both(tmp_path, capsys):
    """nT2VR's videos only a person can fetch: the message never says a command downloads them."""
    assert main(["run", "--model", "shapes_clip", "--task", "msrvtt3k_composed", "--data-root", str(tmp_path / "none"),
                 "--output-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "no program may download them: `negharness fetch msrvtt3k_composed` prints the steps" in err
    assert "downloads them" not in err


def test_a_run_leaves_the_checks_answer_and_it_is_the_fresh_checks(tmp_path, monkeypatch):
    """The memo a run seeds for the records it writes (`remember_written`) holds what the check itself
    computes from the files (one answer, two roads), and the first board after the run verifies each
    record by its hash: no per-query file parsed, no bootstrap."""
    from negharness.records import check, check_memo
    from negharness.scoring import perquery

    req = _request(tmp_path, tasks=["shapes_t2i_original", "shapes_mcq"], task_extra={"n_items": "40"}, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcomes = evaluate_request(make_host(), req)
    seeded = sorted(p.name for p in check_memo.memo_folder(req.cache_dir).glob("*.json"))
    assert len(seeded) == 2
    for o in outcomes:  # a fresh cache: the check computes its own answer, under the same key
        check.read_checked(o.path, cache_dir=tmp_path / "fresh")
    assert sorted(p.name for p in check_memo.memo_folder(tmp_path / "fresh").glob("*.json")) == seeded
    for name in seeded:
        fresh = json.loads((check_memo.memo_folder(tmp_path / "fresh") / name).read_text())
        assert fresh == json.loads((check_memo.memo_folder(req.cache_dir) / name).read_text())
    parsed: list[object] = []
    monkeypatch.setattr(perquery, "parse_sidecar", lambda *a: parsed.append(a) or {})
    for o in outcomes:
        check.read_checked(o.path, cache_dir=req.cache_dir)
    assert parsed == []


def test_a_task_failing_while_planned_leaves_the_others_answered_from_their_records(tmp_path, monkeypatch):
    """`standing` once gave up when any task failed while planned (the command then loaded torch to say
    "nothing to load"); now the standing records and the failure are the answer, the same on both roads."""
    from test_nt2vr_tasks import refuse_data_of

    from negharness.engine.evaluate import run_evaluation

    req = _request(tmp_path, tasks=[TASK, "shapes_mcq"], limit=6)
    evaluate_request(make_host(), req)
    refuse_data_of(monkeypatch, "shapes_mcq")
    host = make_host()
    plan = make_plan(host, req)
    answer = standing(host, plan)
    assert answer is not None, "one failed task kept the standing record from answering"
    assert [(o.task, o.skipped, o.error) for o in answer] == [(TASK, True, None),
                                                             ("shapes_mcq", False, "unreadable (made so by the test)")]
    assert [(o.task, o.path, o.skipped, o.error) for o in run_evaluation(host, plan)] == \
        [(o.task, o.path, o.skipped, o.error) for o in answer]


def test_a_rerun_after_overwrite_or_at_another_precision_stands_without_the_model(tmp_path):
    """The fingerprint a run computed is remembered whatever its --overwrite and precision (the precision is
    in the model's identity, so in the memo's key): the plain rerun of either answers from its records."""
    host = make_host()
    for other in ({"overwrite": True}, {"precision": "bf16"}):
        req = _request(tmp_path, limit=4, **other)
        evaluate_request(host, req)
        again = make_plan(host, RunRequest(**{**req.__dict__, "overwrite": False}))
        assert standing(host, again) is not None, other


def test_one_model_given_twice_is_refused_on_both_doors(tmp_path, capsys):
    """`--model shapes_clip --model shapes_clip`: one record folder written twice; refused before anything
    runs. The same name with other options naming it is two models."""
    args = ["run", "--model", "shapes_clip", "--model", "shapes_clip", "--task", "shapes_mcq", "--output-dir",
            str(tmp_path / "res"), "--cache-dir", str(tmp_path / "c"), "--data-root", str(tmp_path / "d")]
    assert main(args) == 2
    assert "--model shapes_clip is given twice (models 1 and 2" in capsys.readouterr().err
    assert not list((tmp_path / "res").rglob("*.json"))
    with pytest.raises(UserError, match="given twice"):
        negharness.run(["shapes_clip", "shapes_clip"], "shapes_mcq", output_dir=str(tmp_path / "lib"),
                       cache_dir=str(tmp_path / "c"), data_root=str(tmp_path / "d"))
    other = ["-M", "quick_gelu=true"]
    assert main(args[:5] + other + args[5:] + ["--limit", "4"]) == 0


def test_each_model_of_a_run_times_its_own_stages():
    """A run of several models gives each a clock of its own (`StageClock.fork`): the process's start-up is
    every model's, the planning, import and build of one model never appear in another's records."""
    from negharness.engine.stages import StageClock

    seen: list[tuple[str, bool]] = []
    clock = StageClock(0.0)
    clock.watch(lambda stage, starts: seen.append((stage, starts)))
    for stage, seconds in (("startup", 1.0), ("plan", 0.5), ("data", 2.0), ("model_build", 3.0)):
        clock.add(stage, seconds)
    own = clock.fork()
    assert own.seconds() == {"startup": 1.0, "plan": 0.5} and own.started_at == 0.0
    with own.timed("data"):
        pass
    assert seen == [("data", True), ("data", False)]  # the heartbeat still hears the model's stages
    assert clock.seconds()["data"] == 2.0


def test_the_library_door_records_its_planning_stage(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (out,) = negharness.run("shapes_clip", "shapes_mcq", limit=4, output_dir=str(tmp_path / "r"),
                                cache_dir=str(tmp_path / "c"), data_root=str(tmp_path / "d"))
    assert "data_s" in out.record["timings"]


def test_planning_hashes_the_world_split_without_decoding_it(tmp_path, monkeypatch):
    """The split's file, once written, is hashed while planning and read only by the run: a rerun answered
    from its records never decodes 500 images."""
    from negharness.world import media

    req = _request(tmp_path, limit=4)
    evaluate_request(make_host(), req)
    media._load_world.cache_clear()

    def no_decode(path):
        raise AssertionError(f"planning decoded {path}")

    monkeypatch.setattr(media, "_decode", no_decode)
    host = make_host()
    plan = make_plan(host, req)
    assert standing(host, plan) is not None
    assert any("shapes_world" in name for name in plan.tasks[0].task_run.data["files"])


def _checkpoint_request(tmp_path: Path, tasks: list[str]) -> RunRequest:
    """shapes_clip from a --checkpoint file (the bundled weights, saved again): options that name the weights."""
    from safetensors.torch import load_file, save_file

    from negharness.plugins.shapes_clip import WEIGHTS

    ckpt = tmp_path / "w.safetensors"
    if not ckpt.exists():
        save_file(load_file(str(WEIGHTS)), str(ckpt))
    return _request(tmp_path, tasks=tasks, limit=6, model_options=ModelOptions(checkpoint=str(ckpt)))


def _changed_fingerprint(path: Path) -> None:
    """The record's model fingerprint made another (as code that builds the model from the same files
    differently would make it: open_clip's preprocessing, a processor's settings)."""
    rec = json.loads(path.read_text())
    rec["model"]["fingerprint"] = "0" * 16
    path.write_text(json.dumps(rec))


def test_a_record_of_named_weights_is_decided_by_its_fingerprint_whether_or_not_the_model_loads(tmp_path):
    """With a --checkpoint, a record whose files matched once stood without its fingerprint when nothing else
    ran, while a run that loaded the model for a new task compared fingerprints and reran it: two verdicts on
    one record. Now one rule: the fingerprint (remembered, else the loaded model's), on every door."""
    host = make_host()
    alone = _checkpoint_request(tmp_path, [TASK])
    (first,) = evaluate_request(host, alone)
    (kept,) = standing(host, make_plan(host, alone))  # the remembered fingerprint: no model load
    assert kept.skipped
    _changed_fingerprint(first.path)
    assert standing(host, make_plan(host, alone)) is None
    (rerun,) = evaluate_request(host, alone)
    assert not rerun.skipped and rerun.reason.startswith("model weights changed (fingerprint 0000000000000000")
    _changed_fingerprint(first.path)
    beside = {o.task: o for o in evaluate_request(host, _checkpoint_request(tmp_path, [TASK, "shapes_mcq"]))}
    assert not beside[TASK].skipped and beside[TASK].reason == rerun.reason  # the same verdict with a task beside


def test_without_a_remembered_fingerprint_a_record_of_named_weights_stands_after_the_model_loads(tmp_path):
    """No memo (a cache cleared, --no-cache): the records are not answered blind; the model loads, its
    fingerprint is the record's, and the record stands."""
    import shutil

    from negharness.engine.fingerprints import FOLDER

    host = make_host()
    req = _checkpoint_request(tmp_path, [TASK])
    (first,) = evaluate_request(host, req)
    shutil.rmtree(tmp_path / "cache" / FOLDER)
    assert standing(host, make_plan(host, req)) is None
    (again,) = evaluate_request(host, req)
    assert again.skipped and again.record == first.record


def test_only_files_that_hold_the_weights_let_the_fingerprint_memo_see_them(tmp_path, monkeypatch):
    """An --arch config file beside a --pretrained hub tag names the shape, not the weights (a hub cache holds
    them, and its snapshot may move), as a data file does (steer's ``-M pairs=FILE``, its base's weights from
    the hub): not `weights_named`, so no memo stands for the load. A --checkpoint or a --pretrained file holds
    them. A folder named like a tag beside the run is no --pretrained file (open_clip looks tags up first)."""
    from negharness.contracts.options import declared_options
    from negharness.engine.reuse import model_sources, weights_named
    from negharness.store.content import FileHasher

    config, weights, pairs = tmp_path / "arch.json", tmp_path / "weights.pt", tmp_path / "pairs.json"
    for path in (config, weights, pairs):
        path.write_text("{}")
    (tmp_path / "openai").mkdir()
    monkeypatch.chdir(tmp_path)
    host = make_host()

    def named(model: str = "clip", **options) -> tuple[dict, bool]:
        built_with = ModelOptions(**options)
        sources = model_sources(built_with, FileHasher(None))
        specs = declared_options(host.registry.get("model", model).declared())
        return sources, weights_named(built_with, sources, specs)

    assert not named(arch=str(config), pretrained="openai")[1]
    assert named(arch=str(config), checkpoint=str(weights))[1]
    sources, by_file = named(arch=str(config), pretrained=str(weights))
    assert by_file and set(sources) == {"--arch", "--pretrained"}
    assert named(arch=str(config))[1]  # random weights from a config: its file is all there is
    assert named(pretrained="openai") == ({}, False)  # ./openai is a folder here, and no weights file
    sources, held = named("steer", extra={"base": "clip", "pairs": str(pairs)})
    assert set(sources) == {"-M pairs"} and not held  # the pairs are hashed as data, not as weights
    assert named("steer", extra={"base": "clip", "pairs": str(pairs)}, checkpoint=str(weights))[1]
