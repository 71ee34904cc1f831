"""The leaderboard page as a reader sees it (issue #23, item 7): negated metrics never share a
higher-is-better axis, every bar carries its interval, the boolean baseline is drawn only where the
board shows its value, labels carry file names instead of absolute paths, tables scroll inside their
own box, and every figure fits its own width. Checked on the SVG/HTML structure here, and by the
layout a real browser computes (headless Chromium) where one is installed."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from negharness.records.fake import fake_record, write_fake_record
from negharness.records.results import ModelConfig, record_path, write_record
from negharness.report.labels import short_label
from negharness.report.leaderboard import build_tables
from negharness.report.page import newest_records, site_files
from negharness.report.plots import (
    all_plots,
    collections,
    delta_vs_original,
)
from negharness.report.svg_charts import CHAR_W, Point, Series, bar_chart, scatter

SVG = "{http://www.w3.org/2000/svg}"
QRELS = "/home/someone/data/fire_judgements.txt"
ARCH = "/opt/models/very/deep/folder/tiny_clip_arch.json"


def _hits(k: int, n: int = 300) -> list[float]:
    return [100.0] * k + [0.0] * (n - k)


def _collection(root: Path) -> None:
    """shapes-like original/negated/composed records for a model and a boolean baseline whose
    original record is blank (no negative part: the board shows "–")."""
    for name, k in (("alpha", 200), ("boolean", 120)):
        m = ModelConfig(name, {"base": "alpha"} if name == "boolean" else {})
        notes = {"boolean": {"with_negative_part": 0}} if name == "boolean" else {}
        write_fake_record(root, m, "demo_original", {"R@1": _hits(k), "MIR": [k / 300] * 290 + [0.1] * 10},
                          leaderboard=["R@1", "MIR"], main="MIR", fmt=".3f", notes=notes)
        write_fake_record(root, m, "demo_negated", {"ΔMIR": [k / 600] * 150 + [0.0] * 150,
                                                    "neg_MIR": [0.3] * 200 + [0.6] * 100},
                          leaderboard=["ΔMIR"], fmt=".3f")
        write_fake_record(root, m, "demo_composed", {"R@1": _hits(k // 2), "MIR": [k / 900] * 280 + [0.5] * 20},
                          leaderboard=["R@1", "MIR"], main="MIR", fmt=".3f")
        write_fake_record(root, m, "demo_mcq", {"accuracy": _hits(k), "acc_positive": _hits(k // 3),
                                                "acc_negative": _hits(0), "acc_hybrid": _hits(k // 5),
                                                "chose_positive": _hits(100), "chose_negative": _hits(100),
                                                "chose_hybrid": _hits(100)},
                          leaderboard=["accuracy", "acc_positive", "acc_negative", "acc_hybrid"])


def user_board(root: Path) -> None:
    """A community board: the collection above, fourteen long-named tasks (a summary wider than the
    page), a model whose label holds an absolute --arch path and a FIRE variant whose label holds
    an absolute qrels path."""
    _collection(root)
    wide = ModelConfig("clip", {"arch": ARCH})
    for i in range(14):
        write_fake_record(root, wide, f"community_benchmark_task_number_{i:02d}_original",
                          {"accuracy": _hits(100 + 10 * i)})
    rec, pq = fake_record(wide, "demo_original", {"R@1": _hits(150), "MIR": [0.5] * 300},
                          leaderboard=["R@1", "MIR"], main="MIR", fmt=".3f")
    rec["variant"] = {"qrels": QRELS}
    rec["variant_label"] = f"qrels={QRELS}"
    write_record(record_path(root, wide, "demo_original", {"qrels": QRELS}), rec, None, pq)


def _page(root: Path, site: Path) -> str:
    from negharness.records.board_pass import checked_records

    records = list(checked_records(root))
    return site_files(build_tables(records), records, site)["index.html"]


def _svgs(page: str) -> list[str]:
    return re.findall(r"<svg.*?</svg>", page, flags=re.S)


def _path_xs(d: str) -> list[float]:
    """The x coordinates a path of M/H/V/h/v commands (as `svg_charts` writes them) visits."""
    xs, x, y = [], 0.0, 0.0
    for cmd, args in re.findall(r"([MHVhv])([^MHVhv]*)", d):
        nums = [float(v) for v in args.split()]
        if cmd == "M":
            x, y = nums[0], nums[1]
        elif cmd == "H":
            x = nums[0]
        elif cmd == "h":
            x += nums[0]
        elif cmd == "V":
            y = nums[0]
        elif cmd == "v":
            y += nums[0]
        xs.append(x)
    return xs


def x_extents(svg: str) -> list[tuple[str, float, float]]:
    """(what, left, right) of every mark in a chart: rectangles, circles, lines, paths, and texts
    at the width the layout reserves for them (rotated ones through their rotation)."""
    root = ET.fromstring(svg)
    out = []
    for el in root.iter():
        tag = el.tag.removeprefix(SVG)
        if tag == "rect":
            x, w = float(el.get("x")), float(el.get("width"))
            out.append(("rect", x, x + w))
        elif tag == "circle":
            cx, r = float(el.get("cx")), float(el.get("r"))
            out.append(("circle", cx - r, cx + r))
        elif tag == "line":
            out.append(("line", min(float(el.get("x1")), float(el.get("x2"))), max(float(el.get("x1")), float(el.get("x2")))))
        elif tag == "path":
            xs = _path_xs(el.get("d"))
            out.append(("path", min(xs), max(xs)))
        elif tag == "text":
            text = "".join(t for t in el.itertext()) if el.find(f"{SVG}title") is None else \
                (el.find(f"{SVG}title").tail or "")
            size = float(el.get("font-size") or 11)
            w = len(text) * CHAR_W * size / 11
            x = float(el.get("x"))
            anchor = el.get("text-anchor") or "start"
            left = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
            right = left + w
            rot = re.match(r"rotate\((-?[\d.]+) ([\d.]+) ([\d.]+)\)", el.get("transform") or "")
            if rot:
                a = math.radians(float(rot.group(1)))
                ends = [x + (p - x) * math.cos(a) for p in (left, right)]
                if abs(float(rot.group(1))) == 90:  # a vertical label: its x extent is its line height
                    ends = [x - size / 2, x + size / 2]
                left, right = min(ends), max(ends)
            out.append((f"text {text!r}", left, right))
    return out


def _viewbox_width(svg: str) -> float:
    return float(re.search(r"viewBox='0 0 ([\d.]+) ", svg).group(1))


def test_negated_metrics_never_share_a_higher_is_better_axis_and_every_bar_has_an_error_bar(tmp_path):
    _collection(tmp_path / "results")
    page = _page(tmp_path / "results", tmp_path / "site")
    onc = page.split("id='plot-demo-onc'>")[1].split("</figure>")[0]
    panels = _svgs(onc)
    assert len(panels) == 2
    for svg in panels:
        ylabel = re.search(r"class='ylabel'[^>]*>(?:<title>[^<]*</title>)?([^<]+)</text>", svg).group(1)
        assert "higher is better" in ylabel
        series = re.findall(r"data-series='([^']+)'", svg)
        assert series and not any("neg_MIR" in s for s in series)  # lower-is-better: not on this axis
    assert set(re.findall(r"data-series='([^']+)'", panels[0])) == {"original MIR", "composed MIR"}
    assert set(re.findall(r"data-series='([^']+)'", panels[1])) == {"negated ΔMIR"}
    bar_charts = [svg for svg in _svgs(page.split("<h2>Plots</h2>")[1].split("<h2>Tasks</h2>")[0])
                  if "data-series=" in svg and "% of questions" not in svg]  # not the stacked choice shares
    assert len(bar_charts) == 3  # the two panels, MCQ accuracy per template
    for svg in bar_charts:
        assert svg.count("data-series=") == svg.count("class='err'") > 0, "a bar without its error bar"


def test_error_bars_are_the_records_intervals(tmp_path):
    _collection(tmp_path / "results")
    from negharness.records.board_pass import checked_records

    newest = newest_records(checked_records(tmp_path / "results"))
    svg = dict((pid, s) for pid, _, s in all_plots(newest))["plot-demo-onc"]
    composed = newest[("alpha", "demo_composed")]
    lo, hi = composed["intervals"]["MIR"]
    assert lo < composed["metrics"]["MIR"] < hi  # the fake values give a real interval
    assert f"alpha · composed MIR: {composed['metrics']['MIR']:.4g} [{lo:.4g}, {hi:.4g}]" in svg


def test_the_boolean_baseline_is_drawn_only_where_the_board_shows_its_value(tmp_path):
    _collection(tmp_path / "results")
    from negharness.records.board_pass import checked_records

    newest = newest_records(checked_records(tmp_path / "results"))
    svg, left_out = delta_vs_original(newest, collections(newest))
    tips = re.findall(r"<title>([^<]*MIR [^<]*)</title></circle>", svg)
    assert len(tips) == 1 and tips[0].startswith("alpha:")  # boolean's original MIR is "–" on the board
    assert left_out == ["boolean (base=alpha)"]
    page = _page(tmp_path / "results", tmp_path / "site")
    assert "not drawn, no original MIR on the board: boolean (base=alpha)" in page
    onc = page.split("id='plot-demo-onc'>")[1].split("</figure>")[0]
    assert "boolean (base=alpha) · original MIR" not in onc  # no bar either
    assert "boolean (base=alpha) · composed MIR" in onc and "boolean (base=alpha) · negated ΔMIR" in onc


def test_labels_show_file_names_not_absolute_paths(tmp_path):
    assert short_label(f"demo_original [qrels={QRELS}]") == "demo_original [qrels=fire_judgements.txt]"
    assert short_label(f"clip (arch={ARCH}, pretrained=openai)") == "clip (arch=tiny_clip_arch.json, pretrained=openai)"
    assert short_label("x [qrels=C:\\data\\q.txt]") == "x [qrels=q.txt]"
    assert short_label("boolean (base=shapes_clip), n_items=50, a/b") == "boolean (base=shapes_clip), n_items=50, a/b"
    user_board(tmp_path / "results")
    page = _page(tmp_path / "results", tmp_path / "site")
    assert "demo_original [qrels=fire_judgements.txt]" in page and "arch=tiny_clip_arch.json" in page
    assert QRELS not in page and ARCH not in page
    assert not re.search(r"(?<![\w.])/(home|opt|tmp|root|Users)/", page)
    assert str(tmp_path) not in page  # links to records stay relative


def test_a_variant_run_never_stands_in_a_plot_for_the_default_run(tmp_path):
    user_board(tmp_path / "results")
    from negharness.records.board_pass import checked_records

    newest = newest_records(checked_records(tmp_path / "results"))
    wide = ModelConfig("clip", {"arch": ARCH}).label
    assert (wide, f"demo_original [qrels={QRELS}]") in newest and (wide, "demo_original") not in newest
    assert "clip (arch=tiny_clip_arch.json)" not in dict((pid, s) for pid, _, s in all_plots(newest))["plot-demo-onc"]


def test_tables_scroll_inside_their_own_box(tmp_path):
    user_board(tmp_path / "results")
    page = _page(tmp_path / "results", tmp_path / "site")
    assert ".scroll{overflow-x:auto" in page
    tables = page.count("<table")
    assert tables > 15 and page.count("<div class=scroll><table") == tables


def _charts() -> list[str]:
    """Charts with long labels, titles and legends, points at the edges."""
    long = "a model label far longer than any band has room for"
    return [
        bar_chart([long, "b"], [Series("original MIR", [0.5, 0.25], [(0.1, 0.1), None])], title="t " * 80,
                  ylabel="a y label much longer than the plot is tall, to be cut " * 2, width=300),
        bar_chart(["m"] * 30, [Series("s" * 120, [1.0] * 30)], title="many", ylabel="y", width=470),
        scatter([("g", [Point(0, 0, label="a label at the right edge of the plot"), Point(1, 1, label="x" * 40)])],
                title="s", xlabel="x", ylabel="y", width=320),
    ]


def test_every_chart_mark_lies_inside_its_viewbox(tmp_path):
    user_board(tmp_path / "results")
    page = _page(tmp_path / "results", tmp_path / "site")
    svgs = _svgs(page) + _charts()
    assert len(svgs) >= 7
    for svg in svgs:
        width = _viewbox_width(svg)
        outside = [(what, round(lo, 1), round(hi, 1)) for what, lo, hi in x_extents(svg) if lo < -0.5 or hi > width + 0.5]
        assert outside == [], f"marks outside a {width}-wide figure: {outside[:5]}"


def test_fire_figure_fits_its_width(tmp_path):
    """Five metrics (ten with qrels) wrap onto rows of three: the figure's width is fixed, and
    every panel lies inside it."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("matplotlib")
    from negharness.scoring.fire import PANEL_SIZE, PLOT_COLUMNS, plot_deltas

    rng = np.random.default_rng(0)
    metrics = ["C@1", "C@5", "C@10", "MIR", "mAP"] + [f"fire_{m}" for m in ("C@1", "C@5", "C@10", "MIR", "mAP")]
    dists = {m: {n: np.abs(rng.normal(0, 1 / n, 200)) for n in (10, 30)} for m in metrics}
    for count in (4, 5, 10):
        out = plot_deltas({m: dists[m] for m in metrics[:count]}, tmp_path / f"fire{count}.svg", "model / task")
        svg = out.read_text()
        width = float(re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg).group(1))
        assert width == pytest.approx(72 * PANEL_SIZE[0] * PLOT_COLUMNS, abs=1)  # 9.6 in at 72 pt/in
        # each panel's background patch: <g id="axes_N"> <g id="patch_M"> <path d="M x0 y0 L x1 y1 ...
        patches = re.findall(r'<g id="axes_\d+">\s*<g id="patch_\d+">\s*<path d="([^"]+)"', svg)
        assert len(patches) >= count
        for d in patches:
            xs = [float(v) for v in re.findall(r"(-?[\d.]+) -?[\d.]+", d)]
            assert min(xs) >= 0 and max(xs) <= width, d[:80]


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


