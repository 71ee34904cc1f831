"""The bounds a data file named by a task file is held to: a task file may come from anywhere, and
what it makes the harness do must stay bounded in memory and time whatever its files hold.

- every annotation file is a regular file (a FIFO blocks a read, a device never ends one) of at most
  `MAX_DATA_FILE_BYTES`, checked before it is opened, and of at most `MAX_DATA_RECORDS` rows: the whole
  file becomes records in memory (a parquet or Arrow file: what it unpacks to, batch by batch as decoded);
- JSON nested deeper than Python's parser goes is refused naming the file, not a bare RecursionError;
- a choice task's scores are laid out (rows, widest row): the bound is that layout's memory,
  rows x width at most `MAX_SCORE_CELLS` (`check_score_layout`), not a count per row. So a zero-shot
  classification written as a choice task (1,000 options a row, ImageNet's 50,000 rows: 5 x 10^7
  cells) stands, and one 100,000-caption row, which a 1 MB list cell can hold, still makes a file of
  a few thousand rows refused: it would make every row that wide;
- a group's item is laid out (items, widest media, widest captions), cubic in its width, so there an
  item holds at most `MAX_ITEM_WIDTH` media and as many captions (`check_item_width`).
The largest real files are far below these (NegBench's CSVs a few MB, VLMEvalKit TSVs with base64
images some hundred MB; options per row 2 to 10).
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Iterator, Sequence

from negharness.contracts.errors import UserError
from negharness.io.paths import require_size_at_most

MAX_DATA_FILE_BYTES = 4 * 2**30
MAX_ITEM_WIDTH = 100  # media or captions of one group item (its scores: items x width x width)
MAX_SCORE_CELLS = 2**27  # a choice task's (rows x widest row) float32 scores: 512 MiB
MAX_DATA_RECORDS = 10_000_000  # rows of one file (COCO's captions: 25,000; NegBench's largest: 200,000)
BATCH_ROWS = 1024  # rows of a parquet file decoded at a time, each batch checked before the next


def check_data_file(path: str | os.PathLike[str], where: str = "") -> int:
    """The size of ``path``, a regular file of at most `MAX_DATA_FILE_BYTES`, or a `UserError`
    naming it (and ``where``: the task file's key that named it)."""
    return require_size_at_most(path, MAX_DATA_FILE_BYTES, where, "a task's data file",
                                " (split it, or keep its images out of the file)")


def check_row_count(path: str | os.PathLike[str], rows: int, where: str = "") -> None:
    """A `UserError` naming ``path`` when it holds more than `MAX_DATA_RECORDS` rows (each becomes a
    Python object: a 4 GiB file of tiny rows would be billions)."""
    if rows > MAX_DATA_RECORDS:
        raise UserError(f"{where or os.fspath(path)}: more than {MAX_DATA_RECORDS:,} rows; a task's data file "
                        f"may hold at most that many")


def bounded_rows(path: str | os.PathLike[str], batches: Iterable[Any]) -> Iterator[Any]:
    """Arrow record ``batches`` (parquet's, an IPC file's) as they are decoded, refused once their rows
    pass `MAX_DATA_RECORDS` or what they unpack to passes `MAX_DATA_FILE_BYTES`: compressed or
    dictionary-encoded columns make a small file unpack to terabytes, and the file's own metadata,
    written by whoever made it, is not to be trusted about that."""
    rows = unpacked = 0
    for batch in batches:
        rows += batch.num_rows
        unpacked += batch.nbytes
        check_row_count(path, rows)
        if unpacked > MAX_DATA_FILE_BYTES:
            raise UserError(f"{os.fspath(path)} unpacks to more than {MAX_DATA_FILE_BYTES:,} bytes; a task's "
                            "data file may hold at most that")
        yield batch


def check_item_width(n: int, what: str, where: str) -> None:
    """A `UserError` at ``where`` when one item holds more than `MAX_ITEM_WIDTH` ``what``."""
    if n > MAX_ITEM_WIDTH:
        raise UserError(f"{where}: {n:,} {what} in one item; an item may hold at most {MAX_ITEM_WIDTH} "
                        "(each item's scores are laid out as wide as the widest)")


def check_score_layout(widths: Sequence[int], what: str, wheres: Sequence[str]) -> None:
    """A `UserError` at the widest row (``wheres[i]`` names row i) when rows x the widest row's
    ``what`` passes `MAX_SCORE_CELLS`: every row's scores are laid out as wide as the widest, so it
    is the widest row that makes a task too big, however few rows are that wide."""
    if not widths:
        return
    widest = max(range(len(widths)), key=widths.__getitem__)
    cells = len(widths) * widths[widest]
    if cells > MAX_SCORE_CELLS:
        raise UserError(f"{wheres[widest]}: {widths[widest]:,} {what} in one row make the task's scores "
                        f"{len(widths):,} rows x {widths[widest]:,} = {cells:,} cells, over the {MAX_SCORE_CELLS:,} "
                        f"a task may lay out (every row's scores are as wide as the widest; split the file or "
                        f"narrow that row)")


def too_deep(path: str | os.PathLike[str], where: str = "", what: str = "JSON") -> UserError:
    """The error for data nested deeper than the parser goes (Python raises RecursionError)."""
    return UserError(f"{where or os.fspath(path)}: {what} nested too deeply to read (a list or object "
                     "inside thousands of others); no annotation file needs that")
