"""Rules every reader of data files shares (NegBench's CSVs, nT2VR's text files, YAML tasks'
annotation files), so that no reader is laxer than another:

- one encoding rule (`DATA_ENCODING`): UTF-8, a leading BOM (Excel, Notepad) dropped;
- one caption limit (`check_caption`): a caption longer than `MAX_CAPTION_CHARS` is refused, never
  truncated by a tokenizer into another query;
- one reading of surrogates (`readable_text`, applied by `check_caption`): a JSON ``\\ud83d`` escape
  or a Python literal's ``'\\ud83d'`` gives a str no encoder takes (the cache's hashes, a
  tokenizer's ``encode``: a crash naming nothing); it is read as open_clip's tokenizer reads it
  (ftfy's ``fix_surrogates``): a pair joined into its character, a lone one as U+FFFD;
- one rule decides whether a cell is one caption or a list of them (`cell_captions`), for every
  reader: a list read as a Python or JSON literal, never evaluated (`literal_captions`);
- a header whose columns a dict cannot hold apart, a row whose cell count is not the header's (an
  unquoted comma), and a row the csv module cannot read (a cell over its field limit) are errors
  naming the file and line (`check_csv_header`, `check_csv_width`, `numbered_rows`), never shifted or
  dropped fields.
"""

from __future__ import annotations

import ast
import csv
import json
import re
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from negharness.contracts.errors import UserError

DATA_ENCODING = "utf-8-sig"  # UTF-8; a leading BOM is dropped, never kept in the first field name or id
# A caption longer than this is not a caption (the longest MSR-VTT / VATEX / COCO captions have a few
# hundred characters; text encoders keep 77 tokens): refused with the file and line rather than
# truncated, because a cut caption would be a different query and change the numbers silently.
MAX_CAPTION_CHARS = 10_000
MAX_LIST_CELL_CHARS = 100 * MAX_CAPTION_CHARS  # a cell listing captions, checked before it is parsed
# how a cell holding several captions is written: a Python list, tuple or set, or a JSON array
_LITERAL_ENDS = {"[": "]", "(": ")", "{": "}"}
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_caption(text: str, where: str) -> str:
    """``text`` (surrogates read by `readable_text`), or a `UserError` at ``where`` when it is longer
    than `MAX_CAPTION_CHARS`."""
    if len(text) > MAX_CAPTION_CHARS:
        raise UserError(f"{where}: caption of {len(text):,} characters (at most {MAX_CAPTION_CHARS:,}); "
                        "is this a caption file?")
    return readable_text(text)


def readable_text(text: str) -> str:
    """``text`` with UTF-16 surrogates read as open_clip's tokenizer reads them (its ``basic_clean``
    runs ftfy, whose ``fix_surrogates`` does this): a high and low surrogate pair becomes the
    character it encodes, a lone surrogate U+FFFD. A str from JSON (``"\\ud83d"``) or a Python literal
    may hold them; UTF-8 cannot encode them, so every later hash or tokenizer would fail."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def cell_captions(cell: str, where: str) -> list[str]:
    """The one rule for "one caption or a list of them", shared by every reader of such cells: a cell
    is a list (`literal_captions`; malformed, an error at ``where``) when it is written ``[...]``, or
    ``(...)`` / ``{...}`` holding nothing or starting with a quote (CREPE's tuples and sets of
    ``hard_negs``); anything else is one caption as written, ``(Your response)`` among them (an
    option in NegBench's COCO MCQ file, line 236)."""
    if _is_list_cell(cell):
        return literal_captions(cell, where)
    return [cell]


def _is_list_cell(cell: str) -> bool:
    """Whether a cell is written as a list of captions (`cell_captions`'s rule)."""
    text = cell.strip()
    if len(text) < 2 or _LITERAL_ENDS.get(text[0]) != text[-1]:
        return False
    inner = text[1:-1].strip()
    return text[0] == "[" or not inner or inner[0] in "'\""


def literal_captions(cell: str, where: str) -> list[str]:
    """The captions a cell lists as a Python list, tuple or set literal (`ast.literal_eval`, never
    eval) or a JSON array (read as JSON). A set's captions come sorted: its written order is whatever the writer's
    hash seed gave (CREPE wrote ``hard_negs`` as sets on a fifth of its rows), so it means nothing,
    and sorting makes the options' order the same on every machine. A cell that is no such literal,
    or holds anything but strings, is an error at ``where`` (a cell that may be one caption instead:
    `cell_captions`)."""
    cell = cell.strip()
    if len(cell) > MAX_LIST_CELL_CHARS:  # before literal_eval, which would parse it all
        raise UserError(f"{where}: captions cell of {len(cell):,} characters")
    value = _parse(cell, where)
    if isinstance(value, (set, frozenset)) and all(isinstance(v, str) for v in value):
        value = sorted(value)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: captions cell must be a list, tuple or set of strings, got {type(value).__name__}")
    return list(value)


def _parse(cell: str, where: str) -> Any:
    """A JSON array as JSON reads it (its escapes, ``\\/`` and surrogate pairs, differ from Python's),
    anything else as a Python literal."""
    if cell.startswith("["):
        try:
            return json.loads(cell)
        except (json.JSONDecodeError, RecursionError):
            pass
    try:
        return ast.literal_eval(cell)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise UserError(f"{where}: captions cell is not a list literal "
                        f"({exc.__class__.__name__}: {str(exc)[:80]})") from None


def numbered_rows(path: Path | str, reader: Iterable[dict[str, Any]], first: int = 2
                  ) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, row) of a csv.DictReader, numbered from ``first`` (the header is line 1). A row the csv
    module cannot read (a cell longer than its field limit, a NUL byte) is a `UserError` naming the
    file and line, not a plugin crash naming neither."""
    rows = iter(reader)
    lineno = first
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as exc:
            raise UserError(f"{path}:{lineno}: cannot read this row as CSV ({exc}; a caption is at most "
                            f"{MAX_CAPTION_CHARS:,} characters)") from None
        yield lineno, row
        lineno += 1


def check_csv_header(path: Path | str, fields: Sequence[str] | None) -> list[str]:
    """The header's column names; a repeated (or empty) name is an error at line 1: csv.DictReader
    would keep only the last of two same-named columns, silently."""
    names = list(fields or [])
    if not names:
        raise UserError(f"{path}:1: no header line (an empty file?)")
    seen: dict[str, int] = {}
    for i, name in enumerate(names, 1):
        if not name.strip():
            raise UserError(f"{path}:1: column {i} of the header has no name")
        if name in seen:
            raise UserError(f"{path}:1: column {i} {name!r} repeats column {seen[name]}; "
                            "every column needs its own name")
        seen[name] = i
    return names


def check_csv_width(where: str, row: dict[Any, Any], width: int, hint: str = "an unquoted comma?") -> None:
    """A row (from csv.DictReader) with fewer or more cells than the header's ``width`` is an error
    at ``where`` (``file:line``), not shifted columns: DictReader fills a short row with None and
    puts extra cells under None."""
    got = sum(1 for k, v in row.items() if k is not None and v is not None) + len(row.get(None) or [])
    if got != width:
        raise UserError(f"{where}: {got} cells where the header has {width} ({hint})")
