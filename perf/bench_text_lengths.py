"""Text encoding on real token lengths (issue 25, item 1) against the full 77-token context.

Same texts, same random-weight model, same process, interleaved rounds (full, cut, buckets, planned, then
the next round), under inference mode at ``--precision`` (fp32, or bf16 autocast as the runner does):

  full     open_clip's own ``CLIP.encode_text`` on the whole context (the path before)
  cut      each batch cut to its longest text (positional embedding and causal mask too), one pass
  buckets  `OpenClipModel.encode_text` on the runner's old batches of ``--batch-size`` texts in file order:
           each batch split into length buckets, each cut to its longest text, put back in order
  planned  the model's own `text_batches` (sorted by token length, each at most batch size x context token
           positions), each through `encode_text`, put back in order
  runner   the runner itself: `CachedEvalContext.embed_texts` (no cache): its plan, tokenising in a thread
           beside the encoding, its checks; on CUDA at full context, as `lengths_pay` decides there
  runner_on the runner with ``-M text_lengths=on`` (length-sorted batches cut to their longest text, as on
           the CPU), whatever `lengths_pay` decides on the device: the figure that decision is checked against
  pure     the text tower alone at full context: every batch tokenised and on the device before the clock
           starts (issue 54: the device's pure text rate, which perf/gpu_sim.py scales from the image tower's)
  pure_cut the same on length-sorted batches, each cut to its longest text (the pure rate text_lengths=on
           can reach)

Texts: real COCO captions from NegBench's ``COCO_val_retrieval.csv`` (``--csv``, default the shared
data beside the repository), else generated captions of 8-20 words (said in the output). Printed per
round: texts/s of each path, the ratios, the load average; then the max abs difference of the
embeddings against the full context.

Run: python perf/bench_text_lengths.py [--csv PATH] [--texts 256] [--rounds 3] [--arch ViT-B-32]
     [--precision fp32|bf16] [--device cpu|cuda] [--paths full planned] [--json FILE] [--tiny]
(``--paths``: a subset to time, ``full`` always among them: the reference; ``--json``: the medians to a file.)
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import math
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from negharness.api import ModelOptions
from negharness.api import autocast
from negharness.plugins.openclip_model import OpenClipModel
from negharness.plugins.token_lengths import encode_cut_tokens, pool_positions

SHARED = Path(os.environ.get("NEGHARNESS_SHARED") or Path(__file__).resolve().parents[2] / "shared")
CSV = SHARED / "data/negbench/negbench_eval_csvs/images/COCO_val_retrieval.csv"
TINY = {"model_cfg": {"embed_dim": 32, "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16,
                                       "head_width": 16},
                      "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}}}


def load_texts(path: Path, n: int) -> tuple[list[str], str]:
    """(n texts, where they came from): the CSV's captions in file order, else generated ones."""
    if path.is_file():
        with path.open(newline="") as f:
            caps = [c for row in csv.DictReader(f) for c in ast.literal_eval(row["captions"])]
        return caps[:n], f"real COCO captions from {path.name}"
    rng = random.Random(0)
    words = "a the man woman dog cat red blue sofa kitchen table street car standing on near with".split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(8, 20))) for _ in range(n)], "generated captions"


def make_model(arch: str, tiny: bool, folder: Path) -> OpenClipModel:
    torch.manual_seed(0)
    if tiny:
        cfg = folder / "tiny.json"
        cfg.write_text(json.dumps(TINY))
        arch = str(cfg)
    return OpenClipModel.create("clip", ModelOptions(arch=arch), default_pretrained=None)


def full(model: OpenClipModel, texts: list[str]) -> torch.Tensor:
    return F.normalize(model.model.encode_text(model.tokenizer(texts).to(model.device)).float(), dim=-1)


def cut(model: OpenClipModel, texts: list[str]) -> torch.Tensor:
    tokens = model.tokenizer(texts)
    longest = int(pool_positions(tokens, model.model.text_pool_type, getattr(model.model, "text_eos_id", None)).max()) + 1
    return F.normalize(encode_cut_tokens(model.model, tokens[:, :longest].to(model.device)).float(), dim=-1)


def buckets(model: OpenClipModel, texts: list[str]) -> torch.Tensor:
    return model.encode_text(texts)


PATHS = {"full": full, "cut": cut, "buckets": buckets, "planned": None, "runner": None, "runner_on": None, "pure": None, "pure_cut": None}


def pure(model: OpenClipModel, texts: list[str], bs: int, precision: str, sort: bool) -> tuple[float, torch.Tensor]:
    """The tower's own time: batches tokenised, cut (``sort``: length-sorted, each to its longest text) and on
    the device first; only the encoding and one synchronisation are timed."""
    tokens = model.tokenizer(texts)
    pool = pool_positions(tokens, model.model.text_pool_type, getattr(model.model, "text_eos_id", None))
    order = torch.argsort(pool, stable=True) if sort else torch.arange(len(texts))
    batches = []
    for lo in range(0, len(texts), bs):
        idx = order[lo:lo + bs]
        longest = int(pool[idx].max()) + 1 if sort else tokens.shape[1]
        batches.append((idx, tokens[idx, :longest].to(model.device)))
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.inference_mode(), autocast(model.device, precision):
        embs = [encode_cut_tokens(model.model, t) if sort else model.model.encode_text(t) for _, t in batches]
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    out = torch.empty((len(texts), embs[0].shape[1]))
    for (idx, _), emb in zip(batches, embs):
        out[idx] = F.normalize(emb.float(), dim=-1).cpu()
    return seconds, out


