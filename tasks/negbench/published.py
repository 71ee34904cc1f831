"""NegBench's official MCQ accuracies (m1k2zoo/negbench ``results/mcq/``, after the 03/2025 fix that
added L2 normalisation), so a record can show its difference to the published number.

Fractions as published; ViT-B/32 for the first five rows.
"""

from __future__ import annotations

from typing import Any

PUBLISHED: dict[str, dict[str, dict[str, float]]] = {
    "coco": {
        "CLIP-OpenAI": {"accuracy": 0.39297, "acc_positive": 0.69144, "acc_negative": 0.06845, "acc_hybrid": 0.39314},
        "CLIP-Laion400M": {"accuracy": 0.31011, "acc_positive": 0.49705, "acc_negative": 0.16364, "acc_hybrid": 0.25746},
        "CLIP-datacomp": {"accuracy": 0.26260, "acc_positive": 0.42028, "acc_negative": 0.15829, "acc_hybrid": 0.20030},
        "NegCLIP": {"accuracy": 0.28678, "acc_positive": 0.51624, "acc_negative": 0.16150, "acc_hybrid": 0.17147},
        "ConCLIP": {"accuracy": 0.23876, "acc_positive": 0.14419, "acc_negative": 0.33529, "acc_hybrid": 0.24453},
    },
    "voc2007": {
        "CLIP-OpenAI": {"accuracy": 0.38720, "acc_positive": 0.82551, "acc_negative": 0.03347, "acc_hybrid": 0.58977},
        "CLIP-Laion400M": {"accuracy": 0.31564, "acc_positive": 0.62757, "acc_negative": 0.08769, "acc_hybrid": 0.43716},
        "CLIP-datacomp": {"accuracy": 0.23117, "acc_positive": 0.57771, "acc_negative": 0.07449, "acc_hybrid": 0.27424},
        "NegCLIP": {"accuracy": 0.30491, "acc_positive": 0.75367, "acc_negative": 0.05705, "acc_hybrid": 0.40350},
        "ConCLIP": {"accuracy": 0.38124, "acc_positive": 0.24633, "acc_negative": 0.22961, "acc_hybrid": 0.56688},
    },
}

# (model plugin, pretrained tag or None) -> published row
MODEL_ROWS = {
    ("clip", "openai"): "CLIP-OpenAI",
    ("clip", "laion400m_e31"): "CLIP-Laion400M",
    ("clip", "laion400m_e32"): "CLIP-Laion400M",
    ("clip", "datacomp_xl_s13b_b90k"): "CLIP-datacomp",
    ("negclip", None): "NegCLIP",
    ("conclip", None): "ConCLIP",
}


def published_row(model: Any) -> str | None:
    """The published row this model reproduces, for ViT-B-32 runs of the matching weights."""
    info = model.describe()
    if info.get("arch") != "ViT-B-32":
        return None
    weights = info.get("weights")
    return MODEL_ROWS.get((model.name, weights)) or MODEL_ROWS.get((model.name, None))


def compare(dataset: str, model: Any, metrics: dict[str, float]) -> dict[str, Any]:
    """Published numbers for this dataset, and this run's difference (points) where the model matches a row."""
    table = PUBLISHED.get(dataset)
    if not table:
        return {}
    out: dict[str, Any] = {"published_mcq_accuracy": {row: round(v["accuracy"] * 100, 2) for row, v in table.items()}}
    row = published_row(model)
    if row:
        out["published_row"] = row
        out["difference_to_published"] = {k: round(metrics[k] - v * 100, 2) for k, v in table[row].items() if k in metrics}
    return out
