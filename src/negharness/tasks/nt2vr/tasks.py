"""nT2VR tasks: MSR-VTT3k, MSR-VTT1k, VATEX (videos) and Flickr30k, MS-COCO (images), each with
original, negated and composed query sets, read from the authors' layout under the data root::

    <data root>/<collection>/TextData/<collection>.caption.txt | .negated.txt | .composed.txt
    <data root>/<collection>/VideoSets/<collection>.txt
    <data root>/<collection>/id.imagepath.txt     pre-extracted frames (every 0.5 s), or
    <data root>/<collection>/videos/<video_id>.mp4 (.avi, .webm, .mkv), or, for images,
    <data root>/<collection>/images/<image_id>.jpg (.png)

Videos are sampled as the authors' code does at test time (``test_sample_frame=8``): 8 frames
evenly spaced over the video's frames (``uniform:8``: over the pre-extracted 0.5 s frames when
``id.imagepath.txt`` lists them, else over the decoded video), their embeddings mean-pooled;
``-M frames=fps:2`` takes every 0.5 s frame instead. Negated and composed sets absent but captions
present: the error names the ``negharness build-queries`` command, or ``-T build=true`` builds them in place.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

# the facades' torch-bound names (media sets, scorers) are used as media_api.X, scoring.X: resolved when a
# task runs, so building a task and listing its files (the check before torch loads) imports no torch
from negharness.api import EvalContext, OptionSpec, Task, TaskOptions, TaskResult, UserError, scoring
from negharness.api import media as media_api
from negharness.api.files import RootGuard, require_regular
from negharness.api.media import FrameSampling
from negharness.api.published import published_notes
from negharness.api.scoring import NEGATED_METRICS, QRELS_OPTION, TEXT_TO_MEDIA_METRICS
from negharness.tasks.nt2vr import PUBLISHED
from negharness.text.build_queries import BuiltQueries, build, build_settings, builder_identity, write
from negharness.text.built_marker import marker_path, read_marker, stale_reason
from negharness.text.nt2vr_files import (
    check_known_videos,
    original_of,
    read_caption_file,
    read_composed_file,
    read_neginfo,
    read_video_set,
    video_of,
)

from .collections import COLLECTIONS
from .frame_index import read_frame_index

if TYPE_CHECKING:
    from negharness.api.media import MediaSet
    from negharness.api.scoring import QuerySet

VIDEO_EXTS = (".mp4", ".avi", ".webm", ".mkv", ".mov")
IMAGE_EXTS = (".jpg", ".jpeg", ".png")
DEFAULT_SAMPLING = FrameSampling("uniform", 8)  # the authors' test_sample_frame = 8
CITATION = "Wang et al., Learn to Understand Negation in Video Retrieval, ACM MM 2022"
TEXT_SOURCE = "nT2VR text data (the download linked from github.com/ruc-aimc-lab/nT2VR)"
MEDIA_SOURCE = {"msrvtt10ktest": "the MSR-VTT site", "msrvtt1kAtest": "the MSR-VTT site",
                "vatex_test1k5": "the VATEX site (HGR split)", "flickr30ktest": "the Flickr30k site",
                "mscoco5ktest": "the MS-COCO site (val2014 / test images)"}


def layout(root: Path, collection: str, kind: str) -> str:
    """The collection's files under the data root as a tree, each with where it comes from."""
    c = collection
    media = ("videos/<video id>.mp4 (or id.imagepath.txt + its frames)" if kind == "video"
             else "images/<image id>.jpg")
    build = f"same download, or: negharness build-queries --captions {root / c / 'TextData' / f'{c}.caption.txt'} " \
            f"--out {root / c / 'TextData'}  (or -T build=true)"
    rows = [(f"TextData/{c}.caption.txt", f"original queries: {TEXT_SOURCE}"),
            (f"TextData/{c}.negated.txt", f"negated queries: {build}"),
            (f"TextData/{c}.composed.txt", "composed queries: same as negated"),
            (f"VideoSets/{c}.txt", "the collection's ids, one per line: nT2VR text data"),
            (media, f"the {kind}s: {MEDIA_SOURCE.get(c, 'the dataset site')}")]
    return f"expected layout under {root}:\n  {c}/\n" + "\n".join(f"    {p}\n        {w}" for p, w in rows)


