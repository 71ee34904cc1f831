"""The embedded world's NeIn pairs: a test image (the ground truth) and the same scene with one more
shape (the editing input), with a negative instruction about the added shape."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Callable

from PIL import Image

from negharness.api import OptionSpec, TaskOptions
from negharness.world.render import CANVAS, render_image
from negharness.world.scenes import COLOURS, SHAPES, Scene, make_scene

from .tasks import EditSample, NeInTask, instruction_for


def _free_cell(scene: Scene, rng: random.Random) -> tuple[float, float]:
    """The centre of a 2x2 grid cell that no shape of the scene occupies."""
    half = CANVAS / 2
    taken = {(int(o.x // half), int(o.y // half)) for o in scene.objects}
    cells = [(cx, cy) for cx in (0, 1) for cy in (0, 1) if (cx, cy) not in taken]
    cx, cy = rng.choice(cells)
    return cx * half + half / 2, cy * half + half / 2


def editing_pairs(seed: int, split: str, n: int, root: Path | None, query_seed: int = 0) -> list[EditSample]:
    out = []
    for i in range(n):
        scene = make_scene(seed, split, "image", i)
        rng = random.Random(f"{query_seed}|nein|{i}")
        present = {(o.colour, o.shape) for o in scene.objects}
        colour, shape = rng.choice([(c, s) for c in COLOURS for s in SHAPES if (c, s) not in present])
        x, y = _free_cell(scene, rng)
        added = replace(scene.objects[0], colour=colour, shape=shape, x=x, y=y, tint=(0, 0, 0))
        with_added = replace(scene, objects=scene.objects + (added,))
        target = f"{colour} {shape}"
        out.append(EditSample(
            id=f"image{i:05d}", instruction=instruction_for(target, i), target=target,
            objects=[f"{o.colour} {o.shape}" for o in scene.objects],
            load_input=_drawn(with_added), load_truth=_drawn(scene)))
    return out


def _drawn(scene: Scene) -> Callable[[], Image.Image]:
    """What draws ``scene`` when a sample's image is asked for (one per scene: a lambda in a loop would see the last)."""
    return lambda: Image.fromarray(render_image(scene))


class ShapesNeIn(NeInTask):
    name = "nein_shapes"
    description = "embedded world: remove the shape a negative instruction names (exact detector)"
    default_detector = "shapes_exact"
    default_clip = "shapes_clip"
    default_dino = "none"
    task_options = {**NeInTask.task_options, "n_items": OptionSpec(int, 200, "samples", minimum=1)}

    def __init__(self, options: TaskOptions) -> None:
        super().__init__(options)
        self.n_items = min(self.opts["n_items"], options.limit or 10**9)

    def samples(self) -> list[EditSample]:
        return editing_pairs(0, "test", self.n_items, self.options.data_root, self.options.seed)
