"""`negharness leaderboard --check` on a fresh and a stale board, record validation for community
results, and the static page rendered by a real browser (headless Chromium)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from negharness.records.fake import write_fake_record
from negharness.records.results import ModelConfig
from negharness.report.check import invalid_records


def _hits(k: int, n: int = 300) -> list[float]:
    return [100.0] * k + [0.0] * (n - k)


def _board(root: Path) -> None:
    """Two models on an original/negated/composed collection and an MCQ task: every plot has data."""
    for name, k in (("alpha", 200), ("beta", 120)):
        m = ModelConfig(name, {})
        write_fake_record(root, m, "demo_original", {"R@1": _hits(k), "MIR": [k / 300] * 300},
                          leaderboard=["R@1", "MIR"], main="MIR", fmt=".3f")
        write_fake_record(root, m, "demo_negated", {"ΔMIR": [k / 600] * 150 + [0.0] * 150, "neg_MIR": [0.3] * 300},
                          leaderboard=["ΔMIR"], fmt=".3f")
        write_fake_record(root, m, "demo_composed", {"R@1": _hits(k // 2), "MIR": [k / 900] * 300},
                          leaderboard=["R@1", "MIR"], main="MIR", fmt=".3f")
        write_fake_record(root, m, "demo_mcq", {"accuracy": _hits(k), "acc_positive": _hits(k // 3) ,
                                                "acc_negative": _hits(k // 4), "acc_hybrid": _hits(k // 5),
                                                "chose_positive": _hits(100), "chose_negative": _hits(100),
                                                "chose_hybrid": _hits(100)},
                          leaderboard=["accuracy", "acc_positive", "acc_negative", "acc_hybrid"])


def test_check_passes_on_a_fresh_board_and_fails_on_a_stale_one(cli, tmp_path):
    _board(tmp_path / "results")
    (tmp_path / "leaderboard").mkdir()
    args = ("leaderboard", "--out", "leaderboard/README.md", "--html", "leaderboard/site")
    assert cli(*args).returncode == 0
    fresh = cli(*args, "--check")
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert "8 record(s) valid, 2 file(s) up to date" in fresh.stdout
    before = (tmp_path / "leaderboard" / "README.md").read_text()
    write_fake_record(tmp_path / "results", ModelConfig("gamma", {}), "demo_mcq", {"accuracy": _hits(250)})
    stale = cli(*args, "--check")
    assert stale.returncode == 1
    assert "leaderboard/README.md: stale" in stale.stdout and "gamma" in stale.stdout
    assert "site/index.html: stale" in stale.stdout
    assert (tmp_path / "leaderboard" / "README.md").read_text() == before  # --check writes nothing


def test_community_records_are_validated(tmp_path):
    root = tmp_path / "results"
    good = write_fake_record(root, ModelConfig("good", {}), "t", {"acc": _hits(100)})
    assert invalid_records(root) == []
    limited = write_fake_record(root, ModelConfig("quick", {}), "t", {"acc": _hits(100)}, limit=50)
    nofp = write_fake_record(root, ModelConfig("anon", {}), "t", {"acc": _hits(100)})
    rec = json.loads(nofp.read_text())
    rec["model"]["fingerprint"] = ""
    nofp.write_text(json.dumps(rec))
    lost = write_fake_record(root, ModelConfig("lost", {}), "t", {"acc": _hits(100)})
    lost.with_suffix(".perquery.json").unlink()
    edited = write_fake_record(root, ModelConfig("edited", {}), "t", {"acc": _hits(100)})
    rec = json.loads(edited.read_text())
    rec["metrics"]["acc"] = 90.0  # a hand-edited number its per-query values do not give
    edited.write_text(json.dumps(rec))
    widened = write_fake_record(root, ModelConfig("widened", {}), "t", {"acc": _hits(100)})
    rec = json.loads(widened.read_text())
    rec["intervals"]["acc"] = [1.0, 99.0]
    widened.write_text(json.dumps(rec))
    found = "\n".join(invalid_records(root))
    assert str(good) not in found
    assert str(limited) not in found  # a --limit run is left aside (never on the board), not a problem
    assert f"{nofp}: no model fingerprint" in found
    assert f"{lost}: " in found and "cannot be read" in found
    assert f"{edited}: " in found and "mean of per-query values" in found
    assert f"{widened}: interval of 'acc'" in found


def _named_sidecar(record: Path, name: str) -> None:
    rec = json.loads(record.read_text())
    rec["per_query_file"] = name
    record.write_text(json.dumps(rec))


@pytest.mark.parametrize("case", ["dotdot", "absolute", "symlink", "dev_zero", "folder"])
def test_a_records_sidecar_is_read_only_inside_the_results_folder(cli, tmp_path, case):
    """Records are untrusted input: `--check` opened whatever ``per_query_file`` named (a file
    elsewhere, ``/dev/zero`` until MemoryError) without naming the record."""
    root = tmp_path / "results"
    rec = write_fake_record(root, ModelConfig("m", {}), "t", {"acc": _hits(100)})
    outside = tmp_path / "elsewhere.perquery.json"  # a valid sidecar, but not the results folder's
    outside.write_text(rec.with_suffix(".perquery.json").read_text())
    if case == "symlink":
        rec.with_suffix(".perquery.json").unlink()
        rec.with_suffix(".perquery.json").symlink_to(outside)
    name = {"dotdot": "../../elsewhere.perquery.json", "absolute": str(outside), "dev_zero": "/dev/zero",
            "symlink": rec.with_suffix(".perquery.json").name, "folder": "."}[case]
    _named_sidecar(rec, name)
    found = "\n".join(invalid_records(root))
    assert found.startswith(f"{rec}: per_query_file"), found
    assert ("outside" in found) if case != "folder" else ("not a regular file" in found)
    res = cli("leaderboard", "--results-dir", str(root), "--out", str(tmp_path / "board.md"), "--check")
    assert res.returncode == 1 and str(rec) in res.stdout and "Traceback" not in res.stderr + res.stdout


def test_a_record_holding_a_key_twice_or_a_look_alike_name_is_refused_by_name(cli, tmp_path):
    """json kept the last of two equal keys (the board showed a metric's second value); a task name
    with a Greek omicron was a second column with the same title."""
    root = tmp_path / "results"
    good = write_fake_record(root, ModelConfig("m", {}), "t", {"acc": _hits(100)})
    twice = write_fake_record(root, ModelConfig("twice", {}), "t", {"acc": _hits(100)})
    text = twice.read_text()
    twice.write_text(text.replace('"metrics": {', '"metrics": {"acc": 99.0, ', 1))
    assert '"acc": 99.0' in twice.read_text()
    args = ("leaderboard", "--results-dir", str(root), "--out", str(tmp_path / "board.md"))
    for run in (args, (*args, "--check")):
        res = cli(*run)
        out = res.stderr + res.stdout  # --check lists it among the problems (exit 1), the board stops (exit 2)
        assert res.returncode != 0 and str(twice) in out and "'acc' appears twice" in out, out
    twice.unlink()
    twice.with_suffix(".perquery.json").unlink()
    for field, value in (("task", "c\u03bfco"), ("model", "m\u0456"), ("label", "m (arch=ViT-\u0392-32)")):
        rec = json.loads(good.read_text())
        if field == "label":
            rec["model"]["label"] = value
        else:
            rec[field]["name"] = value
        good.write_text(json.dumps(rec))
        res = cli(*args, "--check")
        assert res.returncode != 0 and str(good) in res.stdout and "U+0" in res.stdout, res.stdout


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium (apt-get install chromium)")
def test_the_page_renders_tables_and_plots_in_chromium(cli, tmp_path):
    _board(tmp_path / "results")
    (tmp_path / "leaderboard").mkdir()
    (tmp_path / "leaderboard" / "negation_training.md").write_text(
        "# Negation training\n\nA paragraph.\n\n| recipe | MIR |\n|---|---:|\n| bnl | 0.803 [0.799, 0.808] |\n")
    assert cli("leaderboard", "--out", "leaderboard/README.md", "--html", "leaderboard/site").returncode == 0
    page = tmp_path / "leaderboard" / "site" / "index.html"
    # sort the summary by its first score column (ascending) in the browser, then dump the DOM it built
    script = "<script>document.querySelector('#summary th:nth-child(2)').click();</script>"
    clicked = page.with_name("clicked.html")
    clicked.write_text(page.read_text().replace("</body>", script + "</body>"))
    dom = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          clicked.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert "<table class=\"sortable\" id=\"summary\">" in dom
    assert dom.count("<svg") >= 3  # original/negated/composed, MCQ templates, ΔMIR vs MIR
    assert "demo: original vs negated vs composed" in dom and "ΔMIR against original MIR" in dom
    assert "demo_mcq: MCQ accuracy per template" in dom and "chose positive" in dom
    assert 'href="../../results/alpha/demo_mcq.json"' in dom  # site/ -> the records
    assert "0.803 [0.799, 0.808]" in dom  # the experiment table
    summary = page.read_text().split("id=summary>")[1].split("</table>")[0]
    assert summary.index(">alpha<") < summary.index(">beta<")  # as generated: by label
    assert 'data-asc="1"' in dom
    sorted_dom = dom.split('id="summary"')[1].split("</table>")[0]
    assert sorted_dom.index(">beta<") < sorted_dom.index(">alpha<")  # beta's 0.133 sorts before alpha's 0.222
    shot = tmp_path / "page.png"
    subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,1600",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000