class NT2VRTask(Task[EvalContext]):
    family = "nt2vr"
    version = "2"  # 2: frames sampled uniform:8 by default (was fps:2), so version-1 records rerun
    prefix = "msrvtt3k"
    query_set = "original"
    citation = CITATION
    task_options = {"build": OptionSpec(bool, False, "build missing negated/composed query files from the captions")}
    side_texts: tuple[str, ...] = ()  # text files read when present (their content hashed with the data)

    def __init__(self, options: TaskOptions) -> None:
        super().__init__(options)
        self.collection, self.kind, _ = COLLECTIONS[self.prefix]
        self.folder = options.data_root / self.collection
        self.text_dir = self.folder / "TextData"
        self.modalities = frozenset({"text", self.kind})
        self.build = self.opts["build"]
        self._ensured = False  # the query files checked (and built) once per task object
        self._in_memory: BuiltQueries | None = None  # built queries kept where the data root is read-only

    def _text(self, kind: str) -> Path:
        return self._under_root(self.text_dir / f"{self.collection}.{kind}.txt")

    def _under_root(self, path: Path) -> Path:
        """The data root's rule for the collection's own files, before anything opens them: a
        symlink out of the root (or a loop) is refused naming the file."""
        return RootGuard(self.options.data_root).check(path, f"task {self.name}: data file")

    @property
    def data_help(self) -> str:  # type: ignore[override]
        return layout(self.options.data_root, self.collection, self.kind)

    # data checks ----------------------------------------------------------------------------------
    def _video_set(self) -> Path:
        return self._under_root(self.folder / "VideoSets" / f"{self.collection}.txt")

    def _media_files(self, ids: list[str]) -> tuple[list[Path], list[Path]]:
        """(present, missing) media files; a frame index counts as one file. Every path stays under
        the data root (an id with '../', a symlink out: an error naming the video set and line)."""
        index = self._under_root(self.folder / "id.imagepath.txt")
        if self.kind == "video" and index.is_file():
            return [index], []
        sub, exts = ("videos", VIDEO_EXTS) if self.kind == "video" else ("images", IMAGE_EXTS)
        guard = RootGuard(self.options.data_root)
        lines = self._id_lines()
        present, missing = [], []
        for vid in ids:
            candidates = [self.folder / sub / f"{vid}{e}" for e in exts]
            found = next((c for c in candidates if c.exists()), None)
            where = f"{self._video_set()}:{lines.get(vid, '?')}: video id {vid!r}"
            checked = guard.check(found or candidates[0], where)
            (present.append(checked) if found else missing.append(checked))
        return present, missing

    def _id_lines(self) -> dict[str, int]:
        """Video id -> its line in the video set (for error messages)."""
        try:
            with open(self._video_set(), encoding="utf-8") as fh:
                return {line.strip(): n for n, line in reversed(list(enumerate(fh, 1)))}
        except (OSError, UnicodeDecodeError):
            return {}

    def _needed_text(self) -> list[Path]:
        needed = [self._text("caption"), self._video_set()]
        if self.query_set != "original" and not self.build:
            needed.append(self._text(self.query_set))
        return needed

    def required_files(self) -> list[Path]:
        """The text files, and the media the video set names; before the video set exists, the
        media folder stands for them, so one message lists everything missing at once."""
        needed = self._needed_text()
        if any(not p.exists() for p in needed):
            media = self.folder / ("videos" if self.kind == "video" else "images")
            frames = self.folder / "id.imagepath.txt"
            return needed + ([] if media.exists() or frames.exists() else [media])
        _, missing_media = self._media_files(self._ids())
        return needed + missing_media

    def data_files(self) -> list[Path]:
        """The text files, and the media: each video or image, or the frame index and every frame it names."""
        self._ensure_queries()
        files = [p for p in self._needed_text() if p.exists()]
        if self.query_set != "original":  # read when present even under build=true: hashed either way
            files += [p for p in (self._text(self.query_set), self._marker()) if p.is_file() and p not in files]
        files += [p for p in map(self._text, self.side_texts) if p.is_file()]
        present, _ = self._media_files(self._ids())
        index = self.folder / "id.imagepath.txt"
        if present == [index]:
            frames = self._frame_index()
            wanted = set(self._ids())
            present += [f for vid, paths in frames.items() if vid in wanted for f in paths]
        return files + present

    def _frame_index(self) -> dict[str, list[Path]]:
        """The frame index, read (and every path checked) once per task object."""
        if getattr(self, "_frames", None) is None:
            self._frames = read_frame_index(self.folder / "id.imagepath.txt", self.folder, self.options.data_root)
        return self._frames

    def _ids(self) -> list[str]:
        """The collection's video ids, cut by --limit."""
        for p in self._needed_text():
            if p.exists():
                require_regular(p, f"task {self.name}")  # a FIFO would block the read forever
        ids = read_video_set(self._video_set())
        return ids[: self.options.limit] if self.options.limit else ids

    # media ----------------------------------------------------------------------------------------
    def media(self, ctx: EvalContext, ids: list[str]) -> MediaSet:
        if self.kind == "image":
            paths, _ = self._media_files(ids)
            return media_api.image_files(f"nt2vr/{self.collection}/images", ids, paths)
        sampling = ctx.frame_sampling(DEFAULT_SAMPLING)
        key = f"nt2vr/{self.collection}/{sampling.key}"
        index_file = self.folder / "id.imagepath.txt"
        if index_file.is_file():
            index = self._frame_index()
            lacking = [v for v in ids if v not in index]
            if lacking:
                raise UserError(f"{index_file}: no frames for {len(lacking)} video(s), e.g. {lacking[:3]}")
            return media_api.frame_folders(key, ids, [index[v] for v in ids], sampling)
        paths, _ = self._media_files(ids)
        return media_api.video_files(key, ids, paths, sampling)

    # queries --------------------------------------------------------------------------------------
    def _original_rows(self, known: list[str]) -> list[tuple[str, str]]:
        """(caption id, caption) of every caption of the ``known`` videos (read without torch)."""
        path, wanted = self._text("caption"), set(known)
        rows = read_caption_file(path)
        if self.options.limit:
            rows = [(c, t) for c, t in rows if video_of(c) in wanted]
        check_known_videos(path, ((n, video_of(c)) for n, (c, _) in enumerate(rows, 1)), wanted)
        return rows

    def _originals(self, known: list[str]) -> QuerySet:
        rows = self._original_rows(known)
        position = {v: i for i, v in enumerate(known)}
        return scoring.QuerySet([c for c, _ in rows], [t for _, t in rows],
                                scoring.Relevance.from_lists([[position[video_of(c)]] for c, _ in rows], len(known)))

    def _marker(self) -> Path:
        return self._under_root(marker_path(self.text_dir, self.collection))

    def _stale(self) -> str | None:
        """Why the query files' build mark does not fit this run (None: no mark, or it fits)."""
        mark = read_marker(self._marker())
        if mark is None:
            return None
        wanted = build_settings(self.options.seed) if self.build else None
        return stale_reason(mark, builder_identity(), read_caption_file(self._text("caption")), wanted)

    def _ensure_queries(self) -> BuiltQueries | None:
        """Before anything is hashed: query files built by other rules, settings or captions are rebuilt
        under ``-T build=true`` and refused without it; None when the files on disk are to be read."""
        if self.query_set == "original" or self._ensured:
            return self._in_memory
        self._ensured = True
        path = self._text(self.query_set)
        reason = self._stale() if self._text("caption").is_file() else None
        if not self.build:
            if reason:
                raise UserError(f"{path}: {reason} (see {self._marker().name}); rebuild them with -T build=true "
                                f"or negharness build-queries, or delete {self._marker().name} to read them as they are")
            return None
        if (path.exists() and reason is None) or not self._text("caption").is_file():
            return None
        self._in_memory = self._built()
        return self._in_memory

    def _built(self) -> BuiltQueries | None:
        """Build from the captions and write in place; None once written (the files are read like any),
        the queries themselves where the data root is read-only."""
        items: dict[str, list[str]] = {}
        for cap_id, caption in read_caption_file(self._text("caption")):
            items.setdefault(video_of(cap_id), []).append(caption)
        built = build(list(items.items()), seed=self.options.seed)
        try:
            write(built, self.text_dir, self.collection, write_captions=False)
        except OSError:
            return built  # read-only data root: use them in memory
        return None

    def config(self) -> dict[str, Any]:
        built = {"builder_version": builder_identity()} if self.build and self.query_set != "original" else {}
        return {**super().config(), "collection": self.collection, "query_set": self.query_set, **built}

    def evaluate(self, ctx: EvalContext) -> TaskResult:
        """The query set's scores, with the paper's numbers for this model where it has a row (Tables 2-4, 9-10)."""
        result = self._score(ctx)
        result.notes.update(published_notes(self.name, ctx.model, result.metrics, PUBLISHED, result.n_items))
        return result

    def _score(self, ctx: EvalContext) -> TaskResult:
        raise NotImplementedError


