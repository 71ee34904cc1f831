"""The ``-M`` options of the built-in models, editors and detectors, declared in a module that imports no
torch (nothing but `negharness.api`).

Each registration in `negharness.plugins.builtin` names its declaration here
(``options="negharness.plugins.options:OPEN_CLIP"``), so `negharness run` refuses an ``-M`` typo or a bad
value before torch loads (`negharness.discovery.lookup.check_options`), and `negharness list` shows
the options without importing the plugin; each factory is decorated with the same object
(``@options.OPEN_CLIP``), so what the run checks and what the factory binds are one (the host refuses a
factory whose options differ from its registration's: `negharness.discovery.registry.Entry.load`).
The judges' module imports no torch: they are declared beside their factories.
"""

from __future__ import annotations

import json
from pathlib import Path

from negharness.api import PRECISION_NAMES, ModelOptions, OptionSpec, takes_options

ALPHA = 0.13  # steering strength, the authors' (steer.py:426)
HOLDOUT = 100  # steering pairs at the end of the file kept out of the fit (steer.py:60)
VLM_FRAMES = 4  # a video's frames a generative VLM is shown


def checkpoint_base(options: ModelOptions) -> str | None:
    """The model whose ``-M`` options clip_bnl's are (it passes every one to it): the base its folder's
    ``model.json`` names, or ``clip`` for a released file; so ``-M quick_gelu=1`` and ``=true`` name one
    model, as they do for that base. None where the checkpoint does not say (the run's error names why)."""
    if not options.checkpoint:
        return None
    path = Path(options.checkpoint).expanduser()
    folder = path.parent if path.is_file() else path
    if path.is_file() and not (folder / "model.json").is_file():
        return "clip"  # a released CLIP-bnl / CLIP* file: open_clip's ViT-B/32 (`trained_model._released`)
    meta = json.loads((folder / "model.json").read_text())
    base = meta.get("base_model") if isinstance(meta, dict) else None
    return base if isinstance(base, str) else None


NO_OPTIONS = takes_options({})  # dino, the identity editor, shapes_exact

OPEN_CLIP = takes_options({  # every open_clip model: clip, shapes_clip and the fine-tuned checkpoints
    "quick_gelu": OptionSpec(bool, None, "QuickGELU activations (default: as the weights were trained)"),
    "frames": OptionSpec(str, None, "video frame sampling: segments:N or fps:R"),
    "jpeg_draft": OptionSpec(bool, False, "decode JPEGs at reduced scale before resizing (faster)"),
    "text_lengths": OptionSpec(str, "auto", "texts in batches by token length, each cut to its longest: "
                               "auto (on the CPU only, see lengths_pay), on, off (the full context)",
                               choices=("auto", "on", "off")),
    "decode": OptionSpec(str, "pil", "image files: pil (open_clip's PIL transforms) or tensor (batched JPEG "
                         "decoding, nvjpeg on CUDA, and resizing on the run's device; pixels differ slightly, "
                         "a fingerprint of its own)", choices=("pil", "tensor")),
})

CLIP4CLIP = takes_options({
    **OPEN_CLIP.options,
    "head": OptionSpec(str, None, "similarity head: meanP | seqTransf (default: the checkpoint's)"),
})

HF_CLIP = takes_options({
    "model": OptionSpec(str, None, "Hugging Face model id or folder (else --arch / --checkpoint)"),
    "frames": OptionSpec(str, None, "video frame sampling: segments:N or fps:R"),
    "text_lengths": OptionSpec(str, "auto", "CLIP texts in buckets of similar token length, each padded "
                               "to its longest: auto (on the CPU only, as open_clip's), on, off (the "
                               "host's batches, each padded to its longest); SigLIP pads to 64 always",
                               choices=("auto", "on", "off")),
})

BOOLEAN = takes_options({"base": OptionSpec(str, None, "the retrieval model to wrap (every other -M goes to it)")},
                        wraps="base")

STEER = takes_options({
    "base": OptionSpec(str, None, "the open_clip model to steer (every other -M goes to it)"),
    "alpha": OptionSpec(float, ALPHA, "steering strength: EOT x -> (1 - alpha) x + alpha d |x| at every layer"),
    "pairs": OptionSpec(str, "", "JSON {positive caption: negated caption} the directions are fitted on (default: "
                        "the authors' data/train_data.json, `negharness fetch negation_steering/train_data.json`)",
                        data_file=True),
    "holdout": OptionSpec(int, HOLDOUT, "pairs at the end of the file left out of the fit (their accuracy is "
                          "recorded), as the authors' code", minimum=0),
}, wraps="base")

CLIP_BNL = takes_options({}, wraps=checkpoint_base)  # every -M goes to the base its checkpoint names

HF_VLM = takes_options({
    "scoring": OptionSpec(str, "loglik", "loglik (each option's likelihood) or letter (the letter it picks)",
                          choices=("loglik", "letter")),
    "norm": OptionSpec(str, "mean", "loglik per token (mean) or summed (sum)"),
    "prompt": OptionSpec(str, None, "prompt where the task has no question"),
    "dtype": OptionSpec(str, "fp32", "weights' dtype", choices=PRECISION_NAMES),
    "frames": OptionSpec(int, VLM_FRAMES, "a video's frames shown as images, evenly spaced over those the task "
                         "samples"),
})

TEXT_ONLY = takes_options({"norm": OptionSpec(str, "mean", "caption loglik per token (mean) or summed (sum)")})

INSTRUCT_PIX2PIX = takes_options({
    "model": OptionSpec(str, None, "diffusers model id or folder (else --arch / --checkpoint / the default)"),
    "steps": OptionSpec(int, 100, "denoising steps", minimum=1),
    "guidance": OptionSpec(float, 7.5, "text guidance scale"),
    "image_guidance": OptionSpec(float, 1.5, "image guidance scale"),
    "size": OptionSpec(int, 512, "long side of the edited image", minimum=64),
    "precision": OptionSpec(str, "fp32", "pipeline dtype", choices=PRECISION_NAMES),
})

DETECT_INPAINT = takes_options({"detector": OptionSpec(str, "shapes_exact", "detector that finds what to paint over")})

SHAPES_PRETRAIN = takes_options({  # a trainer's -O; batch size is the --batch-size flag, as for `run`
    "steps": OptionSpec(int, 300, "optimizer steps", minimum=1),
    "lr": OptionSpec(float, 2e-3, "AdamW learning rate"),
    "weight_decay": OptionSpec(float, 0.1, "AdamW weight decay"),
    "n_train": OptionSpec(int, 6000, "world items of each kind (video and image)", minimum=1),
    "world_seed": OptionSpec(int, 0, "the world's seed"),
})

OWLV2 = takes_options({
    "model": OptionSpec(str, None, "OWLv2 model id or folder"),
    "threshold": OptionSpec(float, 0.1, "detection score that counts as present"),
    "prompt": OptionSpec(str, "{}", "text query template, {} the object"),
})
