"""Atomic writes, result records, and a leaderboard that is byte-identical for the same records."""

import json
import os
import re
from pathlib import Path

import pytest

from negharness.records.fake import write_fake_record
from negharness.records.results import ModelConfig, iter_records
from negharness.report.leaderboard import build_tables, to_markdown
from negharness.io.atomic_files import atomic_write, atomic_write_json


def test_failed_write_leaves_old_file_and_no_temp(tmp_path):
    target = tmp_path / "rec.json"
    atomic_write_json(target, {"v": 1})

    def half_then_crash(tmp: Path) -> None:
        tmp.write_text('{"v": 2, "trunc')
        raise OSError("disk full")

    with pytest.raises(OSError):
        atomic_write(target, half_then_crash)
    assert json.loads(target.read_text()) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.json"]


def _hits(rate: float, n: int = 400) -> list[float]:
    k = round(rate * n)
    return [100.0] * k + [0.0] * (n - k)


def _write_set(root: Path):
    """Three models on t1 (a beats b by far, b and c close), a alone on t2, and a --limit run."""
    a, b = ModelConfig("clip", {}), ModelConfig("clip", {"arch": "ViT-L-14"}, "bf16")
    c = ModelConfig("close", {})
    write_fake_record(root, a, "t1", {"acc": _hits(0.8), "MeanR": [3.0] * 400}, lower_is_better=["MeanR"])
    write_fake_record(root, b, "t1", {"acc": _hits(0.5), "MeanR": [5.0] * 200 + [6.0] * 200},
                      lower_is_better=["MeanR"], created="2026-01-02T00:00:00+00:00")
    write_fake_record(root, c, "t1", {"acc": _hits(0.49), "MeanR": [7.0] * 400}, lower_is_better=["MeanR"])
    write_fake_record(root, a, "t2", {"acc": _hits(0.2)})
    write_fake_record(root, ModelConfig("quick", {}), "t1", {"acc": _hits(0.99), "MeanR": [1.0] * 400},
                      lower_is_better=["MeanR"], limit=10, created="2026-01-03T00:00:00+00:00")
    return a, b


