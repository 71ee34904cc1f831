"""What editing plugins give the host: an editor (image + instruction -> image) and a detector
(image + labels -> boxes with confidences), for NeIn-style evaluation.

Scoring an editor with the detector it used itself is circular, so an editor names the detector it
relies on (``detector_used``) and records show both that one and the scoring detector.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Sequence


@dataclass(frozen=True)
class Detection:
    label: str
    score: float
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels


class Detector(ABC):
    name: str = "detector"
    threshold: float = 0.1

    @abstractmethod
    def detect(self, image: Any, labels: Sequence[str]) -> list[Detection]:
        """Detections of the given labels scoring at least ``threshold``."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "threshold": self.threshold}

    def max_scores(self, image: Any, labels: Sequence[str]) -> dict[str, float]:
        """Per label, the largest confidence found, or 0 when the label was not detected."""
        out = {label: 0.0 for label in labels}
        for d in self.detect(image, labels):
            out[d.label] = max(out[d.label], d.score)
        return out


class Editor(ABC):
    name: str = "editor"
    detector_used: str | None = None

    @abstractmethod
    def edit(self, image: Any, instruction: str, seed: int) -> Any:
        """The edited PIL image; ``seed`` makes stochastic editors repeatable per sample."""

    def edit_batch(self, images: Sequence[Any], instructions: Sequence[str], seeds: Sequence[int]) -> list[Any]:
        """Several edits at once; editors that can batch (diffusion pipelines) override this."""
        return [self.edit(i, t, s) for i, t, s in zip(images, instructions, seeds)]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "detector_used": self.detector_used}
