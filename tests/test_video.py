"""Frame sampling by hand, decoding of videos the tests write, pre-extracted frame folders, broken media."""

import numpy as np
import pytest
import torch

from negharness.api import MediaError, UserError
from negharness.engine.runner import CachedEvalContext, RunSettings
from negharness.io.media import MediaSet
from negharness.io.video import (
    FrameSampling,
    available_decoders,
    decode_video,
    load_frames,
)
from negharness.tasks.nt2vr.frame_index import read_frame_index
from negharness.testing import KeywordModel

av = pytest.importorskip("av")


def test_segment_and_fps_sampling_by_hand():
    assert FrameSampling("segments", 4).indices(100, 30).tolist() == [12, 37, 62, 87]
    assert FrameSampling("segments", 3).indices(2, 30).tolist() == [0, 1, 1]  # short clip: repeats, no overflow
    every_half_second = FrameSampling("fps", fps=2).indices(300, 30)
    assert every_half_second.tolist() == list(range(0, 300, 15))
    capped = FrameSampling("fps", fps=2, max_frames=5).indices(300, 30)
    assert len(capped) == 5 and capped[0] == 0 and capped[-1] == 285
    assert FrameSampling.parse("segments:12") == FrameSampling("segments", 12)
    assert FrameSampling.parse("fps:2:max=64").key == "fps:2:max=64"
    with pytest.raises(UserError, match="segments:K"):
        FrameSampling.parse("uniform")


def _gray(i: int) -> int:
    return 10 + (5 * i) % 240


