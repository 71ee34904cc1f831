"""NeIn (Bui et al.): image editing with negative instructions, scored by removal and retention.

Each sample: an input image that shows an object S (the NeIn image: the ground truth with S added),
a negative instruction about S (one of Table 2's 13 formats), and the ground truth (without S).
The editor under test edits the input; a scoring detector then checks whether S is gone (removal,
AUC-removal) and whether the caption's other objects are still there (retention); L1/L2 compare
with the ground truth, CLIP-I with a CLIP image tower. Edited images are written per sample with
what they were made from (input pixels, instruction, seed, editor) and reused on a rerun only when
that is unchanged, so an interrupted run resumes; a gallery page shows a few samples.

``nein_shapes`` builds the samples from the embedded world (a shape added to a test image) and
scores them with the world's exact detector, so the task runs out of the box.
"""

from __future__ import annotations

import html
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import numpy as np

from negharness.api import (
    MediaError,
    MetricInfo,
    OptionSpec,
    Task,
    TaskOptions,
    TaskResult,
    UserError,
)
from negharness.api.files import RootGuard, atomic_write, atomic_write_text
from negharness.api.media import open_image, read_rgb
from negharness.api.published import published_notes
from negharness.api.scoring import per_query
from negharness.tasks.nein import PUBLISHED
from negharness.text.phrases import head_nouns

from .metrics import auc_removal, pixel_distances, removal, retention
from .sources import iter_json_entries, iter_parquet_rows

if TYPE_CHECKING:
    from negharness.api import EditContext, Editor

FORMATS = [
    "The image doesn't have any {S}.", "{S} is not part of the scene.", "No {S} present in the image.",
    "The image is without {S}.", "The image does not have any {S}.", "The image lacks {S}.",
    "No {S} in the image.", "A scene without {S}.", "The image cannot have any {S}.",
    "Not a single {S} in sight.", "{S} is missing from the image.", "The image lacks the presence of {S}.",
    "{S} is nowhere to be seen in the image.",
]
NEIN_METRICS = {
    "Removal": MetricInfo(True, ".1f"), "AUC-Removal": MetricInfo(True, ".1f"), "Retention": MetricInfo(True, ".1f"),
    "L1": MetricInfo(False, ".4f"), "L2": MetricInfo(False, ".4f"), "CLIP-I": MetricInfo(True, ".4f"),
    "DINO": MetricInfo(True, ".4f"),
}
GALLERY_SAMPLES = 12
EDIT_KEY = "negharness-edit-key"  # the PNG text chunk holding what a saved edit was made from


@dataclass
class EditSample:
    id: str
    load_input: Callable[[], Any]
    load_truth: Callable[[], Any]
    instruction: str
    target: str  # the object the instruction negates
    objects: list[str]  # the caption's objects, for retention
    source: str = ""  # the image it was made from (its cluster: NeIn edits one COCO image several ways); "" = its own
    input_name: str = ""  # the input's and ground truth's files as a record names them when unreadable
    truth_name: str = ""


def instruction_for(target: str, k: int) -> str:
    text = FORMATS[k % len(FORMATS)].format(S=target)
    return text[0].upper() + text[1:]


