"""Video frames: sampling rules, decoders chosen by what is installed, and pre-extracted frame folders.

Sampling is part of what an embedding means, so `FrameSampling.key` goes into cache keys and
fingerprints. A video that cannot be decoded raises `MediaError` naming the file; it is never
replaced by black frames.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from negharness.contracts.errors import MediaError, UserError
from negharness.contracts.sampling import FrameSampling
from negharness.io.image_files import DECODE_ERRORS, decode_failure, image_decoder_identity, open_image

if TYPE_CHECKING:
    from av.container import InputContainer
    from av.video.stream import VideoStream

DECODERS = ("av", "decord", "cv2")
FRAME_INDEX_FPS = 2.0  # nT2VR extracted one frame every 0.5 s


def available_decoders() -> list[str]:
    return [name for name in DECODERS if importlib.util.find_spec(name) is not None]


@lru_cache(maxsize=None)
def decoder_identity(decoder: str | None = None) -> str:
    """Which decoder `decode_video` runs and its versions (library and codec build): part of every
    video embedding's cache key, since two decoders (or two FFmpeg builds) can give different pixels."""
    names = [decoder] if decoder else available_decoders()
    if not names:
        return "none"
    name = names[0]
    if name == "av":
        import av

        codec = ".".join(str(v) for v in av.library_versions.get("libavcodec", ()))
        return f"av-{av.__version__}+libavcodec-{codec}"
    if name == "decord":
        import decord

        return f"decord-{decord.__version__}"
    import cv2

    return f"cv2-{cv2.__version__}"


def video_recipe(sampling: "FrameSampling", decoder: str | None = None) -> str:
    """How an MP4's pixels are made: frame source, decoder identity and frame sampling."""
    return f"mp4|{decoder_identity(decoder)}|{sampling.key}"


def frames_recipe(sampling: "FrameSampling") -> str:
    """How a pre-extracted frame folder's pixels are made: JPEG frames through Pillow, then sampling."""
    return f"jpeg-frames|{image_decoder_identity()}|{sampling.key}"


def sampled_frame_paths(paths: Sequence[Path], sampling: "FrameSampling", native_fps: float = FRAME_INDEX_FPS) -> list[Path]:
    """The frame files `load_frames` reads: a video's pixels depend on these alone, in this order."""
    return [paths[int(i)] for i in sampling.indices(len(paths), native_fps)]


def decode_video(path: str | Path, sampling: FrameSampling, decoder: str | None = None) -> np.ndarray:
    """uint8 (T, H, W, 3) RGB frames chosen by ``sampling``, with the first installed decoder. PyAV
    (the first) chooses them by presentation time, right on variable-frame-rate video too; decord and
    OpenCV by index at the average rate, right on a constant rate only."""
    path = Path(path)
    if not path.is_file():
        raise MediaError(f"video not found: {path}")
    names = [decoder] if decoder else available_decoders()
    if not names:
        raise UserError("no video decoder installed: pip install av (or decord, or opencv-python-headless)")
    try:
        frames = {"av": _decode_av, "decord": _decode_decord, "cv2": _decode_cv2}[names[0]](path, sampling)
    except MediaError:
        raise
    except Exception as exc:  # decoder libraries raise many types
        raise MediaError(f"cannot decode video {path}: {type(exc).__name__}: {exc}") from exc
    if len(frames) == 0:
        raise MediaError(f"cannot decode video {path}: no frames")
    return frames


def _decode_av(path: Path, sampling: FrameSampling) -> np.ndarray:
    """The frames on screen at the times the rule names (`FrameSampling.at_times`), found from the
    packets' timestamps (a first pass reads them, decoding nothing), so a variable-frame-rate video
    gets the frames of those times; then decoded (a second opening) by seeking, for sparse sampling,
    or in one pass."""
    import av

    with av.open(str(path)) as container:
        if not container.streams.video:
            raise MediaError(f"cannot decode video {path}: no video stream ({_streams_in(container)})")
        stream = container.streams.video[0]
        rate = float(stream.average_rate or stream.guessed_rate or 25)
        timeline = _av_timeline(container, stream, rate)
        if timeline is not None:
            _require_declared(path, stream, *timeline, rate)
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1  # the runner decodes videos in parallel; codec threads only add overhead
        if timeline is None:  # no timestamps (a raw stream): decode once, take frames by index at the average rate
            every = list(container.decode(stream))
            if not every:
                return np.zeros((0,))
            return np.stack([every[int(i)].to_ndarray(format="rgb24") for i in sampling.indices(len(every), rate)])
        shown, end = timeline
        tb = _time_base(stream)
        wanted = sampling.at_times(shown * tb, end * tb)
        targets = shown[wanted].tolist()
        if len(wanted) * 4 < len(shown):
            frames, last = _av_seek(container, stream, targets, rate)
        else:
            frames, last = _av_sequential(container, stream, targets)
        decoded = int(np.searchsorted(shown, last, side="right")) if last is not None else 0
        if len(frames) and decoded <= wanted[-1]:
            require_whole(path, decoded, len(shown))
        return frames