def write_video(path, n_frames=40, fps=10, size=(48, 64)):
    """Frame i is uniform gray _gray(i): a decoded frame tells which frame it was."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = size[1], size[0], "yuv420p"
        stream.options = {"crf": "0", "g": "10"}
        for i in range(n_frames):
            frame = np.full((*size, 3), _gray(i), dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


@pytest.mark.parametrize("decoder", [d for d in ("av", "cv2") if d in available_decoders()])
def test_decoders_take_the_sampled_frames(tmp_path, decoder):
    path = write_video(tmp_path / "clip.mp4")
    frames = decode_video(path, FrameSampling("segments", 4), decoder)
    assert frames.shape == (4, 48, 64, 3) and frames.dtype == np.uint8
    expected = [_gray(i) for i in (5, 15, 25, 35)]
    assert np.allclose(frames.reshape(4, -1).mean(1), expected, atol=2)
    every = decode_video(path, FrameSampling("fps", fps=2), decoder)  # 10 fps -> every 5th frame
    assert np.allclose(every.reshape(len(every), -1).mean(1), [_gray(i) for i in range(0, 40, 5)], atol=2)


def test_seeking_path_matches_sequential_decoding(tmp_path):
    path = write_video(tmp_path / "long.mp4", n_frames=120)
    sparse = decode_video(path, FrameSampling("segments", 3), "av")  # 3 * 4 < 120: seeks
    assert np.allclose(sparse.reshape(3, -1).mean(1), [_gray(i) for i in (20, 60, 100)], atol=2)
    sequential = decode_video(path, FrameSampling("segments", 40), "av")  # 40 * 4 >= 120: decodes in order
    assert np.allclose(sequential[[6, 20, 33]].reshape(3, -1).mean(1), [_gray(i) for i in (19, 61, 100)], atol=2)


def _vfr_video(path, shown_ms):
    """An MP4 whose frame i is shown at ``shown_ms[i]`` milliseconds (irregular gaps), uniform gray _gray(i)."""
    from fractions import Fraction

    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.codec_context.time_base = stream.time_base = Fraction(1, 1000)
        stream.options = {"crf": "0", "g": "10"}
        for i, t in enumerate(shown_ms):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), _gray(i), dtype=np.uint8), format="rgb24")
            frame.pts, frame.time_base = int(t), Fraction(1, 1000)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def _on_screen(shown_ms, times_ms):
    """The frame shown at each time: the latest whose presentation time is at or before it."""
    return [max(i for i, t in enumerate(shown_ms) if t <= at + 1e-6) for at in times_ms]


@pytest.mark.parametrize("n", [16, 40])  # 8 * 4 >= 16: decoded in order; 8 * 4 < 40: the seek path
def test_variable_frame_rate_video_gives_the_frames_of_the_rules_times(tmp_path, n):
    """uniform:8 on a variable-frame-rate MP4 took 6 of 8 frames by index (or by times at the average
    rate), not those on screen at the 8 evenly spaced times from the first frame to the last."""
    rng = np.random.default_rng(n)  # a burst of frames 10-40 ms apart, then a slide show (0.3-0.7 s)
    gaps = np.concatenate([rng.choice([10, 20, 40], size=3 * n // 4), rng.choice([300, 500, 700], size=n - 1 - 3 * n // 4)])
    shown = np.concatenate([[0], np.cumsum(gaps)]).tolist()
    path = _vfr_video(tmp_path / "vfr.mp4", shown)
    times = np.linspace(shown[0], shown[-1], 8)
    expected = _on_screen(shown, times)
    by_index = np.linspace(0, n - 1, 8).astype(int).tolist()
    assert sum(a != b for a, b in zip(expected, by_index)) >= 4  # the clip tells the two rules apart
    frames = decode_video(path, FrameSampling.parse("uniform:8"), "av")
    got = frames.reshape(8, -1).mean(1)
    assert np.allclose(got, [_gray(i) for i in expected], atol=2), (got.round().tolist(), expected)


def test_sampling_rules_pick_the_frame_on_screen_at_their_times():
    shown = np.array([0.0, 0.1, 0.2, 2.0, 2.05, 3.9])  # seconds; the clip ends at 4.0
    assert FrameSampling("segments", 4).at_times(shown, 4.0).tolist() == [2, 2, 4, 4]  # 0.5, 1.5, 2.5, 3.5 s
    assert FrameSampling("uniform", 3).at_times(shown, 4.0).tolist() == [0, 2, 5]  # 0, 1.95, 3.9 s
    assert FrameSampling("fps", fps=1).at_times(shown, 4.0).tolist() == [0, 2, 3, 4]  # 0, 1, 2, 3 s
    assert FrameSampling("segments", 4).at_times(np.arange(100) / 30, 100 / 30).tolist() == [12, 37, 62, 87]


def test_broken_video_names_the_file(tmp_path):
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"\x00\x01 not a video")
    with pytest.raises(MediaError, match="broken.mp4"):
        decode_video(bad, FrameSampling())
    with pytest.raises(MediaError, match="not found"):
        decode_video(tmp_path / "missing.mp4", FrameSampling())


def test_skip_broken_media_counts_and_keeps_the_rest(tmp_path):
    good = write_video(tmp_path / "good.mp4", n_frames=8)
    (tmp_path / "bad.mp4").write_bytes(b"junk")
    paths = [good, tmp_path / "bad.mp4", good]
    sampling = FrameSampling("segments", 2)
    model = KeywordModel()
    media = MediaSet("files", "video", ["a", "b", "c"], lambda i: decode_video(paths[i], sampling))
    with pytest.raises(MediaError, match="bad.mp4"):
        CachedEvalContext(model, RunSettings(workers=0)).embed_media(media)
    ctx = CachedEvalContext(model, RunSettings(workers=0, skip_broken_media=True))
    with pytest.warns(UserWarning, match="bad.mp4"):
        emb = ctx.embed_media(media)
    assert ctx.counters.media_skipped == 1 and ctx.broken == {"files": ["b"]}
    assert torch.isnan(emb[1]).all() and not torch.isnan(emb[[0, 2]]).any()


def test_frame_index_layout(tmp_path):
    from PIL import Image

    lines = []
    for vid in ("video7010", "video12"):
        for k in (2, 0, 1, 3):  # out of order on purpose
            p = tmp_path / "frames" / vid / f"{k}.jpg"
            p.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.full((8, 8, 3), 40 * k, dtype=np.uint8)).save(p, quality=100)
            lines.append(f"{vid}_{k} frames/{vid}/{k}.jpg")
    (tmp_path / "id.imagepath.txt").write_text("\n".join(lines) + "\n")
    index = read_frame_index(tmp_path / "id.imagepath.txt")
    assert list(index) == ["video7010", "video12"] and [p.name for p in index["video12"]] == [
        "0.jpg", "1.jpg", "2.jpg", "3.jpg"]
    every = load_frames(index["video7010"], FrameSampling("fps", fps=2))  # frames are 0.5 s apart already
    assert np.allclose(every.reshape(4, -1).mean(1), [0, 40, 80, 120], atol=2)
    two = load_frames(index["video7010"], FrameSampling("segments", 2))
    assert np.allclose(two.reshape(2, -1).mean(1), [40, 120], atol=2)
    (tmp_path / "bad.txt").write_text("video1_0 a.jpg\nno-number-here b.jpg\n")
    with pytest.raises(UserError, match="bad.txt:2"):
        read_frame_index(tmp_path / "bad.txt")


def test_seeking_with_skipped_non_reference_frames_is_bit_identical(tmp_path):
    """Moving texture, B-frames (x264 defaults) and keyframes every 30: the seek path skips the
    non-reference frames before each target, yet keeps exactly the frames a full decode shows."""
    path = tmp_path / "textured.mp4"
    base = np.random.default_rng(0).integers(0, 255, (64, 96, 3), dtype=np.uint8)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt, stream.options = 96, 64, "yuv420p", {"g": "30", "crf": "23"}
        for t in range(200):
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.roll(base, 3 * t, axis=1), format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    with av.open(str(path)) as container:
        everything = [f for f in container.decode(video=0)]
        assert any(getattr(f.pict_type, "value", f.pict_type) == 3 for f in everything)  # B-frames: something to skip
        full = np.stack([f.to_ndarray(format="rgb24") for f in everything])
    sampling = FrameSampling("segments", 7)  # 7 * 4 < 200: the seek path
    assert np.array_equal(decode_video(path, sampling, "av"), full[sampling.indices(200, 25)])


def _textured(path, n, fps, options, size=(96, 64)):
    """Moving texture with a flashing band: every frame differs, x264 uses B-frames."""
    base = np.random.default_rng(1).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt, stream.options = size[0], size[1], "yuv420p", options
        for t in range(n):
            frame = np.roll(base, 3 * t, axis=1)
            frame[:, :8] = (7 * t) % 256
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


@pytest.mark.parametrize("n,fps,options,segments", [
    (300, 30, {}, 12),                 # one keyframe interval holds every target: read on, never seek back
    (300, 30, {"g": "12"}, 9),         # short intervals: seek once the interval is known
    (200, 25, {"g": "30", "bf": "3"}, 29),
    (900, 30, {"g": "60"}, 3),         # 10 s between targets: seek (SEEK_GAP_S)
])
def test_sparse_decoding_in_one_pass_keeps_a_full_decodes_frames(tmp_path, n, fps, options, segments):
    """The seek path reads packets forward and decodes from the last keyframe before each target (or
    seeks when the next target is far): the frames are exactly those of a full decode."""
    path = _textured(tmp_path / "clip.mp4", n, fps, options)
    with av.open(str(path)) as container:
        full = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    sampling = FrameSampling("segments", segments)
    assert segments * 4 < len(full)  # the sparse path
    assert np.array_equal(decode_video(path, sampling, "av"), full[sampling.indices(len(full), fps)])


def test_stream_of_unknown_length_converts_only_the_sampled_frames(tmp_path):
    """A raw H.264 stream gives neither a frame count nor a duration: it is decoded once to count, and
    the sampled frames are exactly a full decode's."""
    path = tmp_path / "raw.h264"
    with av.open(str(path), "w", format="h264") as out:
        stream = out.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt, stream.options = 64, 48, "yuv420p", {"crf": "0", "g": "10"}
        for i in range(40):
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.full((48, 64, 3), _gray(i), np.uint8), "rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    with av.open(str(path)) as container:
        assert not container.streams.video[0].frames and container.streams.video[0].duration is None
        full = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    sampling = FrameSampling("segments", 4)
    assert np.array_equal(decode_video(path, sampling, "av"), full[sampling.indices(40, 25)])


