"""Tasks on the embedded world: text-to-video and text-to-image retrieval with original captions.

No download: the world is generated from its seed (``-T world_seed=N``) on first use and kept
under the data root. Items with identical scene facts are all relevant to each other's captions.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

# the facades' torch-bound names (media sets, scorers) are used as media_api.X, scoring.X: resolved when a
# task runs, so building a task (the run's checks before torch loads) imports no torch
from negharness.api import EvalContext, OptionSpec, Task, TaskOptions, TaskResult, scoring
from negharness.api import media as media_api
from negharness.api.files import hash_array, hash_json
from negharness.api.media import FrameSampling
from negharness.api.scoring import NEGATED_METRICS, QRELS_OPTION, TEXT_TO_MEDIA_METRICS
from negharness.world.media import WorldData, kept_world_file, load_world
from negharness.world.queries import WorldQueries, load_world_queries
from negharness.world.scenes import WORLD_VERSION

if TYPE_CHECKING:
    from negharness.api.media import MediaSet
    from negharness.api.scoring import QuerySet

TEST_ITEMS = 500
MAX_ITEMS = 100_000
WORLD_FPS = 2.0  # the world's clips are read as frames 0.5 s apart, the rate of nT2VR's extracted frames


class _ShapesRetrieval(Task[EvalContext]):
    family = "shapes"
    version = "1"
    kind = "video"
    main_score = "MIR"
    metric_info = TEXT_TO_MEDIA_METRICS
    leaderboard_metrics: tuple[str, ...] = ("R@1", "R@10", "MIR")
    citation = "negharness embedded world (procedurally generated)"
    task_options = {
        "world_seed": OptionSpec(int, 0, "seed the world is generated from"),
        "split": OptionSpec(str, "test", "which split of the world", choices=("train", "val", "test")),
        "n_items": OptionSpec(int, TEST_ITEMS, "items of the split to evaluate on (ids have five digits; 100,000 "
                              "clips hold 1.2 GB of pixels in memory)", minimum=1, maximum=MAX_ITEMS),
    }

    def __init__(self, options: TaskOptions) -> None:
        super().__init__(options)
        self.world_seed = self.opts["world_seed"]
        self.split_name = self.opts["split"]
        self.n_items = self.opts["n_items"]
        if options.limit:
            self.n_items = min(self.n_items, options.limit)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "world_version": WORLD_VERSION, "world_seed": self.world_seed,
                "split": self.split_name, "n_items": self.n_items}

    def world(self) -> WorldData:
        return load_world(self.world_seed, self.split_name, self.kind, self.n_items, self.options.data_root)

    def data_files(self) -> list[Path]:
        """The split's file under the data root, which every later run reads: made here if absent (so a
        record hashes what its numbers rest on), and a file rewritten since is another world. None where
        the data root cannot be written (the split then lives in memory, generated from the code)."""
        path = kept_world_file(self.world_seed, self.split_name, self.kind, self.n_items, self.options.data_root)
        return [path] if path is not None else []

    def queries(self) -> WorldQueries:
        """The split's negated and composed query sets (shipped for the default, else built once)."""
        return load_world_queries(self.world_seed, self.split_name, self.n_items, self.options.data_root,
                                  self.options.seed)

    def query_count(self) -> int | None:
        """Every caption of every item (`originals`; counted without building its query set, which loads torch)."""
        return sum(len(caps) for caps in self.world().captions)

    def media(self, world: WorldData, ctx: EvalContext | None = None) -> MediaSet:
        """The split's pixels. For videos, the model's frame sampling (``-M frames=...``) picks frames
        from each clip, as from any video; without it every frame is kept (``uniform:<frames>``) and
        the key is the one it always was, so cached embeddings stay valid."""
        pixels, keys = world.pixels, world.row_keys
        key = f"shapes/v{WORLD_VERSION}/s{self.world_seed}/{self.split_name}/{self.kind}"
        if self.kind == "video" and ctx is not None:
            frames = pixels.shape[1]
            sampling = ctx.frame_sampling(FrameSampling("uniform", frames))
            idx = sampling.indices(frames, WORLD_FPS)
            if idx.tolist() != list(range(frames)):
                pixels, key = pixels[:, idx], f"{key}/{sampling.key}"
                keys = [hash_array(clip) for clip in pixels]
        return media_api.MediaSet(key=key, kind=self.kind, ids=world.ids, load=lambda i: pixels[i], cheap=True,
                                  load_batch=lambda positions: pixels[positions], content_keys=keys)

    def originals(self, world: WorldData) -> QuerySet:
        """Every caption of every item; relevant = the items with identical scene facts."""
        ids, texts, groups, source = [], [], [], []
        for pos, (item_id, caps, group) in enumerate(zip(world.ids, world.captions, world.groups)):
            for k, cap in enumerate(caps):
                ids.append(f"{item_id}#enc#{k}")
                texts.append(cap)
                groups.append(group)
                source.append(pos)
        return scoring.QuerySet(ids, texts, scoring.Relevance.from_groups(groups, world.groups), source=source)

    def evaluate(self, ctx: EvalContext) -> TaskResult:
        world = self.world()
        qs = self.originals(world)
        return scoring.evaluate_text_to_media(ctx, qs.ids, qs.texts, qs.relevance, self.media(world, ctx),
                                              qrels=scoring.task_qrels(self.opts), limited=bool(self.options.limit),
                                              clusters=[world.ids[s] for s in qs.source or ()])


