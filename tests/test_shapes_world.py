"""The embedded world: deterministic, exact facts, actions visible per frame, and the default run above chance."""

import json
from collections import Counter

import numpy as np
import pytest

from negharness.world.media import load_world
from negharness.world.render import render_video
from negharness.world.scenes import ACTIONS, COLOURS, SHAPES, build_split


def test_same_seed_same_world_and_items_stable_when_split_grows():
    a = build_split(0, "test", "video", 40)
    b = build_split(0, "test", "video", 80)
    assert a.captions == b.captions[:40] and a.relevance_groups() == b.relevance_groups()[:40]
    assert np.array_equal(load_world(0, "test", "video", 40, None).pixels,
                          load_world(0, "test", "video", 80, None).pixels[:40])
    assert build_split(1, "test", "video", 40).captions != a.captions
    assert build_split(0, "train", "video", 40).captions != a.captions


def _whole_canvas_frame(scene, frame: int, frames: int) -> np.ndarray:
    """The renderer as first written: every layer's mask over the whole supersampled canvas, blended by
    boolean indexing, then numpy's 2x2 mean (what the world's pixels were defined by)."""
    from negharness.world import render

    img = np.broadcast_to(render.BACKGROUND, (64, 64, 3)).copy()
    for o in scene.objects:
        colour = np.clip(np.array(COLOURS[o.colour], dtype=np.float64) + o.tint, 0, 255)
        if not render._visible(o, frame):
            continue
        t = frame - (frames - 1) / 2
        layers = [(t - back, alpha) for back, alpha in zip((2, 1), reversed(render._TRAIL))
                  if o.action in ("sliding", "bouncing")] + [(t, 1.0)]
        for when, alpha in layers:
            mask = render._mask(o.shape, *render._position(o, when), o.size)
            img[mask] = img[mask] * (1 - alpha) + colour * alpha
    return np.round(img.reshape(32, 2, 32, 2, 3).mean(axis=(1, 3))).astype(np.uint8)


@pytest.mark.parametrize("seed", [0, 7, 123])
def test_pixels_equal_the_whole_canvas_renderer(seed):
    """The renderer works per shape in a window around it, and sums the 2x2 samples itself: the very
    bytes the whole-canvas renderer gives (the world's files, weights and records rest on them), shapes
    sliding off the canvas included."""
    from negharness.world.render import render_image

    from negharness.world import render

    videos = build_split(seed, "train", "video", 150)
    edges = [w for s in videos.scenes for o in s.objects for f in range(4) for w, _, _ in render._layers(o, f, 4)
             if 0 in (w[0].start, w[1].start) or 64 in (w[0].stop, w[1].stop)]
    assert edges  # windows cut by the canvas's edge are among them
    for scene in videos.scenes:
        expected = np.stack([_whole_canvas_frame(scene, f, 4) for f in range(4)])
        assert np.array_equal(render_video(scene), expected)
    for scene in build_split(seed, "train", "image", 150).scenes:
        assert np.array_equal(render_image(scene), _whole_canvas_frame(scene, 0, 1))


def test_every_caption_names_every_object_with_its_action():
    split = build_split(0, "val", "video", 200)
    for scene, caps in zip(split.scenes, split.captions):
        assert 1 <= len(scene.objects) <= 2 and len(caps) >= 2
        for cap in caps:
            for o in scene.objects:
                assert f"{o.colour} {o.shape}" in cap
                assert any(form in cap for form in ACTIONS[o.action])
    images = build_split(0, "val", "image", 200)
    assert all(o.action is None for s in images.scenes for o in s.objects)
    assert Counter(len(s.objects) for s in images.scenes).keys() == {1, 2, 3}


def test_actions_are_visible_to_mean_pooling():
    split = build_split(0, "test", "video", 300)
    by_action = {}
    for scene in split.scenes:
        if len(scene.objects) == 1:
            by_action.setdefault(scene.objects[0].action, scene)
    assert set(by_action) == set(ACTIONS)
    lit = {a: (render_video(s).astype(int).sum(-1) > 200).sum(axis=(1, 2)) for a, s in by_action.items()}
    assert (lit["blinking"] == 0).sum() == 2  # the shape is gone in half of the 4 frames
    assert (lit["resting"] > 0).all() and len(set(lit["resting"])) == 1
    for moving in ("sliding", "bouncing"):  # trails: faint pixels around the shape in every frame
        frames = render_video(by_action[moving]).astype(int).sum(-1)
        faint = ((frames > 90) & (frames < 400)).sum(axis=(1, 2))
        assert (faint > 4).all()


def test_identical_facts_are_grouped():
    split = build_split(0, "test", "video", 500)
    groups = Counter(split.relevance_groups())
    assert max(groups.values()) > 1  # duplicates exist at this size, so the evaluation must group them
    assert len(COLOURS) * len(SHAPES) * len(ACTIONS) == 96


@pytest.mark.heavy  # tens of seconds: scheduled first (tests/conftest.py)
def test_embedded_default_runs_far_above_chance(cli, tmp_path):
    res = cli("run", "--model", "shapes_clip", "--task", "shapes_*")
    assert res.returncode == 0, res.stderr
    video = json.loads((tmp_path / "results" / "shapes_clip" / "shapes_t2v_original.json").read_text())
    assert video["n_items"] == {"queries": 1500, "videos": 500}
    m = video["metrics"]
    assert m["R@1"] >= 20 and m["R@10"] >= 80 and m["MIR"] >= 0.3  # chance: R@1 ~0.3%, MIR ~0.01
    assert video["notes"]["queries_with_several_relevant"] > 0
    image = json.loads((tmp_path / "results" / "shapes_clip" / "shapes_t2i_original.json").read_text())
    assert image["metrics"]["R@1"] >= 20
    board = cli("leaderboard")
    assert board.returncode == 0 and "shapes_t2v_original" in (tmp_path / "results" / "README.md").read_text()


