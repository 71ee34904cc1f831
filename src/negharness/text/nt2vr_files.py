"""nT2VR's text-data files: read strictly (errors name file and line), written atomically.

- ``<c>.caption.txt``: ``<cap_id> <caption>`` per line, cap_id ``<video_id>#enc#<k>``
- ``<c>.negated.txt``: same, cap_id ``<original cap_id>#<j>``
- ``<c>.composed.txt``: one dict per line (read with ast.literal_eval, never eval): ``cap_id``,
  ``caption``, ``video_ids``, ``negstionfirst`` (the authors' spelling), ``pos_occur``, ``neg_occur``
- ``VideoSets/<c>.txt``: video ids, one per line

The source video of a caption or negated query is its id before the first ``#``.
"""

from __future__ import annotations

import ast
import codecs
import contextlib
import csv
import json
from pathlib import Path
from typing import IO, Any, Generator, Iterable, Mapping, Sequence

from negharness.api import UserError
from negharness.api.files import (
    DATA_ENCODING,
    MAX_CAPTION_CHARS,
    atomic_write_text,
    check_caption,
    cell_captions,
    numbered_rows,
)


def video_of(cap_id: str) -> str:
    return cap_id.split("#", 1)[0]


def original_of(neg_id: str) -> str:
    """``video7010#enc#3#0`` -> ``video7010#enc#3``."""
    return neg_id.rsplit("#", 1)[0]


# MAX_CAPTION_CHARS, check_caption: the one caption limit every reader shares (also keeping the
# part-of-speech tagger that builds negated queries off 100,000-character "captions").
# Any line of a text-data file (a composed query lists its videos, so it may be long, but not this).
MAX_LINE_CHARS = 1_000_000


def _open(path: Path, mode: str, **kwargs: Any) -> IO[Any]:
    """``open`` whose usual failures are one error naming the file."""
    try:
        return open(path, mode, **kwargs)
    except FileNotFoundError:
        raise UserError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise UserError(f"{path}: a folder, not a file") from None
    except PermissionError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None


def open_text(path: Path, newline: str | None = None) -> IO[str]:
    """A UTF-8 data file for reading; a leading BOM (Excel, Notepad) is dropped, never kept in the first id."""
    return _open(path, "r", encoding=DATA_ENCODING, newline=newline)


UTF16 = "UTF-16 text (expected UTF-8): save it as UTF-8, e.g. iconv -f UTF-16 -t UTF-8"


def _looks_utf16(raw: bytes) -> bool:
    """UTF-16 without a BOM decodes as "valid" UTF-8 full of NULs: a NUL in every other byte of a
    line's text (ASCII as UTF-16) is that, not a caption."""
    body = raw.rstrip(b"\r\n\x00")
    return len(body) >= 2 and b"\x00" in body and body.count(b"\x00") * 3 >= len(body)


def decoded_lines(path: Path, max_chars: int = MAX_LINE_CHARS) -> Generator[tuple[int, str], None, None]:
    """(line number, text with its line ending) of a UTF-8 file, decoded line by line so a byte that
    is not UTF-8 is reported at its own line; a leading BOM is dropped; a line longer than
    ``max_chars`` is an error (read at most that much, so a huge line never fills memory)."""
    with _open(path, "rb") as fh:
        limit = 4 * max_chars + 4  # bytes: a UTF-8 character has at most 4
        for lineno, raw in enumerate(iter(lambda: fh.readline(limit), b""), 1):
            too_long = len(raw) >= limit and not raw.endswith(b"\n")
            if lineno == 1 and raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or _looks_utf16(raw):
                raise UserError(f"{path}: {UTF16}") from None
            try:
                text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                if too_long:  # cut inside a character
                    raise UserError(f"{path}:{lineno}: line longer than {max_chars:,} characters") from None
                raise UserError(f"{path}:{lineno}: not UTF-8 text ({exc.reason} at byte {exc.start} of the line)") from None
            if too_long or len(text.rstrip("\r\n")) > max_chars:
                raise UserError(f"{path}:{lineno}: line longer than {max_chars:,} characters")
            yield lineno, text


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    for lineno, line in decoded_lines(path):
        if line.strip():
            yield lineno, line.rstrip("\r\n")