class NeInTask(Task["EditContext"]):  # a name only: the editing context loads numpy
    family = "nein"
    version = "1"
    modalities = frozenset({"edit"})
    main_score = "Removal"
    metric_info = NEIN_METRICS
    leaderboard_metrics = ("Removal", "AUC-Removal", "Retention", "L1", "CLIP-I")
    citation = "Bui et al., NeIn: Telling What You Don't Want, CVPR Workshops 2025"
    cluster = "source image"  # samples made from one image (EditSample.source) are not independent
    default_detector = "owlv2"
    default_clip = "clip"
    default_dino = "facebook/dino-vits16"
    task_options = {
        "detector": OptionSpec(str, None, "scoring detector (default: the task's)"),
        "clip_model": OptionSpec(str, None, "model for CLIP-I, or none"),
        "dino_model": OptionSpec(str, None, "DINO model id or folder for the DINO score, or none", data_file=True),
        "edit_batch": OptionSpec(int, 4, "images edited per call", minimum=1, changes_numbers=False),
    }

    def __init__(self, options: TaskOptions) -> None:
        super().__init__(options)
        self.detector_name = self.opts["detector"] or self.default_detector
        self.clip_name = self.opts["clip_model"] or self.default_clip
        self.dino_name = self.opts["dino_model"] or self.default_dino
        self.batch = self.opts["edit_batch"]

    def config(self) -> dict[str, Any]:
        return {**super().config(), "detector": self.detector_name, "clip_model": self.clip_name,
                "dino_model": self.dino_name}

    def samples(self) -> Iterable[EditSample]:
        """The samples in order, produced lazily: a sample's images are read only when it is edited."""
        raise NotImplementedError

    def evaluate(self, ctx: EditContext) -> TaskResult:
        detector = ctx.plugin("detector", self.detector_name)
        editor = ctx.model
        if getattr(editor, "detector_used", None) == self.detector_name:
            ctx.notes["circular"] = f"the editor used the scoring detector {self.detector_name} itself"
        clip = ctx.plugin("model", self.clip_name) if self.clip_name != "none" else None
        from negharness.api import ModelOptions  # lazy: its module loads torch; building the task needs none

        dino = ctx.plugin("model", "dino", ModelOptions(arch=self.dino_name)) if self.dino_name != "none" else None
        out_dir = ctx.artifacts
        out_dir.mkdir(parents=True, exist_ok=True)
        target_scores, before, after, l1s, l2s, clip_i, dino_s = [], [], [], [], [], [], []
        gallery: list[EditSample] = []  # the first GALLERY_SAMPLES samples: their images go to disk at once
        ids: list[str] = []  # per-sample outputs are keyed by sample id (ids only: memory stays bounded)
        clusters: list[str] = []  # and each sample's source image
        for s, source, truth, edited in self._edits(editor, out_dir, ctx):
            ids.append(s.id)
            clusters.append(s.source or s.id)
            target_scores.append(detector.max_scores(edited, [s.target])[s.target])
            found_in = {o for o, v in detector.max_scores(source, s.objects).items() if v > 0} if s.objects else set()
            found_out = {o for o, v in detector.max_scores(edited, sorted(found_in)).items() if v > 0} if found_in else set()
            before.append(found_in)
            after.append(found_out)
            l1, l2 = pixel_distances(edited, truth)
            l1s.append(l1)
            l2s.append(l2)
            if clip is not None:
                clip_i.append(clip.image_cosine(edited, truth))
            if dino is not None:
                dino_s.append(dino.image_cosine(edited, truth))
            if len(gallery) < GALLERY_SAMPLES:
                gallery.append(s)
                _gallery_images(out_dir, s, source, truth)
        n_done = len(target_scores)
        if not n_done:
            n_skipped = sum(len(v) for v in ctx.broken.values())
            raise UserError(f"task {self.name}: no sample could be evaluated ({n_skipped} unreadable, skipped)")
        kept, empty = retention(before, after)
        values = {"Removal": [100.0 * (x == 0) for x in target_scores],
                  "AUC-Removal": [100.0 * (1.0 - x) for x in target_scores],
                  "Retention": [100.0 * len(b & a) / len(b) if b else None for b, a in zip(before, after)],
                  "L1": l1s, "L2": l2s, **({"CLIP-I": clip_i} if clip_i else {}), **({"DINO": dino_s} if dino_s else {})}
        metrics = {"Removal": removal(target_scores), "AUC-Removal": auc_removal(target_scores), "Retention": kept,
                   "L1": float(np.mean(l1s)), "L2": float(np.mean(l2s))}
        if clip_i:
            metrics["CLIP-I"] = float(np.mean(clip_i))
        if dino_s:
            metrics["DINO"] = float(np.mean(dino_s))
        _gallery_page(out_dir, gallery)
        notes = {"per_sample_seed": "run seed * 1000003 + sample index", "scoring_detector": self.detector_name, "editor_detector": getattr(editor, "detector_used", None),
                 "retention_empty_inputs": empty,
                 "edits": str(out_dir), **ctx.notes}
        metrics = {k: v for k, v in metrics.items() if v == v}
        notes.update(published_notes(self.name, editor, metrics, PUBLISHED, {"samples": n_done}))
        values = {k: v for k, v in values.items() if k in metrics}
        return TaskResult(metrics, {"samples": n_done}, None, notes, per_query(ids, values, clusters))

    def _edits(self, editor: Editor, out_dir: Path, ctx: EditContext) -> Iterator[tuple[EditSample, Any, Any, Any]]:
        """(sample, input, truth, edited) in order. An edit an earlier run left is read back (resume)
        only when its key (`EditContext.edit_key`: input pixels, instruction, seed, editor) is this
        run's, so a replaced input or another editor edits again; the rest are made in batches and each
        written atomically, its key inside, as soon as it exists. An image that cannot be read stops the
        run naming it, or with --skip-broken-media leaves its sample out, counted and named
        (`EditContext.unreadable`); an output that is not an image is an error."""
        pending: list[tuple[EditSample, Any, Any, int, str]] = []

        def flush() -> Iterator[tuple[EditSample, Any, Any, Any]]:
            outs = editor.edit_batch([p[1] for p in pending], [p[0].instruction for p in pending],
                                     [p[3] for p in pending])
            for (s, source, truth, _, key), out in zip(pending, outs):
                if not hasattr(out, "save"):
                    raise UserError(f"editor {editor.name} returned {type(out).__name__} for sample {s.id}, not an image")
                _save_edit(out_dir / f"{_safe(s.id)}.png", out, key)
                ctx.counters["edited"] += 1
                yield s, source, truth, out
            pending.clear()

        for k, s in enumerate(self.samples()):
            images = _read_images(s, ctx, self.name)
            if images is None:
                continue
            source, truth = images
            seed = ctx.seed * 1_000_003 + k
            key = ctx.edit_key(source, s.instruction, seed)
            done = _saved_edit(out_dir / f"{_safe(s.id)}.png", key)
            if done is not None:
                ctx.counters["reused"] += 1
                yield s, source, truth, done
                continue
            pending.append((s, source, truth, seed, key))
            if len(pending) >= self.batch:
                yield from flush()
        if pending:
            yield from flush()


