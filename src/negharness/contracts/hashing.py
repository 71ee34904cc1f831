"""Stable hashes of JSON-able objects, for cache keys and config ids (no torch: records import it)."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def hash_json(obj: Any, length: int = 16) -> str:
    """Stable short hash of a JSON-able object (sorted keys), for cache keys and config ids."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]