def read_caption_file(path: str | Path) -> list[tuple[str, str]]:
    """(cap_id, caption) pairs; a line without both is an error naming the file and line."""
    path = Path(path)
    out = []
    seen: dict[str, int] = {}
    for lineno, line in _lines(path):
        cap_id, _, caption = line.strip().partition(" ")
        if not caption.strip() or not cap_id:
            raise UserError(f"{path}:{lineno}: expected '<cap_id> <caption>', got {line.strip()!r}")
        _once(seen, cap_id, path, lineno, "caption id")
        out.append((cap_id, check_caption(caption.strip(), f"{path}:{lineno}")))
    if not out:
        raise UserError(f"{path}: no captions (empty collection)")
    return out


def _once(seen: dict[str, int], key: str, path: Path, lineno: int, what: str) -> None:
    """An id met a second time is an error naming both lines: a repeated video id would add a
    second candidate (every rank, MIR included, moves), a repeated caption id two queries in one."""
    first = seen.setdefault(key, lineno)
    if first != lineno:
        raise UserError(f"{path}:{lineno}: {what} {key!r} repeats line {first}; every id must be listed once")


def read_video_set(path: str | Path) -> list[str]:
    """The collection's ids in file order; a blank line is skipped, a repeated id refused."""
    path = Path(path)
    ids: list[str] = []
    seen: dict[str, int] = {}
    for lineno, line in _lines(path):
        _once(seen, line.strip(), path, lineno, "id")
        ids.append(line.strip())
    if not ids:
        raise UserError(f"{path}: no video ids (empty collection)")
    return ids


COMPOSED_KEYS = ("cap_id", "caption", "video_ids")


def read_composed_file(path: str | Path) -> list[dict[str, Any]]:
    """The composed queries of a file, each a dict with at least ``COMPOSED_KEYS`` (values as written)."""
    path = Path(path)
    out: list[dict[str, Any]] = []
    for lineno, line in _lines(path):
        try:
            rec = ast.literal_eval(line.strip())
        except (ValueError, SyntaxError) as exc:
            raise UserError(f"{path}:{lineno}: not a Python/JSON dict literal ({exc.__class__.__name__})") from exc
        if not isinstance(rec, dict):
            raise UserError(f"{path}:{lineno}: expected a dict per line, got {type(rec).__name__}")
        missing = [k for k in COMPOSED_KEYS if k not in rec]
        if missing:
            raise UserError(f"{path}:{lineno}: composed query lacks {', '.join(missing)}")
        if not isinstance(rec["video_ids"], (list, tuple)) or not rec["video_ids"]:
            raise UserError(f"{path}:{lineno}: video_ids must be a non-empty list")
        out.append(rec)
    if not out:
        raise UserError(f"{path}: no composed queries")
    return out


def check_known_videos(path: Path, lineno_ids: Iterable[tuple[int, str]], known: set[str]) -> None:
    """A query naming a video outside the collection is an error (the authors' code scored it as rank 6)."""
    for lineno, vid in lineno_ids:
        if vid not in known:
            raise UserError(f"{path}:{lineno}: video id {vid!r} is not in the collection's video set")


def write_caption_file(path: str | Path, rows: Iterable[tuple[str, str]]) -> Path:
    return atomic_write_text(path, "".join(f"{cid} {cap}\n" for cid, cap in rows))


def write_dict_lines(path: str | Path, records: Iterable[Mapping[str, object]]) -> Path:
    """One JSON object per line: valid for ast.literal_eval too, so the authors' readers load it."""
    return atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


CAPTION_TABLE_FLAGS = ("--id-column", "--caption-column")  # how build-queries names the two columns