class NT2VROriginal(NT2VRTask):
    main_score = "MIR"
    metric_info = TEXT_TO_MEDIA_METRICS
    leaderboard_metrics: tuple[str, ...] = ("R@1", "R@10", "MIR")
    task_options = {**NT2VRTask.task_options, **QRELS_OPTION}

    def query_count(self) -> int | None:
        """Every caption of the collection's videos (`_originals`)."""
        return len(self._original_rows(self._ids()))

    def _score(self, ctx: EvalContext) -> TaskResult:
        ids = self._ids()
        qs = self._originals(ids)
        return scoring.evaluate_text_to_media(ctx, qs.ids, qs.texts, qs.relevance, self.media(ctx, ids),
                                              qrels=scoring.task_qrels(self.opts), limited=bool(self.options.limit),
                                              clusters=[video_of(c) for c in qs.ids])


class NT2VRNegated(NT2VROriginal):
    query_set = "negated"
    main_score = "ΔMIR"
    metric_info = NEGATED_METRICS
    leaderboard_metrics = ("ΔR@1", "ΔMIR")
    task_options = NT2VRTask.task_options  # deltas against one source video: no extra judgements
    side_texts = ("negated_neginfo",)  # the authors' cue and scope, the boolean baseline's parts

    def _rows(self) -> list[tuple[str, str]]:
        """(caption id, negated query) of every negated query, built or read from its file."""
        built = self._ensure_queries()
        if built is not None:
            return [(i, n.text) for i, n in built.negated]
        return read_caption_file(self._text("negated"))

    def query_count(self) -> int | None:
        """Every negated query (--limit keeps those of the videos it keeps)."""
        return len(self._rows())

    def _score(self, ctx: EvalContext) -> TaskResult:
        ids = self._ids()
        originals = self._originals(ids)
        rows = self._rows()
        where = {c: k for k, c in enumerate(originals.ids)}
        path = self._text("negated")
        kept = [(n, c, t) for n, (c, t) in enumerate(rows, 1) if not self.options.limit or original_of(c) in where]
        for lineno, cap_id, _ in kept:
            if original_of(cap_id) not in where:
                raise UserError(f"{path}:{lineno}: negated query {cap_id!r} has no original caption "
                                f"{original_of(cap_id)!r} in {self._text('caption').name}")
        src = [originals.relevance.indices[where[original_of(c)]] for _, c, _ in kept]
        neginfo = self._text(self.side_texts[0])  # the authors' cue and scope, for the boolean baseline
        info = read_neginfo(neginfo) if neginfo.is_file() else {}
        negated = scoring.QuerySet([c for _, c, _ in kept], [t for _, _, t in kept],
                                   scoring.Relevance.from_lists([[int(s)] for s in src], len(ids)),
                                   [info.get(c) for _, c, _ in kept] if info else None)
        return scoring.evaluate_negated(ctx, self.media(ctx, ids), originals, negated,
                                        [where[original_of(c)] for _, c, _ in kept])


