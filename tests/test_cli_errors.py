"""Bad input: one clear message naming the option or file, a non-zero exit, no traceback."""

import os

import pytest

from negharness.api import UserError


def _clean_error(res, *needles):
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    assert "error:" in res.stderr
    for n in needles:
        assert n in res.stderr, res.stderr


def test_unknown_model_suggests_close_names(cli):
    _clean_error(cli("run", "--model", "shapes_clp", "--task", "shapes_t2v_original"), "shapes_clip")


def test_unknown_task_and_empty_glob(cli):
    _clean_error(cli("run", "--model", "shapes_clip", "--task", "shapes_t2v_orignal"), "shapes_t2v_original")
    _clean_error(cli("run", "--model", "shapes_clip", "--task", "nothing_*"), "no task matches")


def test_missing_data_root(cli, tmp_path):
    res = cli("run", "--model", "mean_colour", "--task", "example_files", "--data-root", str(tmp_path / "nope"),
              plugins=("good", "filetask"))
    _clean_error(res, "data root", "nope", "--data-root", "example_files")


def test_missing_task_files_are_named_with_where_to_get_them(cli, tmp_path):
    root = tmp_path / "data"
    (root / "example").mkdir(parents=True)
    (root / "example" / "captions.txt").write_text("a\nb\n")
    res = cli("run", "--model", "mean_colour", "--task", "example_files", "--data-root", str(root),
              plugins=("good", "filetask"))
    _clean_error(res, "videos.txt", "1 file(s) missing", "https://example.org/data")
    assert "captions.txt" not in res.stderr
    (root / "example" / "videos.txt").write_text("v\n")
    ok = cli("run", "--model", "mean_colour", "--task", "example_files", "--data-root", str(root),
             plugins=("good", "filetask"), env={"NEGHARNESS_DATA": "/nonexistent"})
    assert ok.returncode == 0, ok.stderr


def test_env_data_root_is_named_in_the_error(cli, tmp_path):
    res = cli("run", "--model", "mean_colour", "--task", "example_files", plugins=("good", "filetask"),
              env={"NEGHARNESS_DATA": str(tmp_path / "gone")})
    _clean_error(res, "$NEGHARNESS_DATA", "gone")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere; covered by the file case below")
