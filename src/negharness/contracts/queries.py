"""The query-builder contract: a caption file in, negated / composed query files out.

`negharness build-queries` is the host's command; what it builds comes from a plugin registered as
kind ``query_builder`` (the built-in one writes nT2VR's formats), so the host imports no text code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class QueryBuildOptions:
    captions: Path  # the input caption file
    out: Path  # folder the query files go to
    name: str | None = None  # collection name (default: from the file name)
    id_column: str | None = None
    caption_column: str | None = None
    mode: str = "one"  # one negated variant per caption (seeded) or all
    seed: int = 0
    per_item: int | None = None  # cap on composed queries per item


@dataclass
class QueryBuild:
    """What a builder made: counts to print (the paper's Table 1), examples by kind, files written."""

    counts: dict[str, float]
    examples: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # kind -> [(id, text)]
    paths: list[Path] = field(default_factory=list)
