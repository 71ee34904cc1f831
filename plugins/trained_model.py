"""`clip_bnl`: a model fine-tuned by `negharness train` (BNL, SNL, NegBench or CLIP*), by its folder.

``negharness run --model clip_bnl --checkpoint runs/clip_bnl``: the folder's ``model.json`` names
the base model and its options; ``model.safetensors`` holds the weights.
"""

from __future__ import annotations

import json
from pathlib import Path

from negharness.errors import UserError
from negharness.model import EmbeddingModel, ModelOptions

FORMAT = "negharness-trained-v1"


def clip_bnl(options: ModelOptions) -> EmbeddingModel:
    if not options.checkpoint:
        raise UserError("model clip_bnl needs --checkpoint DIR: the folder `negharness train --out DIR` wrote")
    folder = Path(options.checkpoint)
    folder = folder.parent if folder.is_file() else folder
    meta_path = folder / "model.json"
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise UserError(f"{meta_path}: not found; --checkpoint must be a folder written by `negharness train`") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{meta_path}: not valid JSON ({exc.msg})") from exc
    if meta.get("format") != FORMAT:
        raise UserError(f"{meta_path}: not a negharness training output (format {meta.get('format')!r})")
    base = dict(meta.get("base_options", {}))
    extra = {k: str(v) for k, v in base.items() if k not in ("arch", "pretrained", "checkpoint")}
    extra.update(options.extra)
    model = options.lookup().create("model", meta["base_model"],
                                    ModelOptions(base.get("arch"), None, str(folder / "model.safetensors"), extra))
    model.name = "clip_bnl"
    return model
