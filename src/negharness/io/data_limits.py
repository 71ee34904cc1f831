"""The bounds a data file named by a task file is held to: a task file may come from anywhere, and
what it makes the harness do must stay bounded in memory and time whatever its files hold.

- every annotation file is a regular file (a FIFO blocks a read, a device never ends one) of at most
  `MAX_DATA_FILE_BYTES`, checked before it is opened, and of at most `MAX_DATA_RECORDS` rows: the whole
  file becomes records in memory (a parquet or Arrow file: what it unpacks to, batch by batch as decoded);
- JSON nested deeper than Python's parser goes is refused naming the file, not a bare RecursionError;
- an item (a choice row's options, a group's media or captions) holds at most `MAX_ITEM_WIDTH` of
  each: scores are laid out (items, widest media, widest captions), so one 100,000-caption row, which
  a 1 MB list cell can hold, would make every item that wide (rows x 10^5 scores).
The largest real files are far below these (NegBench's CSVs a few MB, VLMEvalKit TSVs with base64
images some hundred MB; options per row 2 to 10).
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Iterator

from negharness.contracts.errors import UserError
from negharness.io.paths import require_size_at_most

MAX_DATA_FILE_BYTES = 4 * 2**30
MAX_ITEM_WIDTH = 100
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


def too_deep(path: str | os.PathLike[str], where: str = "", what: str = "JSON") -> UserError:
    """The error for data nested deeper than the parser goes (Python raises RecursionError)."""
    return UserError(f"{where or os.fspath(path)}: {what} nested too deeply to read (a list or object "
                     "inside thousands of others); no annotation file needs that")
