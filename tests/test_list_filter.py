"""`negharness list` for a reader: a PATTERN and --kind narrow it; piped, one plain line an entry (never cut
at a width), and a reader that leaves early (`| head`) is no error."""

from __future__ import annotations

import subprocess
import sys

from negharness.cli.commands import listed
from negharness.cli.main import main

NAMES = ["sugarcrepe_add_att", "sugarcrepe_mean", "shapes_mcq", "valse_existence"]


def test_a_glob_matches_whole_names_and_plain_text_any_part():
    assert listed(NAMES, "sugarcrepe_*") == ["sugarcrepe_add_att", "sugarcrepe_mean"]
    assert listed(NAMES, "MCQ") == ["shapes_mcq"]
    assert listed(NAMES, None) == NAMES and listed(NAMES, "s?apes_*") == ["shapes_mcq"]


def test_piped_list_is_one_plain_line_an_entry_filtered(capsys):
    assert main(["list", "--brief", "--kind", "task", "shapes_"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "# tasks: name, plugin, description (tab-separated)"
    rows = [line.split("\t") for line in out[1:] if "\t" in line]
    assert [r[0] for r in rows] == ["shapes_mcq", "shapes_t2i_original", "shapes_t2v_composed", "shapes_t2v_negated",
                                   "shapes_t2v_original"]
    assert all(len(r) == 3 and r[1] == "builtin_tasks" for r in rows)  # brief: no option column
    long = max(len(line) for line in out)
    assert long > 80  # a description is never folded at a console's width


def test_options_of_one_model_on_one_line(capsys):
    assert main(["list", "--kind", "model", "boolean"]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("boolean\t")]
    assert row.split("\t")[3].startswith("base=str")


def test_nothing_matching_is_said_and_a_reader_leaving_early_is_no_error(capsys):
    assert main(["list", "--brief", "no_such_entry_anywhere"]) == 2
    assert "no entry matches 'no_such_entry_anywhere'" in capsys.readouterr().err
    head = subprocess.run(f"{sys.executable} -m negharness.cli list --brief | head -1", shell=True,
                          capture_output=True, text=True)
    assert head.stdout.startswith("# ") and head.stderr == "", head.stderr


def test_training_sets_show_their_options(capsys):
    """A training set's -T options are listed as a task's are (they were left out)."""
    assert main(["list", "--kind", "trainset", "shapes"]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("shapes\t")]
    assert "n_train=int" in row.split("\t")[3]


def test_a_kind_with_nothing_registered_says_so(capsys):
    """`list --kind judge` with the judges' plugin blocked once said "no judge matches None"."""
    assert main(["-p", "no:builtin_models", "list", "--brief", "--kind", "judge"]) == 2
    err = capsys.readouterr().err
    assert "no judge is registered" in err and "None" not in err


def test_the_training_free_methods_are_listed_beside_the_trainers(capsys, monkeypatch):
    """`list --kind trainer`: after the trainers, the model wrappers that need no training, each with the
    command that runs it; in a terminal, a table of its own; a pattern narrows both."""
    assert main(["list", "--brief", "--kind", "trainer"]) == 0
    out = capsys.readouterr().out.splitlines()
    trainers = out.index("# trainers: name, plugin, description (tab-separated)")
    free = next(i for i, line in enumerate(out) if line.startswith("# training-free methods"))
    assert trainers < free and "bnl" in [line.split("\t")[0] for line in out[trainers + 1:free]]
    rows = {line.split("\t")[0]: line.split("\t") for line in out[free + 1:] if "\t" in line}
    assert rows["boolean"][3] == "negharness run --model boolean -M base=clip"
    assert rows["steer"][3] == "negharness run --model steer -M base=clip -M alpha=0.13"
    assert main(["list", "--kind", "trainer", "steer"]) == 0  # no trainer matches; the method does
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines() if "\t" in line] == ["steer"]

    from rich.console import Console

    terminal = Console(force_terminal=True, width=240, record=True, highlight=False, markup=False)
    monkeypatch.setattr("negharness.cli.commands._console", lambda stderr=False: terminal)
    assert main(["list", "--brief", "--kind", "trainer"]) == 0
    shown = terminal.export_text()
    assert shown.index("trainers") < shown.index("training-free methods") < shown.index("-M alpha=0.13")


def test_training_a_training_free_method_names_the_command_that_runs_it(capsys, tmp_path):
    assert main(["train", "--trainer", "steer", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "steer needs no training" in err and "negharness run --model steer -M base=clip" in err
    assert not (tmp_path / "out").exists()
    assert main(["train", "--trainer", "no_such_trainer", "--out", str(tmp_path / "out")]) == 2
    assert "unknown trainer 'no_such_trainer'" in capsys.readouterr().err
    assert main(["train", "--trainer", "stear", "--out", str(tmp_path / "out")]) == 2  # a typo of a method
    assert "unknown trainer 'stear'; did you mean steer (needs no training)?" in capsys.readouterr().err
    assert main(["train", "--trainer", "bnll", "--out", str(tmp_path / "out")]) == 2  # a typo of a trainer
    err = capsys.readouterr().err
    assert "did you mean bnl" in err and "needs no training" not in err
