"""NeIn's published files read one sample at a time, so memory stays bounded whatever their size.

- ``val.json``: a JSON array (or object) of entries, decoded entry by entry from a buffered read:
  at most one entry and one read chunk are held, never the whole list.
- ``validation*.parquet``: the Hugging Face export (images embedded as ``{bytes, path}``), read a
  small batch of rows at a time by the one parquet reader YAML tasks use too, with its caps (size,
  rows, what the columns unpack to) and its buffers (no pre-buffering: at most one row group is held
  by the reader and one batch by us).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, TextIO

from negharness.api import UserError
from negharness.api.files import parquet_rows

CHUNK_CHARS = 1 << 16
PARQUET_BATCH_ROWS = 16
ENTRY_COLUMNS = ("COCO", "T_original", "T_generated", "T_negative", "NeIn")


class _Buffer:
    """A read-ahead window over a text file with the line number of its start, for error messages."""

    def __init__(self, fh: TextIO) -> None:
        self.fh, self.text, self.pos, self.line, self.eof = fh, "", 0, 1, False

    def more(self) -> bool:
        if self.eof:
            return False
        chunk = self.fh.read(CHUNK_CHARS)
        if not chunk:
            self.eof = True
            return False
        self.line += self.text.count("\n", 0, self.pos)
        self.text, self.pos = self.text[self.pos:] + chunk, 0
        return True

    def peek(self) -> str:
        """The next non-space character ('' at the end of the file), skipping whitespace."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.text) or not self.more():
                return self.text[self.pos:self.pos + 1]

    def where(self) -> int:
        return self.line + self.text.count("\n", 0, self.pos)


def iter_json_entries(path: Path) -> Iterator[Any]:
    """The values of a top-level JSON array (or object) in ``path``, decoded one at a time.

    A UTF-8 BOM is dropped; malformed JSON is an error naming the file and line."""
    decoder = json.JSONDecoder()
    try:
        fh = open(path, encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise UserError(f"{path}: a folder, not a JSON file") from None
    with fh:
        buf = _Buffer(fh)
        try:
            yield from _values(buf, decoder, path)
        except UnicodeDecodeError as exc:
            raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start} of a read)") from exc


def _values(buf: _Buffer, decoder: json.JSONDecoder, path: Path) -> Iterator[Any]:
    opening = buf.peek()
    if opening not in ("[", "{"):
        raise UserError(f"{path}:{buf.where()}: expected a JSON list or object of entries")
    closing, keyed = ("]" if opening == "[" else "}"), opening == "{"
    buf.pos += 1
    first = True
    while True:
        c = buf.peek()
        if c == closing:
            return
        if not first:
            if c != ",":
                raise UserError(f"{path}:{buf.where()}: not valid JSON (expected ',' or {closing!r})")
            buf.pos += 1
            buf.peek()
        first = False
        if keyed:
            _decode(buf, decoder, path)  # the key, unused: entries carry their own ids
            if buf.peek() != ":":
                raise UserError(f"{path}:{buf.where()}: not valid JSON (expected ':')")
            buf.pos += 1
            buf.peek()
        yield _decode(buf, decoder, path)


def _decode(buf: _Buffer, decoder: json.JSONDecoder, path: Path) -> Any:
    """One JSON value at the buffer's position, reading more of the file while it is incomplete
    (an entry cut by the read window fails to decode, or a number may go on in the next chunk)."""
    while True:
        try:
            value, end = decoder.raw_decode(buf.text, buf.pos)
        except json.JSONDecodeError as exc:
            if buf.more():
                continue
            line = buf.line + buf.text.count("\n", 0, exc.pos)
            raise UserError(f"{path}:{line}: not valid JSON ({exc.msg})") from None
        if end >= len(buf.text) and buf.more():
            continue
        buf.pos = end
        return value


def iter_parquet_rows(paths: list[Path]) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    """(file, row number, row) over the files, `PARQUET_BATCH_ROWS` rows at a time, through the one
    parquet reader every task uses (`negharness.api.files.parquet_rows`: its caps and its buffers)."""
    for path in paths:
        for n, row in parquet_rows(path, ENTRY_COLUMNS, PARQUET_BATCH_ROWS):
            yield path, n, row