def read_caption_table(path: str | Path, id_column: str | None = None, caption_column: str | None = None,
                       flags: tuple[str, str] = CAPTION_TABLE_FLAGS) -> list[tuple[str, list[str]]]:
    """Items and their captions from an nT2VR caption file, a CSV, or a JSON file.

    CSV: the id and caption columns (a cell may hold a Python list literal of captions, as NegBench's
    ``all_captions``); ``flags`` are how the caller's user names them (``--id-column`` for
    build-queries, ``-T id_column=`` for a training set), so an error names an option that exists.
    JSON: ``{id: [captions]}`` or ``[{"id": .., "caption(s)": ..}]``.
    """
    path = Path(path)
    if path.suffix == ".csv":
        return _read_csv(path, id_column or "image_id", caption_column or "captions", flags)
    if path.suffix == ".json":
        return _read_json(path)
    grouped: dict[str, list[str]] = {}
    for cap_id, caption in read_caption_file(path):
        grouped.setdefault(video_of(cap_id), []).append(caption)
    return list(grouped.items())


def _cell_captions(cell: str, where: str) -> list[str]:
    return [check_caption(v.strip(), where) for v in cell_captions(cell, where) if v.strip()]


def _read_csv(path: Path, id_column: str, caption_column: str, flags: tuple[str, str]) -> list[tuple[str, list[str]]]:
    with contextlib.closing(decoded_lines(path)) as lines:
        reader = csv.DictReader(line for _, line in lines)
        for col, opt in zip((id_column, caption_column), flags):
            if col not in (reader.fieldnames or []):
                raise UserError(f"{path}: no column {col!r} ({opt}); columns are {reader.fieldnames}")
        grouped: dict[str, list[str]] = {}
        for rowno, row in numbered_rows(path, reader):
            item = (row[id_column] or "").strip()
            if not item:
                raise UserError(f"{path}:{rowno}: empty {id_column!r}")
            grouped.setdefault(item, []).extend(_cell_captions(row[caption_column] or "", f"{path}:{rowno}"))
    return list(grouped.items())


def _read_json(path: Path) -> list[tuple[str, list[str]]]:
    try:
        with open_text(path) as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc
    except UnicodeDecodeError as exc:
        with open(path, "rb") as head:
            utf16 = head.read(2) in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
        if utf16:
            raise UserError(f"{path}: {UTF16}") from None
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if isinstance(data, dict):
        return [(str(k), _json_captions([v] if isinstance(v, str) else v, f"{path}: item {k!r}"))
                for k, v in data.items()]
    if not isinstance(data, list):
        raise UserError(f"{path}: expected {{id: [captions]}} or a list of {{'id', 'caption(s)'}} entries")
    out: dict[str, list[str]] = {}
    for i, rec in enumerate(data):
        if not isinstance(rec, dict) or "id" not in rec:
            raise UserError(f"{path}: entry {i} needs an 'id' and 'caption' or 'captions'")
        caps = rec.get("captions", [rec.get("caption")] if rec.get("caption") else [])
        out.setdefault(str(rec["id"]), []).extend(_json_captions(caps, f"{path}: entry {i}"))
    return list(out.items())


def _json_captions(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: captions must be a string or a list of strings")
    return [check_caption(v, where) for v in value]


def caption_rows(items: Sequence[tuple[str, list[str]]]) -> list[tuple[str, str]]:
    """nT2VR cap ids for plain items: ``<item>#enc#<k>``."""
    return [(f"{item}#enc#{k}", cap) for item, caps in items for k, cap in enumerate(caps)]


def read_neginfo(path: str | Path) -> dict[str, tuple[str, str]]:
    """The authors' ``*_neginfo.txt`` (a dict per line: cap_id, caption, and for a negated query its
    positive part ``poscap`` and negation scope ``negcap``): cap_id -> (positive, negative) for the
    boolean baseline. An entry without a scope has no negative part."""
    path = Path(path)
    out: dict[str, tuple[str, str]] = {}
    for lineno, line in _lines(path):
        try:
            rec = ast.literal_eval(line.strip())
        except (ValueError, SyntaxError) as exc:
            raise UserError(f"{path}:{lineno}: not a Python/JSON dict literal ({exc.__class__.__name__})") from exc
        if not isinstance(rec, dict) or "cap_id" not in rec or "caption" not in rec:
            raise UserError(f"{path}:{lineno}: expected a dict with cap_id and caption")
        negative = str(rec.get("negcap") or "").strip()
        positive = str(rec.get("poscap") or "").strip() if negative else str(rec["caption"])
        out[str(rec["cap_id"])] = (positive or str(rec["caption"]), negative)
    return out
