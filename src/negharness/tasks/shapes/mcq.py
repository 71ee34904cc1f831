"""The embedded world's MCQ-Neg: NegBench's question layout with exact ground truth.

Per test image: A is a shape present in it, N a coloured shape that is not. The correct answer,
first as in NegBench's COCO file, takes one of the three templates at random (seeded): positive
"this image features A", negative "this image does not feature N", hybrid "this image features A
but not N". The distractors follow NegBench: "N but not A" (hybrid), "N" (positive), "not A"
(negative). Ties count as wrong (see `negharness.scoring.mcq`).
"""

from __future__ import annotations

import random

from negharness.api import EvalContext, TaskResult, scoring  # scoring.X: resolved when the task runs (torch)
from negharness.api.scoring import MCQ_METRICS
from negharness.world.media import WorldData
from negharness.world.scenes import COLOURS, SHAPES

from .retrieval import _ShapesRetrieval

LAYOUT = ("*", "hybrid", "positive", "negative")


def _np(fact: str) -> str:
    return f"a {fact}"


def questions(world: WorldData, seed: int) -> list[tuple[tuple[str, ...], str]]:
    """(options, template of the correct answer) per item, from the items' exact facts."""
    out: list[tuple[tuple[str, ...], str]] = []
    everything = [f"{c} {s}" for c in COLOURS for s in SHAPES]
    for item_id, facts in zip(world.ids, world.groups):
        rng = random.Random(f"{seed}|{item_id}")
        present = facts.split("|")
        a = rng.choice(present)
        n = rng.choice([x for x in everything if x not in present])
        template = rng.choice(("positive", "negative", "hybrid"))
        correct = {"positive": f"this image features {_np(a)}",
                   "negative": f"this image does not feature {_np(n)}",
                   "hybrid": f"this image features {_np(a)} but not {_np(n)}"}[template]
        out.append(((correct, f"this image features {_np(n)} but not {_np(a)}", f"this image features {_np(n)}",
                     f"this image does not feature {_np(a)}"), template))
    return out


class ShapesMCQ(_ShapesRetrieval):
    name = "shapes_mcq"
    kind = "image"
    cluster = "image"
    modalities = frozenset({"text", "image"})
    description = "embedded world: NegBench-style MCQ with exact ground truth"
    main_score = "accuracy"
    metric_info = MCQ_METRICS
    leaderboard_metrics = ("accuracy", "acc_positive", "acc_negative", "acc_hybrid")

    def evaluate(self, ctx: EvalContext) -> TaskResult:
        world = self.world()
        qs = questions(world, self.options.seed)
        templates = [t for _, t in qs]
        return scoring.evaluate_mcq(ctx, self.media(world), list(range(len(qs))), [o for o, _ in qs], [0] * len(qs),
                                    templates, [tuple(t if x == "*" else x for x in LAYOUT) for t in templates])
