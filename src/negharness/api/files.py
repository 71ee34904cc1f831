"""negharness.api.files: Files a plugin reads and writes: data and cache roots, CSV rows and captions,
atomic writes, content hashes.

A facade over the host modules that define these names; plugins import them from here, never from
those modules (importing it loads what they load: torch, for most)."""

from __future__ import annotations

from negharness.contracts.hashing import hash_json as hash_json
from negharness.io.csv_rows import (
    DATA_ENCODING as DATA_ENCODING,
    MAX_CAPTION_CHARS as MAX_CAPTION_CHARS,
    cell_captions as cell_captions,
    check_caption as check_caption,
    check_csv_header as check_csv_header,
    check_csv_width as check_csv_width,
    literal_captions as literal_captions,
    numbered_rows as numbered_rows,
)
from negharness.io.parquet_files import parquet_rows as parquet_rows
from negharness.io.paths import (
    RootGuard as RootGuard,
    cache_root as cache_root,
    data_root as data_root,
    require_regular as require_regular,
)
from negharness.io.atomic_files import (
    atomic_write as atomic_write,
    atomic_write_bytes as atomic_write_bytes,
    atomic_write_json as atomic_write_json,
    atomic_write_text as atomic_write_text,
    cached_json as cached_json,
)
from negharness.store.content import hash_array as hash_array
from negharness.store.content import hash_open_file as hash_open_file

__all__ = [
    "DATA_ENCODING", "MAX_CAPTION_CHARS", "RootGuard", "atomic_write", "atomic_write_bytes",
    "atomic_write_json", "atomic_write_text", "cache_root", "cached_json", "cell_captions",
    "check_caption", "check_csv_header", "check_csv_width", "data_root", "hash_array", "hash_json",
    "hash_open_file",
    "literal_captions", "numbered_rows", "parquet_rows", "require_regular",
]
