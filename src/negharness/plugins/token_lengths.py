"""Texts on their token lengths: for a text tower where cutting each text to its own length is exact
(causal attention, pooled at one token), batches packed by length (`token_batches`) or split into
length buckets (`length_buckets`) and encoded cut (`encode_cut_tokens`), and where it pays
(`lengths_pay`: the CPU only, by default). The full context gives the same embeddings up to float
rounding; these only decide speed. Used by the open_clip plugin (`negharness.plugins.openclip_model`).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np
import torch

if TYPE_CHECKING:  # open_clip ships no types (no py.typed): its classes read as Any
    import open_clip

# How texts become embeddings, in describe() (so in the cache key) for models on the length path:
# an embedding of it differs from a full-context one by float rounding only, never mixed in a cache.
TEXT_ENCODER = "lengths-v1"
POOL_AT_TOKEN = ("argmax", "eos", "first")  # pooling at one token: positions after it change nothing
# Cost of one more forward pass, in token positions, when splitting a batch into length buckets:
# smaller on CPU (compute dominates, but small matrix products run below peak), large on accelerators
# (launches and a small batch's low use). A guess: only speed depends on it, never a value beyond rounding;
# on the shared 2-core machine the measurements (perf/bench_text_lengths.py) were too noisy to tune it.
# Under bf16/fp16 autocast a CPU gains only on large matrix products (a 512->2048 linear: 3.1x faster than
# fp32 at 4,928 rows, no faster at 768), so there a split costs as much as on an accelerator.
BUCKET_OVERHEAD = {"cpu": 128}
BUCKET_OVERHEAD_DEFAULT = 1024


def causal_text_tower(model: torch.nn.Module) -> bool:
    """Whether this model's text goes through open_clip's own ``CLIP.encode_text`` with a causal mask and
    pooling at one token: then positions after that token change nothing, and the tower may run on a
    batch cut to its longest text exactly. Anything else (CustomTextCLIP, a Hugging Face text tower,
    no causal mask, 'last' pooling, a subclass's own encode_text) keeps the full context."""
    import open_clip
    from open_clip.transformer import Transformer

    if not isinstance(model, open_clip.model.CLIP) or type(model).encode_text is not open_clip.model.CLIP.encode_text:
        return False
    mask = getattr(model, "attn_mask", None)
    if (mask is None or mask.ndim != 2 or getattr(model, "text_pool_type", None) not in POOL_AT_TOKEN
            or not isinstance(model.transformer, Transformer) or model.positional_embedding.shape[0] != mask.shape[0]):
        return False
    upper = torch.ones(mask.shape, dtype=torch.bool, device=mask.device).triu(1)
    return bool(torch.all(mask[upper] == float("-inf")) and torch.all(mask[~upper] == 0))


def pool_positions(tokens: torch.Tensor, pool_type: str, eos_id: int | None) -> torch.Tensor:
    """(B,) the position each row is pooled at, by open_clip's ``text_global_pool`` rule."""
    if pool_type == "argmax":
        return tokens.argmax(dim=-1)
    if pool_type == "eos":
        if eos_id is None:
            raise ValueError("pooling at the end-of-text token needs its id (the model's text_eos_id)")
        return (tokens == eos_id).int().argmax(dim=-1)
    return torch.zeros(tokens.shape[0], dtype=torch.long)


def length_buckets(lengths: Sequence[int], overhead: int) -> list[list[int]]:
    """Row indices grouped into buckets of similar length, shortest first, minimising the token
    positions computed (each bucket runs at its longest length) plus ``overhead`` per bucket.
    Exact dynamic programme over the distinct lengths (at most the context length of them)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    distinct = sorted(set(lengths))
    upto = [sum(1 for v in lengths if v <= d) for d in distinct]  # rows with length <= distinct[k]
    best, cut = [0.0] + [float("inf")] * len(distinct), [0] * (len(distinct) + 1)
    for j in range(1, len(distinct) + 1):
        for i in range(j):
            cost = best[i] + overhead + (upto[j - 1] - (upto[i - 1] if i else 0)) * distinct[j - 1]
            if cost < best[j]:
                best[j], cut[j] = cost, i
    bounds, j = [], len(distinct)
    while j > 0:
        bounds.append((upto[cut[j] - 1] if cut[j] else 0, upto[j - 1]))
        j = cut[j]
    return [order[lo:hi] for lo, hi in reversed(bounds)]


def bucket_overhead(device: torch.device) -> int:
    """`BUCKET_OVERHEAD` for this device, the accelerators' under bf16/fp16 autocast on a CPU."""
    if device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        return BUCKET_OVERHEAD_DEFAULT
    return BUCKET_OVERHEAD.get(device.type, BUCKET_OVERHEAD_DEFAULT)


def lengths_pay(device: torch.device, choice: str = "auto") -> bool:
    """Whether texts run on their token lengths (`token_batches`, `length_buckets`) rather than the full
    context on ``device``: ``-M text_lengths=on|off`` forces it; ``auto`` is where it was measured faster,
    the CPU only (perf/bench_text_lengths.py). On an H100 the full context was faster: ViT-B-32 bf16, 16,384
    COCO captions, batch 1,024, the planned batches ran at 0.36-0.79x of full context's texts/s
    (perf/gpu_check.sh step 2 on 2026-11-28: ../shared/gpu/gpu_check_run2_h100.log), launches and small batches costing more there than
    the padding saves. On an H200 (2026-11-30, the same texts, perf/bench_text_lengths.py) the runner with
    ``text_lengths=on`` beat its full context once warm (34,560-49,065 against 26,579-26,727 texts/s) but its
    first pass in a process ran at 4,923 (3.3 s against 0.8 s for 16,384 texts: every new cut shape is a
    new kernel choice), and a run is mostly one first pass: still full context on CUDA. Other
    accelerators, unmeasured, keep open_clip's own full-context path."""
    if choice != "auto":
        return choice == "on"
    return device.type == "cpu"


def token_batches(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Row indices sorted by length and packed so that rows x longest length <= ``budget`` per batch
    (one row alone may exceed it). With budget = batch size x context length, a batch holds the
    activations of one full-context batch, filled with short texts: COCO captions come ~270 a batch
    instead of 64, and the matrix products are large enough for bf16 on a CPU to pay."""
    batches: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if not batches or (len(batches[-1]) + 1) * lengths[i] > budget:
            batches.append([])
        batches[-1].append(i)
    return batches


def sequence_first_stacks(model: torch.nn.Module) -> list[open_clip.transformer.Transformer | torch.nn.MultiheadAttention]:
    """open_clip's plain ``Transformer`` stacks in ``model`` (their blocks: ``ResidualAttentionBlock`` on
    ``nn.MultiheadAttention``), each with its attention modules: what `sequence_first` may switch."""
    from open_clip.transformer import ResidualAttentionBlock, Transformer

    found: list[Transformer | torch.nn.MultiheadAttention] = []
    for stack in model.modules():
        blocks = list(getattr(stack, "resblocks", []))
        if (type(stack) is Transformer and stack.batch_first and blocks
                and all(type(b) is ResidualAttentionBlock and type(b.attn) is torch.nn.MultiheadAttention
                        and b.attn.batch_first for b in blocks)):
            found += [stack, *(b.attn for b in blocks)]
    return found


@contextlib.contextmanager
def sequence_first(model: torch.nn.Module, device: torch.device) -> Iterator[None]:
    """Under bf16/fp16 autocast on a CPU, run open_clip's transformer stacks sequence-first, the layout
    open_clip builds with ``batch_first=False``: batch-first attention hands its input projection a
    transposed tensor, and a CPU's bf16 matrix product on one is 2.5-8x slower than on a contiguous one
    (ViT-B-32, 64 images: 2.0 s against 0.8 s). Same weights and operations; restored on exit. fp32
    keeps the batch-first layout (no gain there, and torch's fused attention needs it)."""
    switched = sequence_first_stacks(model) if device.type == "cpu" and torch.is_autocast_enabled("cpu") else []
    for module in switched:
        module.batch_first = False
    try:
        yield
    finally:
        for module in switched:
            module.batch_first = True


def encode_cut_tokens(model: open_clip.CLIP, tokens: torch.Tensor) -> torch.Tensor:
    """open_clip's ``CLIP.encode_text`` on tokens cut to (B, L): the positional embedding and the causal
    mask cut to L as well (only for models `causal_text_tower` accepts)."""
    from open_clip.transformer import text_global_pool

    n = tokens.shape[1]
    cast = model.transformer.get_cast_dtype()
    x = model.token_embedding(tokens).to(cast) + model.positional_embedding[:n].to(cast)
    x = model.ln_final(model.transformer(x, attn_mask=model.attn_mask[:n, :n].contiguous()))
    x = text_global_pool(x, tokens, model.text_pool_type, eos_token_id=getattr(model, "text_eos_id", None))
    proj = model.text_projection
    out: torch.Tensor = x if proj is None else proj(x) if isinstance(proj, torch.nn.Linear) else x @ proj
    return out


class PassTokens:
    """The tokens of the texts a length pre-pass tokenised (`token_batches` needs their lengths), kept so
    that each batch's own tokenising (the model's ``prepare_texts``) takes their rows instead of a second
    pass over the same texts (9 us a COCO caption on a warm tokenizer). Held as int32, cut after the last
    column any text reaches (the rest is padding, zeros), so 100,000 captions take ~25 MB."""

    def __init__(self, texts: Sequence[str], tokens: torch.Tensor) -> None:
        self.index = dict(zip(texts, range(len(texts))))
        used = torch.nonzero(tokens.any(dim=0)).flatten()
        self.width, self.cut = tokens.shape[1], int(used[-1]) + 1 if len(used) else 0
        self.dtype = tokens.dtype
        self.rows = np.ascontiguousarray(tokens[:, :self.cut].numpy().astype(np.int32))

    def of(self, texts: Sequence[str]) -> torch.Tensor | None:
        """The tokens of ``texts`` (N, context), equal to the tokenizer's; None when one was not in the pass."""
        try:
            at = np.fromiter((self.index[t] for t in texts), dtype=np.int64, count=len(texts))
        except KeyError:
            return None
        out = np.zeros((len(texts), self.width), dtype=np.int64)
        out[:, :self.cut] = self.rows[at]
        return torch.from_numpy(out).to(self.dtype)