@pytest.mark.parametrize("size", [(32, 32), (48, 64)])  # at the model's size (its array fast path) and not
def test_frame_folder_images_preprocess_to_the_arrays_pixels(tmp_path, size):
    """Frame folders hand the model decoded images, not a stacked array: the same pixels after its
    preprocessing, bit for bit, for RGB and grey JPEGs."""
    from PIL import Image

    from negharness.api import ModelOptions
    from negharness.io.media import frame_folders
    from negharness.plugins.shapes_clip import shapes_clip

    rng = np.random.default_rng(2)
    paths = []
    for k in range(6):
        p = tmp_path / f"{k}.jpg"
        img = Image.fromarray(rng.integers(0, 255, (*size, 3), dtype=np.uint8))
        (img.convert("L") if k % 2 else img).save(p, quality=90)
        paths.append(p)
    sampling = FrameSampling("segments", 3)
    media = frame_folders("folders", ["v"], [paths], sampling)
    model = shapes_clip(ModelOptions())
    assert torch.equal(model.preprocess_video(media.load(0)), model.preprocess_video(load_frames(paths, sampling)))


def _faststart(path, n_frames=64, fps=10):
    """An H.264 MP4 with its index (moov) before the frames (mdat), as ``-movflags faststart`` writes:
    cut short, its header still declares every frame."""
    with av.open(str(path), "w", options={"movflags": "faststart"}) as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = {"crf": "0", "g": "10"}
        for i in range(n_frames):
            frame = np.full((48, 64, 3), _gray(i), dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


@pytest.mark.parametrize("spec", ["segments:4", "uniform:8", "segments:40"])  # seek path, seek path, in order
def test_truncated_mp4_is_refused_by_name(tmp_path, spec):
    whole = _faststart(tmp_path / "whole.mp4").read_bytes()
    assert whole.find(b"moov") < whole.find(b"mdat")
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole[: int(len(whole) * 0.6)])
    with pytest.raises(MediaError, match=r"cut\.mp4: ends after frame \d+ of 64 \(truncated\?\)"):
        decode_video(cut, FrameSampling.parse(spec), "av")
    assert len(decode_video(tmp_path / "whole.mp4", FrameSampling.parse(spec), "av")) == int(spec.split(":")[1])


