"""NegBench fine-tuning sets (Alhamoud et al., CVPR 2025, section 5), as ``--task negbench_negfull`` etc.:
the fine-tune data of its Table 1 (plain CC12M, CC12M-NegCap, CC12M-NegFull; COCO and MSR-VTT are
that table's *evaluation* sets) and CC12M-NegMCQ alone.

Files under ``<data root>/negbench/finetuning/`` (``-T captions_csv=`` / ``-T mcq_csv=`` point elsewhere):

- captions CSV (NegCap): the media column ``filepath`` or ``image_path``; captions in ``captions``,
  ``caption``, ``title`` and/or ``negative_captions`` (a cell is a caption or a Python list literal of
  them; every one is a positive of its media, including those with true negations); comma or tab separated.
- MCQ CSV (NegMCQ, the authors' ``create_mcq.py`` output): ``image_path``, ``caption_0..caption_3``,
  ``correct_answer``, ``correct_answer_template``.

Media paths go through the evaluation CSVs' rule (`map_media_path`). Videos: 4 segment-centre
frames, as NegBench. No validation split unless ``-T val_csv=`` names a retrieval CSV (MIR on it).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Callable, TextIO

from negharness.api import OptionSpec, TrainSetOptions, TrainStream, TrainingSet, UserError, named_trainset
from negharness.api.files import (
    DATA_ENCODING,
    check_caption,
    cell_captions,
    numbered_rows,
)
from negharness.api.media import FrameSampling, decode_video, read_rgb
from negharness.tasks.nt2vr.training import file_digest

from .data import map_media_path, read_mcq, read_retrieval

SETS = {  # name -> (captions csv, mcq csv, what)
    "negbench_negcap": ("cc12m_negcap.csv", None, "CC12M-NegCap: captions with true negations (CLIP loss only)"),
    "negbench_negmcq": (None, "cc12m_negmcq.csv", "CC12M-NegMCQ: MCQs, one correct and three hard negatives"),
    "negbench_negfull": ("cc12m_negcap.csv", "cc12m_negmcq.csv", "CC12M-NegFull: NegCap + NegMCQ (the paper's best)"),
    "negbench_cc12m": ("cc12m.csv", None, "plain CC12M captions: Table 1's control fine-tune (open_clip CSV, 'title')"),
}
CAPTION_COLUMNS = ("captions", "caption", "title", "negative_captions")
VIDEO_EXTS = (".mp4", ".avi", ".webm", ".mkv", ".mov")
DEFAULT_SAMPLING = FrameSampling("segments", 4)
OPTIONS = {
    "captions_csv": OptionSpec(str, None, "caption CSV (default: the set's file under negbench/finetuning)", data_file=True),
    "mcq_csv": OptionSpec(str, None, "MCQ CSV (default: the set's file under negbench/finetuning)", data_file=True),
    "val_csv": OptionSpec(str, None, "validation retrieval CSV (original captions)", data_file=True),
    "caption_column": OptionSpec(str, None, "the captions CSV's caption column"),
    "frames": OptionSpec(str, None, "video frame sampling: segments:N or fps:R"),
}
WHERE = ("NegBench fine-tuning CSVs are built with the scripts of github.com/m1k2zoo/negbench "
         "(synthetic_datasets/finetuning/, README there) from CC12M, COCO or MSR-VTT; put them in {dir} "
         "and the media where the CSV paths map (see `negharness.tasks.negbench.data`: COCO -> <root>/coco/, "
         "MSR-VTT videos -> <root>/msrvtt/videos/, other paths relative to the data root)")


def _open_csv(path: Path) -> tuple[TextIO, csv.DictReader[str]]:
    """The CSV (or TSV) with the readers' one encoding rule (UTF-8, a BOM dropped)."""
    try:
        fh = open(path, newline="", encoding=DATA_ENCODING)
    except FileNotFoundError:
        raise UserError(f"file not found: {path}") from None
    head = fh.readline()
    fh.seek(0)
    return fh, csv.DictReader(fh, delimiter="\t" if head.count("\t") > head.count(",") else ",")


def _cell(cell: str, where: str) -> list[str]:
    """A caption, or the captions a list/tuple/set/JSON cell holds, each within the one caption limit."""
    cell = (cell or "").strip()
    caps = cell_captions(cell, where)
    return [check_caption(c.strip(), where) for c in caps if c.strip()]


