"""Questions per second of `hf_vlm` on a two-option choice task (SugarCrepe-like), both scorings.

The model is LLaVA-1.5-shaped with random weights built from its config (no download): ``7b`` is
LLaVA-1.5-7B's shape (Llama-2-7B text model, CLIP ViT-L/14 at 336 px: 576 image tokens), ``tiny``
a 1-layer stand-in for a CPU check of the script itself. Throughput depends on shapes, not on weight
values, so a random 7B model times what a real one would. ``loglik`` runs one sequence per option
(two per question); ``letter`` one per question. Baseline in the same run: ``loglik`` at batch 1.

Run: python perf/bench_vlm_choice.py --size 7b --device cuda --precision bf16 [--questions 64]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

SHAPES = {
    "7b": dict(text=dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=32), vision=dict(hidden_size=1024, intermediate_size=4096,
                                                              num_hidden_layers=24, num_attention_heads=16,
                                                              image_size=336, patch_size=14), vocab=32064),
    "tiny": dict(text=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                           num_key_value_heads=2), vision=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                                               num_attention_heads=2, image_size=336, patch_size=14),
                 vocab=32064),
}
CAPTIONS = [("a man riding a red bike on a city street", "a man riding a blue bike on a city street"),
            ("two dogs playing with a ball in the park", "there are no dogs playing in the park")]


def build(size: str, dtype: torch.dtype, device: str):
    """(processor, model) of the given shape: a word-level tokenizer padded to the vocabulary size."""
    from choice_helpers import CHAT, word_tokenizer
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    s = SHAPES[size]
    words = [c for pair in CAPTIONS for c in pair] + ["Describe the image in one sentence."]
    tok = word_tokenizer(words)
    side = s["vision"]["image_size"]
    processor = LlavaProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": side},
                                                                  crop_size={"height": side, "width": side}),
                               tokenizer=tok, patch_size=s["vision"]["patch_size"],
                               vision_feature_select_strategy="default", num_additional_image_tokens=1,
                               chat_template=CHAT)
    config = LlavaConfig(vision_config=CLIPVisionConfig(**s["vision"]),
                         text_config=LlamaConfig(vocab_size=s["vocab"], pad_token_id=tok.pad_token_id, **s["text"]),
                         image_token_index=tok.convert_tokens_to_ids("<image>"),
                         image_seq_length=(side // s["vision"]["patch_size"]) ** 2,
                         vision_feature_select_strategy="default")
    torch.set_default_dtype(dtype)
    with torch.device(device):
        model = LlavaForConditionalGeneration(config)
    torch.set_default_dtype(torch.float32)
    return processor, model.eval()


def rate(model, choices, batch_size: int, precision: str) -> float:
    model.score_choices(type(choices)(choices.media, choices.media_index[:2], choices.options[:2],
                                      choices.correct[:2]), batch_size, precision)  # warm-up
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    model.score_choices(choices, batch_size, precision)
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    return len(choices) / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    from negharness.io.media import MediaSet
    from negharness.plugins.hf_vlm import HFVLM
    from negharness.scoring.choices import ChoiceSet

    p = argparse.ArgumentParser()
    p.add_argument("--size", choices=list(SHAPES), default="tiny")
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--questions", type=int, default=16)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 16])
    args = p.parse_args(argv)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.precision]
    processor, vlm = build(args.size, dtype, args.device)
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 255, (480, 640, 3), dtype=np.uint8) for _ in range(8)]
    media = MediaSet("bench/noise", "image", [str(i) for i in range(8)], lambda i: images[i], cheap=True)
    n = args.questions
    choices = ChoiceSet(media, [i % 8 for i in range(n)], [CAPTIONS[i % 2] for i in range(n)], [0] * n)
    params = sum(p.numel() for p in vlm.parameters()) / 1e9
    print(f"LLaVA-1.5-shaped {args.size} ({params:.2f} B parameters), {args.device}, {args.precision}, {n} questions")
    base = None
    for scoring in ("loglik", "letter"):
        model = HFVLM(processor, vlm, f"random-{args.size}", scoring, dtype=args.precision)
        model.device = torch.device(args.device)
        for bs in args.batch_sizes:
            q = rate(model, choices, bs, args.precision)
            base = base or q
            print(f"  {scoring:6} batch {bs:3}: {q:8.2f} questions/s  ({q / base:.2f}x loglik batch {args.batch_sizes[0]})")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory():
        main()
