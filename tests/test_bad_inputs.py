"""Every bad input a message (issue 13, item 8): the CLI in a subprocess exits non-zero (2 for the
user's input or machine, 1 for a plugin's bug), prints one `error:` line naming the file, row,
option or plugin, never a traceback, and keeps what was finished."""

from __future__ import annotations

import csv
import errno
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from negharness.api import MediaError
from negharness.records.results import record_files


def _one_error_line(res, code: int, *needles: str) -> str:
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and "Caught " not in res.stderr, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, res.stderr
    tail = res.stderr[res.stderr.index("error:"):].strip()
    assert "\n" not in tail, tail  # the message is the one last line
    for n in needles:
        assert n in tail, tail
    return tail


# nT2VR image collection -----------------------------------------------------------------------------
def _flickr(root: Path, n: int = 4) -> Path:
    folder = root / "flickr30ktest"
    (folder / "TextData").mkdir(parents=True)
    (folder / "VideoSets").mkdir()
    (folder / "images").mkdir()
    colours = ["red", "green", "blue", "red"]
    rgb = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}
    for i in range(n):
        Image.fromarray(np.full((16, 16, 3), rgb[colours[i % 4]], np.uint8)).save(folder / "images" / f"im{i}.jpg")
    (folder / "VideoSets" / "flickr30ktest.txt").write_text("".join(f"im{i}\n" for i in range(n)))
    (folder / "TextData" / "flickr30ktest.caption.txt").write_text(
        "".join(f"im{i}#enc#0 a {colours[i % 4]} picture\n" for i in range(n)))
    return folder


def _run_flickr(cli, root: Path, *extra: str):
    return cli("run", "--model", "mean_colour", "--task", "flickr30k_original", "--data-root", str(root),
               *extra, plugins=("good",))


@pytest.mark.parametrize("file, extra, needles", [
    # a second im1 in the collection was a second candidate: MIR moved, silently
    ("VideoSets/flickr30ktest.txt", "im1\n", ["VideoSets/flickr30ktest.txt:5: id 'im1' repeats line 2"]),
    # before: a contract error naming no file
    ("TextData/flickr30ktest.caption.txt", "im1#enc#0 a green picture\n",
     ["TextData/flickr30ktest.caption.txt:5: caption id 'im1#enc#0' repeats line 2"]),
])
def test_a_repeated_id_in_an_image_collection_names_both_lines(cli, tmp_path, file, extra, needles):
    folder = _flickr(tmp_path / "data")
    with open(folder / file, "a") as fh:
        fh.write(extra)
    _one_error_line(_run_flickr(cli, tmp_path / "data", "--workers", "0"), 2, *needles)


def test_empty_jpeg_in_an_image_collection(cli, tmp_path):
    folder = _flickr(tmp_path / "data")
    (folder / "images" / "im2.jpg").write_bytes(b"")
    _one_error_line(_run_flickr(cli, tmp_path / "data", "--workers", "0"), 2, "im2.jpg", "empty or not an image")


@pytest.mark.parametrize("pixels, fmt, wide", [
    (np.linspace(0, 65535, 16).astype(np.uint16), "PNG", "16-bit image (mode I;16)"),
    (np.linspace(0, 2**20, 16).astype(np.int32), "TIFF", "32-bit integer image (mode I)"),
    (np.linspace(0, 1, 16).astype(np.float32), "TIFF", "32-bit float image (mode F)")])
def test_wider_than_8_bit_image_is_refused_not_clipped(cli, tmp_path, pixels, fmt, wide):
    """convert("RGB") clips: a 0..65535 gradient came out almost all white, scored as if fine."""
    folder = _flickr(tmp_path / "data")
    Image.fromarray(np.tile(pixels, (16, 1))).save(folder / "images" / "im2.jpg", format=fmt)  # named as listed
    res = _run_flickr(cli, tmp_path / "data", "--workers", "0")
    _one_error_line(res, 2, "im2.jpg", wide, "expected 8 bits per channel")
    ok = _run_flickr(cli, tmp_path / "data", "--workers", "0", "--skip-broken-media")
    assert ok.returncode == 0 and "im2.jpg" in ok.stderr, ok.stderr