class NT2VRComposed(NT2VROriginal):
    query_set = "composed"
    main_score = "MIR"
    metric_info = TEXT_TO_MEDIA_METRICS
    leaderboard_metrics: tuple[str, ...] = ("R@1", "R@10", "MIR", "mAP")

    def _records(self) -> list[dict[str, Any]]:
        """Every composed query's record, built or read from its file."""
        built = self._ensure_queries()
        if built is not None:
            return [q.as_record() for q in built.composed]
        return read_composed_file(self._text("composed"))

    def query_count(self) -> int | None:
        """Every composed query (--limit keeps those with a relevant video it keeps)."""
        return len(self._records())

    def _score(self, ctx: EvalContext) -> TaskResult:
        ids = self._ids()
        position = {v: i for i, v in enumerate(ids)}
        path = self._text("composed")
        records = self._records()
        if not self.options.limit:
            check_known_videos(path, ((n, v) for n, r in enumerate(records, 1) for v in r["video_ids"]), set(ids))
        lists = [[position[v] for v in r["video_ids"] if v in position] for r in records]
        keep = [k for k, rel in enumerate(lists) if rel]
        records = [records[k] for k in keep]
        parts = None  # stored parts where every record has them; else the model splits (boolean)
        if records and all("positive" in r for r in records):
            parts = [(r["positive"], r["negative"]) for r in records]
        return scoring.evaluate_text_to_media(
            ctx, [str(r["cap_id"]) for r in records], [r["caption"] for r in records],
            scoring.Relevance.from_lists([lists[k] for k in keep], len(ids)), self.media(ctx, ids),
            parts, several=True, qrels=scoring.task_qrels(self.opts), limited=bool(self.options.limit))


def _make(prefix: str, base: type, query_set: str) -> type:
    collection, kind, what = COLLECTIONS[prefix]
    return type(f"{prefix}_{query_set}", (base,), {
        "name": f"{prefix}_{query_set}", "prefix": prefix, "query_set": query_set,
        "modalities": frozenset({"text", kind}),
        # a video's (or image's) captions and their negations are queries about one item; a composed
        # query has several relevant items and no source: each is its own cluster
        "cluster": "row" if query_set == "composed" else kind,
        "description": f"nT2VR {query_set} queries, text-to-{kind} retrieval on {what}"})


TASKS = {f"{p}_{q}": _make(p, b, q) for p in COLLECTIONS
         for q, b in (("original", NT2VROriginal), ("negated", NT2VRNegated), ("composed", NT2VRComposed))}
globals().update(TASKS)  # registry targets: negharness.tasks.nt2vr.tasks:<task name>
