"""A third-party plugin for the declarative-task tests: a mean-colour model that takes PIL images,
and YAML tasks shipped inside the package, registered with `register_yaml_folder`."""

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from negharness.api import EmbeddingModel
from negharness.declarative.register import register_yaml_folder
from negharness.discovery.hookspecs import hookimpl
from negharness.testing import COLOURS


class PilColourModel(EmbeddingModel):
    name = "pil_colour"
    def modules(self): return []  # no torch modules
    def describe(self): return {"arch": "pil-colour", "version": 1}
    def preprocess_image(self, image):
        return torch.from_numpy(np.asarray(image.convert("RGB"), dtype=np.float32)).permute(2, 0, 1) / 255
    def encode_image(self, pixels): return F.normalize(pixels.mean(dim=(2, 3)), dim=-1)
    def encode_text(self, texts):
        rgb = [next((COLOURS[w] for w in t.split() if w in COLOURS), (1, 1, 1)) for t in texts]
        return F.normalize(torch.tensor(rgb, dtype=torch.float32), dim=-1)


@hookimpl
def negharness_register_models(registry):
    registry.add("pil_colour", lambda options: PilColourModel(), "mean colour of a PIL image")


@hookimpl
def negharness_register_tasks(registry):
    register_yaml_folder(registry, Path(__file__).parent / "choicefake_tasks")
