"""nT2VR training sets (``--task msrvtt10ktrain`` ...) and the user's own captions (``--task captions``).

Read from the authors' layout under the data root, as the evaluation collections are::

    <root>/<train>/TextData/<train>.caption.txt            <video_id>#enc#<k> <caption>
    <root>/<train>/TextData/<train>.caption.negation.txt   optional: the authors' soft negatives (JSONL:
                                                           id, truth, false=[{falsesent, id, ...}])
    <root>/<train>/VideoSets/<train>.txt                   video ids
    <root>/<train>/id.imagepath.txt | videos/<id>.mp4 | images/<id>.jpg
    <root>/<val>/...                                       the matching validation split, same layout

Soft negatives q- come from the authors' negation file when present (every ``false`` sentence of a
caption is a candidate; one is drawn per epoch, as their loader does), else from the negator, built
once and cached under the cache folder. Videos: 8 frames uniformly (``uniform:8``, the authors'
``sample_frame = 8``); ``-M frames=...`` or ``-T frames=...`` changes it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from negharness.api import (
    OptionSpec,
    TrainSetOptions,
    TrainStream,
    TrainingSet,
    UserError,
    named_trainset,
    takes_options,
)
from negharness.api.files import cache_root, cached_json
from negharness.api.media import FrameSampling, decode_video, load_frames, read_rgb
from negharness.text.build_queries import builder_identity
from negharness.text.negator import negate
from negharness.text.nt2vr_files import (
    read_caption_file,
    read_caption_table,
    read_video_set,
    video_of,
)

from .frame_index import read_frame_index

TRAIN_SETS = {  # name -> (validation collection, media kind, what it is)
    "msrvtt10ktrain": ("msrvtt10kval", "video", "MSR-VTT official train split (the 7k setting; test: msrvtt3k)"),
    "msrvtt1kAtrain": ("msrvtt1kAval", "video", "MSR-VTT 9k train split of JSFusion (test: msrvtt1k)"),
    "vatex_train": ("vatex_val1k5", "video", "VATEX train, HGR split (test: vatex)"),
    "flickr30ktrain": ("flickr30kval", "image", "Flickr30k train split (test: flickr30k; appendix A.3)"),
    "mscocotrain": ("mscocoval", "image", "MS-COCO train split (test: mscoco; appendix A.3)"),
}
DEFAULT_SAMPLING = FrameSampling("uniform", 8)
VIDEO_EXTS = (".mp4", ".avi", ".webm", ".mkv", ".mov")
IMAGE_EXTS = (".jpg", ".jpeg", ".png")
OPTIONS = {
    "frames": OptionSpec(str, None, "video frame sampling: segments:N or fps:R"),
    "negatives": OptionSpec(str, "auto", "soft negatives: the set's negation file if present (auto), it (file), "
                            "or the negator", choices=("auto", "file", "negator")),
    "val": OptionSpec(str, "auto", "validation split: the paper's (auto) or none", choices=("auto", "none")),
}
WHERE = ("nT2VR training text data (TextData/, VideoSets/): the download linked from github.com/ruc-aimc-lab/nT2VR "
         "(docs/guides/data.md); videos from the MSR-VTT / VATEX sites into {folder}/videos/ (or pre-extracted frames "
         "listed in {folder}/id.imagepath.txt); Flickr30k / MS-COCO images into {folder}/images/.")


def file_digest(paths: list[Path]) -> str:
    """Content hash of the text files a training set read, for the training record."""
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode())
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def media_loader(folder: Path, ids: list[str], kind: str, sampling: FrameSampling, where: str,
                 media_dir: Path | None = None) -> Callable[[int], Any]:
    """``load(i)`` for the media of ``ids`` in a collection folder (or flat in ``media_dir``); every
    file is checked now, so a missing one is reported before any training starts."""
    index = folder / "id.imagepath.txt"
    if kind == "video" and index.is_file():
        frames = read_frame_index(index)
        missing = [v for v in ids if v not in frames]
        _report_missing(missing, f"{index} (frame index)", where)
        return lambda i: load_frames(frames[ids[i]], sampling)
    sub, exts = ("videos", VIDEO_EXTS) if kind == "video" else ("images", IMAGE_EXTS)
    directory = media_dir or folder / sub
    by_stem: dict[str, Path] = {}
    if directory.is_dir():
        for p in directory.iterdir():
            if p.suffix.lower() in exts:
                by_stem.setdefault(p.stem, p)
    files = [by_stem.get(v) for v in ids]
    _report_missing([v for v, f in zip(ids, files) if f is None], f"{directory}/<id>{exts[0]}", where)
    found = [f for f in files if f is not None]  # every one: `_report_missing` refused a gap
    if kind == "video":
        return lambda i: decode_video(found[i], sampling)
    return lambda i: read_rgb(found[i])


def _report_missing(missing: list[str], pattern: str, where: str) -> None:
    if missing:
        raise UserError(f"{len(missing)} media file(s) missing, e.g. {', '.join(missing[:3])} (looked for {pattern}). "
                        f"Where to get them: {where}")


def read_negation_file(path: Path) -> dict[str, list[str]]:
    """The authors' ``<train>.caption.negation.txt``: cap id -> its false sentences (json per line)."""
    out: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                sents = [str(f["falsesent"]) for f in rec.get("false", [])]
                out[str(rec["id"])] = [s for s in sents if s.strip()]
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise UserError(f"{path}:{lineno}: expected a JSON object with 'id', 'truth' and "
                                f"'false': [{{'falsesent': ...}}] ({type(exc).__name__})") from None
    return out


