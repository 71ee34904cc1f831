"""Tasks on the embedded world: text-to-video and text-to-image retrieval with original captions.

No download: the world is generated from its seed (``-T world_seed=N``) on first use and kept
under the data root. Items with identical scene facts are all relevant to each other's captions.
"""

from __future__ import annotations

from negharness.media import MediaSet
from negharness.metrics import Relevance
from negharness.runner import EvalContext
from negharness.task import Task, TaskOptions, TaskResult

from .retrieval import RETRIEVAL_METRICS, evaluate_text_to_media
from .shapes_media import load_world
from .shapes_world import WORLD_VERSION

TEST_ITEMS = 500


class _ShapesRetrieval(Task):
    family = "shapes"
    version = "1"
    kind = "video"
    main_score = "MIR"
    metric_info = RETRIEVAL_METRICS
    leaderboard_metrics = ("R@1", "R@10", "MIR")
    citation = "negharness embedded world (procedurally generated)"

    def __init__(self, options: TaskOptions) -> None:
        super().__init__(options)
        extra = options.extra
        self.world_seed = int(extra.get("world_seed", 0))
        self.split_name = extra.get("split", "test")
        self.n_items = int(extra.get("n_items", TEST_ITEMS))
        if options.limit:
            self.n_items = min(self.n_items, options.limit)

    def config(self) -> dict:
        return {**super().config(), "world_version": WORLD_VERSION, "world_seed": self.world_seed,
                "split": self.split_name, "n_items": self.n_items}

    def evaluate(self, ctx: EvalContext) -> TaskResult:
        world = load_world(self.world_seed, self.split_name, self.kind, self.n_items, self.options.data_root)
        pixels = world.pixels
        media = MediaSet(
            key=f"shapes/v{WORLD_VERSION}/s{self.world_seed}/{self.split_name}/{self.kind}",
            kind=self.kind, ids=world.ids, load=lambda i: pixels[i], cheap=True,
            load_batch=lambda positions: pixels[positions])
        groups = world.groups
        query_ids, queries, query_groups = [], [], []
        for item_id, caps, group in zip(world.ids, world.captions, groups):
            for k, cap in enumerate(caps):
                query_ids.append(f"{item_id}#{k}")
                queries.append(cap)
                query_groups.append(group)
        relevance = Relevance.from_groups(query_groups, groups)
        return evaluate_text_to_media(ctx, query_ids, queries, relevance, media)


class ShapesT2VOriginal(_ShapesRetrieval):
    name = "shapes_t2v_original"
    kind = "video"
    modalities = frozenset({"text", "video"})
    description = "embedded world: text-to-video retrieval, original captions"


class ShapesT2IOriginal(_ShapesRetrieval):
    name = "shapes_t2i_original"
    kind = "image"
    modalities = frozenset({"text", "image"})
    description = "embedded world: text-to-image retrieval, original captions"