class _BuiltQueries(_ShapesRetrieval):
    """World tasks whose queries the text builders make: the query set's content is part of the
    config, so a builder change (new wording, other targets) reruns their records, never reuses them.
    Listed first among a task's bases, so its `config` wraps the task's own."""

    def config(self) -> dict[str, Any]:
        return {**super().config(), "queries": hash_json(self.queries())}


class ShapesT2VOriginal(_ShapesRetrieval):
    task_options = {**_ShapesRetrieval.task_options, **QRELS_OPTION}
    name = "shapes_t2v_original"
    kind = "video"
    cluster = "video"  # an item's captions are queries about one clip
    modalities = frozenset({"text", "video"})
    description = "embedded world: text-to-video retrieval, original captions"


class ShapesT2IOriginal(_ShapesRetrieval):
    task_options = {**_ShapesRetrieval.task_options, **QRELS_OPTION}
    name = "shapes_t2i_original"
    kind = "image"
    cluster = "image"
    modalities = frozenset({"text", "image"})
    description = "embedded world: text-to-image retrieval, original captions"


class ShapesT2VNegated(_BuiltQueries, ShapesT2VOriginal):
    """Negated captions from the nT2VR negator; the source video is the one each must push down."""

    name = "shapes_t2v_negated"
    description = "embedded world: negated captions, ΔR@K / ΔMIR against their originals"
    main_score = "ΔMIR"
    metric_info = NEGATED_METRICS
    leaderboard_metrics = ("ΔR@1", "ΔMIR")
    task_options = _ShapesRetrieval.task_options  # deltas against one source video: no extra judgements

    def query_count(self) -> int | None:
        return len(self.queries()["negated"])

    def evaluate(self, ctx: EvalContext) -> TaskResult:
        world = self.world()
        originals = self.originals(world)
        queries = self.queries()
        where = {c: k for k, c in enumerate(originals.ids)}
        position = {v: i for i, v in enumerate(world.ids)}
        negs = queries["negated"]
        sources = [[position[n[2].split("#", 1)[0]]] for n in negs]
        negated = scoring.QuerySet([n[0] for n in negs], [n[1] for n in negs],
                                   scoring.Relevance.from_lists(sources, len(world.ids)),
                                   [(n[3], n[4]) for n in negs])
        return scoring.evaluate_negated(ctx, self.media(world, ctx), originals, negated, [where[n[2]] for n in negs])


class ShapesT2VComposed(_BuiltQueries, ShapesT2VOriginal):
    """Composed "subject does A and not B" queries; matched videos found by the composer's text retrieval."""

    name = "shapes_t2v_composed"
    description = "embedded world: composed queries with several relevant videos"
    cluster = "row"  # no query has one source clip: each is its own cluster
    leaderboard_metrics = ("R@1", "R@10", "MIR", "mAP")

    def query_count(self) -> int | None:
        return len(self.queries()["composed"])

    def evaluate(self, ctx: EvalContext) -> TaskResult:
        world = self.world()
        records = self.queries()["composed"]
        position = {v: i for i, v in enumerate(world.ids)}
        lists = [[position[v] for v in r["video_ids"]] for r in records]
        relevance = scoring.Relevance.from_lists(lists, len(world.ids))
        return scoring.evaluate_text_to_media(
            ctx, [r["cap_id"] for r in records], [r["caption"] for r in records], relevance, self.media(world, ctx),
            [(r["positive"], r["negative"]) for r in records], several=True, qrels=scoring.task_qrels(self.opts),
            limited=bool(self.options.limit))
