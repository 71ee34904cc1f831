"""nT2VR tasks on a layout the tests write (frames and captions), file-format errors, build-queries."""

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from negharness.api import MissingDataError, UserError
from negharness.api import ModelOptions
from negharness.engine.evaluate import RunRequest, evaluate_request
from negharness.testing import COLOURS, host_with_models, keyword_model
from negharness.text.nt2vr_files import read_caption_file, read_composed_file

COLL = "msrvtt1kAtest"
VIDEOS = {"video0": "red", "video1": "green", "video2": "blue", "video3": "yellow", "video4": "cyan"}
CAPTIONS = {
    "video0": ["a man in red is playing a guitar", "a man in red is playing a guitar on a stage"],
    "video1": ["a man in green is cooking pasta", "a man in green is cooking pasta in a kitchen"],
    "video2": ["a man in blue is playing a guitar", "a man in blue is singing a song"],
    "video3": ["a woman in yellow is reading a book", "a woman in yellow is reading a book at home"],
    "video4": ["a woman in cyan is riding a bike", "a woman in cyan is riding a bike in a park"],
}


def write_layout(root: Path) -> Path:
    from PIL import Image

    folder = root / COLL
    (folder / "TextData").mkdir(parents=True)
    (folder / "VideoSets").mkdir()
    (folder / "VideoSets" / f"{COLL}.txt").write_text("\n".join(VIDEOS) + "\n")
    lines = []
    for vid, colour in VIDEOS.items():
        for k in range(3):
            p = folder / "frames" / vid / f"{k}.png"
            p.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.full((8, 8, 3), COLOURS[colour], dtype=np.uint8)).save(p)
            lines.append(f"{vid}_{k} frames/{vid}/{k}.png")
    (folder / "id.imagepath.txt").write_text("\n".join(lines) + "\n")
    caps = [f"{vid}#enc#{k} {c}" for vid, cs in CAPTIONS.items() for k, c in enumerate(cs)]
    (folder / "TextData" / f"{COLL}.caption.txt").write_text("\n".join(caps) + "\n")
    return folder


def refuse_data_of(monkeypatch, name: str) -> None:
    """The plan finds task ``name``'s data unreadable (where it hashes a task's data): it fails alone."""
    from negharness.engine import plan

    hashes = plan.data_hashes

    def refusing(files, root, hasher, task):
        if task == name:
            raise UserError("unreadable (made so by the test)")
        return hashes(files, root, hasher, task)

    monkeypatch.setattr(plan, "data_hashes", refusing)


def _host():
    return host_with_models({"kw": keyword_model})


def _run(tmp_path, tasks, **kw):
    req = RunRequest(model="kw", tasks=tasks, data_root=str(tmp_path / "data"), output_dir=str(tmp_path / "res"),
                     cache_dir=str(tmp_path / "cache"), **kw)
    return {o.task: o for o in evaluate_request(_host(), req)}


@pytest.mark.needs("nltk")
def test_original_negated_composed_share_one_pass_over_the_videos(tmp_path):
    write_layout(tmp_path / "data")
    with pytest.raises(MissingDataError, match="build-queries"):
        _run(tmp_path, ["msrvtt1k_negated"])
    out = _run(tmp_path, ["msrvtt1k_*"], task_extra={"build": "true"})
    assert {k: v.record["counts"]["media_encoded"] for k, v in out.items()} == {
        "msrvtt1k_composed": 5, "msrvtt1k_negated": 0, "msrvtt1k_original": 0}  # one pass, then the cache
    orig = out["msrvtt1k_original"].record
    assert orig["metrics"]["R@1"] == 100.0 and orig["n_items"] == {"queries": 10, "videos": 5}
    neg = out["msrvtt1k_negated"].record
    assert neg["n_items"]["negated_queries"] == 10
    # colour words survive negation, so a keyword model cannot tell: it is not negation-aware
    assert neg["metrics"]["ΔMIR"] == pytest.approx(0.0, abs=1e-9)
    text_dir = tmp_path / "data" / COLL / "TextData"
    assert (text_dir / f"{COLL}.negated.txt").is_file()  # -T build=true wrote them in place
    comp = out["msrvtt1k_composed"].record
    assert comp["n_items"]["queries"] >= 2 and 0 < comp["metrics"]["mAP"] <= 1
    assert "C@1" in comp["metrics"] and "several_relevant" in comp["notes"]


