"""A model that raises in the middle of a run (its image encoder), and two tasks: one that needs
only texts (finishes) and one that needs images (fails), to test what the user sees and keeps."""
import torch
import torch.nn.functional as F

from negharness.api import EmbeddingModel
from negharness.api import MetricInfo, Task, TaskResult
from negharness.discovery.hookspecs import hookimpl
from negharness.io.media import MediaSet


class BoomModel(EmbeddingModel):
    name = "boom"

    def modules(self):
        return []  # no torch modules

    def describe(self):
        return {"arch": "boom", "version": 1}

    def preprocess_image(self, image):
        return torch.zeros(3, 2, 2)

    def encode_image(self, pixels):
        raise RuntimeError("kaboom in encode_image")

    def encode_text(self, texts):
        return F.normalize(torch.ones(len(texts), 4), dim=-1)


class _BoomTask(Task):
    family = "boom"
    main_score = "n"
    metric_info = {"n": MetricInfo(True, ".0f")}


class BoomTexts(_BoomTask):
    name = "boom_texts"
    modalities = frozenset({"text"})

    def evaluate(self, ctx):
        return TaskResult({"n": float(len(ctx.embed_texts(["a", "b"])))}, {"texts": 2})


class BoomImages(_BoomTask):
    name = "boom_images"
    modalities = frozenset({"text", "image"})

    def evaluate(self, ctx):
        media = MediaSet("boom/images", "image", ["x", "y"], lambda i: None, cheap=True)
        return TaskResult({"n": float(len(ctx.embed_media(media)))}, {"images": 2})


class BoomFiles(BoomTexts):
    """A task whose own code fails before any model loads: naming its files."""
    name = "boom_files"

    def required_files(self):
        return self.no_such_attribute


@hookimpl
def negharness_register_models(registry):
    registry.add("boom", lambda options: BoomModel(), "raises in encode_image")


@hookimpl
def negharness_register_tasks(registry):
    registry.add("boom_texts", "negharness_boom:BoomTexts", "texts only")
    registry.add("boom_images", "negharness_boom:BoomImages", "images: the model raises")
    registry.add("boom_files", "negharness_boom:BoomFiles", "raises naming its files, before torch")