def _table(md: str, task: str) -> list[str]:
    section = md.split(f"## {task} (")[1].split("\n## ")[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| model")]


def test_leaderboard_is_deterministic_sorted_and_bolds_only_separated_bests(tmp_path):
    root = tmp_path / "results"
    _write_set(root)
    out = tmp_path / "leaderboard" / "README.md"
    md1 = to_markdown(build_tables(iter_records(root)), out)
    md2 = to_markdown(build_tables(iter_records(root)), out)
    assert md1 == md2
    assert "quick" not in md1  # --limit runs never enter
    assert md1.index("## Summary") < md1.index("## t1 (")
    rows = _table(md1, "t1")
    assert [r.split(" | ")[0] for r in rows] == ["| clip", "| clip (arch=ViT-L-14, bf16)", "| close"]  # by acc
    # 80% vs 50% over 400 queries: disjoint intervals, bold; the value carries ± half its interval
    assert rows[0].startswith("| clip | **[80.0 ±")
    assert "](../results/clip/t1.json)**" in rows[0]
    # lower MeanR is best: 3.0 for every query has a zero-width interval, far from 5.5
    assert "**[3.0 ±0.0](../results/clip/t1.json)**" in rows[0]
    t2 = _table(md1, "t2")
    assert t2[0].startswith("| clip | [20.0 ±") and "**" not in t2[0]  # nothing to beat: not bold
    summary = md1.split("## Summary")[1].split("\n## ")[0]
    assert "| close | [49.0 ±" in summary and "| – |" in summary  # close has no t2 record


def test_overlapping_intervals_and_circular_rows_are_never_bold(tmp_path):
    root = tmp_path / "results"
    write_fake_record(root, ModelConfig("x", {}), "t", {"acc": _hits(0.51)})
    write_fake_record(root, ModelConfig("y", {}), "t", {"acc": _hits(0.50)})
    write_fake_record(root, ModelConfig("ref", {}), "t", {"acc": _hits(0.99)}, notes={"circular": "own detector"})
    write_fake_record(root, ModelConfig("boolean", {}), "t", {"acc": _hits(1.0)},
                      notes={"boolean": {"queries": 400, "with_negative_part": 0}})
    md = to_markdown(build_tables(iter_records(root)), tmp_path / "README.md")
    rows = _table(md, "t")
    assert "**" not in "".join(rows)  # 51% vs 50%: intervals overlap; ref is circular
    assert rows[0].startswith("| ref † | [99.0 ±") and "† ref: own detector" in md
    assert rows[-1] == "| boolean | – |" and "– boolean: no query has a negative part" in md


def test_published_rows_are_shown_beside_measured_ones(tmp_path):
    root = tmp_path / "results"
    write_fake_record(root, ModelConfig("clip", {}), "negbench_retrieval_coco", {"R@5": _hits(0.5), "R-Neg@5": _hits(0.4)},
                      leaderboard=["R@5", "R-Neg@5"], main="R-Neg@5")
    md = to_markdown(build_tables(iter_records(root)), tmp_path / "README.md")
    rows = _table(md, "negbench_retrieval_coco")
    assert rows[0].startswith("| clip | [40.0 ±")
    assert "| *published*: CLIP / None (NegBench paper, Table 1 (COCO)) |" in md
    assert all("](" not in r for r in rows[1:])  # published numbers link to no record


def test_newest_record_wins_and_rewrites_are_byte_identical(tmp_path):
    root = tmp_path / "results"
    a, _ = _write_set(root)
    out = tmp_path / "README.md"
    before = to_markdown(build_tables(iter_records(root)), out)
    write_fake_record(root, a, "t2", {"acc": _hits(0.9)}, created="2026-02-01T00:00:00+00:00")
    after = to_markdown(build_tables(iter_records(root)), out)
    assert before != after and "90.0 ±" in after and "20.0 ±" not in after
    write_fake_record(root, a, "t2", {"acc": _hits(0.2)})
    assert to_markdown(build_tables(iter_records(root)), out) == before


def test_leaderboard_cli_output_is_byte_identical(cli, tmp_path):
    _write_set(tmp_path / "results")
    first = cli("leaderboard")
    assert first.returncode == 0, first.stderr
    text1 = (tmp_path / "results" / "README.md").read_bytes()  # beside the records it reads
    os.utime(tmp_path / "results")  # nothing changed but time
    cli("leaderboard")
    assert (tmp_path / "results" / "README.md").read_bytes() == text1
    assert "clip (arch=ViT-L-14, bf16)" in first.stdout


def test_the_committed_leaderboard_matches_its_records():
    """leaderboard/README.md and leaderboard/site are generated: a record added or changed without
    refreshing the board fails CI (see the regenerate command in leaderboard/README.md's section of
    the project README)."""
    from negharness.report.check import diagnosis_problems, invalid_records, stale_files
    from negharness.report.diagnosis_file import load_all
    from negharness.report.page import site_files

    board = Path(__file__).resolve().parents[1] / "leaderboard"
    records = list(iter_records(board / "results"))
    diagnoses = load_all(board / "results")
    tables = build_tables(records)
    expected = {board / "README.md": to_markdown(tables, board / "README.md")}
    expected.update({board / "site" / k: v for k, v in site_files(tables, records, board / "site",
                                                                    board / "negation_training.md", diagnoses).items()})
    assert stale_files(expected) == []
    assert invalid_records(board / "results") == []
    assert [d["model"]["label"] for _, d in diagnoses] == ["shapes_clip"]  # its Fig. 6 picture is on the page
    assert diagnosis_problems(board / "results", records) == []


def test_terminal_summary_fits_80_columns(tmp_path):
    """One row per task; a column per model where they fit, else one 'model: score' line each; no
    cell truncated with an ellipsis at 80 columns."""
    import io

    from rich.console import Console

    from negharness.records.results import iter_records
    from negharness.report.leaderboard import build_tables, to_rich

    tables = build_tables(iter_records(Path(__file__).resolve().parents[1] / "leaderboard" / "results"))
    for width, stacked in ((80, True), (200, False)):
        out = io.StringIO()
        console = Console(file=out, width=width, color_system=None)
        for table in to_rich(tables, width):
            console.print(table)
        text = out.getvalue()
        assert "…" not in text and max(len(line) for line in text.splitlines()) <= width
        assert ("model: score" in text) == stacked and "shapes_t2v_composed" in text


def test_labels_with_pipes_newlines_or_html_stay_one_literal_cell(cli, tmp_path):
    """A model label is the user's text: `|` split the README row, a newline ended the table and
    `<script>` went to the page's Markdown raw."""
    root = tmp_path / "results"
    write_fake_record(root, ModelConfig("clip", {"note": "a|b\nc <script>alert(1)</script> & d"}), "t1",
                      {"acc": _hits(0.8)}, notes={"circular": "own <b>detector</b> | x"})
    write_fake_record(root, ModelConfig("plain", {}), "t1", {"acc": _hits(0.5)})
    res = cli("leaderboard")
    assert res.returncode == 0, res.stderr
    md = (root / "README.md").read_text()
    assert "<script>" not in md and "<b>" not in md
    label = r"clip (note=a\|b c &lt;script&gt;alert(1)&lt;/script&gt; &amp; d)"
    rows = _table(md, "t1")
    assert rows[0].startswith(f"| {label} † | ") and rows[1].startswith("| plain | ")
    assert all(len(re.split(r"(?<!\\)\|", r)) == 4 for r in rows)  # two cells each: label, acc
    assert f"† {label}: own &lt;b&gt;detector&lt;/b&gt; \\| x" in md


def _images(n_images: int, per_image: int, rate: float, seed: int) -> tuple[list[float], list[str]]:
    """0/100 hits that move together per image (each image mostly right or mostly wrong)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    easy = rng.random(n_images) < rate
    hits = [100.0 * (e if rng.random() < 0.9 else not e) for e in easy for _ in range(per_image)]
    return hits, [f"img{i}" for i in range(n_images) for _ in range(per_image)]


def _before_clusters(path: Path) -> None:
    """The record as negharness wrote it before clusters: intervals over rows, no cluster fields."""
    rec = json.loads(path.read_text())
    rec["intervals"] = rec.pop("intervals_rows")
    for key in ("standard_errors", "standard_errors_rows"):
        rec.pop(key)
    rec["interval_method"] = {k: v for k, v in rec["interval_method"].items() if k not in ("cluster", "clusters",
                                                                                           "cluster_note")}
    rec["task"].pop("cluster")
    path.write_text(json.dumps(rec))


def test_bold_needs_clustered_intervals_to_clear_and_headings_count_clusters(tmp_path):
    """Issue 37: 60 images x 10 questions, 70% vs 58% right: over rows (600 independent questions)
    the intervals are disjoint, over images (60 clusters) they overlap, so the value is not bold."""
    root = tmp_path / "results"
    hits_a, clusters = _images(60, 10, 0.72, 1)
    hits_b, _ = _images(60, 10, 0.58, 2)
    a = write_fake_record(root, ModelConfig("a", {}), "t", {"acc": hits_a}, clusters=clusters, cluster="image")
    write_fake_record(root, ModelConfig("b", {}), "t", {"acc": hits_b}, clusters=clusters, cluster="image")
    rec = json.loads(a.read_text())
    assert rec["intervals_rows"]["acc"][0] > json.loads((root / "b" / "t.json").read_text())["intervals_rows"]["acc"][1]
    md = to_markdown(build_tables(iter_records(root)), tmp_path / "README.md")
    assert "## t (fam; main score acc; 60 clusters by image)" in md
    assert "**" not in "".join(_table(md, "t"))
    from negharness.report.page import site_files

    records = list(iter_records(root))
    page = site_files(build_tables(records), records, tmp_path / "site")["index.html"]
    assert "(fam; main score acc; 60 clusters by image)" in page
    assert re.search(r"title='95% interval over clusters \[[\d.]+, [\d.]+\], SE [\d.]+; over rows \[", page)
    write_fake_record(root, ModelConfig("c", {}), "u", {"acc": _hits(0.8)})
    write_fake_record(root, ModelConfig("d", {}), "u", {"acc": _hits(0.5)})
    md = to_markdown(build_tables(iter_records(root)), tmp_path / "README.md")
    assert "## u (fam; main score acc; 400 clusters: each query its own)" in md
    assert _table(md, "u")[0].startswith("| c | **[80.0 ±")


def test_a_record_made_before_clusters_is_refused_by_the_board_as_by_check(tmp_path):
    """One reader, one policy (issue 45, item 7): the board no longer shows what --check refuses
    (fc4bba0 showed it marked ‡ while --check failed on it)."""
    from negharness.records.board_pass import checked_records
    from negharness.records.check import RecordError
    from negharness.report.check import invalid_records

    root = tmp_path / "results"
    old = write_fake_record(root, ModelConfig("old", {}), "t", {"acc": _hits(0.9)})
    write_fake_record(root, ModelConfig("new", {}), "t", {"acc": _hits(0.3)})
    _before_clusters(old)
    with pytest.raises(RecordError, match=f"{re.escape(str(old))}: made before clustered intervals"):
        list(checked_records(root))
    assert [f"{old}: made before clustered intervals"] == [p.split(" (no")[0] for p in invalid_records(root)]


def _nt2vr_record(root: Path, videos: int, queries: int) -> None:
    from negharness.records.fake import fake_record
    from negharness.records.results import record_path, write_record

    model = ModelConfig("clip", {})
    rec, pq = fake_record(model, "msrvtt3k_original", {"R@1": _hits(0.3, queries), "MIR": _hits(0.4, queries)},
                          family="nt2vr", leaderboard=["R@1", "MIR"], main="MIR")
    rec["n_items"] = {"queries": queries, "videos": videos}
    write_record(record_path(root, model, "msrvtt3k_original"), rec, None, pq)


def test_published_rows_measured_on_another_collection_size_carry_a_caveat(tmp_path):
    """The paper's 2,990-video rows under a 30-video run: marked § in the Markdown with a note naming
    both sizes, and said under the terminal board (they stood there as if comparable)."""
    from rich.console import Console

    from negharness.report.leaderboard import to_rich

    root = tmp_path / "results"
    _nt2vr_record(root, 30, 600)
    tables = build_tables(iter_records(root))
    md = to_markdown(tables, tmp_path / "README.md")
    published = [r for r in _table(md, "msrvtt3k_original") if r.startswith("| *published*")]
    assert published and all(r.split(" |")[0].endswith(" §") for r in published)
    assert ("§ published rows: measured on 2,990 videos, 59,800 queries" in md
            and "the records here on 30 videos, 600 queries: another collection size, not comparable" in md)
    from negharness.report.leaderboard import Links
    from negharness.report.page import _task_table

    page = _task_table(tables[0], Links(tmp_path))  # the web page's table: the same mark and note
    assert "</span> §</td>" in page and "§ published rows: measured on 2,990 videos" in page
    console = Console(width=200, record=True)
    for item in to_rich(tables, 200):
        console.print(item)
    assert "msrvtt3k_original: the paper's rows on the board were measured on 2,990 videos" in console.export_text()
    (root / "clip").rename(tmp_path / "small")  # the paper's own collection size: no caveat
    _nt2vr_record(root, 2990, 59800)
    md = to_markdown(build_tables(iter_records(root)), tmp_path / "README.md")
    assert "*published*" in md and "§" not in md