@pytest.mark.needs("nltk")
def test_built_query_files_are_hashed_and_rebuilt_when_their_rules_or_captions_change(tmp_path):
    """-T build=true: the files it wrote are hashed like any data (an edit reruns, never reuses the
    record), carry a build mark, and are rebuilt when the builder's version or the captions change;
    without build=true, stale built files are refused naming the file, never read as current."""
    folder = write_layout(tmp_path / "data")
    text = folder / "TextData"
    first = _run(tmp_path, ["msrvtt1k_composed"], task_extra={"build": "true"})["msrvtt1k_composed"]
    mark = json.loads((text / f"{COLL}.built.json").read_text())
    assert mark["complete"] is True and mark["settings"]["seed"] == 0
    composed = text / f"{COLL}.composed.txt"
    hashed = first.record["data"]["files"]
    assert f"{COLL}/TextData/{composed.name}" in hashed and f"{COLL}/TextData/{COLL}.built.json" in hashed
    again = _run(tmp_path, ["msrvtt1k_composed"], task_extra={"build": "true"})["msrvtt1k_composed"]
    assert again.skipped  # nothing changed: the record is reused
    lines = composed.read_text().splitlines()
    composed.write_text("\n".join(lines[:1]) + "\n")  # an edit of the built file reruns
    edited = _run(tmp_path, ["msrvtt1k_composed"], task_extra={"build": "true"})["msrvtt1k_composed"]
    assert not edited.skipped and edited.record["n_items"]["queries"] == 1
    mark["builder_version"] = "0"  # files built by older rules
    (text / f"{COLL}.built.json").write_text(json.dumps(mark))
    with pytest.raises(UserError, match=r"composed.txt: built by builder version 0.*-T build=true"):
        _run(tmp_path, ["msrvtt1k_composed"])
    rebuilt = _run(tmp_path, ["msrvtt1k_composed"], task_extra={"build": "true"})["msrvtt1k_composed"]
    assert not rebuilt.skipped and rebuilt.record["n_items"]["queries"] == first.record["n_items"]["queries"]
    assert json.loads((text / f"{COLL}.built.json").read_text())["builder_version"] != "0"
    cap = text / f"{COLL}.caption.txt"  # other captions: the built files no longer describe them
    cap.write_text(cap.read_text().replace("cooking pasta", "baking bread"))
    with pytest.raises(UserError, match="built from other captions"):
        _run(tmp_path, ["msrvtt1k_negated"])
    neg = _run(tmp_path, ["msrvtt1k_negated"], task_extra={"build": "true"})["msrvtt1k_negated"]
    assert "baking bread" in (text / f"{COLL}.negated.txt").read_text() and neg.record["n_items"]["negated_queries"]


def test_query_files_without_a_build_mark_are_read_as_data(tmp_path):
    """The authors' files carry no mark: read as they are, with or without build=true."""
    folder = write_layout(tmp_path / "data")
    (folder / "TextData" / f"{COLL}.composed.txt").write_text(
        "{'cap_id': 'q0', 'caption': 'a man not in red', 'video_ids': ['video1', 'video2']}\n")
    for extra in ({}, {"build": "true"}):
        out = _run(tmp_path, ["msrvtt1k_composed"], task_extra=extra, overwrite=True)["msrvtt1k_composed"]
        assert out.record["n_items"]["queries"] == 1
    assert not (folder / "TextData" / f"{COLL}.built.json").exists()


