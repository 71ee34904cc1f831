"""Local Hugging Face dataset snapshots as declarative sources: parquet files (images embedded as
bytes, or as paths beside the file) and ``imagefolder`` folders (images plus a metadata file), read
with pyarrow directly: no ``datasets`` dependency and no network.

A parquet row becomes a `Record` named ``file: row N`` (N counts rows across the file's row groups,
from 0), so a malformed row (a null caption, an image struct with neither bytes nor a path) is
refused naming the file and the row. An image cell is kept as the snapshot stores it (``{bytes,
path}``, raw bytes, or a path string) and turned into a medium by `embedded_image`.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, Iterable

from negharness.contracts.errors import UserError
from negharness.declarative.annotations import Record, read_records
from negharness.io.data_limits import bounded_rows, check_data_file
from negharness.io.parquet_files import parquet_batches

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff")
METADATA = ("metadata.jsonl", "metadata.csv", "metadata.parquet")


def read_parquet(path: Path) -> list[Record]:
    """Every row of a parquet file as a record (struct cells become dicts, lists stay lists), through
    the one parquet reader (`negharness.io.parquet_files`) and its caps, a batch at a time."""
    return _records(path, parquet_batches(path))


def read_arrow(path: Path) -> list[Record]:
    """Every row of an Arrow file as ``datasets``' ``save_to_disk`` writes it (the IPC stream format;
    VisMin's ``data/test/data-0000N-of-00003.arrow``, read by its eval.py with ``load_from_disk``), a
    record batch at a time (compressed buffers unpack as read: bounded by `bounded_rows`)."""
    import pyarrow as pa  # lazy: start-up time

    check_data_file(path)
    try:
        with pa.memory_map(str(path)) as source:
            try:
                return _records(path, bounded_rows(path, iter(pa.ipc.open_stream(source))))
            except pa.ArrowInvalid:  # the random-access file format
                reader = pa.ipc.open_file(source)
                return _records(path, bounded_rows(path, (reader.get_batch(i)
                                                         for i in range(reader.num_record_batches))))
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 (pyarrow raises several types for a damaged file)
        raise UserError(f"{path}: not a readable Arrow file ({type(exc).__name__}: {exc})") from None


def _records(path: Path, batches: Iterable[Any]) -> list[Record]:
    """The rows of record ``batches`` (each checked by `bounded_rows` before it is handed on) as records."""
    rows: list[Any] = []
    for batch in batches:
        rows.extend(batch.to_pylist())
    return [Record(row, f"{path}: row {i}") for i, row in enumerate(rows)]


def read_imagefolder(folder: Path) -> list[Record]:
    """An ``imagefolder`` snapshot: the rows of its metadata file (``file_name`` relative to the
    folder), or without one a row per image, labelled by its subfolder."""
    if not folder.is_dir():
        raise UserError(f"{folder}: an imagefolder source is a folder (its images and metadata file)")
    meta = next((folder / m for m in METADATA if (folder / m).is_file()), None)
    if meta is not None:
        fmt = meta.suffix.lstrip(".")
        recs = read_parquet(meta) if fmt == "parquet" else read_records(meta, fmt)
        for rec in recs:
            if not isinstance(rec.fields, dict) or not str(rec.fields.get("file_name") or "").strip():
                raise UserError(f"{rec.where}: no field 'file_name' (an imagefolder metadata row names its image)")
        return recs
    images = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    if not images:
        raise UserError(f"{folder}: no {', '.join(METADATA)} and no image files")
    return [Record({"file_name": p.relative_to(folder).as_posix(),
                    "label": p.parent.name if p.parent != folder else ""}, f"{folder}: {p.relative_to(folder)}")
            for p in images]


def embedded_image(rec: Record, field: str) -> tuple[str | None, str | None]:
    """(base64 of the image bytes, or None; path as stored, or None) of an image cell: a ``{bytes,
    path}`` struct as `datasets` writes it, raw bytes, or a path string. Neither is an error naming
    the row and field."""
    value = rec.get(field)
    data, path = (value.get("bytes"), value.get("path")) if isinstance(value, dict) else (value, None)
    if isinstance(data, str) and not isinstance(value, dict):  # a path string
        data, path = None, data
    if isinstance(data, (bytes, bytearray)) and data:
        return base64.b64encode(bytes(data)).decode("ascii"), None
    if isinstance(path, str) and path.strip():
        return None, path.strip()
    raise UserError(f"{rec.where}: field {field!r} holds no image (expected bytes, a path, or a "
                    f"{{bytes, path}} struct; found {type(value).__name__})")


def read_source(path: Path, fmt: str) -> list[Record] | None:
    """Records of the formats this module reads (``parquet``, ``imagefolder``, ``arrow``); None for the others."""
    if fmt == "parquet":
        return read_parquet(path)
    if fmt == "imagefolder":
        return read_imagefolder(path)
    if fmt == "arrow":
        return read_arrow(path)
    return None
