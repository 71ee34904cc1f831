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


def test_the_markdown_and_terminal_boards_name_files_by_name_not_by_absolute_path(tmp_path):
    """Issue 46: board labels kept the absolute --arch path of the machine that ran the model."""
    from rich.console import Console

    from negharness.records.fake import write_fake_record
    from negharness.records.results import ModelConfig, iter_records
    from negharness.report.leaderboard import build_tables, to_markdown, to_rich

    root = tmp_path / "results"
    for arch in ("/home/me/runs/tiny_arch.json", "/srv/other/tiny_arch.json"):  # two files, one name: two rows
        write_fake_record(root, ModelConfig("clip", {"arch": arch}), "t", {"R@1": [50.0, 100.0, 0.0, 100.0]})
    tables = build_tables(iter_records(root))
    md = to_markdown(tables, root / "README.md")
    assert md.count("clip (arch=tiny_arch.json)") >= 2 and "/home/me" not in md and "/srv/other" not in md
    console = Console(width=120, record=True, markup=False)
    for item in to_rich(tables, 120):
        console.print(item)
    shown = console.export_text()
    assert "tiny_arch.json" in shown and "/home/me" not in shown
