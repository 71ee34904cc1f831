"""NegBench's evaluation CSVs: strict reading (errors name file and row) and one rule for media paths.

Media path rule: the CSVs carry foreign prefixes (``data/coco/images/val2017/...``, the authors'
``/data/healthy-ml/...`` cluster paths, bare ``videoNNNN.mp4``). The dataset anchor found in a path
decides the folder under the data root; everything after the anchor is kept:

    .../coco/images/val2017/X.jpg                    -> <data root>/coco/val2017/X.jpg
    .../VOC2007/JPEGImages/X.jpg                     -> <data root>/voc2007/JPEGImages/X.jpg
    .../synthetic_visual_negation/data/positive/X    -> <data root>/hardneg_syn/positive/X
    [...]/videoNNNN.mp4                              -> <data root>/msrvtt/videos/videoNNNN.mp4
    .../CheXpert.../(train|valid)/...                -> <data root>/chexpert/(train|valid)/...

The CSVs themselves are looked up as ``<data root>/negbench/<name>.csv`` (or under ``images/`` or
``videos/`` there, as the authors' folder has them).
"""

from __future__ import annotations

import contextlib
import csv
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generator

from negharness.api import UserError
from negharness.api.files import (
    RootGuard,
    check_caption,
    check_csv_header,
    check_csv_width,
    literal_captions,
    numbered_rows,
    require_regular,
)
from negharness.text.nt2vr_files import decoded_lines

ANCHORS = [
    (re.compile(r"(?:^|/)coco/images/val2017/(.+)$"), "coco/val2017/{0}"),
    (re.compile(r"(?:^|/)VOC2007/JPEGImages/(.+)$"), "voc2007/JPEGImages/{0}"),
    (re.compile(r"(?:^|/)synthetic_visual_negation/data/((?:positive|negative)/.+)$"), "hardneg_syn/{0}"),
    (re.compile(r"(?:^|/)(video\d+\.(?:mp4|avi|webm|mkv))$"), "msrvtt/videos/{0}"),
    (re.compile(r"(?:^|/)CheXpert[^/]*/((?:train|valid|test)/.+)$", re.IGNORECASE), "chexpert/{0}"),
]
TEMPLATES = ("positive", "negative", "hybrid")
NEG_CUE = re.compile(r"\b(?:not|no|without|neither|nor|never|absent|missing|lacks?|lacking|free of)\b|n't\b|-free\b",
                     re.IGNORECASE)
AFFIRM_JOIN = re.compile(r"\bbut\b|\bwhile\b|\bwhereas\b|\bhowever\b|\balongside\b|\bwith no\b|, (?:and|with) no\b|;",
                         re.IGNORECASE)


def map_media_path(raw: str, root: Path, where: str = "", guard: RootGuard | None = None) -> Path:
    """The one documented rule above; a path with no known anchor is taken relative to the root.
    The result must stay under the data root, symlinks followed (`negharness.io.paths.RootGuard`):
    ``../`` in a CSV, or a link out of the root, is an error naming ``where`` (file:row)."""
    where = where or f"media path {raw!r}"
    guard = guard or RootGuard(root)
    p = raw.strip().replace("\\", "/")
    for pattern, dest in ANCHORS:
        m = pattern.search(p)
        if m:
            return guard.check(root / dest.format(m.group(1)), where)
    if p.startswith("/"):
        raise UserError(f"{where}: media path {raw!r} is absolute, with no known dataset folder in it (coco, "
                        "VOC2007, synthetic_visual_negation, videoNNNN, CheXpert)")
    return guard.check(root / p, where)


def template_of_caption(caption: str) -> str:
    """NegBench's template types from the words alone: no cue -> positive (affirmation); a cue with
    an affirmed part joined to it -> hybrid; a cue alone -> negative. Used where a file does not fix
    the template by option position (the templated MSR-VTT file, CheXpert)."""
    if not NEG_CUE.search(caption):
        return "positive"
    if re.search(r"\bneither\b", caption, re.IGNORECASE):
        return "negative"
    return "hybrid" if AFFIRM_JOIN.search(caption) else "negative"


@dataclass(frozen=True)
class McqRow:
    media: Path
    options: tuple[str, ...]
    correct: int
    template: str  # template of the correct answer
    option_templates: tuple[str, ...]
    where: str = ""  # "<csv>:<row>", for messages about this row's media


