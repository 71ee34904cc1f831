"""Negated and composed query sets of a world split, built by the nT2VR builders from its captions.

Built once per (world version, seed, split, size) and kept beside the world's pixels under the
data root as JSON, so later runs only read them.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from negharness.atomic import atomic_write_json
from negharness.build_queries import build

from .shapes_media import load_world
from .shapes_world import WORLD_VERSION

BUILDER_VERSION = "1"


@lru_cache(maxsize=8)
def load_world_queries(seed: int, split: str, n: int, root: Path | None, query_seed: int = 0) -> dict:
    """{"negated": [(neg_id, text, original cap id, positive, negative)], "composed": [record, ...]}."""
    path = None
    if root is not None:
        path = Path(root) / "shapes_world" / f"v{WORLD_VERSION}-s{seed}-{split}-video-{n}.queries-b{BUILDER_VERSION}-q{query_seed}.json"
        if path.is_file():
            try:
                return json.loads(path.read_text())
            except (OSError, ValueError):
                pass
    world = load_world(seed, split, "video", n, root)
    built = build(list(zip(world.ids, world.captions)), seed=query_seed)
    data = {
        "negated": [[i, neg.text, i.rsplit("#", 1)[0], neg.remainder, neg.scope] for i, neg in built.negated],
        "composed": [q.as_record() for q in built.composed],
    }
    if path is not None:
        try:
            atomic_write_json(path, data)
        except OSError:
            pass
    return data