def read_caption_csv(path: Path, root: Path, column: str | None = None) -> list[tuple[Path, list[str]]]:
    """(media, captions) per media file; rows naming the same file are merged."""
    fh, reader = _open_csv(path)
    with fh:
        fields = reader.fieldnames or []
        media_col = next((c for c in ("filepath", "image_path") if c in fields), None)
        cols = [column] if column else [c for c in CAPTION_COLUMNS if c in fields]
        if media_col is None or not cols or (column and column not in fields):
            raise UserError(f"{path}: needs a 'filepath' or 'image_path' column and a caption column "
                            f"({column or ' / '.join(CAPTION_COLUMNS)}); columns are {fields}")
        merged: dict[Path, list[str]] = {}
        for rowno, row in numbered_rows(path, reader):
            caps = [c for col in cols for c in _cell(row[col], f"{path}:{rowno}")]
            if caps:
                merged.setdefault(map_media_path(row[media_col], root), []).extend(caps)
    if not merged:
        raise UserError(f"{path}: no rows with captions")
    return list(merged.items())


def _loader(paths: list[Path], sampling: FrameSampling, where: str) -> tuple[str, Callable[[int], Any]]:
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise UserError(f"{len(missing)} media file(s) missing, e.g. {', '.join(map(str, missing[:3]))}. {where}")
    kinds = {"video" if p.suffix.lower() in VIDEO_EXTS else "image" for p in paths}
    if len(kinds) > 1:
        raise UserError("a NegBench training CSV mixes images and videos; use one CSV per kind")
    kind = kinds.pop()
    if kind == "video":
        return kind, lambda i: decode_video(paths[i], sampling)

    return kind, lambda i: read_rgb(paths[i])


def _ids(paths: list[Path], root: Path) -> list[str]:
    return [p.relative_to(root).as_posix() if p.is_relative_to(root) else str(p) for p in paths]


def negbench_trainset(name: str, options: TrainSetOptions) -> TrainingSet:
    values = options.values
    cap_name, mcq_name, _ = SETS[name]
    root = options.data_root
    base = root / "negbench" / "finetuning"
    where = "Where to get them: " + WHERE.format(dir=base)
    spec = values["frames"]
    sampling = FrameSampling.parse(spec) if spec else (options.sampling or DEFAULT_SAMPLING)
    cap_csv = Path(values["captions_csv"]) if values["captions_csv"] else (base / cap_name if cap_name else None)
    mcq_csv = Path(values["mcq_csv"]) if values["mcq_csv"] else (base / mcq_name if mcq_name else None)
    for f in (cap_csv, mcq_csv):
        if f is not None and not f.is_file():
            raise UserError(f"training set {name}: {f} not found. {where}")
    streams, read = [], []
    if cap_csv is not None:
        rows = read_caption_csv(cap_csv, root, values["caption_column"])
        kind, load = _loader([p for p, _ in rows], sampling, where)
        streams.append(TrainStream(f"{name}-captions", kind, _ids([p for p, _ in rows], root), load, [c for _, c in rows]))
        read.append(cap_csv)
    if mcq_csv is not None:
        mcqs = read_mcq(mcq_csv, root, None)
        kind, load = _loader([m.media for m in mcqs], sampling, where)
        # NegBench's MCQ batches feed only the MCQ loss (contrastive=False); the correct option is kept as caption
        streams.append(TrainStream(f"{name}-mcq", kind, _ids([m.media for m in mcqs], root), load,
                                   [[m.options[m.correct]] for m in mcqs], mcq=[(m.options, m.correct) for m in mcqs],
                                   contrastive=False))
        read.append(mcq_csv)
    val = None
    if values["val_csv"]:
        vpath = Path(values["val_csv"])
        vrows = read_retrieval(vpath, root)
        kind, load = _loader([p for p, _ in vrows], sampling, where)
        val = TrainStream(f"{name}-val", kind, _ids([p for p, _ in vrows], root), load, [c for _, c in vrows])
        read.append(vpath)
    return TrainingSet(name, streams, val, file_digest(read), [f"frames {sampling.key}" if streams[0].kind == "video" else "images"])


negbench_negcap, negbench_negmcq, negbench_negfull, negbench_cc12m = (
    named_trainset(n, negbench_trainset, OPTIONS) for n in ("negbench_negcap", "negbench_negmcq", "negbench_negfull",
                                                    "negbench_cc12m"))