def with_negator(digest: str, negator: bool) -> str:
    """A training set's digest: its files', and where its soft negatives are the negator's, the negator's
    identity (`builder_identity`: its rules and the libraries they read), so a resumed run sees new rules."""
    if not negator:
        return digest
    return hashlib.sha256(f"{digest}|negator {builder_identity()}".encode()).hexdigest()[:16]


def negator_negatives(captions: list[tuple[str, str]], digest: str, seed: int, cache_dir: Path | None) -> dict[str, list[str]]:
    """The negator's soft negative per caption (nT2VR section 3.1 rule), built once and cached."""

    def build() -> dict[str, list[str]]:
        out = {}
        for cap_id, caption in captions:
            cands = [n for n in negate(caption, seed=seed) if not n.rule.startswith("remove")]
            out[cap_id] = [cands[0].text] if cands else []
        return out

    path = cache_root(cache_dir) / "trainsets" / f"{digest}-s{seed}-b{builder_identity()}.negator.json"
    negatives: dict[str, list[str]] = cached_json(path, build)  # JSON: as `build` made it, or rebuilt
    return negatives


def _stream(name: str, kind: str, folder: Path, caption_path: Path, ids: list[str] | None,
            sampling: FrameSampling, where: str, negatives: dict[str, list[str]] | None) -> TrainStream:
    rows = read_caption_file(caption_path)
    by_item: dict[str, list[tuple[str, str]]] = {}
    for cap_id, caption in rows:
        by_item.setdefault(video_of(cap_id), []).append((cap_id, caption))
    ids = [v for v in (ids if ids is not None else by_item) if v in by_item]
    if not ids:
        raise UserError(f"{caption_path}: no caption belongs to a video of the collection's video set")
    captions = [[c for _, c in by_item[v]] for v in ids]
    negated = None
    if negatives is not None:
        # every candidate is kept, joined by a tab; the loader draws one per epoch
        negated = [["\t".join(negatives.get(cid, [])) or None for cid, _ in by_item[v]] for v in ids]
    load = media_loader(folder, ids, kind, sampling, where)
    return TrainStream(name, kind, ids, load, captions, None, negated)


def nt2vr_trainset(name: str, options: TrainSetOptions) -> TrainingSet:
    values = options.values
    val_name, kind, _ = TRAIN_SETS[name]
    spec = values["frames"]
    sampling = FrameSampling.parse(spec) if spec else (options.sampling or DEFAULT_SAMPLING)
    root = options.data_root
    folder = root / name
    text = folder / "TextData"
    where = WHERE.format(folder=folder)
    cap, vset = text / f"{name}.caption.txt", folder / "VideoSets" / f"{name}.txt"
    for needed in (cap, vset):
        if not needed.is_file():
            raise UserError(f"training set {name}: {needed} not found. Where to get it: {where}")
    neg_files = [p for p in (text / f"{name}.caption.negation.txt", text / f"{name}.caption.neagtion.txt") if p.is_file()]
    read = [cap, vset, *neg_files[:1]]
    digest = file_digest(read)
    source = values["negatives"]
    if source == "file" and not neg_files:
        raise UserError(f"-T negatives=file: {text / f'{name}.caption.negation.txt'} not found. Where to get it: {where}")
    by_negator = source == "negator" or not neg_files
    if not by_negator:
        negatives, how = read_negation_file(neg_files[0]), f"soft negatives from {neg_files[0].name}"
    else:
        negatives, how = negator_negatives(read_caption_file(cap), digest, options.seed, options.cache_dir), \
            "soft negatives from the negator (cached)"
    train = _stream(name, kind, folder, cap, read_video_set(vset), sampling, where, negatives)
    val = None
    if values["val"] != "none":
        vfolder = root / val_name
        vcap, vvset = vfolder / "TextData" / f"{val_name}.caption.txt", vfolder / "VideoSets" / f"{val_name}.txt"
        if not (vcap.is_file() and vvset.is_file()):
            raise UserError(f"training set {name}: validation split {val_name} not found ({vcap}); the paper picks "
                            f"the epoch on it. Where to get it: {WHERE.format(folder=vfolder)} (or -T val=none)")
        val = _stream(val_name, kind, vfolder, vcap, read_video_set(vvset), sampling, WHERE.format(folder=vfolder), None)
        digest = file_digest(read + [vcap, vvset])
    return TrainingSet(name, [train], val, with_negator(digest, by_negator),
                       [how, f"frames {sampling.key}" if kind == "video" else "images"])