def find_csv(root: Path, name: str) -> Path:
    """The CSV under ``<root>/negbench`` (or its ``images/`` / ``videos/``), held to the data root's
    rule before anything opens it: a symlink out of the root (or a loop) is refused naming the file."""
    base = root / "negbench"
    found = next((c for c in (base / name, base / "images" / name, base / "videos" / name) if c.is_file()), base / name)
    return RootGuard(root).check(found, f"NegBench CSV {name}")


def _open_rows(path: Path) -> tuple[contextlib.closing[Generator[tuple[int, str], None, None]], csv.DictReader[str]]:
    """A DictReader over a UTF-8 CSV: a BOM dropped, bytes that are not UTF-8 an error naming the line."""
    require_regular(path)  # a FIFO would block open() forever
    lines = decoded_lines(path)
    return contextlib.closing(lines), csv.DictReader(line for _, line in lines)


def _short_or_long(path: Path, rowno: int, row: dict[Any, Any], width: int) -> None:
    """A row with fewer or more cells than the header is an error, not shifted columns."""
    check_csv_width(f"{path}:{rowno}", row, width, "an option missing or extra?")


def _media_column(path: Path, fields: list[str], order: tuple[str, str]) -> str:
    """The column naming each row's image or video (the authors' files use ``image_path`` or
    ``filepath``); neither is an error at the header, naming what was found (``Image_Path``?)."""
    found = next((c for c in order if c in fields), None)
    if found is None:
        raise UserError(f"{path}:1: no column {order[0]!r} (or {order[1]!r}) naming each row's media; the header "
                        f"has {', '.join(map(repr, fields)) or 'no columns'} (column names are case-sensitive)")
    return found


_LAYOUT_WORDS = {"*": "the correct answer's template"}
_CONTROL_NAMES = {"\0": "NUL", "\t": "TAB", "\n": "line feed", "\r": "carriage return", "\x1b": "ESC",
                  "\x7f": "DEL"}


def plain_caption(text: str, where: str, spaces: str = "") -> str:
    """A caption without NUL or other control characters (a binary file, a pasted escape): those
    never belong in a caption and would be tokenized silently; the error names the row. ``spaces``:
    control characters that are whitespace and allowed (COCO's own captions carry a newline, which
    the retrieval files keep as ``\\n``)."""
    bad = next((c for c in text if unicodedata.category(c) == "Cc" and c not in spaces), None)
    if bad is not None:
        name = _CONTROL_NAMES.get(bad, "control character")
        raise UserError(f"{where}: control character U+{ord(bad):04X} ({name}) at character {text.index(bad) + 1} "
                        "of the caption; captions are plain text")
    return check_caption(text, where)


def _norm(caption: str) -> str:
    return " ".join(caption.split()).casefold()


def _check_layout(path: Path, cols: list[str], layout: tuple[str, ...] | None) -> None:
    """The header's option count must be the layout's: three options under a four-position layout
    would score every row against the wrong templates."""
    if layout is not None and len(cols) != len(layout):
        positions = ", ".join(_LAYOUT_WORDS.get(t, t) for t in layout)
        raise UserError(f"{path}:1: the header has {len(cols)} option column(s) ({', '.join(cols) or 'none'}); this "
                        f"task's layout has {len(layout)} ({positions})")


def _check_no_copy_of_correct(path: Path, rowno: int, options: tuple[str, ...], cols: list[str], correct: int) -> None:
    """A distractor equal to the correct caption (spaces and case aside) makes the row unanswerable:
    the model's score for both is the same, so accuracy would depend on tie-breaking."""
    for i, option in enumerate(options):
        if i != correct and _norm(option) == _norm(options[correct]):
            raise UserError(f"{path}:{rowno}: {cols[i]} repeats the correct caption ({cols[correct]}: "
                            f"{options[correct][:80]!r}); every option must differ from the correct one")


