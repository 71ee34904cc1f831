"""OWLv2 (zero-shot detection) through transformers, as NeIn scores removal and retention.

Default ``google/owlv2-large-patch14-ensemble`` (``-M model=ID_OR_FOLDER`` for another or a local
copy), confidence threshold 0.1 as the NeIn protocol. OWLv2 pads images to a square before
predicting, so boxes are mapped back with the padded size; the label is queried as written (or
through ``-M prompt="a photo of a {}"``).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from negharness.api import Detection, Detector, ModelOptions, UserError
from negharness.api.checkpoints import hash_processor, hash_state_dict, load_or_explain
from negharness.plugins import options as declared

DEFAULT = "google/owlv2-large-patch14-ensemble"


class Owlv2Detector(Detector):
    name = "owlv2"

    def __init__(self, source: str, model: Any, processor: Any, threshold: float, prompt: str) -> None:
        self.source, self.model, self.processor = source, model.eval(), processor
        self.threshold, self.prompt = threshold, prompt
        # what detections rest on beside the source's name: weights and processor by content (once, here)
        self._weights, self._processor = hash_state_dict(self.model.state_dict()), hash_processor(processor)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "source": self.source, "prompt": self.prompt, "weights": self._weights,
                "processor": self._processor}

    @torch.inference_mode()
    def detect(self, image: Any, labels: Sequence[str]) -> list[Detection]:
        if not labels:
            return []
        image = image.convert("RGB")
        queries = [self.prompt.format(label) for label in labels]
        inputs = self.processor(text=[queries], images=image, return_tensors="pt")
        inputs = {k: v.to(self.model.device) for k, v in inputs.items()}
        outputs = self.model(**inputs)
        side = max(image.size)  # OWLv2 predicts on the image padded to a square
        result = self.processor.post_process_grounded_object_detection(
            outputs, threshold=self.threshold, target_sizes=[(side, side)])[0]
        return [Detection(labels[int(i)], float(s), _box(b))
                for s, i, b in zip(result["scores"], result["labels"], result["boxes"])]


def _box(box: Any) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) of a predicted box, as floats."""
    x0, y0, x1, y1 = (float(v) for v in box)
    return x0, y0, x1, y1


@declared.OWLV2
def owlv2(options: ModelOptions) -> Owlv2Detector:
    values = options.values
    source = values["model"] or options.arch or options.checkpoint or DEFAULT
    from transformers import Owlv2ForObjectDetection, Owlv2Processor

    model, processor = load_or_explain("owlv2", str(source), lambda: (
        Owlv2ForObjectDetection.from_pretrained(source), Owlv2Processor.from_pretrained(source)))
    if len(processor.tokenizer) < 1000:
        raise UserError(f"owlv2: the tokenizer from {source!r} has only {len(processor.tokenizer)} tokens; its "
                        "vocabulary files are missing")
    return Owlv2Detector(str(source), model, processor, values["threshold"], values["prompt"])
