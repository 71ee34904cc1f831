"""Training data with negation, from the embedded world: what the BNL/SNL and NegBench trainers consume.

Per item: its captions; for each caption the negator's soft negative q- (nT2VR; built once and kept
under the data root, captions without a candidate are left out of the auxiliary loss); captions
with *true* negations (NegBench's CC12M-NegCap idea: a caption that says what is absent is a
positive for the item); and a NegBench-style MCQ with exact answers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from negharness.atomic import cached_json
from negharness.text.negator import negate
from negharness.world.media import WorldData, load_world
from negharness.world.scenes import ACTIONS, COLOURS, SHAPES, WORLD_VERSION



@dataclass
class Stream:
    """One kind of media (videos or still images) with everything the losses need."""

    kind: str
    pixels: np.ndarray
    groups: list[str]
    captions: list[list[str]]
    negated: list[list[str | None]]  # per caption: the negator's soft negative, or None
    true_negations: list[list[str]]
    mcq: list[tuple[tuple[str, ...], int]]  # (options, correct index)


def _soft_negatives(world: WorldData, root: Path | None, seed: int, split: str, kind: str) -> list[list[str | None]]:
    def make() -> list[list[str | None]]:
        negs = [[(negate(c, seed=seed) or [None])[0] for c in caps] for caps in world.captions]
        return [[n.text if n is not None and not n.rule.startswith("remove") else None for n in caps] for caps in negs]

    name = f"v{WORLD_VERSION}-s{seed}-{split}-{kind}-{len(world.ids)}.negator.json"
    return cached_json(None if root is None else Path(root) / "shapes_world" / name, make)


def _progressive(action: str) -> str:
    return ACTIONS[action][2]


def true_negations(facts: str, caption: str, rng: random.Random, kind: str) -> list[str]:
    """Captions that stay true: an absent shape, and (videos) an action an object is not doing."""
    present = facts.split("|")
    shapes_present = {" ".join(f.split()[:2]) for f in present}
    absent = rng.choice([f"{c} {s}" for c in COLOURS for s in SHAPES if f"{c} {s}" not in shapes_present])
    out = [f"{caption} and there is no {absent}", f"there is no {absent} but {caption}"]
    if kind == "video":
        fact = rng.choice(present).split()
        obj, act = " ".join(fact[:2]), fact[2]
        other = rng.choice([a for a in ACTIONS if a != act])
        out.append(f"a {obj} is {_progressive(act)} and not {_progressive(other)}")
    return out


def mcq(facts: str, rng: random.Random, noun: str) -> tuple[tuple[str, ...], int]:
    """NegBench layout: correct first (positive / negative / hybrid), then "N but not A", "N", "not A"."""
    present = facts.split("|")
    a = rng.choice(present)
    n = rng.choice([f"{c} {s}" for c in COLOURS for s in SHAPES if f"{c} {s}" not in {" ".join(p.split()[:2]) for p in present}])
    correct = rng.choice([f"this {noun} features a {a}", f"this {noun} does not feature a {n}",
                          f"this {noun} features a {a} but not a {n}"])
    return (correct, f"this {noun} features a {n} but not a {a}", f"this {noun} features a {n}",
            f"this {noun} does not feature a {a}"), 0


def build_stream(seed: int, split: str, kind: str, n: int, root: Path | None, query_seed: int = 0) -> Stream:
    world = load_world(seed, split, kind, n, root)
    rng = random.Random(f"{query_seed}|{split}|{kind}")
    return Stream(
        kind, world.pixels, world.groups, world.captions, _soft_negatives(world, root, seed, split, kind),
        [true_negations(f, caps[0], rng, kind) for f, caps in zip(world.groups, world.captions)],
        [mcq(f, rng, "video" if kind == "video" else "image") for f in world.groups])
