"""`clip_bnl`: a model fine-tuned by `negharness train` (BNL, SNL, NegBench or CLIP*), or a released file.

``negharness run --model clip_bnl --checkpoint runs/clip_bnl``: the folder's ``model.json`` names
the base model and its options; ``model.safetensors`` holds the weights.
``--checkpoint model_best.pth.tar``: a file with no ``model.json`` beside it is a released checkpoint,
e.g. the nT2VR authors' CLIP-bnl or CLIP* (OpenAI ViT-B/32 under ``clip_model.ClipModel.``).
Either way, weights equal to the base model's are reported (a warning and ``checkpoint_notes``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from negharness.api import EmbeddingModel, ModelOptions, UserError
from negharness.api.checkpoints import base_note, load_state_dict
from negharness.plugins import options as declared

FORMAT = "negharness-trained-v1"


@declared.CLIP_BNL
def clip_bnl(options: ModelOptions) -> EmbeddingModel:
    if not options.checkpoint:
        raise UserError("model clip_bnl needs --checkpoint DIR (the folder `negharness train --out DIR` wrote) "
                        "or FILE (a released CLIP-bnl checkpoint, e.g. nT2VR's model_best.pth.tar)")
    path = Path(options.checkpoint)
    if path.is_file() and not (path.parent / "model.json").is_file():
        return _released(options)
    folder = path.parent if path.is_file() else path
    meta_path = folder / "model.json"
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise UserError(f"{meta_path}: not found; --checkpoint must be a folder written by `negharness train` "
                        "or a checkpoint file") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{meta_path}: not valid JSON ({exc.msg})") from exc
    if meta.get("format") != FORMAT:
        raise UserError(f"{meta_path}: not a negharness training output (format {meta.get('format')!r})")
    base = dict(meta.get("base_options", {}))
    if base.get("arch") and (folder / str(base["arch"])).is_file():  # the config the folder keeps (arch.json)
        base["arch"] = str(folder / str(base["arch"]))
    extra = {k: str(v) for k, v in base.items() if k not in ("arch", "pretrained", "checkpoint")}
    extra.update(options.extra)
    plugins = options.lookup()
    model: EmbeddingModel = plugins.create("model", meta["base_model"],
                                           ModelOptions(base.get("arch"), None, str(folder / "model.safetensors"), extra))
    model.name = "clip_bnl"
    _note_if_base(model, plugins, meta["base_model"],
                  ModelOptions(base.get("arch"), base.get("pretrained"), base.get("checkpoint"), extra), folder)
    return model


def _released(options: ModelOptions) -> EmbeddingModel:
    """A CLIP-bnl / CLIP* file from the nT2VR authors: OpenAI ViT-B/32 fine-tuned, so QuickGELU."""
    from negharness.plugins.openclip_model import OpenClipModel  # lazy: start-up time

    return OpenClipModel.create("clip_bnl", options, default_arch="ViT-B-32", default_pretrained=None,
                                default_quick_gelu=True, base_pretrained="openai")


def _note_if_base(model: EmbeddingModel, plugins: Any, base_name: str, base_options: ModelOptions, folder: Path) -> None:
    """Build the base model as training did and compare weights; a base that cannot be built is
    not compared (training needed it, so it is normally at hand)."""
    notes = getattr(model, "checkpoint_notes", None)
    if notes is None or "note" in notes:
        return
    try:
        base = plugins.create("model", base_name, base_options)
    except UserError:
        return
    note = base_note(load_state_dict(folder / "model.safetensors"), base.modules()[0].state_dict(),
                     base_name, folder)
    if note:
        notes["note"] = note