def test_unwritable_output_dir_by_permissions(cli, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    _clean_error(cli("run", "--model", "mean_colour", "--task", "example_colours", "--output-dir",
                     str(locked / "out"), plugins=("good",)), "--output-dir")


def test_output_dir_that_cannot_be_written(cli, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    _clean_error(cli("run", "--model", "mean_colour", "--task", "example_colours", "--output-dir",
                     str(blocker / "results"), plugins=("good",)), "--output-dir", "a_file")


def test_bad_options(cli):
    _clean_error(cli("run", "--model", "mean_colour", "--task", "example_colours", "-M", "novalue",
                     plugins=("good",)), "-M", "KEY=VALUE")
    _clean_error(cli("run", "--model", "mean_colour", "--task", "example_colours", "--device", "cuda:7",
                     plugins=("good",)), "--device")
    _clean_error(cli("leaderboard", "--results-dir", "does-not-exist"), "--results-dir")
    _clean_error(cli("run", "--model", "mean_colour", "--task", "example_colours", "-T", "n=2", "-T", "n=3",
                     plugins=("good",)), "-T n given twice (n=2 and n=3)")
    _clean_error(cli("run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "-T", "n_items=100000000"),
                 "-T n_items=100000000", "must be at most 100000")  # was: a silent run until memory ran out


def test_output_dir_that_is_a_file_says_so(cli, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    _clean_error(cli("run", "--model", "mean_colour", "--task", "example_colours", "--output-dir", str(blocker),
                     plugins=("good",)), "--output-dir", "is a file, not a folder")


def test_reduced_precision_on_the_cpu_warns_once(cli, tmp_path):
    res = cli("run", "--model", "mean_colour", "--task", "example_colours", "--precision", "bf16",
              "--output-dir", str(tmp_path / "res"), plugins=("good",))
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("--precision bf16 on the CPU") == 1


def test_a_missing_pretrained_download_is_one_line(cli, tmp_path):
    """Offline with nothing cached, the default weights are refused before the model is built (open_clip
    used to log 'ERROR:root:Failed to download ...' around the command's own error): one line."""
    res = cli("run", "--model", "clip", "--task", "shapes_t2i_original", "--limit", "3",
              env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    assert res.returncode == 2
    # the lines a long stage says while it lasts ("... building the model ... (4 s)") are not the error's
    from test_cli_imports import said

    lines = said(res.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: model clip: its weights ViT-B-32/openai are not in the "
                                                   f"Hugging Face cache {tmp_path / 'hf' / 'hub'}")


def test_a_repeated_option_with_the_same_value_is_one_option():
    from negharness.cli.common import _pairs

    assert _pairs(["n=2", " n = 2 ", "seed=1"], "-T") == {"n": "2", "seed": "1"}
    with pytest.raises(UserError, match="-M arch given twice"):
        _pairs(["arch=a", "arch=b"], "-M")


BEFORE_TORCH = {  # a mistake -> what its one line must say
    "unknown model": (["run", "--model", "shapes_clp", "--task", "shapes_t2i_original"], "did you mean shapes_clip"),
    "unknown task": (["run", "--model", "shapes_clip", "--task", "shapes_t2i_orignal"], "shapes_t2i_original"),
    "tasks with a comma": (["run", "--model", "shapes_clip", "--task", "shapes_t2i_original,shapes_t2v_original"],
                           "repeat --task: --task shapes_t2i_original --task shapes_t2v_original"),
    "no such device": (["run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "--device", "tpu"],
                       "--device tpu: not a device"),
    "mps off macOS": (["run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "--device", "mps"],
                      "--device mps"),
    "data root is a file": (["run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "--data-root",
                             "a_file"], "is a file, not a folder"),
    "missing weights file": (["run", "--model", "clip", "--task", "shapes_t2i_original", "--checkpoint", "gone.pt"],
                             "--checkpoint gone.pt: no such file"),
    "blocking no plugin": (["-p", "no:nonexistent", "run", "--model", "shapes_clip", "--task", "shapes_t2i_original"],
                           "-p no:nonexistent: no plugin is named"),
    "blocking nothing": (["-p", "no:", "list"], "-p no: names no plugin"),
}


@pytest.mark.parametrize("name", list(BEFORE_TORCH))
def test_mistakes_are_answered_before_torch_loads(name, tmp_path):
    """One line, exit 2, and no torch in the process's import listing (`python -X importtime`)."""
    import sys

    from test_cli_imports import TORCH_LINE, console_script, said

    if name == "mps off macOS" and sys.platform == "darwin":
        pytest.skip("on macOS MPS may exist: torch decides")
    args, needle = BEFORE_TORCH[name]
    (tmp_path / "a_file").write_text("not a folder")
    done = console_script(args, tmp_path)
    lines = said(done.stderr)
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    assert needle in lines[0]
    assert not TORCH_LINE.search(done.stderr), f"{name}: torch was imported before the mistake was told"


def test_cuda_on_a_machine_without_a_gpu_driver_is_told_before_torch(tmp_path):
    from pathlib import Path

    from test_cli_imports import TORCH_LINE, console_script, said

    from negharness.engine.precheck import _GPU_DRIVER_FILES

    if any(Path(p).exists() for p in _GPU_DRIVER_FILES) or not os.uname().sysname == "Linux":
        pytest.skip("a GPU driver is here (or not Linux): torch decides, right after it loads")
    done = console_script(["run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "--device", "cuda"],
                          tmp_path)
    assert done.returncode == 2 and "--device cuda: CUDA is not available" in done.stderr
    assert not TORCH_LINE.search(done.stderr)


def test_an_unavailable_mps_is_refused_before_the_model_is_built(monkeypatch):
    """Where MPS may exist (macOS) torch says whether it does; absent, one line, exit 2 (was: exit 1
    after the model was built, blaming its plugin)."""
    import sys

    import torch

    from negharness.engine.devices import resolve_device

    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(UserError, match="--device mps: MPS is not available"):
        resolve_device("mps")


MISSING_INPUTS = {  # a run whose inputs are absent -> what the error's first line must name, all at once
    "nT2VR headline: data and checkpoint": (
        ["run", "--model", "clip_bnl", "--task", "msrvtt3k_composed", "--data-root", "empty"],
        ["task msrvtt3k_composed: 4 file(s) missing", "`negharness fetch msrvtt3k_composed`",
         "model clip_bnl needs --checkpoint PATH", "--pretrained nt2vr-msrvtt", "--data-root DIR"]),
    "two benchmarks and a named checkpoint file": (
        ["run", "--model", "clip", "--checkpoint", "gone.pt", "--task", "negbench_mcq_coco", "--task",
         "msrvtt3k_original", "--data-root", "empty"],
        ["3 inputs missing", "task negbench_mcq_coco: 1 file(s) missing", "task msrvtt3k_original: 3 file(s) missing",
         "--checkpoint gone.pt: no such file", "--data-root DIR"]),
    "released weights no program may fetch": (
        ["run", "--model", "clip_bnl", "--pretrained", "nt2vr-msrvtt", "--task", "shapes_t2i_original"],
        ["model clip_bnl: its released weights clip_bnl_msrvtt.pth.tar are not in the model cache"]),
    "no data root": (
        ["run", "--model", "clip", "--task", "negbench_mcq_coco", "--data-root", "nope"],
        ["data root nope does not exist (tasks negbench_mcq_coco read", "--data-root DIR"]),
}


@pytest.mark.parametrize("name", list(MISSING_INPUTS))
def test_every_missing_input_is_named_at_once_before_torch_loads(name, tmp_path):
    """Data files, media folders and weights: all of what is absent in the error's first line (the
    details follow it), exit 2, and no torch in the process's import listing. Missing data was found
    only after torch loaded, one task at a time, and a missing checkpoint only once the data was there."""
    from test_cli_imports import TORCH_LINE, console_script, said

    args, needles = MISSING_INPUTS[name]
    (tmp_path / "empty").mkdir()
    done = console_script(args, tmp_path.resolve())
    lines = said(done.stderr)
    assert done.returncode == 2 and lines and lines[0].startswith("error: "), done.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not TORCH_LINE.search(done.stderr), f"{name}: torch was imported before the missing inputs were told"