@pytest.mark.parametrize("spec", ["segments:4", "segments:40"])
def test_a_frame_short_of_the_declared_count_keeps_the_last_frame(tmp_path, spec):
    """A container that declares a frame more than it holds (the last packet missing) is not refused:
    the last decoded frame stands in for the last target."""
    whole = _faststart(tmp_path / "whole.mp4").read_bytes()
    with av.open(str(tmp_path / "whole.mp4")) as c:
        last = max((p for p in c.demux(c.streams.video[0]) if p.size), key=lambda p: p.pos)
        assert last.pos + last.size == len(whole)
    short = tmp_path / "short.mp4"
    short.write_bytes(whole[: last.pos])
    frames = decode_video(short, FrameSampling.parse("uniform:4" if spec == "segments:4" else spec), "av")
    assert len(frames) == int(spec.split(":")[1])


def test_frame_sampling_specs_are_checked_when_given(tmp_path):
    for spec, needle in (("fps:nan", "finite F > 0"), ("fps:inf", "finite F > 0"), ("fps:0", "finite F > 0"),
                         ("fps:2:max=-1", "max=N needs N >= 1"), ("fps:2:max=0", "max=N needs N >= 1"),
                         ("segments:0", "K >= 1"), ("uniform:-3", "K >= 1"), ("fps:2:cap=3", "expected"),
                         ("segments:x", "expected")):
        with pytest.raises(UserError) as err:
            FrameSampling.parse(spec, "-M frames")
        assert str(err.value).startswith(f"-M frames={spec}: ") and needle in str(err.value), err.value
    assert FrameSampling.parse("fps:2:max=1").indices(300, 30).tolist() == [0]


def test_opencv_decodes_on_one_thread_the_same_frames(tmp_path):
    """Clips are decoded in parallel (runner threads, trainer workers): OpenCV's capture is opened on one
    FFmpeg thread, as PyAV's is, and gives the frames a default (a thread per core) capture gives."""
    cv2 = pytest.importorskip("cv2")
    from negharness.io.video import open_capture

    path = write_video(tmp_path / "clip.mp4", n_frames=60)
    one, default = open_capture(cv2, path), cv2.VideoCapture(str(path))
    try:
        assert one.isOpened() and one.get(cv2.CAP_PROP_N_THREADS) == 1
        for i in (7, 31, 52):
            one.set(cv2.CAP_PROP_POS_FRAMES, i)
            default.set(cv2.CAP_PROP_POS_FRAMES, i)
            assert np.array_equal(one.read()[1], default.read()[1])
    finally:
        one.release()
        default.release()
    assert not open_capture(cv2, tmp_path / "missing.mp4").isOpened()  # _decode_cv2 then names the file
