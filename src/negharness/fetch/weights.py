"""Released checkpoints by model name: ``--model negclip`` with no ``--checkpoint`` fetches the
authors' published weights into the model cache (``<cache>/models/<model>/``), verified like data.

Keyed by (model, ``--pretrained`` tag or None), so another model (NegationCLIP, TripletCLIP) is one
more row. Each row is a `Source` of the model cache (``models/<model>/<file>``), fetched by the same
session as data (lock, resume, SHA-256, manifest), whether a run needs it or ``negharness fetch
MODEL`` asks for it. The file is only downloaded here; the model plugin reads it as any
``--checkpoint``, so a pickle still goes through `negharness.io.safe_unpickle` and nothing else.
Weights no program may fetch (Baidu Pan, a Drive folder) print the steps and the path to put the file at.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError
from negharness.fetch import session
from negharness.fetch.sources import Source, human_size


@dataclass(frozen=True)
class Weights:
    file: str  # the name in the model cache
    url: str = ""
    sha256: str | None = None
    size: int | None = None
    manual: str = ""  # steps, where no program may fetch the file
    origin: str = ""


WEIGHTS: dict[tuple[str, str | None], Weights] = {
    ("negclip", None): Weights(
        "negclip.pth", "https://drive.usercontent.google.com/download?id=1ooVVPxB-tvptgmHlIMMFGV3Cg-IrhbRZ"
                       "&export=download&confirm=t", None, None,
        origin="Google Drive id from mertyg/vision-language-models-are-bows@81fdd20 model_zoo/__init__.py "
               "(no published checksum or size: the first download's SHA-256 is recorded)"),
    ("conclip", None): Weights(
        "conclip_b32_openclip_version.pt", manual="ConCLIP's ViT-B/32 (conclip_b32_openclip_version.pt) is in "
        "NegBench's Google Drive folder (github.com/m1k2zoo/negbench models.md: drive.google.com/drive/folders/"
        "1kSEq0mkV1t1T8GuOAM65iz_iAA7e5gxB, ConCLIP/); a folder no program may fetch: download the file and put "
        "it at {target}", origin="m1k2zoo/negbench@2ac009b models.md"),
    ("clip_bnl", "nt2vr-msrvtt"): Weights(
        "clip_bnl_msrvtt.pth.tar", manual="nT2VR's CLIP-bnl (MSR-VTT) checkpoint is on Baidu Pan only "
        "(links in github.com/ruc-aimc-lab/nT2VR README): download model_best.pth.tar and put it at {target}",
        origin="ruc-aimc-lab/nT2VR@35babc0 README"),
    ("clip4clip", None): Weights(
        "pytorch_model.bin", manual="CLIP4Clip's authors publish no trained checkpoint (github.com/ArrowLuo/"
        "CLIP4Clip); train one with their code (or take a colleague's pytorch_model.bin.N) and put it at {target}",
        origin="ArrowLuo/CLIP4Clip README"),
    ("negationclip", None): Weights(
        "negationclip_ViT-B32.pth",
        "https://huggingface.co/jerryray/negationclip/resolve/main/negationclip_ViT-B32.pth", None, None,
        origin="parkquasar/NegationCLIP@6f858ee README links huggingface.co/jerryray/negationclip (ViT-B/32, B/16, "
               "L/14, L/14@336px); the ViT-B/32 file name as other code fetches it, not checked against the hub; no "
               "published checksum or size: the first download's SHA-256 is recorded"),
    ("tripletclip", None): Weights(
        "tripletclip_openclip_finetune.ckpt", "https://drive.usercontent.google.com/download?"
        "id=14mupW26LMh6U4FQPa74FOIMEg8MndxCh&export=download&confirm=t", None, None,
        origin="tripletclip/TripletCLIP@abbf81c README, 'TripletCLIP OpenCLIP Finetuning Checkpoint' (a Drive file; "
               "the hub's CC3M/CC12M checkpoints are split vision/text encoders the plugin does not read); no "
               "published checksum or size: the first download's SHA-256 is recorded"),
}


def weights_for(model: str, pretrained: str | None) -> Weights | None:
    return WEIGHTS.get((model, pretrained))


def as_source(model: str, w: Weights) -> Source:
    """The row as a source of the model cache: ``models/<model>/<file>``, where runs look for it."""
    name = f"models/{model}/{w.file}"
    return Source(name, w.url, w.sha256, w.size, manual=w.manual, done=name if w.manual else "", origin=w.origin,
                  licence=f"released weights of {model}")


def weight_sources(patterns: list[str]) -> list[Source]:
    """The released weights the patterns name (a model name or glob, or a source's own name
    ``models/negclip/negclip.pth``), in table order; [] when they name none."""
    return [as_source(m, w) for (m, _), w in WEIGHTS.items()
            if any(fnmatchcase(m, p) or fnmatchcase(f"models/{m}/{w.file}", p) for p in patterns)]


def released_checkpoint(model: str, pretrained: str | None, cache: Path, progress: Any = None) -> Path | None:
    """The released weights of ``model`` (with ``--pretrained`` tag) in the model cache, downloaded
    and verified when absent; None when the table has no row for it."""
    w = weights_for(model, pretrained)
    if w is None:
        return None
    source = as_source(model, w)
    (out,) = session.fetch_sources([source], cache, 1, progress, log=lambda line: print(line, file=sys.stderr))
    if out.state == "by hand":
        raise UserError(f"model {model}: no --checkpoint given and its released weights cannot be fetched by a "
                        f"program: {out.note} (or pass --checkpoint PATH)")
    return cache / source.lands


def with_released(model: str, options: Any, cache: Path, progress: Any = None) -> Any:
    """``options`` (a `ModelOptions`) with the released weights of ``model`` as the checkpoint, when
    no ``--checkpoint`` was given and the table has a row for the model (and ``--pretrained`` tag,
    which the file then stands for); otherwise ``options`` unchanged."""
    if options.checkpoint:
        return options
    path = released_checkpoint(model, options.pretrained, cache, progress)
    if path is None:
        return options
    return dataclasses.replace(options, checkpoint=str(path), pretrained=None)


def listing(models: list[str]) -> str:
    """For `negharness list`: which of ``models`` fetch their released weights when run without
    ``--checkpoint``, each with its file's size (or "by hand" where no program may fetch it)."""
    rows = [(m, tag, w) for (m, tag), w in sorted(WEIGHTS.items(), key=lambda kv: (kv[0][0], kv[0][1] or ""))
            if m in models]
    if not rows:
        return ""
    shown = "; ".join(f"{m}{f' --pretrained {tag}' if tag else ''} {'by hand' if w.manual else human_size(w.size)}"
                      for m, tag, w in rows)
    return f"released weights, fetched into the model cache when no --checkpoint is given: {shown}"


def describe(model: str, pretrained: str | None) -> str:
    """One line for messages: where the weights come from and how big they are."""
    w = weights_for(model, pretrained)
    if w is None:
        return ""
    return f"{w.file} ({human_size(w.size)}, {'by hand' if w.manual else w.url})"