def _time_base(stream: VideoStream) -> float:
    """Seconds per tick of the stream's timestamps (a stream whose packets carry them has one)."""
    assert stream.time_base is not None
    return float(stream.time_base)


def _av_timeline(container: InputContainer, stream: VideoStream, rate: float) -> tuple[np.ndarray, int] | None:
    """(every frame's presentation time in the stream's time base, ascending; when the last one stops
    showing), from the packets alone; None when a packet has no timestamp. A file cut short ends its
    packets early (`_require_declared` judges it). The last frame shows for its packet's duration, else
    the median gap between frames (so a constant rate's clip ends ``n / fps`` after its first frame)."""
    shown: list[int] = []
    durations: dict[int, int] = {}
    try:
        for packet in container.demux(stream):
            if not packet.size or packet.is_discard:  # the flush packet; an edit list's hidden lead-in
                continue
            if packet.pts is None:
                return None
            shown.append(packet.pts)
            durations[packet.pts] = packet.duration or 0
    except av_data_error():
        pass  # a packet cut off by the end of the file: the timeline ends here
    if not shown:
        return None
    times = np.unique(np.asarray(shown, dtype=np.int64))
    last = int(times[-1])
    step = durations.get(last) or (int(np.median(np.diff(times))) if len(times) > 1 else 0)
    if step <= 0:
        step = max(1, round(1.0 / (rate * _time_base(stream))))
    return times, last + step


def _require_declared(path: Path, stream: VideoStream, shown: np.ndarray, end: int, rate: float) -> None:
    """Refuse a file whose packets stop well before what its header declares (an MP4 cut short, its
    index intact): by frame count where the container gives one, else by duration at the average rate."""
    if stream.frames:
        require_whole(path, len(shown), int(stream.frames))
    elif stream.duration:
        tb = _time_base(stream)
        first = float(stream.start_time or shown[0]) * tb
        require_whole(path, round((end * tb - first) * rate), round(float(stream.duration) * tb * rate))


TAIL_SLACK_FRAMES = 2  # a container may declare a frame or two more than it holds: the last one stands in
TAIL_SLACK_FRACTION = 0.02  # ... or a little more, where the count comes from duration x rate


def require_whole(path: Path, decoded: int, declared: int) -> None:
    """Refuse a stream that ends well before its declared length (an MP4 cut short, its index intact):
    the missing frames the sampling asked for would otherwise be the last decoded one repeated, and
    the video encoded as if whole. A shortfall within the slack is an over-reported count, not a cut."""
    if declared - decoded > max(TAIL_SLACK_FRAMES, TAIL_SLACK_FRACTION * declared):
        raise MediaError(f"cannot decode video {path}: ends after frame {decoded} of {declared} (truncated?)")


def _streams_in(container: InputContainer) -> str:
    """What the file holds instead: "1 audio stream", "no streams"."""
    kinds: dict[str, int] = {}
    for s in container.streams:
        kinds[s.type] = kinds.get(s.type, 0) + 1
    return ", ".join(f"{n} {k} stream{'s' if n > 1 else ''}" for k, n in kinds.items()) or "no streams"


