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
