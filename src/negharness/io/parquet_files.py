"""The one parquet reader: YAML tasks' snapshots (`negharness.declarative.sources`) and NeIn's published
files read their rows through `parquet_batches`, with one set of caps (`negharness.io.data_limits`):
a regular file of at most `MAX_DATA_FILE_BYTES`, at most `MAX_DATA_RECORDS` rows by its metadata and
as decoded, and batches that unpack to at most `MAX_DATA_FILE_BYTES` in all (a dictionary-encoded
column makes a small file unpack to terabytes).

One set of buffers too: the file is read as a buffered stream without pre-buffering (pyarrow's
default, ``pre_buffer``, caches every range read until the file is closed, so memory grows with the
file: measured in perf/bench_nein_memory.py), so at most one row group is held by the reader and one
batch by the caller. A damaged file, whether pyarrow finds it at the footer or in a later row
group, is a `UserError` naming it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, Sequence

from negharness.contracts.errors import UserError
from negharness.io.data_limits import BATCH_ROWS, bounded_rows, check_data_file, check_row_count

STREAM_BUFFER_BYTES = 1 << 20  # the reader's read-ahead: one buffer, never the file


def parquet_batches(path: str | os.PathLike[str], columns: Sequence[str] | None = None, batch_rows: int = BATCH_ROWS,
                    where: str = "") -> Iterator[Any]:
    """pyarrow record batches of ``path`` (the named ``columns`` only, when given), ``batch_rows``
    rows at a time, each checked against the caps before it is handed on. A missing column, a file
    over the caps or a damaged one is a `UserError` naming the file (and ``where``: the task file's
    key that named it)."""
    try:
        import pyarrow.parquet as pq  # lazy: start-up time
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        raise UserError(f"{path}: reading parquet needs pyarrow (pip install pyarrow)") from None
    check_data_file(path, where)
    try:
        source = pq.ParquetFile(path, pre_buffer=False, buffer_size=STREAM_BUFFER_BYTES)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid (a ValueError), OSError, ...
        raise _damaged(path, exc) from None
    with source:
        check_row_count(path, source.metadata.num_rows, where)
        missing = [c for c in columns or () if c not in source.schema_arrow.names]
        if missing:
            raise UserError(f"{path}: no column(s) {', '.join(missing)}")
        batches = source.iter_batches(batch_size=batch_rows, columns=list(columns) if columns else None)
        try:
            yield from bounded_rows(path, batches)
        except UserError:
            raise
        except GeneratorExit:
            raise
        except Exception as exc:  # noqa: BLE001 - a damaged row group, found as it is decoded
            raise _damaged(path, exc) from None


def parquet_rows(path: str | os.PathLike[str], columns: Sequence[str] | None = None, batch_rows: int = BATCH_ROWS,
                 where: str = "") -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number from 0, row as a dict) of `parquet_batches`, one batch held at a time."""
    n = 0
    for batch in parquet_batches(path, columns, batch_rows, where):
        for row in batch.to_pylist():
            yield n, row
            n += 1


def _damaged(path: str | os.PathLike[str], exc: BaseException) -> UserError:
    return UserError(f"{Path(path)}: not a readable parquet file ({type(exc).__name__}: {exc})")
