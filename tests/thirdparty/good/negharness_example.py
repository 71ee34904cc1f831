from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from negharness.api import EmbeddingModel, EvalContext, MetricInfo, ModelOptions, Task, TaskResult
from negharness.api.media import MediaSet
from negharness.api.scoring import Relevance, best_relevant_rank, per_query, query_scores, retrieval_metrics

COLOURS = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}


class MeanColourModel(EmbeddingModel):
    """Images: their mean colour. Texts: the colour they name."""
    name = "mean_colour"

    def describe(self) -> dict[str, Any]:  # everything that changes an embedding: it keys the cache
        return {"arch": "mean-colour", "version": 1}

    def modules(self) -> list[torch.nn.Module]:  # its torch modules (the host moves them to the device, in eval mode): none here
        return []

    def preprocess_image(self, image: Any) -> torch.Tensor:
        return torch.as_tensor(np.asarray(image)).permute(2, 0, 1).float() / 255

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        return F.normalize(pixels.mean(dim=(2, 3)), dim=-1)

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        rgb = [next((COLOURS[w] for w in t.split() if w in COLOURS), (1, 1, 1)) for t in texts]
        return F.normalize(torch.tensor(rgb, dtype=torch.float32), dim=-1)


class ExampleColours(Task[EvalContext]):
    """Three solid-colour images, one caption each: text-to-image R@1 and MIR."""
    name = "example_colours"
    family = "example"
    modalities = frozenset({"text", "image"})
    main_score = "R@1"
    # direction, printed format and unit ("percent" or "share" of 1: what exporters write the number in)
    metric_info = {"R@1": MetricInfo(True, ".1f", unit="percent"), "MIR": MetricInfo(True, ".3f", unit="share")}
    leaderboard_metrics = ("R@1", "MIR")

    def evaluate(self, ctx: EvalContext) -> TaskResult:
        names = list(COLOURS)
        images = [np.full((8, 8, 3), COLOURS[c], dtype=np.uint8) for c in names]
        media = MediaSet("example/colours", "image", names, lambda i: images[i], cheap=True)
        captions = [f"a {c} picture" for c in names]
        sim = query_scores(ctx, captions, ctx.embed_media(media))  # the model's scores, cached, batched
        ranks = best_relevant_rank(sim, Relevance.from_lists([[i] for i in range(len(names))], len(names)))
        metrics = retrieval_metrics(ranks, ks=(1,))
        # one value per query whose mean is the metric: the record's bootstrap intervals, `leaderboard --check`
        values = {"R@1": (ranks <= 1).double() * 100, "MIR": 1 / ranks.double()}
        return TaskResult({k: metrics[k] for k in ("R@1", "MIR")}, {"images": len(names)},
                          per_query=per_query(names, values))


def mean_colour(options: ModelOptions) -> MeanColourModel:
    """The model factory (its pyproject entry point); `options` holds -M values, unused here."""
    return MeanColourModel()