def timed(name: str, model: OpenClipModel, texts: list[str], bs: int, precision: str) -> tuple[float, torch.Tensor]:
    if name in ("pure", "pure_cut"):
        return pure(model, texts, bs, precision, sort=name == "pure_cut")
    start = time.perf_counter()
    if name in ("runner", "runner_on"):  # the runner's own path: plan, tokenise in a thread, encode, check (no cache)
        from negharness.engine.runner import CachedEvalContext, RunSettings

        chosen, model.text_lengths = model.text_lengths, "on" if name == "runner_on" else model.text_lengths
        try:
            ctx = CachedEvalContext(model, RunSettings(device=model.device, precision=precision, batch_size=bs), cache=None)
            out = ctx.embed_texts(texts)
        finally:
            model.text_lengths = chosen
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start, out.float().cpu()
    with torch.inference_mode(), autocast(model.device, precision):
        if name == "planned":
            parts = [(b, model.encode_text([texts[i] for i in b])) for b in model.text_batches(texts, bs)]
            out = parts[0][1].new_empty((len(texts), parts[0][1].shape[1]))
            for b, emb in parts:
                out[torch.tensor(b, device=out.device)] = emb
        else:
            out = torch.cat([PATHS[name](model, texts[lo:lo + bs]) for lo in range(0, len(texts), bs)])
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, out.float().cpu()


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=CSV)
    ap.add_argument("--texts", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--arch", default="ViT-B-32")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--paths", nargs="+", default=list(PATHS), choices=list(PATHS), help="which paths to time")
    ap.add_argument("--json", type=Path, help="also write the median rates and differences to this JSON file")
    ap.add_argument("--tiny", action="store_true", help="a 1-layer width-32 model, 16 texts, 1 round (a check of the script)")
    opts = ap.parse_args(argv)
    paths = ["full", *(k for k in PATHS if k in opts.paths and k != "full")]
    if opts.tiny:
        opts.texts, opts.rounds = min(opts.texts, 16), 1
    texts, source = load_texts(opts.csv, opts.texts)
    with tempfile.TemporaryDirectory() as tmp:
        model = make_model(opts.arch, opts.tiny, Path(tmp)).to(opts.device)
    assert model.text_on_lengths, "this model's text tower is not on the length path"
    lengths = (pool_positions(model.tokenizer(texts), model.model.text_pool_type, None) + 1).tolist()
    print(f"{len(texts)} {source}; tokens min {min(lengths)} mean {sum(lengths) / len(lengths):.1f} max {max(lengths)}; "
          f"{'tiny model' if opts.tiny else opts.arch + ' (random weights)'}, {opts.precision} on {opts.device}, batch {opts.batch_size}, "
          f"{torch.get_num_threads()} threads, {os.cpu_count()} cores")
    rates: dict[str, list[float]] = {k: [] for k in paths}
    outs: dict[str, torch.Tensor] = {}
    for r in range(opts.rounds):
        for name in paths:
            seconds, outs[name] = timed(name, model, texts, opts.batch_size, opts.precision)
            rates[name].append(len(texts) / seconds)
        load = os.getloadavg()[0]
        print(f"round {r}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in rates.items()) + " texts/s; "
              + ", ".join(f"{k}/full {rates[k][-1] / rates['full'][-1]:.2f}x" for k in paths[1:])
              + (f"; planned/buckets {rates['planned'][-1] / rates['buckets'][-1]:.2f}x" if {"planned", "buckets"} <= set(paths) else "")
              + f"; load average {load:.2f}")
    diff = {k: float((outs[k] - outs["full"]).abs().max()) for k in paths[1:]}
    cosine = float((outs["planned"] * outs["full"]).sum(-1).min()) if "planned" in outs else float("nan")
    print("max abs difference against the full context: " + ", ".join(f"{k} {v:.2e}" for k, v in diff.items())
          + f"; min cosine (planned) {cosine:.7f}")
    median = {k: statistics.median(v) for k, v in rates.items()}
    if opts.json:
        from negharness.io.atomic_files import atomic_write_json

        atomic_write_json(opts.json, {"texts": len(texts), "source": source, "real": source.startswith("real"),
                                      "mean_tokens": sum(lengths) / len(lengths), "arch": "tiny" if opts.tiny else opts.arch,
                                      "device": opts.device, "precision": opts.precision, "batch": opts.batch_size,
                                      "rounds": opts.rounds, "median_texts_per_s": median, "rates": rates,
                                      "max_abs_diff": diff, "min_cosine_planned": cosine})
    return {"speedup": median.get("planned", math.nan) / median["full"],
            "over_buckets": median.get("planned", math.nan) / median.get("buckets", math.nan),
            "max_abs_diff": max(diff.values(), default=0.0)}


if __name__ == "__main__":
    main()
