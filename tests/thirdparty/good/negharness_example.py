import torch
import torch.nn.functional as F
from negharness.hookspecs import hookimpl
from negharness.model import EmbeddingModel
from negharness.testing import COLOURS, ColourRetrievalTask


class MeanColourModel(EmbeddingModel):
    name = "mean_colour"
    def describe(self): return {"arch": "mean-colour", "version": 1}
    def preprocess_image(self, image): return torch.as_tensor(image).permute(2, 0, 1).float() / 255
    def encode_image(self, pixels): return F.normalize(pixels.mean(dim=(2, 3)), dim=-1)
    def encode_text(self, texts):
        rgb = [next((COLOURS[w] for w in t.split() if w in COLOURS), (1, 1, 1)) for t in texts]
        return F.normalize(torch.tensor(rgb, dtype=torch.float32), dim=-1)


class ExampleColours(ColourRetrievalTask):
    name = "example_colours"
    family = "example"


@hookimpl
def negharness_register_models(registry):
    registry.add("mean_colour", lambda options: MeanColourModel(), "mean colour of an image")


@hookimpl
def negharness_register_tasks(registry):
    registry.add("example_colours", "negharness_example:ExampleColours", "six colours", family="example")
