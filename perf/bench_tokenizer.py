"""Tokenising CLIP texts (issue 44, item 3): open_clip's `SimpleTokenizer` against the fast one
(`negharness.plugins.clip_tokenizer`), and text encoding end to end before and after.

Same texts, same process, interleaved rounds (before and after swap places each round):

  tokenizer  texts/s of open_clip's tokenizer and of `FastClipTokenizer` on the texts (the fast one's word
             memo warm after round 0, as in a run, whose first batch fills it), their ratio, and that the
             ids are equal
  before     the runner's loop as it was: the model's `text_batches`, then `encode_text` on each batch, which
             tokenises with open_clip's tokenizer inline
  after      `CachedEvalContext.embed_texts` as it is: the fast tokenizer, the next batch tokenised in a
             thread while this one encodes

The model is open_clip's ViT-B-32 config with random weights (``--tiny``: a 1-layer width-32 tower), on
``--device`` at ``--precision``; texts: real COCO captions from NegBench's ``COCO_val_retrieval.csv``
(``--csv``), else generated captions (said in the output).

Run: python perf/bench_tokenizer.py [--csv PATH] [--texts 2048] [--encode-texts 512] [--rounds 3]
     [--batch-size 64] [--device cpu|cuda] [--precision fp32|bf16] [--tiny]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_text_lengths import CSV, TINY, load_texts  # noqa: E402  (the same captions and tiny model)

from negharness.api import ModelOptions  # noqa: E402
from negharness.api import autocast  # noqa: E402
from negharness.engine.runner import CachedEvalContext, RunSettings  # noqa: E402
from negharness.plugins.clip_tokenizer import FastClipTokenizer  # noqa: E402
from negharness.plugins.openclip_model import OpenClipModel  # noqa: E402


def make_model(tiny: bool, folder: Path, device: str) -> OpenClipModel:
    torch.manual_seed(0)
    arch = "ViT-B-32"
    if tiny:
        (folder / "tiny.json").write_text(json.dumps(TINY))
        arch = str(folder / "tiny.json")
    model = OpenClipModel.create("clip", ModelOptions(arch=arch), default_pretrained=None)
    model.to(device).eval_mode()
    return model


def tokenizer_rates(fast: FastClipTokenizer, texts: list[str]) -> tuple[float, float, bool]:
    """(open_clip texts/s, fast texts/s, ids equal)."""
    start = time.perf_counter()
    want = fast.original(texts)
    slow = len(texts) / (time.perf_counter() - start)
    start = time.perf_counter()
    got = fast(texts)
    return slow, len(texts) / (time.perf_counter() - start), torch.equal(got, want)


def before(model: OpenClipModel, texts: list[str], settings: RunSettings) -> torch.Tensor:
    """The runner's text loop before: open_clip's tokenizer, inline, batch after batch."""
    fast, model.tokenizer = model.tokenizer, model.tokenizer.original
    try:
        out = torch.empty(len(texts), 0)
        with torch.inference_mode(), autocast(settings.device, settings.precision):
            for batch in model.text_batches(texts, settings.batch_size):
                emb = model.encode_text([texts[i] for i in batch]).float().cpu()
                if out.shape[1] == 0:
                    out = torch.empty(len(texts), emb.shape[1])
                out[batch] = emb
        return out
    finally:
        model.tokenizer = fast


def after(model: OpenClipModel, texts: list[str], settings: RunSettings) -> torch.Tensor:
    return CachedEvalContext(model, settings, None).embed_texts(texts)


def timed(fn, model: OpenClipModel, texts: list[str], settings: RunSettings) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    out = fn(model, texts, settings)
    if settings.device.type == "cuda":
        torch.cuda.synchronize()
    return len(texts) / (time.perf_counter() - start), out


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = os.environ.get("NEGHARNESS_SHARED")
    ap.add_argument("--csv", type=Path, default=Path(shared) / CSV.relative_to(CSV.parents[4]) if shared else CSV)
    ap.add_argument("--texts", type=int, default=16384, help="texts for the tokenizer rates")
    ap.add_argument("--encode-texts", type=int, default=512, help="texts encoded end to end")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--tiny", action="store_true", help="1-layer width-32 model, 256 texts, 1 round")
    opts = ap.parse_args(argv)
    if opts.tiny:
        opts.texts, opts.encode_texts, opts.rounds = min(opts.texts, 256), min(opts.encode_texts, 64), 1
    texts, source = load_texts(opts.csv, max(opts.texts, opts.encode_texts))
    settings = RunSettings(device=torch.device(opts.device), precision=opts.precision, batch_size=opts.batch_size)
    with tempfile.TemporaryDirectory() as tmp:
        model = make_model(opts.tiny, Path(tmp), opts.device)
    assert isinstance(model.tokenizer, FastClipTokenizer), "the fast tokenizer is not in use"
    print(f"{len(texts)} {source}; {'tiny model' if opts.tiny else 'ViT-B-32 (random weights)'}, {opts.precision} on "
          f"{opts.device}, batch {opts.batch_size}, length plan {'on' if model.on_lengths() else 'off'}, "
          f"{torch.get_num_threads()} threads, {os.cpu_count()} cores")
    rates: dict[str, list[float]] = {"open_clip": [], "fast": [], "before": [], "after": []}
    diff = 0.0
    for r in range(opts.rounds):
        slow, quick, same = tokenizer_rates(model.tokenizer, texts[:opts.texts])
        assert same, "the fast tokenizer's ids differ from open_clip's"
        rates["open_clip"].append(slow)
        rates["fast"].append(quick)
        enc = texts[:opts.encode_texts]
        runs = {fn.__name__: timed(fn, model, enc, settings)  # neither always runs second
                for fn in ((before, after) if r % 2 == 0 else (after, before))}
        (rate_before, out_before), (rate_after, out_after) = runs["before"], runs["after"]
        rates["before"].append(rate_before)
        rates["after"].append(rate_after)
        diff = max(diff, float((out_before - out_after).abs().max()))
        print(f"round {r}: tokenizer open_clip {slow:.0f}, fast {quick:.0f} texts/s, fast/open_clip {quick / slow:.2f}x "
              f"(ids equal on {opts.texts}); encoding {len(enc)} texts: before {rate_before:.1f}, after {rate_after:.1f} "
              f"texts/s, after/before {rate_after / rate_before:.2f}x; load average {os.getloadavg()[0]:.2f}")
    median = {k: statistics.median(v) for k, v in rates.items()}
    print(f"median: tokenizer fast/open_clip {median['fast'] / median['open_clip']:.2f}x, encoding after/before "
          f"{median['after'] / median['before']:.2f}x; max abs difference of the embeddings after vs before {diff:.2e}")
    return {"tokenizer_speedup": median["fast"] / median["open_clip"], "encode_speedup": median["after"] / median["before"],
            "max_abs_diff": diff}


if __name__ == "__main__":
    main()