@pytest.mark.needs("nltk")
def test_shipped_world_queries_equal_a_fresh_build(tmp_path):
    """The query sets shipped for the default tasks are what the builders make today: a change to
    the builders without `python -m negharness.world.queries` fails here, not on users' machines."""
    import json

    from negharness.world.queries import PACKAGED, SHIPPED, _name, build_world_queries

    for seed, split, n, query_seed in SHIPPED:
        shipped = json.loads((PACKAGED / _name(seed, split, n, query_seed)).read_text())
        fresh = json.loads(json.dumps(build_world_queries(seed, split, n, tmp_path, query_seed)))
        assert shipped == fresh


def test_a_builder_change_changes_the_world_tasks_config(monkeypatch, tmp_path):
    """The negated / composed world tasks' config holds their query set's content: new wording from
    the text builders reruns their records instead of reusing them."""
    from negharness.api import TaskOptions
    from negharness.tasks.shapes import retrieval

    task = retrieval.ShapesT2VComposed(TaskOptions(tmp_path))
    before = task.config()
    shipped = task.queries()
    reworded = {**shipped, "composed": [{**q, "caption": q["caption"] + "!"} for q in shipped["composed"]]}
    monkeypatch.setattr(retrieval.ShapesT2VComposed, "queries", lambda self: reworded)
    assert task.config()["queries"] != before["queries"]
    assert retrieval.ShapesT2VOriginal(TaskOptions(tmp_path)).config().get("queries") is None


def _limited_record(root, model_folder: str) -> dict:
    [path] = (root / "results").glob(f"{model_folder}/shapes_t2v_original.limit*@*[0-9a-f].json")
    return json.loads(path.read_text())


def test_model_frame_sampling_applies_to_the_world_videos(cli, tmp_path):
    """``-M frames=...`` was ignored on the world's in-memory clips: every variant scored the same 4
    frames under its own label. Now segments:1 keeps frame 2 of 4 and its numbers are its own."""
    runs = {}
    for spec in ("", "segments:1", "segments:4"):
        res = cli("run", "--model", "shapes_clip", *(["-M", f"frames={spec}"] if spec else []),
                  "--task", "shapes_t2v_original", "--limit", "40")
        assert res.returncode == 0, res.stderr
        folder = "shapes_clip" if not spec else next(
            p.name for p in (tmp_path / "results").glob("shapes_clip@*") if p.name not in runs.values())
        runs[spec] = folder
    default, one, four = (_limited_record(tmp_path, runs[s])["metrics"] for s in ("", "segments:1", "segments:4"))
    assert one != default  # a single frame loses the motion the captions' actions name
    assert four == default  # segments:4 of a 4-frame clip is every frame


def test_world_media_takes_the_sampled_frames(tmp_path):
    from negharness.api import TaskOptions
    from negharness.api.media import FrameSampling
    from negharness.tasks.shapes.retrieval import ShapesT2VOriginal

    task = ShapesT2VOriginal(TaskOptions(data_root=tmp_path, limit=6))
    world = task.world()

    class Ctx:
        def __init__(self, sampling):
            self.sampling = sampling

        def frame_sampling(self, default):
            return self.sampling or default

    whole = task.media(world, Ctx(None))
    assert np.array_equal(whole.load_batch([0, 1]), world.pixels[[0, 1]])
    one = task.media(world, Ctx(FrameSampling("segments", 1)))  # the centre of one segment of 4: frame 2
    assert np.array_equal(one.load(3), world.pixels[3][[2]]) and one.key == f"{whole.key}/segments:1"
    half = task.media(world, Ctx(FrameSampling("fps", fps=1.0)))  # the world runs at 2 fps: frames 0 and 2
    assert np.array_equal(half.load(0), world.pixels[0][[0, 2]])
    keys = {m.content_keys[0] for m in (whole, one, half)}
    assert len(keys) == 3  # other frames, other cache entries
    assert whole.content_keys == task.media(world, Ctx(None)).content_keys  # stable across calls


def test_world_content_keys_follow_the_pixels(tmp_path):
    """The world's media are keyed by each item's pixel hash, computed once per split: one changed
    pixel changes that item's key only, the pixels cannot be changed in place, and a smaller split's
    items (``--limit``) share the larger one's keys."""
    from negharness.api.files import hash_array
    from negharness.world.media import WorldData

    world = load_world(0, "test", "image", 8, tmp_path)
    assert world.row_keys == [hash_array(p) for p in world.pixels] and len(set(world.row_keys)) == 8
    with pytest.raises(ValueError):
        world.pixels[0, 0, 0, 0] = 1
    pixels = world.pixels.copy()
    pixels[5, 3, 3, 0] ^= 1
    other = WorldData(world.ids, world.captions, world.groups, pixels).row_keys
    assert [a == b for a, b in zip(other, world.row_keys)] == [True] * 5 + [False] + [True] * 2
    assert load_world(0, "test", "image", 3, tmp_path).row_keys == world.row_keys[:3]
