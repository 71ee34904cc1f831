"""The embedded world as a training set (``--task shapes``): no download, exact negation data.

Per item: its captions; for each caption the negator's soft negative q- (nT2VR; built once and kept
under the data root, captions without a candidate are left out of the auxiliary loss); captions
with *true* negations (NegBench's CC12M-NegCap idea: a caption that says what is absent is a
positive for the item); and a NegBench-style MCQ with exact answers. Two streams (videos and still
images) and a validation split of videos. ``-T n_train=6000 -T n_val=500 -T world_seed=0``.
"""

from __future__ import annotations

import random
from pathlib import Path

from negharness.api import OptionSpec, TrainSetOptions, TrainStream, TrainingSet, takes_options
from negharness.api.files import cached_json, hash_json
from negharness.text.build_queries import builder_identity
from negharness.text.negator import negate
from negharness.world.media import WorldData, load_world
from negharness.world.scenes import ACTIONS, COLOURS, SHAPES, WORLD_VERSION

OPTIONS = {
    "n_train": OptionSpec(int, 6000, "training items of each kind (video and image)", minimum=1),
    "n_val": OptionSpec(int, 500, "validation items", minimum=1),
    "world_seed": OptionSpec(int, 0, "the world's seed"),
}


def _soft_negatives(world: WorldData, root: Path | None, seed: int, split: str, kind: str) -> list[list[str | None]]:
    soft: dict[str, str | None] = {}  # caption -> its q-: the world's captions repeat (36k, 17k distinct)

    def one(caption: str) -> str | None:
        if caption not in soft:
            neg = next(iter(negate(caption, seed=seed)), None)
            soft[caption] = neg.text if neg is not None and not neg.rule.startswith("remove") else None
        return soft[caption]

    def make() -> list[list[str | None]]:
        return [[one(c) for c in caps] for caps in world.captions]

    name = f"v{WORLD_VERSION}-s{seed}-{split}-{kind}-{len(world.ids)}-b{builder_identity()}.negator.json"
    negatives: list[list[str | None]] = cached_json(None if root is None else Path(root) / "shapes_world" / name, make)
    return negatives


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
        out.append(f"a {obj} is {ACTIONS[act][2]} and not {ACTIONS[other][2]}")
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


def build_stream(seed: int, split: str, kind: str, n: int, root: Path | None, query_seed: int = 0) -> TrainStream:
    world = load_world(seed, split, kind, n, root)
    rng = random.Random(f"{query_seed}|{split}|{kind}")
    pixels = world.pixels
    return TrainStream(
        f"shapes-{split}-{kind}", kind, list(world.ids), lambda i: pixels[i], world.captions, list(world.groups),
        _soft_negatives(world, root, seed, split, kind),
        [true_negations(f, caps[0], rng, kind) for f, caps in zip(world.groups, world.captions)],
        [mcq(f, rng, "video" if kind == "video" else "image") for f in world.groups])


@takes_options(OPTIONS)
def shapes(options: TrainSetOptions) -> TrainingSet:
    values = options.values
    seed, n_train, n_val = values["world_seed"], values["n_train"], values["n_val"]
    root = options.data_root
    streams = [build_stream(seed, "train", kind, n_train, root) for kind in ("video", "image")]
    val = build_stream(seed, "val", "video", n_val, root)
    digest = hash_json({"world": WORLD_VERSION, "seed": seed, "n_train": n_train, "n_val": n_val,
                        "negator": builder_identity()})
    return TrainingSet("shapes", streams, val, digest, unit="item")  # one sample per item, as the world's earlier runs
