"""Terminal output prints what it did not write as text (issue 46 item 5): Rich markup in a variant's
label ("t [n_items=8]"), a model label or a folder name is never taken for a tag and swallowed."""

from __future__ import annotations

import re


def test_brackets_in_variants_labels_and_folders_reach_the_terminal(cli, tmp_path):
    out = "res[bold]"
    for extra in ([], ["-T", "n_items=8"]):
        ran = cli("run", "--model", "shapes_clip", "--task", "shapes_t2i_original", *extra, "--output-dir", out)
        assert ran.returncode == 0, ran.stderr
        assert f"records in {out}" in " ".join(ran.stdout.split()).replace(" /", "/")
    board = cli("leaderboard", "--results-dir", out, "--out", str(tmp_path / "board.md"))
    assert board.returncode == 0, board.stderr
    flat = " ".join(board.stdout.split())
    assert "shapes_t2i_original [n_items=8]" in flat  # the variant's row is labelled, as in the Markdown
    compared = cli("compare", f"{out}/shapes_clip", f"{out}/shapes_clip")
    assert compared.returncode == 0, compared.stderr
    assert "[n_items=8]" in compared.stdout


def test_list_shows_every_option_name_whole_with_its_meaning(tmp_path):
    """At 80 columns `list` cut option names ("n_items=i..."); they fold now, and carry their meaning."""
    from negharness.testing import run_cli

    listed = run_cli(["list"], cwd=tmp_path, env={"COLUMNS": "80"})
    assert listed.returncode == 0, listed.stderr
    assert "…" not in listed.stdout  # nothing cut
    assert "n_items=int" in listed.stdout and "frames=int (default 4)" in listed.stdout