def _read_images(s: EditSample, ctx: Any, key: str) -> tuple[Any, Any] | None:
    """(input, ground truth) of a sample, or None when one could not be read and the run skips it."""
    images = []
    for load, name in ((s.load_input, s.input_name), (s.load_truth, s.truth_name)):
        try:
            images.append(load())
        except MediaError as exc:
            ctx.unreadable(key, name or s.id, exc)
            return None
    return images[0], images[1]


def _save_edit(path: Path, image: Any, key: str) -> None:
    """The edited image as PNG with its edit key in a text chunk (written before the pixels)."""
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text(EDIT_KEY, key)
    atomic_write(path, lambda tmp: image.save(tmp, format="PNG", pnginfo=info))


def _saved_edit(path: Path, key: str) -> Any:
    """The saved edit when it was made under ``key``, else None (absent, damaged, older or other)."""
    if not path.exists():
        return None
    try:
        with open_image(path) as im:
            if im.format != "PNG" or im.info.get(EDIT_KEY) != key:  # text chunks before the pixels, read by open
                return None
        return read_rgb(path)
    except MediaError:  # damaged (an interrupted copy): edited again
        path.unlink(missing_ok=True)
        return None


def _gallery_images(out_dir: Path, s: EditSample, source: Any, truth: Any) -> None:
    """A gallery sample's input and ground truth, written when the sample is scored (never kept in
    memory), over what an earlier run wrote: the data may have changed since."""
    for tag, img in (("input", source), ("truth", truth)):
        atomic_write(out_dir / f"{_safe(s.id)}.{tag}.png", _png_writer(img))


def _png_writer(image: Any) -> Callable[[Path], None]:
    """What writes ``image`` as PNG to a path (one per image: a lambda in a loop would see the last)."""
    return lambda tmp: image.save(tmp, format="PNG")


def _gallery_page(out_dir: Path, samples: list[EditSample]) -> None:
    cells = []
    for s in samples:
        name = _safe(s.id)
        cells.append(f"<tr><td>{html.escape(s.instruction)}</td><td><img src='{name}.input.png'></td>"
                     f"<td><img src='{name}.png'></td><td><img src='{name}.truth.png'></td></tr>")
    page = ("<!doctype html><meta charset='utf-8'><title>NeIn gallery</title><style>img{width:128px;"
            "image-rendering:pixelated}</style><table><tr><th>instruction</th><th>input</th><th>edited</th>"
            "<th>ground truth</th></tr>" + "".join(cells) + "</table>")
    atomic_write_text(out_dir / "gallery.html", page)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


