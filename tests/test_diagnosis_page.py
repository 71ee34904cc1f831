"""`negharness diagnose` writes its PCA picture as data beside the records, and the leaderboard page
draws it (one scatter per diagnosed model); the hand-written SVG charts the page uses."""

import json
import re

import pytest

from negharness.records.fake import write_fake_record
from negharness.records.results import ModelConfig
from negharness.report.diagnose import captions
from negharness.report.diagnosis_file import FILE_NAME
from negharness.report.svg_charts import (
    Point,
    Series,
    bar_chart,
    nice_ticks,
    scatter,
    tick_text,
)

TINY_CLIP = {"model_cfg": {"embed_dim": 16, "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16,
                                                           "head_width": 16},
                           "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}},
             "preprocess_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}}
OBJECTS = ["dog", "cat", "car"]


@pytest.fixture
def diagnosed(cli, tmp_path):
    """A diagnosis of a random-init tiny CLIP under results/, its path and the arch file."""
    arch = tmp_path / "tiny_clip.json"
    arch.write_text(json.dumps(TINY_CLIP))
    res = cli("diagnose", "--model", "clip", "--arch", str(arch), "--objects", ",".join(OBJECTS), "--device", "cpu",
              "--out", str(tmp_path / "d.png"), "--results-dir", "results")
    assert res.returncode == 0, res.stderr
    cfg = ModelConfig("clip", {"arch": str(arch)})
    path = tmp_path / "results" / cfg.dirname / FILE_NAME
    assert str(path.relative_to(tmp_path)) in res.stdout.replace("\n", "")
    return path, cfg


def test_diagnose_writes_the_pca_data_beside_the_records(diagnosed):
    path, cfg = diagnosed
    data = json.loads(path.read_text())
    rows = captions(OBJECTS)
    points = data["pca"]["points"]
    assert data["kind"] == "negharness.diagnosis" and data["schema_version"] == 1
    assert data["model"]["label"] == cfg.label and data["model"]["options"] == cfg.options and data["model"]["fingerprint"]
    assert data["objects"] == OBJECTS and data["summary"]["n_captions"] == len(rows) == len(points)
    assert [(p["family"], p["object"], p["caption"]) for p in points] == rows
    s = data["summary"]
    assert s["negation_gap"] == pytest.approx(s["same_object_negation"] - s["different_objects"], abs=1e-12)
    # PCA coordinates are centred, uncorrelated, and their variances are in the ratio the stored
    # explained-variance shares give (each component's variance is s_i^2 / n)
    xs, ys = [p["x"] for p in points], [p["y"] for p in points]
    n = len(points)
    mx, my = sum(xs) / n, sum(ys) / n
    vx, vy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    ev = data["pca"]["explained_variance_ratio"]
    assert abs(mx) < 1e-5 and abs(my) < 1e-5 and abs(cov) < 1e-4 * (vx * vy) ** 0.5
    assert 1 >= ev[0] >= ev[1] > 0 and ev[0] + ev[1] <= 1
    assert vx / vy == pytest.approx(ev[0] / ev[1], rel=1e-3)


def test_the_page_draws_one_point_per_caption_and_check_keeps_it_honest(cli, diagnosed, tmp_path):
    path, cfg = diagnosed
    data = json.loads(path.read_text())
    rec = write_fake_record(tmp_path / "results", cfg, "demo_mcq", {"accuracy": [100.0] * 30 + [0.0] * 70})
    args = ("leaderboard", "--out", "board/README.md", "--html", "board/site")
    assert cli(*args).returncode == 0
    page = (tmp_path / "board" / "site" / "index.html").read_text()
    section = page.split("<section id=diagnoses>")[1].split("</section>")[0]
    assert section.count("<svg") == 1 and "clip (arch=tiny_clip.json)" in section
    assert str(tmp_path) not in page  # the --arch path shows as its file name (a label, not a location)
    assert section.count("class='pt'") == len(data["pca"]["points"])
    assert all(f">{fam}</text>" in section for fam in ("affirmation", "negation", "two objects", "hybrid", "double negation"))
    assert f"PC 1 ({100 * data['pca']['explained_variance_ratio'][0]:.1f}% of variance)" in section
    assert "This image includes dog (affirmation; dog)" in section  # a point's hover text
    assert f"href='../../results/{cfg.dirname}/{FILE_NAME}'" in section
    # the fake record names another fingerprint than the model diagnosed: --check calls the diagnosis stale
    stale = cli(*args, "--check")
    assert stale.returncode == 1 and f"{path.relative_to(tmp_path)}: stale: made with model fingerprint" in stale.stdout
    body = json.loads(rec.read_text())
    body["model"]["fingerprint"] = data["model"]["fingerprint"]
    rec.write_text(json.dumps(body))
    fresh = cli(*args, "--check")
    assert fresh.returncode == 0, fresh.stdout
    assert "1 diagnosis file(s) valid" in fresh.stdout


def test_a_malformed_diagnosis_is_one_error_naming_the_file(cli, diagnosed, tmp_path):
    path, _ = diagnosed
    good = path.read_text()
    path.write_text(good[: len(good) // 2])
    res = cli("leaderboard", "--html", "site")
    assert res.returncode == 2 and f"{path.relative_to(tmp_path)}:" in res.stderr and "not valid JSON" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    data = json.loads(good)
    del data["pca"]["points"][3]["x"]
    path.write_text(json.dumps(data))
    res = cli("leaderboard", "--html", "site", "--check")
    assert res.returncode == 2 and "invalid diagnosis: pca.points[3]: needs keys" in res.stderr


def test_nice_ticks_and_tick_text():
    assert nice_ticks(0, 0.95) == ([0.0, 0.2, 0.4, 0.6, 0.8, 1.0], 0.2)
    assert nice_ticks(-0.013, 0.06)[0][0] == pytest.approx(-0.02) and nice_ticks(-0.013, 0.06)[0][-1] >= 0.06
    assert nice_ticks(5, 5)[0][0] < 5 < nice_ticks(5, 5)[0][-1]  # a flat range still gets an axis
    assert [tick_text(v, 2.5) for v in (0, 2.5, 5)] == ["0.0", "2.5", "5.0"]
    assert tick_text(-1e-17, 0.1) == "0.0"


def test_charts_carry_their_data_axes_and_legend():
    svg = bar_chart(["m1", "m2"], [Series("original MIR", [0.5, 0.25], [(0.1, 0.1), (0.0, 0.0)]),
                                   Series("negated", [None, 0.75])], title="t", ylabel="MIR")
    bars = re.findall(r"<rect x='[^']+' y='([^']+)' width='[^']+' height='([^']+)'[^>]*><title>([^<]+)</title>", svg)
    assert [b[2] for b in bars] == ["m1 · original MIR: 0.5 [0.4, 0.6]", "m2 · original MIR: 0.25 [0.25, 0.25]",
                                    "m2 · negated: 0.75"]
    heights = [float(b[1]) for b in bars]
    assert heights[0] == pytest.approx(2 * heights[1], abs=0.2) and heights[2] == pytest.approx(3 * heights[1], abs=0.2)
    assert ">original MIR</text>" in svg and ">negated</text>" in svg and ">MIR</text>" in svg  # legend, y label
    assert svg.count("<path d='M") == 1  # the axes
    # m1's and m2's intervals (a zero-width one draws a flat whisker); "negated" has none, so no whisker
    assert svg.count("<path class='err'") == 2
    pts = scatter([("a", [Point(0, 0), Point(1, 1)]), ("b", [Point(0.5, 0.2, tip="x<y")])],
                  title="s", xlabel="PC 1", ylabel="PC 2")
    assert pts.count("class='pt'") == 3 and "x&lt;y" in pts and ">PC 1</text>" in pts
    assert pts == scatter([("a", [Point(0, 0), Point(1, 1)]), ("b", [Point(0.5, 0.2, tip="x<y")])],
                          title="s", xlabel="PC 1", ylabel="PC 2")  # deterministic


def test_diagnose_defaults_to_the_models_own_object_words():
    """A plugin may declare the objects its model's captions name; without them, COCO's."""
    from types import SimpleNamespace

    from negharness.report.diagnose import DEFAULT_OBJECTS, default_objects

    assert default_objects(SimpleNamespace()) == (list(DEFAULT_OBJECTS), "ten COCO objects")
    assert default_objects(SimpleNamespace(object_words=("red circle", " ", "blue square")))[0] == ["red circle", "blue square"]
    assert default_objects(SimpleNamespace(object_words=("red circle",)))[0] == list(DEFAULT_OBJECTS)  # one is no pair


def test_diagnose_on_the_world_uses_the_worlds_words(cli, tmp_path):
    """`negharness diagnose --model shapes_clip` with no --objects: colour-shape pairs of the world
    (every colour and every shape of its vocabulary), never a COCO word the model never saw."""
    from negharness.world.scenes import COLOURS, SHAPES

    res = cli("diagnose", "--model", "shapes_clip", "--device", "cpu", "--out", str(tmp_path / "d.png"),
              "--results-dir", "results")
    assert res.returncode == 0, res.stderr
    assert "the model's own object words" in res.stdout.replace("\n", " ")
    data = json.loads((tmp_path / "results" / "shapes_clip" / FILE_NAME).read_text())
    objects = data["objects"]
    pairs = [tuple(o.split(" ")) for o in objects]
    assert all(c in COLOURS and s in SHAPES for c, s in pairs) and len(set(pairs)) == len(pairs) == 12
    assert {c for c, _ in pairs} == set(COLOURS) and {s for _, s in pairs} == set(SHAPES)
    captions_text = " ".join(p["caption"] for p in data["pca"]["points"]).lower()
    assert not any(re.search(rf"\b{w}\b", captions_text) for w in ("dog", "cat", "pizza", "umbrella"))
    assert data["summary"]["n_captions"] == len(captions(objects))
