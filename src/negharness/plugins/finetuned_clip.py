"""Published fine-tunes of OpenAI CLIP ViT-B/32, given by checkpoint path: NegCLIP and ConCLIP.

Both were fine-tuned from OpenAI weights, which use QuickGELU; a local file carries no pretrained
tag to take the activation from, so it would silently run with plain GELU. Here QuickGELU is the
default and ``-M quick_gelu=false`` reproduces the plain-GELU setting (NegBench's published
NegCLIP/ConCLIP numbers were probably made that way).

NegBench's own fine-tunes (``NegCLIP_CC12M_NegFull_ViT-B-32_lr1e-8_clw0.99_mlw0.01/checkpoint.pt`` and the
``CLIP_...`` one, the α = 0.99 runs) are open_clip training checkpoints (``state_dict`` with
``module.`` keys): load them with ``negclip`` or ``clip``.
"""

from __future__ import annotations

from negharness.api import ModelOptions, UserError, takes_options
from negharness.plugins.openclip_model import OPTIONS, OpenClipModel

WHERE = {
    "negclip": "NegCLIP (Yuksekgonul et al., ICLR 2023): the fine-tuned ViT-B/32 checkpoint linked from "
               "the README of github.com/vinid/neg_clip",
    "conclip": "ConCLIP / CoN-CLIP (Singh et al., ICLR 2025): the ViT-B/32 checkpoint linked from the README "
               "of github.com/jaisidhsingh/CoN-CLIP",
}


def _finetuned(name: str, options: ModelOptions) -> OpenClipModel:
    if not options.checkpoint:
        raise UserError(f"model {name} needs --checkpoint PATH. Download {WHERE[name]}, then pass its path.")
    return OpenClipModel.create(name, options, default_arch="ViT-B-32", default_pretrained=None,
                                default_quick_gelu=True, base_pretrained="openai")


@takes_options(OPTIONS)
def negclip(options: ModelOptions) -> OpenClipModel:
    return _finetuned("negclip", options)


@takes_options(OPTIONS)
def conclip(options: ModelOptions) -> OpenClipModel:
    return _finetuned("conclip", options)