def _av_sequential(container: InputContainer, stream: VideoStream, targets: list[int]) -> tuple[np.ndarray, int | None]:
    """Decode in order from the current position and keep, for each target presentation time (in
    the stream's time base, ascending), the first frame shown at or after it; stops after the last.
    Returns the frames and the presentation time of the last frame decoded (None: none was)."""
    out: list[np.ndarray] = []
    last = None
    try:
        for frame in container.decode(stream):
            last, pixels = frame, None
            while len(out) < len(targets) and frame.pts is not None and frame.pts >= targets[len(out)]:
                pixels = frame.to_ndarray(format="rgb24") if pixels is None else pixels  # once per frame
                out.append(pixels)
            if len(out) == len(targets):
                break
    except av_data_error():  # a packet cut off by the end of the file: the stream ends here
        if last is None:
            raise
    if last is None:
        return np.zeros((0,)), None
    if len(out) < len(targets):  # the last decoded frame stands in for a missing tail (`require_whole`
        tail = last.to_ndarray(format="rgb24")  # refuses one longer than a slack)
        out.extend(tail for _ in range(len(targets) - len(out)))
    return np.stack(out), last.pts


SEEK_GAP_S = 10.0  # a later target this far ahead is reached by seeking, whatever the keyframe interval


def _av_seek(container: InputContainer, stream: VideoStream, targets: list[int], rate: float
             ) -> tuple[np.ndarray, int | None]:
    """Sparse sampling in one pass: seek to the keyframe before the first target, then read packets in
    order and decode only from the last keyframe before each target (packets before it are read, never
    decoded). Targets within one keyframe interval share one decode; seeking back for each of them
    decoded the interval again (measured: 12 segments of a 15 s clip cost ~3x decoding all of it). Packets
    more than a frame before the target are decoded with ``skip_frame=NONREF``: no other frame depends on
    a non-reference frame, so the frames kept are bit-identical to a full decode's (tested). A target
    further ahead than the longest keyframe interval seen (a keyframe likely lies between: reading the
    packets up to it would cost more than the seek), or than `SEEK_GAP_S`, is reached by a seek.
    ``targets``: presentation times in the stream's time base, ascending. Returns the frames and the
    presentation time of the last frame decoded (None: none was)."""
    tb = _time_base(stream)
    out: list[np.ndarray] = []
    last = None  # the last frame decoded: stands in for targets past the real end of the stream
    gop: list[float] = []  # the longest keyframe interval seen, in seconds (none seen yet: empty)
    try:
        while len(out) < len(targets):
            container.seek(int(targets[len(out)]), stream=stream, backward=True, any_frame=False)
            last, seek_again = _decode_targets(container, stream, targets, out, tb, rate, last, gop)
            if not seek_again:
                break
    finally:
        stream.codec_context.skip_frame = "DEFAULT"
    if last is None:
        return np.zeros((0,)), None
    if len(out) < len(targets):  # the stream ended first
        tail = last.to_ndarray(format="rgb24")
        out.extend(tail for _ in range(len(targets) - len(out)))
    return np.stack(out), last.pts


def _decode_targets(container: InputContainer, stream: VideoStream, targets: list[int], out: list[np.ndarray],
                    tb: float, rate: float, last: int | None, gop: list[float]) -> tuple[Any, ...]:
    """From the current position, append to ``out`` the first frame shown at or after each target
    (a presentation time in the stream's time base) in turn. Returns (last frame decoded, whether the next target wants a seek);
    ``gop`` keeps the longest keyframe interval seen across calls. A packet the decoder refuses after
    frames were decoded (the last one of a file cut short) ends the stream: `require_whole` judges it."""
    seen = [last]  # the last frame decoded, kept when the decoder raises
    try:
        return _decode_packets(container, stream, targets, out, tb, rate, seen, gop)
    except av_data_error():
        if seen[0] is None:
            raise
        return seen[0], False


