"""Where negharness keeps data and caches: explicit option, else environment variable, else a per-user folder."""

from __future__ import annotations

import os
from pathlib import Path


def _user_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "negharness"


def cache_root(explicit: str | os.PathLike | None = None) -> Path:
    """Embedding cache and generated media: --cache-dir, else $NEGHARNESS_CACHE, else ~/.cache/negharness."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("NEGHARNESS_CACHE")
    return Path(env) if env else _user_cache()


def data_root(explicit: str | os.PathLike | None = None) -> tuple[Path, str]:
    """The folder tasks read their files from, and which rule chose it (for error messages)."""
    if explicit:
        return Path(explicit), "--data-root"
    env = os.environ.get("NEGHARNESS_DATA")
    if env:
        return Path(env), "$NEGHARNESS_DATA"
    return _user_cache() / "data", "the default data root"