class NeInVal(NeInTask):
    """The published NeIn evaluation set::

        <data root>/nein/val.json                  entries: COCO, T_original, T_generated, T_negative, NeIn
        <data root>/nein/images/<NeIn>.png|.jpg    the editing input (the object-added image)
        <data root>/coco/val2017/<COCO>.jpg        the ground truth (shared with NegBench's COCO folder)

    The object to remove is the text after "Add a/an" in T_generated; the caption's objects for
    retention are the head nouns of T_original (`negharness.text.composer.head_nouns`)."""

    name = "nein_val"
    description = "NeIn validation set (24,182 samples): editing with negative instructions"
    data_help = ("NeIn's val.json and images: the Hugging Face dataset nhatttanbui/NeIn or the Google Drive "
                 "folder linked from github.com/tanbuinhat/NeIn; COCO val2017 images into <data root>/coco/val2017/")

    def _json(self) -> Path:
        return self._under_root(self.options.data_root / "nein" / "val.json")

    def _parquet(self) -> list[Path]:
        return [self._under_root(p) for p in sorted((self.options.data_root / "nein").glob("validation*.parquet"))]

    def _under_root(self, path: Path) -> Path:
        """The data root's rule before anything opens the file: a symlink out (or a loop) is refused."""
        return RootGuard(self.options.data_root).check(path, f"task {self.name}: data file")

    def required_files(self) -> list[Path]:
        return [] if self._parquet() else [self._json()]

    def data_files(self) -> list[Path]:
        """Every file a number rests on: the parquet files (images inside), or val.json and each
        sample's input and ground truth (one that is absent stops the run, or with
        --skip-broken-media skips its sample; once it appears, the record reruns)."""
        if self._parquet():
            return self._parquet()
        return [self._json()] + [p for _, _, source, truth in self._limited(self._json_rows())
                                 for p in (source, truth) if p.exists()]

    def samples(self) -> Iterator[EditSample]:
        made = self._parquet_samples() if self._parquet() else self._json_samples()
        return self._limited(made)

    def _limited(self, items: Iterator[Any]) -> Iterator[Any]:
        return itertools.islice(items, self.options.limit) if self.options.limit else items

    def _json_rows(self) -> Iterator[tuple[dict[str, Any], str, Path, Path]]:
        """(entry, where, input image, ground truth) per val.json entry, each path checked under the root."""
        root, path = self.options.data_root, self._json()
        guard = RootGuard(root)
        for n, e in enumerate(iter_json_entries(path)):
            where = f"{path} entry {n} ({e.get('NeIn', '?') if isinstance(e, dict) else '?'})"
            _check_entry(e, where)
            source = next((p for p in (root / "nein" / "images" / f"{e['NeIn']}{x}" for x in (".png", ".jpg"))
                           if p.exists()), root / "nein" / "images" / f"{e['NeIn']}.png")
            truth = root / "coco" / "val2017" / f"{str(e['COCO']).zfill(12)}.jpg"
            yield e, where, guard.check(source, where), guard.check(truth, where)

    def _json_samples(self) -> Iterator[EditSample]:
        root = self.options.data_root
        for e, _, source, truth in self._json_rows():
            yield _sample(str(e["NeIn"]), e, _opener(source), _opener(truth), (_named(source, root), _named(truth, root)))

    def _parquet_samples(self) -> Iterator[EditSample]:
        """The published parquet files (images embedded as {bytes, path}), a few rows at a time."""
        for path, n, row in iter_parquet_rows(self._parquet()):
            where = f"{path} row {n}"
            _check_entry(row, where)
            ident = Path((row["NeIn"] or {}).get("path") or f"{path.stem}_{n}").stem
            names = (f"{path.name} row {n} NeIn", f"{path.name} row {n} COCO")
            yield _sample(ident, row, _bytes_opener(row["NeIn"], names[0]), _bytes_opener(row["COCO"], names[1]), names)


def _check_entry(e: Any, where: str) -> None:
    for key in ("COCO", "T_original", "T_generated", "T_negative", "NeIn"):
        if not isinstance(e, dict) or key not in e or e[key] is None:
            raise UserError(f"{where}: no {key!r}")


def _sample(ident: str, e: dict[str, Any], load_input: Callable[[], Any], load_truth: Callable[[], Any],
            names: tuple[str, str]) -> EditSample:
    """The object to remove is the text after "Add a/an" in T_generated, without the final '.'."""
    import re


    m = re.match(r"\s*add an? (.+?)\.?\s*$", e["T_generated"], re.IGNORECASE)
    if not m:
        raise UserError(f"sample {ident}: T_generated {e['T_generated']!r} is not 'Add a/an <object>.'")
    return EditSample(ident, load_input, load_truth, e["T_negative"], m.group(1).strip().lower(),
                      head_nouns(e["T_original"]), _coco_id(e.get("COCO")), *names)


def _coco_id(cell: Any) -> str:
    """The COCO image a sample was made from (its cluster): val.json's id or the parquet cell's file
    name, without leading zeros (``139`` and ``000000000139.jpg`` are one image); "" when unknown."""
    name = Path(str(cell.get("path") or "")).stem if isinstance(cell, dict) else "" if cell is None else str(cell)
    return name.lstrip("0") or ("0" if name else "")


def _bytes_opener(cell: Any, where: str) -> Callable[[], Any]:
    """An image embedded in a parquet cell ({bytes, path}), read by the shared reader."""
    def load() -> Any:
        import io

        data = cell.get("bytes") if isinstance(cell, dict) else cell
        if not isinstance(data, (bytes, bytearray)):
            raise MediaError(f"cannot read image {where}: no embedded image bytes ({type(data).__name__})")
        return read_rgb(io.BytesIO(data), where)
    return load


def _named(path: Path, root: Path) -> str:
    """``nein/images/NeIn_1_1.png``: a file as a record names it, under the data root."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _opener(path: Path) -> Callable[[], Any]:
    """An image file, read by the shared reader: any failure is a `MediaError` naming the file."""
    return lambda: read_rgb(path)
