"""negharness.api.hashing: the public face of `negharness.contracts.hashing` (stable hashes of JSON-able
objects, for cache keys and config ids (no torch: records import it)).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from negharness.contracts.hashing import hash_json as hash_json

__all__ = [
    "hash_json",
]
