"""negharness.api.files: Files a plugin reads and writes: data and cache roots, CSV rows and captions, atomic writes, content hashes.

A facade over the host modules that define these names (resolved on first use, so importing it
loads no torch); plugins import them from here, never from those modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from negharness.api.exports import resolver

_EXPORTS: dict[str, str] = {
    "RootGuard": "negharness.io.paths",
    "data_root": "negharness.io.paths",
    "cache_root": "negharness.io.paths",
    "require_regular": "negharness.io.paths",
    "check_csv_header": "negharness.io.csv_rows",
    "check_csv_width": "negharness.io.csv_rows",
    "numbered_rows": "negharness.io.csv_rows",
    "check_caption": "negharness.io.csv_rows",
    "literal_captions": "negharness.io.csv_rows",
    "cell_captions": "negharness.io.csv_rows",
    "MAX_CAPTION_CHARS": "negharness.io.csv_rows",
    "DATA_ENCODING": "negharness.io.csv_rows",
    "atomic_write": "negharness.store.atomic",
    "atomic_write_bytes": "negharness.store.atomic",
    "atomic_write_json": "negharness.store.atomic",
    "atomic_write_text": "negharness.store.atomic",
    "cached_json": "negharness.store.atomic",
    "hash_array": "negharness.store.content",
    "hash_json": "negharness.api.hashing",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = resolver(__name__, _EXPORTS)

if TYPE_CHECKING:  # what type checkers and IDEs read; the same names as _EXPORTS
    from negharness.api.hashing import hash_json
    from negharness.io.csv_rows import (
        DATA_ENCODING,
        MAX_CAPTION_CHARS,
        cell_captions,
        check_caption,
        check_csv_header,
        check_csv_width,
        literal_captions,
        numbered_rows,
    )
    from negharness.io.paths import RootGuard, cache_root, data_root, require_regular
    from negharness.store.atomic import (
        atomic_write,
        atomic_write_bytes,
        atomic_write_json,
        atomic_write_text,
        cached_json,
    )
    from negharness.store.content import hash_array
