"""The embedded world: procedurally generated scenes of coloured shapes, with exact scene facts.

Each item (a short video or a still image) is drawn from its own random stream,
``default_rng([seed, split, kind, index])``, so an item never changes when a split grows and
the same seed always gives the same world on every machine.

Actions are chosen so that a model that mean-pools normalised frame embeddings can see them:
*sliding* and *bouncing* leave a faint motion trail inside every frame (horizontal against
vertical), *blinking* shows the shape in half of the frames, *resting* does neither. Actions that
exist only in the order of frames (growing against shrinking) are deliberately absent: a pooled
model cannot separate them, and that is a temporal head's job, not the default tasks'.

Two items whose facts are identical (the same set of coloured shapes doing the same things) are
indistinguishable by design, so every caption of one is relevant to the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 50, 50),
    "green": (50, 190, 70),
    "blue": (60, 110, 240),
    "yellow": (235, 215, 50),
    "purple": (170, 70, 210),
    "white": (235, 235, 235),
}
SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "cross")
# action -> (third person, progressive, participle)
ACTIONS: dict[str, tuple[str, str, str]] = {
    "resting": ("rests", "is resting", "resting"),
    "sliding": ("slides", "is sliding", "sliding"),
    "bouncing": ("bounces", "is bouncing", "bouncing"),
    "blinking": ("blinks", "is blinking", "blinking"),
}
SPLITS = {"train": 0, "val": 1, "test": 2}
KINDS = {"video": 0, "image": 1}
WORLD_VERSION = "1"


@dataclass(frozen=True)
class ShapeObject:
    """One shape in a scene; ``action`` is None in still images."""

    colour: str
    shape: str
    action: str | None
    x: float  # centre, in pixels of a 32 px canvas
    y: float
    size: float  # half-extent in pixels
    phase: int  # blinking / bouncing phase
    direction: int  # +1 or -1 along the motion axis
    tint: tuple[int, int, int]  # small colour jitter, so colour names denote ranges

    @property
    def noun_phrase(self) -> str:
        return f"a {self.colour} {self.shape}"

    @property
    def fact(self) -> str:
        base = f"{self.colour} {self.shape}"
        return f"{base} {self.action}" if self.action else base


@dataclass(frozen=True)
class Scene:
    objects: tuple[ShapeObject, ...]

    @property
    def facts_key(self) -> str:
        """Canonical, order-free description: equal keys mean indistinguishable items."""
        return "|".join(sorted(o.fact for o in self.objects))


def _item_rng(seed: int, split: str, kind: str, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, SPLITS[split], KINDS[kind], index])


def _place(rng: np.random.Generator, n: int, canvas: int = 32) -> list[tuple[float, float]]:
    """Centres in separate cells of a 2x2 grid, so shapes and their trails rarely overlap."""
    cells = rng.permutation(4)[:n]
    half = canvas / 2
    out = []
    for c in cells:
        cx = (c % 2) * half + half / 2 + rng.uniform(-2.0, 2.0)
        cy = (c // 2) * half + half / 2 + rng.uniform(-2.0, 2.0)
        out.append((float(cx), float(cy)))
    return out


def make_scene(seed: int, split: str, kind: str, index: int) -> Scene:
    """Draw one scene: 1-2 acting shapes for a video, 1-3 still shapes for an image."""
    rng = _item_rng(seed, split, kind, index)
    if kind == "video":
        n = 1 if rng.random() < 0.3 else 2
    else:
        n = int(rng.choice([1, 2, 3], p=[0.3, 0.4, 0.3]))
    pairs: list[tuple[str, str]] = []
    while len(pairs) < n:
        pair = (str(rng.choice(list(COLOURS))), str(rng.choice(SHAPES)))
        if pair not in pairs:
            pairs.append(pair)
    objects = []
    for (colour, shape), (x, y) in zip(pairs, _place(rng, n)):
        action = str(rng.choice(list(ACTIONS))) if kind == "video" else None
        tint = tuple(int(v) for v in rng.integers(-18, 19, size=3))
        objects.append(
            ShapeObject(colour, shape, action, x, y, float(rng.uniform(3.6, 4.8)),
                        int(rng.integers(0, 2)), int(rng.choice([-1, 1])), tint)  # type: ignore[arg-type]
        )
    return Scene(tuple(objects))


def video_caption_forms(acting: Sequence[tuple[str, str]]) -> list[str]:
    """Every wording of a video with these (noun phrase, action) objects, in this order: the
    world's whole caption language (`negharness.world.tagger` enumerates it)."""
    nps = [np_ for np_, _ in acting]
    third, prog, part = zip(*(ACTIONS[a] for _, a in acting))
    if len(acting) == 1:
        return [f"{nps[0]} {prog[0]}", f"{nps[0]} {third[0]}", f"there is {nps[0]} {part[0]}"]
    return [
        f"{nps[0]} {prog[0]} and {nps[1]} {prog[1]}",
        f"{nps[0]} {third[0]} while {nps[1]} {third[1]}",
        f"there is {nps[0]} {part[0]} and {nps[1]} {part[1]}",
    ]


def image_caption_forms(nps: Sequence[str]) -> list[str]:
    """Every wording of an image with these noun phrases, in this order."""
    listed = nps[0] if len(nps) == 1 else ", ".join(nps[:-1]) + " and " + nps[-1]
    return [listed, f"there is {listed}", f"an image of {listed}"]


def _video_caption(rng: np.random.Generator, objs: Sequence[ShapeObject]) -> str:
    forms = video_caption_forms([(o.noun_phrase, str(o.action)) for o in objs])
    return str(forms[int(rng.integers(len(forms)))])


def _image_caption(rng: np.random.Generator, objs: Sequence[ShapeObject]) -> str:
    forms = image_caption_forms([o.noun_phrase for o in objs])
    return str(forms[int(rng.integers(len(forms)))])


def make_captions(scene: Scene, seed: int, split: str, kind: str, index: int, n: int = 3) -> list[str]:
    """Up to ``n`` distinct captions, each describing every object, in varied order and wording."""
    rng = np.random.default_rng([seed, SPLITS[split], KINDS[kind], index, 7])
    make = _video_caption if kind == "video" else _image_caption
    captions: list[str] = []
    for _ in range(n * 6):
        objs = [scene.objects[i] for i in rng.permutation(len(scene.objects))]
        cap = make(rng, objs)
        if cap not in captions:
            captions.append(cap)
        if len(captions) == n:
            break
    return captions


@dataclass(frozen=True)
class WorldSplit:
    """Scenes and captions of one split; the pixels come from `shapes_render`."""

    seed: int
    split: str
    kind: str
    ids: list[str]
    scenes: list[Scene]
    captions: list[list[str]]

    def relevance_groups(self) -> list[str]:
        return [s.facts_key for s in self.scenes]


def build_split(seed: int, split: str, kind: str, n: int) -> WorldSplit:
    if split not in SPLITS or kind not in KINDS:
        raise ValueError(f"unknown split/kind {split!r}/{kind!r}")
    scenes = [make_scene(seed, split, kind, i) for i in range(n)]
    captions = [make_captions(s, seed, split, kind, i) for i, s in enumerate(scenes)]
    ids = [f"{kind}{i:05d}" for i in range(n)]
    return WorldSplit(seed, split, kind, ids, scenes, captions)
