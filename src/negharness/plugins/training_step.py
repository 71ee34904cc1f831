"""One training step's loss: a single forward of every image/frame and text of the step through the
(possibly DDP-wrapped) open_clip model, embeddings gathered over ranks, the recipe's loss terms on
the global batch. Also the validation MIR (section 5.1: the epoch is chosen on it).

One forward per step matters for DDP: its gradient hooks are prepared by the wrapper's forward, and
several forwards before one backward would mark parameters ready twice.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from negharness.api import TrainStream
from negharness.api.devices import Dist, gather_batch
from negharness.api.scoring import Relevance, best_relevant_rank, retrieval_metrics
from negharness.plugins.losses import (
    bcl,
    mcq_cross_entropy,
    multi_positive_infonce,
    soft_triplet,
    triplet_hardest,
)
from negharness.plugins.negation_data import stream_groups


def pool_frames(per_frame: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """(B, T, D) normalised frames -> normalised masked mean, as `EmbeddingModel.encode_video`."""
    if mask is None:
        return F.normalize(per_frame.mean(1), dim=-1)
    m = mask.to(per_frame.dtype).unsqueeze(-1)
    return F.normalize((per_frame * m).sum(1) / m.sum(1).clamp_min(1.0), dim=-1)


class StepLoss:
    def __init__(self, model: Any, net: torch.nn.Module, recipe: Any, dist: Dist, device: torch.device) -> None:
        self.model, self.net, self.r, self.dist, self.device = model, net, recipe, dist, device

    def _texts(self, stream: TrainStream, b: dict[str, Any]) -> dict[str, list[str]]:
        r, out = self.r, {}
        if stream.contrastive and (r.triplet or r.bnl or r.snl or r.negbench):
            out["q"] = b["caption"]
        if stream.contrastive and (r.bnl or r.snl) and stream.negated is not None:
            out["qn"] = b["negated"]
        if stream.contrastive and r.negbench and stream.true_negations is not None:
            out["tn"] = b["true_negation"]
        if r.negbench and stream.mcq is not None:
            out["opt"] = [o for opts in b["options"] for o in opts]
        return out

    def __call__(self, batches: list[tuple[TrainStream, dict[str, Any]]]) -> tuple[torch.Tensor, dict[str, float]]:
        images: list[torch.Tensor] = []
        texts: list[str] = []
        plan: list[tuple[TrainStream, dict[str, Any], torch.Size, int, dict[str, int]]] = []
        for stream, b in batches:
            pix = b["pixels"]
            frames = pix.flatten(0, 1) if stream.kind == "video" else pix
            t = self._texts(stream, b)
            plan.append((stream, b, pix.shape[:2] if stream.kind == "video" else pix.shape[:1], len(frames),
                         {k: len(v) for k, v in t.items()}))
            images.append(frames)
            texts.extend(v for vs in t.values() for v in vs)
        tokens = self.model.tokenizer(texts).to(self.device)
        out = self.net(torch.cat(images).to(self.device, non_blocking=True), tokens)
        img, txt = out["image_features"] if isinstance(out, dict) else out[0], out["text_features"] if isinstance(out, dict) else out[1]
        scale = (out["logit_scale"] if isinstance(out, dict) else out[2]).float().clamp(max=100)
        img, txt = img.float(), txt.float()
        total, logs, io, to = img.new_zeros(()), {}, 0, 0
        for stream, b, shape, n_img, n_txt in plan:
            x = img[io:io + n_img]
            io += n_img
            if stream.kind == "video":
                mask = b["mask"].to(self.device) if b["mask"] is not None else None
                x = pool_frames(x.view(*shape, -1), mask)
            emb = {}
            for key, n in n_txt.items():
                emb[key] = txt[to:to + n]
                to += n
            loss, parts = self._stream_loss(stream, b, x, emb, scale)
            total = total + loss
            logs.update({f"{stream.kind}/{k}": v for k, v in parts.items()})
        return total, logs

    def _stream_loss(self, stream: TrainStream, b: dict[str, Any], x: torch.Tensor, emb: dict[str, torch.Tensor],
                     scale: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        r, d, dev = self.r, self.dist, self.device
        x = gather_batch(d, x)
        groups = gather_batch(d, b["group"].to(dev))
        g = {k: gather_batch(d, v) for k, v in emb.items()}
        parts: dict[str, torch.Tensor] = {}
        if "q" in g and r.triplet:
            positives = groups[:, None] == groups[None, :]
            parts["triplet"] = triplet_hardest(g["q"], x, positives, r.m0)
        if "qn" in g:
            has = gather_batch(d, torch.tensor(b["has_negated"], device=dev))
            if bool(has.any()):
                xv = x[has].detach() if r.detach_video else x[has]
                qp, qn = g["q"][has], g["qn"][has]
                s_xq, s_xqn, s_qqn = (xv * qp).sum(1), (xv * qn).sum(1), (qp * qn).sum(1)
                if r.bnl:
                    parts["bcl_v"] = r.lambda_v * bcl(s_xq, s_xqn, r.m1, r.m2).mean()
                    parts["bcl_q"] = r.lambda_q * bcl(s_xq, s_qqn, r.m3, r.m4).mean()
                if r.snl:  # Eq. 3 with the video as pivot, or Table 5 row 3 with the query as pivot
                    s_neg = s_xqn if r.pivot == "video" else s_qqn
                    parts["snl"] = r.lambda_1 * soft_triplet(s_xq, s_neg, r.m1).mean()
        if r.negbench:
            term = x.new_zeros(())
            if stream.contrastive and ("tn" in g or "q" in g):
                _, inverse = torch.unique(groups, return_inverse=True)
                positives = g["tn"] if "tn" in g else g["q"]
                term = term + r.alpha * multi_positive_infonce(positives, x, inverse, scale)
            if "opt" in g:
                opts = g["opt"].view(x.shape[0], -1, x.shape[1])
                correct = gather_batch(d, b["correct"].to(dev))
                term = term + (1 - r.alpha) * mcq_cross_entropy(x, opts, correct, scale)
            parts["negbench"] = r.negbench_weight * term
        total = sum(parts.values(), x.new_zeros(()))
        return total, {k: float(v.detach()) for k, v in parts.items()}


@torch.no_grad()
def validation_mir(model: Any, stream: TrainStream, loader: Any, device: torch.device, autocast: Any) -> float:
    """Original-caption MIR on the validation items (items with equal groups all relevant)."""
    xs = []
    for b in loader:
        with autocast():
            pix = b["pixels"].to(device)
            if stream.kind == "video":
                xs.append(pool_frames(model.encode_image(pix.flatten(0, 1)).view(*pix.shape[:2], -1),
                                      b["mask"].to(device) if b["mask"] is not None else None).float())
            else:
                xs.append(model.encode_image(pix).float())
    x = torch.cat(xs)
    texts = [c for caps in stream.captions for c in caps]
    with autocast():
        q = torch.cat([model.encode_text(texts[lo:lo + 256]).float() for lo in range(0, len(texts), 256)])
    item_groups = stream_groups(stream)
    groups = [g for g, caps in zip(item_groups, stream.captions) for _ in caps]
    ranks = best_relevant_rank((q @ x.t()).float().cpu(), Relevance.from_groups(groups, item_groups))
    return float(retrieval_metrics(ranks)["MIR"])