@pytest.mark.needs("nltk")
def test_query_naming_an_unknown_video_is_an_error_with_file_and_line(tmp_path):
    folder = write_layout(tmp_path / "data")
    cap = folder / "TextData" / f"{COLL}.caption.txt"
    cap.write_text(cap.read_text() + "video99#enc#0 a purple dog\n")
    with pytest.raises(UserError, match=r"caption.txt:11: video id 'video99'"):
        _run(tmp_path, ["msrvtt1k_original"])


def test_composed_file_with_a_line_that_is_not_a_dict(tmp_path):
    path = tmp_path / "c.composed.txt"
    path.write_text("{'cap_id': 's0', 'caption': 'a man', 'video_ids': ['v1']}\n['not', 'a', 'dict']\n")
    with pytest.raises(UserError, match="c.composed.txt:2: expected a dict"):
        read_composed_file(path)
    path.write_text("{'cap_id': 's0', 'caption': 'x', 'video_ids': ['v1']}\n__import__('os').system('echo hi')\n")
    with pytest.raises(UserError, match="c.composed.txt:2: not a Python/JSON dict literal"):
        read_composed_file(path)


def test_caption_line_without_an_id_and_empty_collection(tmp_path):
    path = tmp_path / "x.caption.txt"
    path.write_text("video1#enc#0 a man sings\njustonetoken\n")
    with pytest.raises(UserError, match="x.caption.txt:2"):
        read_caption_file(path)
    path.write_text("\n\n")
    with pytest.raises(UserError, match="empty collection"):
        read_caption_file(path)


