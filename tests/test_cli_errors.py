"""Bad input: one clear message naming the option or file, a non-zero exit, no traceback."""

import os

import pytest

from negharness.api.errors import UserError


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
    """open_clip logs 'ERROR:root:Failed to download ...' through the root logger; the command's
    own error says it, on one line, and nothing else is printed around it."""
    res = cli("run", "--model", "clip", "--task", "shapes_t2i_original", "--limit", "3",
              env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    assert res.returncode == 2
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: could not load pretrained weights ViT-B-32/openai")


def test_a_repeated_option_with_the_same_value_is_one_option():
    from negharness.cli.common import _pairs

    assert _pairs(["n=2", " n = 2 ", "seed=1"], "-T") == {"n": "2", "seed": "1"}
    with pytest.raises(UserError, match="-M arch given twice"):
        _pairs(["arch=a", "arch=b"], "-M")