@pytest.mark.parametrize("mode", ["L", "LA", "P", "RGBA", "CMYK", "1", "I;16"])
def test_8_bit_modes_are_still_read(tmp_path, mode):
    from negharness.io.media import open_image

    path = tmp_path / ("im.tif" if mode == "CMYK" else "im.png")
    grey = Image.fromarray(np.full((16, 16), 200, np.uint8))
    if mode == "I;16":
        Image.fromarray(np.full((16, 16), 200 * 257, np.uint16)).save(path)
        with pytest.raises(MediaError, match=r"im\.png: 16-bit image \(mode I;16\), expected 8 bits per channel"):
            open_image(path)
        return
    grey.convert(mode).save(path)
    with open_image(path) as im:
        assert im.mode == mode
        assert np.asarray(im.convert("RGB")).shape == (16, 16, 3)


def test_training_and_declarative_loaders_refuse_16_bit_images_too(tmp_path):
    """Every loader that decodes images whole (nT2VR and NegBench training sets, declarative tasks'
    files and base64 records) refuses a 16-bit PNG naming it, as evaluation does, instead of
    training on or scoring clipped pixels; 8-bit files still load."""
    import base64
    import io

    from negharness.api.media import FrameSampling, read_rgb
    from negharness.declarative.media import MediaRef
    from negharness.declarative.media import load_image as _load_image
    from negharness.tasks.negbench.training import _loader
    from negharness.tasks.nt2vr.training import media_loader

    (tmp_path / "images").mkdir()
    wide, fine = tmp_path / "images" / "wide.png", tmp_path / "images" / "fine.png"
    Image.fromarray(np.tile(np.linspace(0, 65535, 16).astype(np.uint16), (16, 1))).save(wide)
    Image.fromarray(np.full((16, 16, 3), 7, np.uint8)).save(fine)
    blob = base64.b64encode(wide.read_bytes()).decode()
    loads = {"nt2vr": media_loader(tmp_path, ["wide"], "image", FrameSampling("segments", 4), "here"),
             "negbench": _loader([wide], FrameSampling("segments", 4), "here")[1],
             "declarative": lambda _i: _load_image(MediaRef("r1", path=wide))}
    for name, load in loads.items():
        with pytest.raises(MediaError, match=r"wide\.png: 16-bit image \(mode I;16\)"):
            load(0)
    with pytest.raises(MediaError, match=r"record 7: 16-bit image"):
        _load_image(MediaRef("record 7", base64=blob))
    with pytest.raises(MediaError, match="record 8: empty or not an image"):
        _load_image(MediaRef("record 8", base64="%%%"))  # decodes (leniently, as VLMEvalKit's) to nothing
    with pytest.raises(MediaError, match="r9: empty or not an image"):
        read_rgb(io.BytesIO(b"not an image"), "r9")
    assert read_rgb(fine).mode == "RGB" and np.asarray(read_rgb(fine))[0, 0].tolist() == [7, 7, 7]
    crop = _load_image(MediaRef("r2", path=fine, crop=(2, 3, 5, 4)))
    assert crop.size == (5, 4) and crop.mode == "RGB"