def _mcq_header(path: Path, fields: list[str], binary: bool) -> tuple[list[str], str]:
    """(option columns, media column) in the authors' schema: ``CsvBinaryMCQDataset`` reads
    ``image_path, caption_0, caption_1, correct_answer``; ``CsvMCQDataset`` every ``caption_N`` and
    ``correct_answer_template`` as well."""
    cols = ["caption_0", "caption_1"] if binary else sorted(
        (c for c in fields if re.fullmatch(r"caption_\d+", c)), key=lambda c: int(c[8:]))
    needed = ["correct_answer", *cols] + ([] if binary else ["correct_answer_template"])
    for need in needed:
        if need not in fields:
            raise UserError(f"{path}:1: no column {need!r}; the header has {', '.join(map(repr, fields))}")
    return cols, _media_column(path, fields, ("image_path", "filepath"))


def read_mcq(path: Path, root: Path, layout: tuple[str, ...] | None, binary: bool = False) -> list[McqRow]:
    """Rows of an MCQ CSV. ``layout`` gives each option position's template where the file fixes
    it (position 0 is the correct answer's own template, written as "*"); None derives templates
    from the captions. ``binary``: the authors' 2-option schema, which has no template column (any
    such column is ignored, as their loader does): every template comes from the captions' words."""
    fh, reader = _open_rows(path)
    with fh:
        header = check_csv_header(path, reader.fieldnames)
        cols, media_col = _mcq_header(path, header, binary)
        _check_layout(path, cols, layout)
        guard = RootGuard(root)
        out = []
        for rowno, row in numbered_rows(path, reader):
            _short_or_long(path, rowno, row, len(header))
            options = tuple(plain_caption((row[c] or "").strip(), f"{path}:{rowno}: {c}") for c in cols)
            filled = sum(1 for o in options if o)
            if filled != len(cols) or len(cols) < 2:
                raise UserError(f"{path}:{rowno}: {filled} option(s); every row needs {len(cols)} (caption_0..caption_{len(cols) - 1})")
            try:
                correct = int(row["correct_answer"])
            except ValueError:
                raise UserError(f"{path}:{rowno}: correct_answer {row['correct_answer']!r} is not a number") from None
            if not 0 <= correct < len(options):
                raise UserError(f"{path}:{rowno}: correct_answer {correct} is not an option index")
            _check_no_copy_of_correct(path, rowno, options, cols, correct)
            template = template_of_caption(options[correct]) if binary else (row["correct_answer_template"] or "").strip()
            if template not in TEMPLATES:
                raise UserError(f"{path}:{rowno}: template {template!r} is not one of {', '.join(TEMPLATES)}")
            if layout is not None:
                option_templates = tuple(template if t == "*" else t for t in layout)
            else:
                option_templates = tuple(template if i == correct else template_of_caption(o) for i, o in enumerate(options))
            out.append(McqRow(map_media_path(row[media_col] or "", root, f"{path}:{rowno}", guard), options, correct,
                              template, option_templates, f"{path}:{rowno}"))
    if not out:
        raise UserError(f"{path}: no rows")
    return out


def read_retrieval(path: Path, root: Path, skipped: list[str] | None = None) -> list[tuple[Path, list[str]]]:
    """(media, captions) per row; ``captions`` cells are Python list literals (`literal_captions`, never eval).

    An empty string inside a list (one in the published COCO Retrieval-Neg file, row 914) is left
    out and noted in ``skipped`` as ``file:row``; anything else malformed is an error."""
    fh, reader = _open_rows(path)
    with fh:
        fields = check_csv_header(path, reader.fieldnames)
        media_col = _media_column(path, fields, ("filepath", "image_path"))
        if "captions" not in fields:
            raise UserError(f"{path}:1: no column 'captions'; the header has {', '.join(map(repr, fields))}")
        guard = RootGuard(root)
        out = []
        for rowno, row in numbered_rows(path, reader):
            check_csv_width(f"{path}:{rowno}", row, len(fields), "an unquoted comma in a captions list?")
            caps = literal_captions(row["captions"] or "", f"{path}:{rowno}")
            kept = [plain_caption(c.strip(), f"{path}:{rowno}", spaces="\t\n\r") for c in caps if c.strip()]
            if len(kept) < len(caps) and skipped is not None:
                skipped.append(f"{path.name}:{rowno}")
            if not kept:
                raise UserError(f"{path}:{rowno}: no non-empty caption")
            out.append((map_media_path(row[media_col] or "", root, f"{path}:{rowno}", guard), kept))
    if not out:
        raise UserError(f"{path}: no rows")
    return out
