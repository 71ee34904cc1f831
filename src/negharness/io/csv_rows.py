"""Checks every CSV reader of the harness shares (NegBench's files, YAML tasks' annotation files):
a header whose columns a dict cannot hold apart, and a row whose cell count is not the header's
(an unquoted comma), are errors naming the file and line, never shifted or dropped fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from negharness.api.errors import UserError


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


def check_csv_width(where: str, row: dict, width: int, hint: str = "an unquoted comma?") -> None:
    """A row (from csv.DictReader) with fewer or more cells than the header's ``width`` is an error
    at ``where`` (``file:line``), not shifted columns: DictReader fills a short row with None and
    puts extra cells under None."""
    got = sum(1 for k, v in row.items() if k is not None and v is not None) + len(row.get(None) or [])
    if got != width:
        raise UserError(f"{where}: {got} cells where the header has {width} ({hint})")
