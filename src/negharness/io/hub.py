"""Loading Hugging Face models by id or folder, with one clear error when that fails (offline, typo)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, TypeVar

from negharness.contracts.errors import UserError

T = TypeVar("T")


def load_or_explain(plugin: str, source: str, load: Callable[[], T], option: str = "-M model=FOLDER") -> T:
    """``load()``, or a UserError naming the plugin, the id or folder, and what to do offline."""
    try:
        return load()
    except (OSError, ValueError) as exc:
        where = "folder" if Path(source).exists() else "model id"
        raise UserError(f"{plugin}: cannot load {where} {source!r}: {str(exc).splitlines()[0]}. Offline, download it "
                        f"on a connected machine (huggingface-cli download) and pass {option}.") from exc
