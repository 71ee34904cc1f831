"""CLIP4Clip checkpoints (Luo et al., 2022) in their own state-dict layout, with the meanP and seqTransf heads.

Layout: the OpenAI CLIP under ``clip.``; for seqTransf also ``frame_position_embeddings.weight``
and ``transformerClip.resblocks.N.*`` (CLIP residual blocks: QuickGELU MLP, LayerNorm eps 1e-12).
Both heads follow CLIP4Clip's ``_loose_similarity``: per-frame CLIP image features; for seqTransf,
add frame position embeddings, run the frame transformer with padded frames masked, add the input
back; then normalise each frame, average the real frames, normalise again.

One deliberate difference: CLIP4Clip builds the per-head attention mask with
``mask.repeat(n_head, 1, 1)``, which pairs heads with the wrong videos when a batch mixes clip
lengths; here each video's mask goes to its own heads, so a video's embedding never depends on its
batch. For batches of equal-length clips (CLIP4Clip's usual setting) the two agree exactly.
CLIP4Clip was trained on 12 uniformly sampled frames: pass ``-M frames=segments:12`` to match it;
otherwise the task's default sampling applies.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import Any, Iterable

import torch
import torch.nn.functional as F
from torch import nn

from negharness.api import ModelOptions, UserError
from negharness.api.checkpoints import hash_state_dict, read_checkpoint
from negharness.plugins import options as declared
from negharness.plugins.openclip_model import OpenClipModel

HEADS = ("meanP", "seqTransf")


class _QuickGELU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


class _Block(nn.Module):
    """A CLIP residual attention block with CLIP4Clip's parameter names."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads)
        self.ln_1 = nn.LayerNorm(width, eps=1e-12)
        self.mlp = nn.Sequential(OrderedDict([
            ("c_fc", nn.Linear(width, width * 4)), ("gelu", _QuickGELU()), ("c_proj", nn.Linear(width * 4, width))]))
        self.ln_2 = nn.LayerNorm(width, eps=1e-12)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, need_weights=False, attn_mask=mask)[0]
        out: torch.Tensor = x + self.mlp(self.ln_2(x))  # a module's call reads as Any
        return out


class _Blocks(nn.Module):
    """The blocks under CLIP4Clip's names (``transformerClip.resblocks.N``)."""

    def __init__(self, blocks: Iterable[_Block]) -> None:
        super().__init__()
        self.resblocks = nn.ModuleList(blocks)


class SeqTransfHead(nn.Module):
    """Frame position embeddings + a small transformer over the frame sequence."""

    def __init__(self, width: int, layers: int, positions: int) -> None:
        super().__init__()
        self.heads = max(1, width // 64)
        self.frame_position_embeddings = nn.Embedding(positions, width)
        self.transformerClip = _Blocks(_Block(width, self.heads) for _ in range(layers))

    def forward(self, frames: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """frames (B, T, D) un-normalised CLIP features, mask (B, T) -> (B, T, D)."""
        b, t, _ = frames.shape
        x: torch.Tensor = frames + self.frame_position_embeddings(torch.arange(t, device=frames.device))[None]
        additive = (1.0 - mask.to(x.dtype))[:, None, :].expand(b, t, t) * -1000000.0
        additive = additive.repeat_interleave(self.heads, dim=0)  # (B * heads, T, T), batch-major
        x = x.permute(1, 0, 2)
        for block in self.transformerClip.resblocks:
            x = block(x, additive)
        return x.permute(1, 0, 2) + frames


class Clip4ClipModel(OpenClipModel):
    head: SeqTransfHead | None = None

    def modules(self) -> list[nn.Module]:
        return [self.model] + ([self.head] if self.head is not None else [])

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "head": "seqTransf" if self.head is not None else "meanP"}

    def encode_video(self, frames: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, t = frames.shape[:2]
        feats = self.image_features(frames.flatten(0, 1)).float().view(b, t, -1)
        mask = torch.ones(b, t, device=feats.device) if mask is None else mask.to(feats.device).float()
        if self.head is not None:
            feats = self.head(feats, mask).float()
        feats = F.normalize(feats, dim=-1) * mask[..., None]
        return F.normalize(feats.sum(1) / mask.sum(1, keepdim=True).clamp_min(1.0), dim=-1)


def _split(state: dict[str, torch.Tensor], path: str) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    clip = {k[len("clip."):]: v for k, v in state.items() if k.startswith("clip.")}
    head = {k: v for k, v in state.items() if k.startswith(("frame_position_embeddings.", "transformerClip."))}
    if not clip:
        raise UserError(f"{path}: not a CLIP4Clip checkpoint (no 'clip.' keys; found e.g. {sorted(state)[:3]})")
    if "visual.conv2.weight" in clip:
        raise UserError(f"{path}: a CLIP4Clip checkpoint trained with --linear_patch 3d (clip.visual.conv2), "
                        "which is not supported; only the 2d patch embedding (the default) is")
    for k in ("input_resolution", "context_length", "vocab_size"):
        clip.pop(k, None)
    return clip, head


@declared.CLIP4CLIP
def clip4clip(options: ModelOptions) -> Clip4ClipModel:
    """CLIP4Clip: ``--checkpoint pytorch_model.bin`` (head from the checkpoint, or ``-M head=meanP``)."""
    if not options.checkpoint:
        raise UserError("model clip4clip needs --checkpoint PATH to a CLIP4Clip checkpoint (pytorch_model.bin.N "
                        "from github.com/ArrowLuo/CLIP4Clip training, or a published one)")
    ckpt = read_checkpoint(options.checkpoint)
    clip_state, head_state = _split(ckpt.state, options.checkpoint)
    head_name = options.values["head"] or ("seqTransf" if head_state else "meanP")
    if head_name not in HEADS:
        raise UserError(f"-M head={head_name}: choose one of {', '.join(HEADS)}")
    if head_name == "seqTransf" and not head_state:
        raise UserError(f"{options.checkpoint}: -M head=seqTransf, but the checkpoint has no seqTransf weights")
    base = dataclasses.replace(options, pretrained=None)  # bound to CLIP4CLIP's: OpenClipModel's options and more
    model = Clip4ClipModel.create("clip4clip", base, default_arch="ViT-B-32", default_pretrained=None,
                                  default_quick_gelu=True, state=clip_state, base_pretrained="openai")
    model.checkpoint_notes = {**ckpt.notes(), **model.checkpoint_notes}
    model._weights_id = model._weights_id + ("+" + _hash_head(head_state) if head_name == "seqTransf" else "")
    if head_name == "seqTransf":
        model.head = _build_head(head_state, options.checkpoint)
    return model


def _hash_head(state: dict[str, torch.Tensor]) -> str:

    return hash_state_dict(state)


def _build_head(state: dict[str, torch.Tensor], path: str) -> SeqTransfHead:
    positions, width = state["frame_position_embeddings.weight"].shape
    layers = len({k.split(".")[2] for k in state if k.startswith("transformerClip.resblocks.")})
    head = SeqTransfHead(width, layers, positions)
    missing, unexpected = head.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise UserError(f"{path}: seqTransf weights do not fit (missing {missing[:4]}, unexpected {unexpected[:4]})")
    return head.eval()