def test_truncated_jpeg_decoded_in_dataloader_workers(cli, tmp_path):
    """Exceptions from worker processes arrive wrapped in the worker's traceback: only the message is shown."""
    folder = _flickr(tmp_path / "data")
    good = (folder / "images" / "im1.jpg").read_bytes()
    (folder / "images" / "im1.jpg").write_bytes(good[: len(good) // 2])
    res = _run_flickr(cli, tmp_path / "data", "--workers", "2")
    _one_error_line(res, 2, "im1.jpg", "truncated")
    ok = _run_flickr(cli, tmp_path / "data", "--workers", "2", "--skip-broken-media")
    assert ok.returncode == 0, ok.stderr


def test_one_unreadable_media_rule_for_decoders_and_both_contexts(tmp_path):
    """`UnreadableMedia` decides (stop or skip) for every decoder, a worker process's copy included, and
    keeps the one count and list of names the embedding runner and the editing context share."""
    import pickle
    import warnings

    from negharness.engine.edit_context import EditContext
    from negharness.engine.runner import CachedEvalContext, RunSettings
    from negharness.io.media import PreprocessedItems, image_files
    from negharness.io.unreadable import UnreadableMedia

    (tmp_path / "bad.jpg").write_bytes(b"not a jpeg")
    policy = UnreadableMedia(True, {})
    policy.skipped["k"] = ["seen before"]
    copy = pickle.loads(pickle.dumps(policy))  # what a worker process (spawned) holds: the decision only
    assert copy.skip and copy.skipped == {}
    media = image_files("k", ["bad"], [tmp_path / "bad.jpg"])
    worker = PreprocessedItems(media, [0], lambda im: im, copy)
    assert worker[0][0] == 0 and "bad.jpg" in worker[0][1]
    with pytest.raises(MediaError, match="bad.jpg"):
        _ = PreprocessedItems(media, [0], lambda im: im, UnreadableMedia(False))[0]
    error = MediaError("cannot read image bad.jpg")
    import types

    model = types.SimpleNamespace(name="m", fingerprint=lambda: "m", describe=lambda: {})
    runner_ctx = CachedEvalContext(model, RunSettings(skip_broken_media=True))  # type: ignore[arg-type]
    edit_ctx = EditContext(object(), None, tmp_path, 0, skip_broken_media=True)  # type: ignore[arg-type]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        runner_ctx.media_policy.leave_out("k", "bad", worker[0][1])
        edit_ctx.unreadable("k", "bad", error)
    assert runner_ctx.broken == edit_ctx.broken == {"k": ["bad"]}
    assert runner_ctx.counters.media_skipped == edit_ctx.counters.media_skipped == 1
    assert [str(w.message).split(":")[0] for w in seen] == ["skipped unreadable media"] * 2
    with pytest.raises(MediaError, match="bad.jpg"):
        EditContext(object(), None, tmp_path, 0).unreadable("k", "bad", error)  # type: ignore[arg-type]


def _two_video_collection(root: Path) -> Path:
    """An MSR-VTT-layout collection of two videos (video0, video1) and a caption each; no video files yet."""
    folder = root / "msrvtt10ktest"
    (folder / "TextData").mkdir(parents=True)
    (folder / "VideoSets").mkdir()
    (folder / "videos").mkdir()
    (folder / "VideoSets" / "msrvtt10ktest.txt").write_text("video0\nvideo1\n")
    (folder / "TextData" / "msrvtt10ktest.caption.txt").write_text("video0#enc#0 a red circle\nvideo1#enc#0 a cat\n")
    return folder


def test_corrupt_video_decoded_in_dataloader_workers(cli, tmp_path):
    folder = _two_video_collection(tmp_path / "data")
    for v in ("video0", "video1"):
        (folder / "videos" / f"{v}.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 4)
    res = cli("run", "--model", "shapes_clip", "--task", "msrvtt3k_original", "--data-root", str(tmp_path / "data"),
              "--workers", "2")
    _one_error_line(res, 2, "video", ".mp4")


def test_truncated_mp4_with_its_index_in_front_is_refused(cli, tmp_path):
    """An MP4 written with faststart (index first) and cut at 60%: its header declares all 64 frames,
    the stream ends after a few; the sampled frames past the end were the last one repeated."""
    av = pytest.importorskip("av")
    folder = _two_video_collection(tmp_path / "data")
    for v in ("video0", "video1"):
        with av.open(str(folder / "videos" / f"{v}.mp4"), "w", options={"movflags": "faststart"}) as out:
            stream = out.add_stream("libx264", rate=10)
            stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
            stream.options = {"crf": "0", "g": "10"}
            for i in range(64):
                frame = np.full((48, 64, 3), (4 * i) % 256, np.uint8)
                for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
    whole = (folder / "videos" / "video1.mp4").read_bytes()
    (folder / "videos" / "video1.mp4").write_bytes(whole[: int(len(whole) * 0.6)])
    run = ("run", "--model", "shapes_clip", "--task", "msrvtt3k_original", "--data-root", str(tmp_path / "data"),
           "--workers", "0")
    _one_error_line(cli(*run), 2, "video1.mp4", "of 64 (truncated?)")
    _one_error_line(cli(*run, "-M", "frames=uniform:8"), 2, "video1.mp4", "of 64 (truncated?)")
    ok = cli(*run, "--skip-broken-media")
    assert ok.returncode == 0 and "video1.mp4" in ok.stderr, ok.stderr


@pytest.mark.parametrize("spec, cause", [("fps:nan", "finite F > 0"), ("fps:inf", "finite F > 0"),
                                         ("fps:2:max=-1", "max=N needs N >= 1"), ("fps:2:max=0", "max=N needs N >= 1"),
                                         ("segments:0", "K >= 1"), ("fps:2:cap=4", "expected segments:K")])
def test_frame_sampling_option_is_refused_before_any_video(cli, tmp_path, spec, cause):
    """Accepted before, these failed per video with a ZeroDivisionError blamed on the video (max=0: no cap)."""
    res = cli("run", "--model", "shapes_clip", "-M", f"frames={spec}", "--task", "shapes_t2v_original",
              "--limit", "5")
    line = _one_error_line(res, 2, cause)
    assert line.startswith(f"error: -M frames={spec}: "), line


def test_unreadable_caption_file_folder_or_bad_utf8(cli, tmp_path):
    folder = _flickr(tmp_path / "data")
    cap = folder / "TextData" / "flickr30ktest.caption.txt"
    cap.write_bytes(b"im0#enc#0 a red picture\nim1#enc#0 a gr\xff\xfeen picture\n")
    _one_error_line(_run_flickr(cli, tmp_path / "data"), 2, "flickr30ktest.caption.txt:2", "not UTF-8")
    cap.unlink()
    cap.mkdir()
    _one_error_line(_run_flickr(cli, tmp_path / "data"), 2, "flickr30ktest.caption.txt", "folder")


def test_option_values(cli, tmp_path, monkeypatch, capsys):
    """--limit through a real subprocess; the other checks run before any plugin loads, so in-process."""
    _flickr(tmp_path / "data")
    _one_error_line(_run_flickr(cli, tmp_path / "data", "--limit", "-1"), 2, "--limit -1")
    _one_error_line(_run_flickr(cli, tmp_path / "data", "-T", "build=maybe"), 2, "-T build", "maybe")
    a_file = tmp_path / "not_a_folder"
    a_file.write_text("x")
    for extra, needles in ((["--limit", "0"], ["--limit 0"]),
                           (["--cache-dir", str(a_file)], ["--cache-dir", "not_a_folder"]),
                           (["--cache-dir", str(a_file / "sub")], ["--cache-dir", "is a file"]),
                           (["--workers", "-2"], ["--workers"])):
        code, err = _run_in_process(monkeypatch, capsys, tmp_path, [
            "run", "--model", "mean_colour", "--task", "flickr30k_original", "--data-root", str(tmp_path / "data"),
            *extra])
        assert code == 2 and err.startswith("error:") and "Traceback" not in err, err
        assert all(n in err for n in needles), err


# a plugin that raises mid-run ------------------------------------------------------------------------
def test_model_that_raises_mid_run_is_named_and_finished_records_are_kept(cli, tmp_path):
    res = cli("run", "--model", "boom", "--task", "boom_texts", "--task", "boom_images", plugins=("boom",))
    line = _one_error_line(res, 1, "model 'boom' (plugin 'boom')", "task 'boom_images'", "kaboom in encode_image",
                           "NEGHARNESS_DEBUG=1")
    assert "records of tasks finished" in line
    assert json.loads((tmp_path / "results" / "boom" / "boom_texts.json").read_text())["metrics"] == {"n": 2.0}
    assert not (tmp_path / "results" / "boom" / "boom_images.json").exists()
    debug = cli("run", "--model", "boom", "--task", "boom_images", plugins=("boom",), env={"NEGHARNESS_DEBUG": "1"})
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "kaboom" in debug.stderr


def test_a_task_that_raises_before_torch_is_named_as_after(cli):
    """A task plugin's bug while the run checks its inputs (before torch) was "unexpected AttributeError",
    naming nothing; it names the task and its plugin, as a bug in its `evaluate` does."""
    res = cli("run", "--model", "boom", "--task", "boom_files", plugins=("boom",))
    _one_error_line(res, 1, "task 'boom_files' (plugin 'boom') failed", "AttributeError", "no_such_attribute",
                    "NEGHARNESS_DEBUG=1")


@pytest.mark.parametrize("value,on", [("0", False), ("off", False), ("", False), ("yes", True), ("TRUE", True)])
def test_env_flags_read_one_way(monkeypatch, value, on):
    """Issue 32: env flags were read two ways (``NEGHARNESS_DEBUG=0`` turned debugging on in one of them)."""
    from negharness.api import ENV_FLAGS, env_flag
    from negharness.cli.process import debug_requested
    from negharness.io.paths import links_out_allowed

    for name in ENV_FLAGS:
        monkeypatch.setenv(name, value)
        assert env_flag(name) is on, name
    assert debug_requested() is on and links_out_allowed() is on


def test_an_env_flag_that_is_neither_on_nor_off_is_refused_by_name(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("NEGHARNESS_DEBUG", "maybe")
    code, err = _run_in_process(monkeypatch, capsys, tmp_path, ["list", "--brief"])
    assert code == 2 and "$NEGHARNESS_DEBUG" in err and "'maybe'" in err and "Traceback" not in err


# a full disk -----------------------------------------------------------------------------------------
def _run_in_process(monkeypatch, capsys, tmp_path, argv):
    from negharness.cli.main import main

    monkeypatch.setenv("COLUMNS", "300")
    code = main(argv)
    return code, capsys.readouterr().err


def test_full_disk_under_the_output_folder_names_the_file_and_keeps_finished_records(monkeypatch, capsys, tmp_path):
    import negharness.io.atomic_files as atomic

    real = atomic.atomic_write

    def full_for_second_record(path, write):
        if Path(path).name.startswith("shapes_t2v_original") and Path(path).name.endswith(".json"):
            def write(tmp):  # noqa: F811  the disk fills up halfway through this record
                Path(tmp).write_text("{")
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, write)

    monkeypatch.setattr(atomic, "atomic_write", full_for_second_record)
    out = tmp_path / "res"
    code, err = _run_in_process(monkeypatch, capsys, tmp_path, [
        "run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "--task", "shapes_t2v_original",
        "--limit", "8", "--output-dir", str(out), "--no-cache"])
    assert code == 2, err
    assert "no space left on device writing" in err and "shapes_t2v_original" in err and "Traceback" not in err
    written = record_files(out)  # --limit runs are variant records (<task>.limit8.json)
    assert [json.loads(p.read_text())["task"]["name"] for p in written] == ["shapes_t2i_original"]
    assert not list((out / "shapes_clip").glob("shapes_t2v_original*.json"))
    assert not [p for p in (out / "shapes_clip").iterdir() if p.name.endswith(".tmp")]  # no half file left


def test_full_disk_under_the_cache_is_one_line(monkeypatch, capsys, tmp_path):
    """Whatever writes the cache, a full disk there (an OSError without a path, or a library's own
    error that says so) is one line naming the cache folder, exit 2."""
    from negharness.engine.runner import CachedEvalContext

    def full(self, *args, **kwargs):
        raise RuntimeError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
                           "message: \"No space left on device\" })")

    monkeypatch.setattr(CachedEvalContext, "embed_texts", full)
    cache = tmp_path / "cache"
    code, err = _run_in_process(monkeypatch, capsys, tmp_path, [
        "run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "--limit", "4",
        "--output-dir", str(tmp_path / "res"), "--cache-dir", str(cache)])
    assert code == 2 and "no space left on device" in err and str(cache) in err and "Traceback" not in err


# the leaderboard -------------------------------------------------------------------------------------
def _record(**changes):
    from negharness.records.results import SCHEMA_VERSION

    rec = {"schema_version": SCHEMA_VERSION, "created_at": "2026-01-01T00:00:00Z",
           "model": {"label": "m", "name": "m"}, "task": {"name": "t", "family": "f", "leaderboard_metrics": ["R@1"]},
           "metrics": {"R@1": 50.0}, "metric_info": {"R@1": {"higher_is_better": True, "fmt": ".1f"}},
           "main_score": {"name": "R@1", "value": 50.0}, "limited": False}
    rec.update(changes)
    return rec


@pytest.mark.parametrize("content, needles", [
    (lambda: json.dumps(_record())[:40], ["t.json:1", "truncated"]),
    (lambda: json.dumps(_record(schema_version=99)), ["schema_version 99"]),
    (lambda: json.dumps({k: v for k, v in _record().items() if k != "schema_version"}), ["no schema_version"]),
    (lambda: json.dumps({k: v for k, v in _record().items() if k != "metrics"}), ["'metrics' is missing"]),
    (lambda: json.dumps(_record(metrics={"R@1": "50"})), ["'metrics.R@1' must be a number"]),
    (lambda: json.dumps(_record(model={"label": 3})), ["'model.label' must be str"]),
    (lambda: "[" * 100_000 + "]" * 100_000, ["nested too deep"]),  # was a RecursionError
    (lambda: json.dumps(_record()).replace("50.0}", "1" + "0" * 5000 + "}", 1), ["a number too long to read"]),
    (lambda: json.dumps(_record()).encode("utf-16"), ["UTF-16 text (expected UTF-8)"]),
    (lambda: json.dumps(_record()).encode("utf-16-le"), ["UTF-16 text (expected UTF-8)"]),
    (lambda: json.dumps(_record(metric_info={"R@1": {"fmt": "s"}})), ["'metric_info.R@1.fmt' 's'"]),
    (lambda: json.dumps(_record(metric_info={"R@1": {"fmt": ".1f}{0.__class__"}})), ["'metric_info.R@1.fmt'"]),
    (lambda: json.dumps(_record(metric_info={"R@1": {"fmt": ".100000f"}})), ["'metric_info.R@1.fmt' '.100000f'",
                                                                             "precision 0 to 10"]),
])
def test_leaderboard_reports_every_unusable_record(cli, tmp_path, content, needles):
    from negharness.records.fake import write_fake_record
    from negharness.records.results import ModelConfig

    write_fake_record(tmp_path / "results", ModelConfig("m", {}), "ok", {"R@1": [100.0, 0.0]})  # a valid one beside
    data = content()
    (tmp_path / "results" / "m" / "t.json").write_bytes(data if isinstance(data, bytes) else data.encode())
    _one_error_line(cli("leaderboard", "--out", str(tmp_path / "board.md")), 2, "t.json", *needles)
    assert not (tmp_path / "board.md").exists()


# NegBench MCQ ----------------------------------------------------------------------------------------
def _mcq(root: Path, rows) -> Path:
    (root / "negbench").mkdir(parents=True, exist_ok=True)
    (root / "coco" / "val2017").mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8, 3), (255, 0, 0), np.uint8)).save(root / "coco" / "val2017" / "000000000001.jpg")
    path = root / "negbench" / "COCO_val_mcq_llama3.1_rephrased.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["image_path", "correct_answer", "caption_0", "caption_1", "caption_2", "caption_3",
                    "correct_answer_template"])
        w.writerows(rows)
    return path


