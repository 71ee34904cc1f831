"""Negated and composed query sets of a world split, built by the nT2VR builders from its captions.

The default test split's sets ship with the package (``world/packaged/``), so the embedded
default runs with no NLTK data and no network; any other (seed, split, size) is built once and
kept beside the world's pixels under the data root. ``python -m negharness.world.queries``
rebuilds the shipped files and the tag table (tests check the query sets against a fresh build and the
table against the hash of what its build read, wherever NLTK data is present). Any other set is built without NLTK data too: the world tags its own captions
(`negharness.world.tagger`).
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, TypedDict

from negharness.api import UserError
from negharness.api.files import atomic_write_text, cached_json
from negharness.text.build_queries import BUILDER_VERSION, build, builder_identity

from .media import load_world
from .scenes import WORLD_VERSION
from .tagger import write_table

PACKAGED = Path(__file__).parent / "packaged"
SHIPPED = [(0, "test", 500, 0)]  # (world seed, split, items, query seed): the tasks' defaults


def _name(seed: int, split: str, n: int, query_seed: int) -> str:
    """A shipped set's file name (the rules' version only: the package holds one build of each)."""
    return f"v{WORLD_VERSION}-s{seed}-{split}-video-{n}.queries-b{BUILDER_VERSION}-q{query_seed}.json"


def _built_name(seed: int, split: str, n: int, query_seed: int) -> str:
    """A set built here and kept under the data root: named by the builders' whole identity (the rules and
    the lemminflect and NLTK releases they read: `builder_identity`), so an upgrade builds it again."""
    return f"v{WORLD_VERSION}-s{seed}-{split}-video-{n}.queries-b{builder_identity()}-q{query_seed}.json"


class WorldQueries(TypedDict):
    """A split's query sets, as shipped and cached (JSON)."""
    negated: list[list[str]]  # (neg_id, text, original cap id, positive, negative)
    composed: list[dict[str, Any]]  # `ComposedQuery.as_record` records


def build_world_queries(seed: int, split: str, n: int, root: Path | None, query_seed: int = 0) -> WorldQueries:
    """Run the builders (needs NLTK's tokenizer and tagger data) on the split's captions."""
    world = load_world(seed, split, "video", n, root)
    built = build(list(zip(world.ids, world.captions)), seed=query_seed, subjects=None)
    return {
        "negated": [[i, neg.text, i.rsplit("#", 1)[0], neg.remainder, neg.scope] for i, neg in built.negated],
        "composed": [q.as_record() for q in built.composed],
    }


@lru_cache(maxsize=8)
def load_world_queries(seed: int, split: str, n: int, root: Path | None, query_seed: int = 0) -> WorldQueries:
    """{"negated": [(neg_id, text, original cap id, positive, negative)], "composed": [record, ...]}."""
    name = _name(seed, split, n, query_seed)
    shipped = PACKAGED / name
    queries: WorldQueries
    if shipped.is_file():
        queries = json.loads(shipped.read_text(encoding="utf-8"))
    else:
        kept = None if root is None else Path(root) / "shapes_world" / _built_name(seed, split, n, query_seed)
        queries = cached_json(kept, lambda: build_world_queries(seed, split, n, root, query_seed))
    return queries


def write_packaged(root: Path | None = None) -> list[Path]:
    """Rebuild the shipped query sets (the command that reproduces them)."""
    paths = []
    for seed, split, n, query_seed in SHIPPED:
        data = build_world_queries(seed, split, n, root, query_seed)
        path = PACKAGED / _name(seed, split, n, query_seed)
        atomic_write_text(path, json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
        paths.append(path)
    return paths


def main() -> int:
    """Rebuild what ships: the world's tag table, then its default query sets (needs NLTK data)."""
    try:
        for written in [write_table(), *write_packaged()]:
            print(f"wrote {written}")
    except UserError as exc:  # no traceback from an entry point: one line, exit 2
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
