"""The tiny CLIP of the embedded world: an open_clip model from a bundled config and bundled weights.

The weights are reproduced by ``negharness train --trainer shapes_pretrain`` (docs/guides/training.md).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from negharness.api import ModelOptions, UserError
from negharness.plugins import options as declared
from negharness.plugins.openclip_model import OpenClipModel
from negharness.world.scenes import COLOURS, SHAPES

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
CONFIG = WEIGHTS_DIR / "shapes_clip.json"
WEIGHTS = WEIGHTS_DIR / "shapes_clip.safetensors"
REPRODUCE = "negharness train --trainer shapes_pretrain --out {}".format(WEIGHTS)
# the objects the world's captions name, for `negharness diagnose` (its default objects are COCO's,
# words this model never saw): twelve "colour shape" pairs, each colour twice and each shape three times
OBJECT_WORDS = tuple(f"{colour} {shape}" for colour, shape in zip(list(COLOURS) * 2, SHAPES * 3))


@declared.OPEN_CLIP
def shapes_clip(options: ModelOptions) -> OpenClipModel:
    """ModifiedResNet at 32 px + a 2-layer text transformer, trained on the embedded world."""
    checkpoint = options.checkpoint or str(WEIGHTS)
    if not Path(checkpoint).is_file():
        raise UserError(f"shapes_clip weights not found at {checkpoint}; reproduce them with: {REPRODUCE}")
    opts = dataclasses.replace(options, arch=options.arch or str(CONFIG), checkpoint=checkpoint)  # still bound
    model = OpenClipModel.create("shapes_clip", opts, default_pretrained=None)
    model.object_words = OBJECT_WORDS  # read by `negharness diagnose` when no --objects is given
    return model