# the page's layout as a browser computes it: wider than the window? any SVG mark outside its figure?
MEASURE = """<script>
var svgs=document.querySelectorAll('svg'),bad=[];
svgs.forEach(function(svg,i){var box=svg.getBoundingClientRect(),sx=box.width/svg.viewBox.baseVal.width;
 svg.querySelectorAll('rect,circle,line,path,text').forEach(function(el){var r=el.getBoundingClientRect();
  if(r.width===0&&r.height===0)return;
  if(r.left<box.left-1||r.right>box.right+1)bad.push(i+':'+el.tagName+':'+(el.textContent||'').slice(0,30)+':'
   +Math.round(r.left-box.left)+'..'+Math.round(r.right-box.left)+'/'+Math.round(box.width))})});
var wide=document.documentElement.scrollWidth,win=window.innerWidth;
document.body.insertAdjacentHTML('beforeend','<pre id=measure>page '+wide+' window '+win+' svgs '+svgs.length
 +' outside ['+bad.join('; ')+']</pre>');
</script>"""


@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium (apt-get install chromium)")
@pytest.mark.parametrize("window", [1280, 900])
def test_in_chromium_the_page_is_no_wider_than_the_window_and_figures_hold_their_marks(tmp_path, window):
    user_board(tmp_path / "results")
    site = tmp_path / "site"
    site.mkdir()
    page = site / "index.html"
    page.write_text(_page(tmp_path / "results", site).replace("</body>", MEASURE + "</body>"))
    dom = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          f"--window-size={window},900", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    found = re.search(r"page (\d+) window (\d+) svgs (\d+) outside \[(.*?)\]</pre>", dom, flags=re.S)
    assert found, dom[-500:]
    wide, win, svgs, outside = int(found.group(1)), int(found.group(2)), int(found.group(3)), found.group(4)
    assert win == window and svgs >= 5
    assert wide <= win, f"the page is {wide} px wide in a {win} px window"
    assert outside == "", outside