def test_mcq_row_with_three_options_in_a_four_option_file(cli, tmp_path):
    p = "data/coco/images/val2017/000000000001.jpg"
    path = _mcq(tmp_path / "data", [[p, 0, "a red picture", "b", "c", "d", "positive"]])
    with open(path, "a", newline="") as fh:
        fh.write(f"{p},0,a red picture,b,c,positive\n")  # a short row: three options
    res = cli("run", "--model", "mean_colour", "--task", "negbench_mcq_coco", "--data-root", str(tmp_path / "data"),
              plugins=("good",))
    _one_error_line(res, 2, "COCO_val_mcq_llama3.1_rephrased.csv:3", "6 cells where the header has 7")
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").rglob("*.json"))


def test_missing_mcq_image_names_csv_row_and_image(cli, tmp_path):
    rows = [["data/coco/images/val2017/000000000001.jpg", 0, "a red picture", "b", "c", "d", "positive"],
            ["data/coco/images/val2017/000000000009.jpg", 0, "a red picture", "b", "c", "d", "positive"]]
    _mcq(tmp_path / "data", rows)
    res = cli("run", "--model", "mean_colour", "--task", "negbench_mcq_coco", "--data-root", str(tmp_path / "data"),
              plugins=("good",))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "COCO_val_mcq_llama3.1_rephrased.csv:3: image" in res.stderr and "000000000009.jpg not found" in res.stderr


