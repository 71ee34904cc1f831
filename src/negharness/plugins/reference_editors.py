"""Two reference editors that bound every NeIn score.

- ``identity`` returns its input: removal as low as doing nothing gets, retention and pixel
  distances as high as keeping everything gets.
- ``detect_inpaint`` finds the negated object with a detector (``-M detector=NAME``; the world's
  exact detector by default, OWLv2 for real images) and fills its boxes with OpenCV inpainting.
  It knows which object to remove because it reads the instruction's object name, so it is an
  upper bound for removal; its records name the detector it used, since scoring it with the same
  detector would be circular.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from negharness.api import (
    Detector,
    Editor,
    ModelOptions,
    UserError,
)
from negharness.plugins import options as declared

# NeIn's Table 2 formats name the object as {S}; read it back from any of them
_OBJECT_PATTERNS = [
    r"doesn't have any (.+?)\.?$", r"^(.+?) is not part of the scene", r"^no (.+?) present in the image",
    r"is without (.+?)\.?$", r"does not have any (.+?)\.?$", r"lacks the presence of (.+?)\.?$", r"lacks (.+?)\.?$",
    r"^no (.+?) in the image", r"^a scene without (.+?)\.?$", r"cannot have any (.+?)\.?$",
    r"^not a single (.+?) in sight", r"^(.+?) is missing from the image", r"^(.+?) is nowhere to be seen",
]


def negated_object(instruction: str) -> str:
    text = instruction.strip().lower()
    for pattern in _OBJECT_PATTERNS:
        m = re.search(pattern, text)
        if m:
            return re.sub(r"^(a|an|the) ", "", m.group(1).strip())
    raise UserError(f"cannot find the negated object in instruction {instruction!r}")


class IdentityEditor(Editor):
    name = "identity"

    def edit(self, image: Any, instruction: str, seed: int) -> Any:
        return image.copy()


class DetectInpaintEditor(Editor):
    name = "detect_inpaint"

    def __init__(self, detector: Detector, detector_name: str, dilate: int = 2) -> None:
        self.detector = detector
        self.detector_used = detector_name
        self.dilate = dilate

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "detector": self.detector.describe(), "dilate": self.dilate}

    def edit(self, image: Any, instruction: str, seed: int) -> Any:
        import cv2
        from PIL import Image

        target = negated_object(instruction)
        rgb = np.asarray(image.convert("RGB"))
        mask = np.zeros(rgb.shape[:2], dtype=np.uint8)
        for d in self.detector.detect(image, [target]):
            x0, y0, x1, y1 = (int(round(v)) for v in d.box)
            mask[max(0, y0 - self.dilate): y1 + self.dilate, max(0, x0 - self.dilate): x1 + self.dilate] = 255
        if not mask.any():
            return image.copy()
        return Image.fromarray(cv2.inpaint(rgb, mask, 3, cv2.INPAINT_TELEA))


@declared.NO_OPTIONS
def identity(options: ModelOptions) -> IdentityEditor:
    return IdentityEditor()


@declared.DETECT_INPAINT
def detect_inpaint(options: ModelOptions) -> DetectInpaintEditor:
    name = options.values["detector"]
    detector = options.lookup().plugin("detector", name)
    return DetectInpaintEditor(detector, name)
