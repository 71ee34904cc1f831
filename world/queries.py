"""Negated and composed query sets of a world split, built by the nT2VR builders from its captions.

Built once per (world version, seed, split, size) and kept beside the world's pixels under the
data root as JSON, so later runs only read them.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from negharness.atomic import cached_json
from negharness.text.build_queries import build

from .media import load_world
from .scenes import WORLD_VERSION

BUILDER_VERSION = "1"


@lru_cache(maxsize=8)
def load_world_queries(seed: int, split: str, n: int, root: Path | None, query_seed: int = 0) -> dict:
    """{"negated": [(neg_id, text, original cap id, positive, negative)], "composed": [record, ...]}."""
    name = f"v{WORLD_VERSION}-s{seed}-{split}-video-{n}.queries-b{BUILDER_VERSION}-q{query_seed}.json"

    def make() -> dict:
        world = load_world(seed, split, "video", n, root)
        built = build(list(zip(world.ids, world.captions)), seed=query_seed)
        return {
            "negated": [[i, neg.text, i.rsplit("#", 1)[0], neg.remainder, neg.scope] for i, neg in built.negated],
            "composed": [q.as_record() for q in built.composed],
        }

    return cached_json(None if root is None else Path(root) / "shapes_world" / name, make)