def test_mcq_csv_with_bad_utf8_names_file_and_line(cli, tmp_path):
    path = _mcq(tmp_path / "data", [["data/coco/images/val2017/000000000001.jpg", 0, "a", "b", "c", "d", "positive"]])
    path.write_bytes(path.read_bytes() + b"x,0,\xff,b,c,d,positive\n")
    res = cli("run", "--model", "mean_colour", "--task", "negbench_mcq_coco", "--data-root", str(tmp_path / "data"),
              plugins=("good",))
    _one_error_line(res, 2, "COCO_val_mcq_llama3.1_rephrased.csv:3", "not UTF-8")


@pytest.mark.parametrize("header, needles", [
    ("Image_Path", [":1: no column 'image_path' (or 'filepath')", "'Image_Path'", "case-sensitive"]),
    ("caption_1", [":1: column 4 'caption_1' repeats column 1"]),  # csv.DictReader would keep the last
])
def test_mcq_csv_header_without_the_media_column(cli, tmp_path, header, needles):
    """`Image_Path` for `image_path` used to end in exit 1 "plugin failed: KeyError: 'filepath'"."""
    path = _mcq(tmp_path / "data", [["data/coco/images/val2017/000000000001.jpg", 0, "a", "b", "c", "d", "positive"]])
    path.write_text(path.read_text().replace("image_path", header, 1))
    res = cli("run", "--model", "mean_colour", "--task", "negbench_mcq_coco", "--data-root", str(tmp_path / "data"),
              plugins=("good",))
    _one_error_line(res, 2, "COCO_val_mcq_llama3.1_rephrased.csv:1", *needles)


# a million-character caption -------------------------------------------------------------------------
def test_million_character_caption_line_is_refused_at_once(cli, tmp_path):
    captions = tmp_path / "caps.txt"
    captions.write_text("v1#enc#0 a dog runs on the grass\nv2#enc#0 " + "a cat " * 170_000 + "\n")
    res = cli("build-queries", "--captions", str(captions), "--out", str(tmp_path / "out"))
    _one_error_line(res, 2, "caps.txt:2", "characters")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