msrvtt10ktrain, msrvtt1kAtrain, vatex_train, flickr30ktrain, mscocotrain = (
    named_trainset(n, nt2vr_trainset, OPTIONS) for n in ("msrvtt10ktrain", "msrvtt1kAtrain", "vatex_train", "flickr30ktrain",
                                                 "mscocotrain"))


# the user's own captions -----------------------------------------------------------------------------------
CAPTION_OPTIONS = {
    "file": OptionSpec(str, None, "the captions table: csv, nT2VR .txt or json", data_file=True),
    "media": OptionSpec(str, None, "folder of the media the ids name"),
    "kind": OptionSpec(str, None, "video or image (default: guessed from the media folder)", choices=("video", "image")),
    "val_file": OptionSpec(str, None, "validation captions table", data_file=True),
    "id_column": OptionSpec(str, None, "a CSV's id column (default image_id)"),
    "caption_column": OptionSpec(str, None, "a CSV's caption column (default captions)"),
    "frames": OptionSpec(str, None, "video frame sampling: segments:N or fps:R"),
    "negatives": OptionSpec(str, "negator", "soft negatives from the negator, or none", choices=("negator", "none")),
}


@takes_options(CAPTION_OPTIONS)
def captions(options: TrainSetOptions) -> TrainingSet:
    """``-T file=captions.csv|.txt|.json -T media=DIR [-T val_file=...] [-T kind=video|image]``: any captions
    table (nT2VR caption file, CSV with id/caption columns, JSON) whose item ids name files in DIR."""
    values = options.values
    if not values["file"] or not values["media"]:
        raise UserError("training set captions: needs -T file=CAPTIONS (csv, nT2VR .txt or json) and -T media=DIR "
                        "(files named <id>.mp4 / <id>.jpg, or a videos/ or images/ folder inside); a CSV's columns "
                        "are -T id_column= (default image_id) and -T caption_column= (default captions)")
    media = Path(values["media"])
    spec = values["frames"]
    sampling = FrameSampling.parse(spec) if spec else (options.sampling or DEFAULT_SAMPLING)

    def stream(path: Path, name: str) -> TrainStream:
        if not path.is_file():
            raise UserError(f"-T file: {path} not found")
        items = read_caption_table(path, values["id_column"], values["caption_column"],
                                   ("-T id_column=", "-T caption_column="))
        ids = [i for i, caps in items if caps]
        kind = values["kind"] or _guess_kind(media, ids)
        nested = (media / ("videos" if kind == "video" else "images")).is_dir()
        load = media_loader(media, [Path(i).stem if Path(i).suffix else i for i in ids], kind, sampling,
                            f"put the media named by {path} into {media}", None if nested else media)
        caps = [c for _, c in items if c]
        negated = None
        if values["negatives"] == "negator":
            rows = [(f"{i}#enc#{k}", c) for i, cs in zip(ids, caps) for k, c in enumerate(cs)]
            negs = negator_negatives(rows, file_digest([path]), options.seed, options.cache_dir)
            negated = [["\t".join(negs.get(f"{i}#enc#{k}", [])) or None for k in range(len(cs))] for i, cs in zip(ids, caps)]
        return TrainStream(name, kind, ids, load, caps, None, negated)

    train_path = Path(values["file"])
    val = stream(Path(values["val_file"]), "captions-val") if values["val_file"] else None
    read = [train_path] + ([Path(values["val_file"])] if val else [])
    return TrainingSet("captions", [stream(train_path, "captions")], val,
                       with_negator(file_digest(read), values["negatives"] == "negator"))


def _guess_kind(media: Path, ids: list[str]) -> str:
    if (media / "videos").is_dir():
        return "video"
    if (media / "images").is_dir():
        return "image"
    exts = {p.suffix.lower() for p in media.iterdir()} if media.is_dir() else set()
    return "video" if exts & set(VIDEO_EXTS) else "image"