def _decode_packets(container: InputContainer, stream: VideoStream, targets: list[int], out: list[np.ndarray],
                    tb: float, rate: float, seen: list[Any], gop: list[float]) -> tuple[Any, ...]:
    """`_decode_targets`'s pass over the packets; ``seen[0]`` follows the last frame decoded."""
    codec = stream.codec_context
    pending: list[Any] = []  # packets read, not decoded: since the last keyframe, or since the last decode
    fed = False  # whether the decoder holds state from packets before ``pending``
    key_at = None  # the last keyframe read since the seek
    for packet in container.demux(stream):
        target = targets[len(out)] * tb
        at = None if packet.pts is None or not packet.size else packet.pts * tb
        if packet.is_keyframe and at is not None:
            if key_at is not None and at > key_at:
                gop[:] = [max(gop[0] if gop else 0.0, at - key_at)]
            key_at = at
        if at is not None and at < target - 1.0 / rate:
            if packet.is_keyframe:  # decoding can start here: what was read before it is not needed
                if fed:
                    codec.flush_buffers()  # as a seek does: frames held for reordering are dropped
                    fed = False
                pending = []
            pending.append(packet)
            continue
        for held in [*pending, packet]:  # the target is near (or the stream ends): decode in order
            far = held.pts is not None and held.size and held.pts * tb < target - 1.0 / rate
            codec.skip_frame = "NONREF" if far else "DEFAULT"
            for frame in codec.decode(held):
                seen[0] = frame
                while len(out) < len(targets) and frame.pts is not None and frame.pts >= targets[len(out)]:
                    out.append(frame.to_ndarray(format="rgb24"))
            fed = True
            if len(out) == len(targets):
                return seen[0], False
        pending = []
        ahead = targets[len(out)] * tb - at if at is not None else 0.0
        if ahead > SEEK_GAP_S or (gop and ahead > gop[0]):
            return seen[0], True
    return seen[0], False


def av_data_error() -> type[Exception]:
    """PyAV's error for data the decoder cannot use (here: the last packet of a file cut short)."""
    import av

    return av.error.InvalidDataError


def _decode_decord(path: Path, sampling: FrameSampling) -> np.ndarray:
    import decord

    reader = decord.VideoReader(str(path))
    idx = sampling.indices(len(reader), float(reader.get_avg_fps()))
    frames: np.ndarray = reader.get_batch(idx.tolist()).asnumpy()
    return frames


def open_capture(cv2: Any, path: Path) -> Any:
    """An OpenCV capture of ``path`` decoding on one thread, as PyAV's does: the runner and the trainer decode
    clips in parallel, and FFmpeg's default of a thread per core, flushed at each seek, is overhead then (on
    an H200's 16 cores, 2026-11-30: 79 ms of CPU a 4-frame clip, BNL training's workers at 0.09 of a bare
    loop; on 2 cores here one thread took 16 ms of CPU a clip against 30 ms, less wall too, the same frames)."""
    if hasattr(cv2, "CAP_PROP_N_THREADS"):  # an open-only parameter since OpenCV 4.6
        return cv2.VideoCapture(str(path), cv2.CAP_ANY, [cv2.CAP_PROP_N_THREADS, 1])
    return cv2.VideoCapture(str(path))


def _decode_cv2(path: Path, sampling: FrameSampling) -> np.ndarray:
    import cv2

    cap = open_capture(cv2, path)
    try:
        if not cap.isOpened():
            raise MediaError(f"cannot open video {path}")
        n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        idx = sampling.indices(n, float(cap.get(cv2.CAP_PROP_FPS) or 25))
        frames = []
        for i in idx:
            cap.set(cv2.CAP_PROP_POS_FRAMES, int(i))  # seek: no decoding of the frames in between
            ok, frame = cap.read()
            if ok:
                frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
            else:  # past the real end: within the slack the last frame read stands in, as with av
                require_whole(path, int(i), n)
                if frames:
                    frames.append(frames[-1])
        return np.stack(frames) if frames else np.zeros((0,))
    finally:
        cap.release()


# pre-extracted frames ----------------------------------------------------------------------
def load_frames(paths: Sequence[Path], sampling: FrameSampling, native_fps: float = FRAME_INDEX_FPS) -> np.ndarray:
    """Sampled frames of a pre-extracted video as uint8 (T, H, W, 3)."""
    return np.stack([np.asarray(im) for im in load_frame_images(paths, sampling, native_fps)])


def load_frame_images(paths: Sequence[Path], sampling: FrameSampling, native_fps: float = FRAME_INDEX_FPS) -> list[Any]:
    """Sampled frames of a pre-extracted video as decoded RGB Pillow images, which a model's
    preprocessing resizes directly; `load_frames`'s array costs three full-size copies per frame more
    (to an array, into the stack, back to an image) for the same pixels."""
    out = []
    for path in sampled_frame_paths(paths, sampling, native_fps):
        with open_image(path) as im:  # the shared reader: a damaged frame is a MediaError naming it
            try:
                im.load()
            except DECODE_ERRORS as exc:
                raise decode_failure(im, exc, str(path)) from exc
            out.append(im if im.mode == "RGB" else im.convert("RGB"))
    if not out:
        raise MediaError("video has no frames in the frame index")
    return out
