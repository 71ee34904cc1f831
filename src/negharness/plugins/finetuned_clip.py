"""Published CLIP fine-tunes and re-trainings, given by checkpoint path: NegCLIP, ConCLIP, NegationCLIP, TripletCLIP.

NegCLIP, ConCLIP and NegationCLIP were fine-tuned from OpenAI weights, which use QuickGELU; a local file
carries no pretrained tag to take the activation from, so it would silently run with plain GELU (the
open_clip #771 trap). Here QuickGELU is their default and ``-M quick_gelu=false`` reproduces the
plain-GELU setting (NegBench's published NegCLIP/ConCLIP numbers were probably made that way).

NegBench's own fine-tunes (``NegCLIP_CC12M_NegFull_ViT-B-32_lr1e-8_clw0.99_mlw0.01/checkpoint.pt`` and the
``CLIP_...`` one, the α = 0.99 runs) are open_clip training checkpoints (``state_dict`` with
``module.`` keys): load them with ``negclip`` or ``clip``.

NegationCLIP (Park et al., ICCV 2025) saves ``torch.save(model.state_dict())`` of OpenAI's ``clip``
package model (its src/clip_finetune.py): a bare OpenAI-layout state dict, in four architectures
(ViT-B/32, ViT-B/16, ViT-L/14, ViT-L/14@336px); without ``--arch`` the file's shapes choose it.
TripletCLIP's open_clip variant (Patel et al., NeurIPS 2024; src/openclip of its repository) trains
``open_clip.create_model_and_transforms(model_name, pretrained=None)`` from scratch, so GELU for
ViT-B-32, in bf16, and saves ``{"model_state_dict", "optimizer_state_dict", "epoch"}`` (``epoch-N.ckpt``).
"""

from __future__ import annotations

from dataclasses import dataclass

from negharness.api import ModelOptions, UserError
from negharness.plugins import options as declared
from negharness.plugins.openclip_model import OpenClipModel


@dataclass(frozen=True)
class Release:
    """How one method's checkpoints are built: where the files are, the default architecture (or the
    architectures the file's shapes choose among), the activation, the base model they started from."""

    where: str
    arch: str = "ViT-B-32"
    archs: tuple[str, ...] = ()
    quick_gelu: bool = True
    base: str | None = "openai"


RELEASES = {
    "negclip": Release("NegCLIP (Yuksekgonul et al., ICLR 2023): the fine-tuned ViT-B/32 checkpoint linked from "
                       "the README of github.com/vinid/neg_clip"),
    "conclip": Release("ConCLIP / CoN-CLIP (Singh et al., ICLR 2025): the ViT-B/32 checkpoint linked from the README "
                       "of github.com/jaisidhsingh/CoN-CLIP"),
    "negationclip": Release("NegationCLIP (Park et al., ICCV 2025): a fine-tuned checkpoint (ViT-B/32, ViT-B/16, "
                            "ViT-L/14 or ViT-L/14@336px) linked from the README of github.com/parkquasar/NegationCLIP",
                            archs=("ViT-B-32", "ViT-B-16", "ViT-L-14", "ViT-L-14-336")),
    "tripletclip": Release("TripletCLIP (Patel et al., NeurIPS 2024): an open_clip checkpoint (epoch-N.ckpt) written "
                           "by src/openclip of github.com/tripletclip/TripletCLIP",
                           quick_gelu=False, base=None),
}

WHERE = {name: r.where for name, r in RELEASES.items()}  # where each method's files are, in words


def _finetuned(name: str, options: ModelOptions) -> OpenClipModel:
    release = RELEASES[name]
    if not options.checkpoint:
        raise UserError(f"model {name} needs --checkpoint PATH. Download {release.where}, then pass its path.")
    return OpenClipModel.create(name, options, default_arch=release.arch, default_pretrained=None,
                                default_quick_gelu=release.quick_gelu, base_pretrained=release.base,
                                archs=release.archs)


@declared.OPEN_CLIP
def negclip(options: ModelOptions) -> OpenClipModel:
    return _finetuned("negclip", options)


@declared.OPEN_CLIP
def conclip(options: ModelOptions) -> OpenClipModel:
    return _finetuned("conclip", options)


@declared.OPEN_CLIP
def negationclip(options: ModelOptions) -> OpenClipModel:
    """NegationCLIP: its architecture from the file's shapes (or --arch), QuickGELU."""
    return _finetuned("negationclip", options)


@declared.OPEN_CLIP
def tripletclip(options: ModelOptions) -> OpenClipModel:
    """TripletCLIP's open_clip checkpoint: ViT-B-32 unless --arch says otherwise, GELU, trained from scratch."""
    return _finetuned("tripletclip", options)