@pytest.mark.needs("nltk")
def test_build_queries_cli_on_plain_captions(cli, tmp_path):
    folder = write_layout(tmp_path / "data")
    res = cli("build-queries", "--captions", str(folder / "TextData" / f"{COLL}.caption.txt"),
              "--out", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    assert "negated" in res.stdout and "composed" in res.stdout
    neg = read_caption_file(tmp_path / "out" / f"{COLL}.negated.txt")
    assert len(neg) >= 5 and all(c.endswith("#0") for c, _ in neg)
    assert all(any(w in t for w in ("not", "n't", "without")) for _, t in neg)
    info = [json.loads(x) for x in (tmp_path / "out" / f"{COLL}.negated_neginfo.txt").read_text().splitlines()]
    assert all({"cue", "negcap", "poscap", "rule"} <= set(i) for i in info)
    for line in (tmp_path / "out" / f"{COLL}.composed.txt").read_text().splitlines():
        rec = ast.literal_eval(line)  # the authors' reader works on our files
        assert rec["video_ids"] and "negstionfirst" in rec
    bad = cli("build-queries", "--captions", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o2"))
    assert bad.returncode == 2 and "--captions" in bad.stderr


@pytest.mark.needs("nltk", "data/negbench/negbench_eval_csvs/videos/msr_vtt_retrieval.csv")
def test_builders_on_real_msrvtt_captions():
    from conftest import SHARED

    from negharness.text.build_queries import build, summary
    from negharness.text.nt2vr_files import read_caption_table

    csv_path = SHARED / "data/negbench/negbench_eval_csvs/videos/msr_vtt_retrieval.csv"
    items = read_caption_table(csv_path, "image_id", "all_captions")
    assert len(items) == 1000 and sum(len(c) for _, c in items) == 19998
    built = build(items[:60], seed=0)
    s = summary(built)
    assert s["original"] == sum(len(c) for _, c in items[:60])
    assert s["negated"] >= 0.8 * s["original"]  # ~90% of real captions get a negated variant
    assert s["composed"] > 0 and all(len(q.video_ids) >= 1 for q in built.composed)


def test_boolean_wrapper_scores_positive_minus_negative():
    from negharness.engine.runner import CachedEvalContext, RunSettings
    from negharness.io.media import MediaSet
    from negharness.plugins.boolean_model import BooleanModel
    from negharness.scoring.metrics import Relevance
    from negharness.scoring.retrieval import QuerySet, similarities
    from negharness.testing import KeywordModel, solid_image

    base = KeywordModel()
    wrapped = BooleanModel(base, "kw")
    assert wrapped.fingerprint() == base.fingerprint()  # shares the base model's cached embeddings
    imgs = [solid_image(c) for c in ("red", "green")]
    media = MediaSet("t", "image", ["r", "g"], lambda i: imgs[i], cheap=True)
    ctx = CachedEvalContext(wrapped, RunSettings())
    emb = ctx.embed_media(media)
    qs = QuerySet(["q"], ["red and not green"], Relevance.from_lists([[0]], 2), [("red", "green")])
    got = similarities(ctx, qs, emb)
    cos = lambda a, b: float(base.encode_text([a]) @ emb[b])  # noqa: E731
    assert got[0, 0].item() == pytest.approx((1 + cos("red", 0)) / 2 - (1 + cos("green", 0)) / 2)
    assert got[0, 1].item() == pytest.approx((1 + cos("red", 1)) / 2 - (1 + cos("green", 1)) / 2)
    plain = CachedEvalContext(base, RunSettings())
    assert torch_equal(similarities(plain, qs, emb), base.encode_text(["red and not green"]) @ emb.t())


def torch_equal(a, b):
    import torch

    return torch.allclose(a, b)


def test_boolean_baseline_reads_the_authors_neginfo_and_reports_its_parts(tmp_path):
    """A negated query whose neginfo gives (poscap, negcap) is scored with those parts, not the
    negator's; a query without an entry is split by the negator; the notes count both."""
    from negharness.plugins.boolean_model import BooleanModel
    from negharness.testing import KeywordModel
    from negharness.text.nt2vr_files import read_neginfo

    info = tmp_path / "c.negated_neginfo.txt"
    info.write_text("{'cap_id': 'v1#enc#0#0', 'caption': 'a red car not green', 'poscap': 'a blue car', 'negcap': 'green'}\n"
                    "{'cap_id': 'v2#enc#0#0', 'caption': 'a red car'}\n")
    parts = read_neginfo(info)
    assert parts == {"v1#enc#0#0": ("a blue car", "green"), "v2#enc#0#0": ("a red car", "")}
    model = BooleanModel(KeywordModel(), "kw")
    notes = model.scoring_notes(["a red car not green", "a red car", "red without green"],
                                [parts["v1#enc#0#0"], parts["v2#enc#0#0"], None])
    assert notes["boolean"] == {"queries": 3, "with_negative_part": 2, "parts_from_data": 2, "parts_from_negator": 1}
    # the data's positive part is what is scored: "blue", not the caption's "red"
    views = model.text_views(["a red car not green"], [parts["v1#enc#0#0"]])
    assert views == {"positive": ["a blue car"], "negative": ["green"]}


@pytest.mark.needs("nltk")
def test_boolean_baseline_scores_choices_as_positive_minus_negative():
    """MCQ rows are scored through the model's text views: each option by s(pos) - s(neg), ragged rows padded."""
    from negharness.api import ChoiceSet
    from negharness.engine.runner import CachedEvalContext, RunSettings
    from negharness.io.media import MediaSet
    from negharness.plugins.boolean_model import BooleanModel
    from negharness.scoring.choices import score_choices
    from negharness.testing import KeywordModel, solid_image

    base = KeywordModel()
    imgs = [solid_image(c) for c in ("red", "green")]
    media = MediaSet("t", "image", ["r", "g"], lambda i: imgs[i], cheap=True)
    ctx = CachedEvalContext(BooleanModel(base, "kw"), RunSettings())
    emb = ctx.embed_media(media)
    options = [["red", "red but not green"], ["green", "red", "blue"]]
    got = score_choices(ctx, ChoiceSet(media, [0, 1], options, [0, 0]))
    cos = lambda t, m: float(base.encode_text([t]) @ emb[m])  # noqa: E731
    assert got.shape == (2, 3) and got[0, 2] == float("-inf")
    assert got[0, 0].item() == pytest.approx((1 + cos("red", 0)) / 2)
    # the negator's parts of "red but not green" are ("red but", "green")
    assert got[0, 1].item() == pytest.approx((1 + cos("red but", 0)) / 2 - (1 + cos("green", 0)) / 2, abs=1e-5)
    assert got[1].argmax().item() == 0


def test_default_frames_are_the_authors_test_sampling():
    """nT2VR's test code takes 8 frames, ``np.linspace(0, n - 1, 8, dtype=int)`` of the video's
    pre-extracted frames (configs/base_config.py test_sample_frame = 8): so does the default."""
    import numpy as np

    from negharness.tasks.nt2vr.tasks import DEFAULT_SAMPLING

    for n in (8, 20, 61):
        assert list(DEFAULT_SAMPLING.indices(n, 2.0)) == list(np.linspace(0, n - 1, 8, dtype=int))
    assert DEFAULT_SAMPLING.key == "uniform:8"


def test_missing_data_lists_every_file_at_once_with_where_each_comes_from(cli, tmp_path):
    """An empty data root: the text files, the video set and the videos folder in one message,
    then the layout as a tree with each file's source (and the build-queries alternative)."""
    (tmp_path / "data").mkdir()
    res = cli("run", "--model", "clip", "--task", "msrvtt3k_composed", "--data-root", str(tmp_path / "data"))
    assert res.returncode == 2
    err = res.stderr
    assert "4 file(s) missing" in err
    for name in ("msrvtt10ktest.caption.txt", "VideoSets/msrvtt10ktest.txt", "msrvtt10ktest.composed.txt",
                 "msrvtt10ktest/videos"):
        assert name in err
    assert "expected layout under" in err and "github.com/ruc-aimc-lab/nT2VR" in err and "MSR-VTT site" in err
    assert "negharness build-queries --captions" in err and "-T build=true" in err


def test_an_edited_neginfo_file_reruns_the_boolean_baseline_and_says_which(tmp_path):
    """The authors' negated_neginfo.txt, read when present, gives the boolean baseline its parts: its
    content enters the record's data hashes (an edit reran nothing: the stale ΔMIR 0.667 stood for 0.000)."""
    folder = write_layout(tmp_path / "data")
    text = folder / "TextData"
    neg = [(f"{vid}#enc#0#0", f"{caps[0]} without any dog") for vid, caps in CAPTIONS.items()]
    (text / f"{COLL}.negated.txt").write_text("".join(f"{c} {t}\n" for c, t in neg))
    info = text / f"{COLL}.negated_neginfo.txt"

    def write_info(negative):
        info.write_text("".join(repr({"cap_id": c, "caption": t, "poscap": t.split(" without")[0],
                                      "negcap": negative(c)}) + "\n" for c, t in neg))

    write_info(lambda c: "dog")
    req = RunRequest(model="boolean", tasks=["msrvtt1k_negated"], model_options=ModelOptions(extra={"base": "kw"}),
                     data_root=str(tmp_path / "data"), output_dir=str(tmp_path / "res"), cache_dir=str(tmp_path / "c"))
    first = evaluate_request(_host(), req)[0]
    assert f"{COLL}/TextData/{COLL}.negated_neginfo.txt" in first.record["data"]["files"]
    assert evaluate_request(_host(), req)[0].skipped
    write_info(lambda c: VIDEOS[c.split("#")[0]])  # each query's scope now names its own video's colour
    again = evaluate_request(_host(), req)[0]
    assert not again.skipped and again.reason == f"data file {COLL}/TextData/{COLL}.negated_neginfo.txt changed"
    assert again.record["metrics"]["ΔMIR"] != first.record["metrics"]["ΔMIR"]


def test_one_tasks_unusable_input_fails_alone_and_the_others_records_are_written(cli, tmp_path):
    """An empty composed file (found only once the run reads it) fails that task, named with its file;
    the original set's record is written and the run exits 2 (it aborted the whole run, no record kept)."""
    folder = write_layout(tmp_path / "data")
    (folder / "TextData" / f"{COLL}.composed.txt").write_text("")
    res = cli("run", "--model", "shapes_clip", "--task", "msrvtt1k_composed", "--task", "msrvtt1k_original",
              "--data-root", str(tmp_path / "data"), "--output-dir", str(tmp_path / "res"),
              "--cache-dir", str(tmp_path / "cache"))
    assert res.returncode == 2, res.stderr[-2000:]
    assert "error: task msrvtt1k_composed failed (the other tasks ran)" in res.stderr
    assert f"{COLL}.composed.txt: no composed queries" in res.stderr
    written = sorted(p.name for p in (tmp_path / "res").rglob("msrvtt1k_*.json") if "perquery" not in p.name)
    assert written == ["msrvtt1k_original.json"]
    assert "msrvtt1k_composed (failed: see below)" in res.stdout and "msrvtt1k_original" in res.stdout


def test_a_task_failing_while_planned_is_named_at_its_variants_record_path(tmp_path, monkeypatch):
    """A task whose data cannot be hashed fails alone; its outcome names the path its record would have
    (with --limit: the variant's file, as the task that ran beside it), not the default run's."""
    folder = write_layout(tmp_path / "data")
    neg = [(f"{vid}#enc#0#0", f"{caps[0]} without any dog") for vid, caps in CAPTIONS.items()]
    (folder / "TextData" / f"{COLL}.negated.txt").write_text("".join(f"{c} {t}\n" for c, t in neg))
    refuse_data_of(monkeypatch, "msrvtt1k_negated")
    outs = _run(tmp_path, ["msrvtt1k_original", "msrvtt1k_negated"], limit=2)
    ran, failed = outs["msrvtt1k_original"], outs["msrvtt1k_negated"]
    assert ran.error is None and failed.error == "unreadable (made so by the test)"
    assert failed.path.parent == ran.path.parent and ran.path.name != "msrvtt1k_original.json"
    assert failed.path.name == ran.path.name.replace("msrvtt1k_original", "msrvtt1k_negated")


def test_a_task_whose_config_fails_fails_alone(tmp_path, monkeypatch):
    """A task whose config() raises (it reads its files) fails alone, named; the task beside it runs."""
    from negharness.tasks.nt2vr.tasks import NT2VRTask

    write_layout(tmp_path / "data")
    neg = [(f"{vid}#enc#0#0", f"{caps[0]} without any dog") for vid, caps in CAPTIONS.items()]
    (tmp_path / "data" / COLL / "TextData" / f"{COLL}.negated.txt").write_text("".join(f"{c} {t}\n" for c, t in neg))
    config = NT2VRTask.config

    def refuse_negated(self):
        if self.name == "msrvtt1k_negated":
            raise UserError("config unreadable (made so by the test)")
        return config(self)

    monkeypatch.setattr(NT2VRTask, "config", refuse_negated)
    outs = _run(tmp_path, ["msrvtt1k_original", "msrvtt1k_negated"])
    assert outs["msrvtt1k_original"].error is None and outs["msrvtt1k_original"].record is not None
    assert outs["msrvtt1k_negated"].error == "config unreadable (made so by the test)"


def test_a_run_whose_every_task_fails_is_one_error_naming_each(tmp_path):
    """No task stands: the run fails as one error naming each task and why (it named the first only)."""
    folder = write_layout(tmp_path / "data")
    (folder / "TextData" / f"{COLL}.composed.txt").write_text("")
    with open(folder / "VideoSets" / f"{COLL}.txt", "a") as fh:
        fh.write("video9\n")  # listed, with no frames in id.imagepath.txt
    with pytest.raises(UserError) as err:
        _run(tmp_path, ["msrvtt1k_original", "msrvtt1k_composed"])
    message = str(err.value)
    assert message.startswith("all 2 tasks failed: ")
    assert "msrvtt1k_composed: " in message and "no composed queries" in message
    assert "msrvtt1k_original: " in message and "no frames for 1 video(s)" in message
