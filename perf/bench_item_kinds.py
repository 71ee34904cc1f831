"""The item kinds (group, multi_choice ITT and TOT, image_choice over boxes) and qrels retrieval image to
text within per-query candidate sets (MRMR Negation's protocol: 4 texts per image) on 10,000 generated items:
each task's evaluate time with its embeddings already cached (a second context over the same cache
folder, a fresh task object: rows re-read and re-checked, every embedding looked up, scores and metrics).

Goal (issue 34): a new YAML kind scores 10,000 items in under a second once embeddings are cached.
Run: python perf/bench_item_kinds.py [--items N] (``--tiny``: 50 items, a check of the script only)
"""

from __future__ import annotations

import argparse
import json
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from negharness.api import TaskOptions
from negharness.declarative.register import load_folder
from negharness.engine.runner import CachedEvalContext, RunSettings
from negharness.store.cache import EmbeddingCache
from negharness.testing import COLOURS, KeywordModel

COMMON = 'family: bench\ndescription: "bench"\ncitation: "none"\ndata_help: "none"\n'
TASKS = {
    "bench_group": "kind: group\ndata: {file: items.jsonl}\nmedia: {members: ['img/{a}.png', 'img/{b}.png']}\n"
                   "captions: {members: [ca, cb]}\nmain_score: group_score\n",
    "bench_itt": "kind: multi_choice\ndata: {file: items.jsonl}\nmedia: {path: 'img/{a}.png'}\n"
                 "captions: {positives: [ca, cc], false: cb}\nmain_score: accuracy\n",
    "bench_tot": "kind: multi_choice\ndata: {file: items.jsonl}\ntext_only: true\n"
                 "captions: {positives: [ca, cc], false: cb}\nmain_score: accuracy\n",
    "bench_regions": "kind: image_choice\ndata: {file: items.jsonl}\nmedia: {path: 'img/{a}.png', boxes: boxes}\n"
                     "captions: {text: ca}\nmain_score: accuracy\n",
    "bench_mrmr": "kind: retrieval\ndirection: media_to_text\ndata: {file: items.jsonl}\n"
                  "media: {path: 'img/{a}.png', id: id}\ntexts: {file: texts.jsonl, id: id, text: text}\n"
                  "qrels: {file: qrels.tsv, query: query-id, item: corpus-id}\ncandidates: {item: '(.*)_[^_]*'}\n"
                  "metrics: [R@1, MIR]\nmain_score: R@1\n",
}
IMAGES = 64  # distinct image files: items share them, as COCO-based sets do


def write_data(root: Path, n: int) -> None:
    """``n`` items over `IMAGES` two-colour 8x8 images; every caption distinct."""
    from PIL import Image

    names = list(COLOURS)
    (root / "img").mkdir(parents=True)
    for i in range(IMAGES):
        arr = np.zeros((8, 8, 3), dtype=np.uint8)
        arr[:, :4], arr[:, 4:] = COLOURS[names[i % len(names)]], COLOURS[names[(i // len(names) + 1) % len(names)]]
        Image.fromarray(arr).save(root / "img" / f"{i}.png")
    with (root / "items.jsonl").open("w") as fh, (root / "texts.jsonl").open("w") as texts:
        for k in range(n):
            c1, c2 = names[k % len(names)], names[(k // 3) % len(names)]
            for j, caption in enumerate((f"a {c1} thing number {k}", f"a {c2} thing number {k}",
                                         f"one {c1} object, item {k}", f"no {c2} item here, {k}")):
                texts.write(json.dumps({"id": f"{k}_{j + 1}", "text": caption}) + "\n")
            fh.write(json.dumps({"id": str(k), "a": k % IMAGES, "b": (k * 7 + 1) % IMAGES, "ca": f"a {c1} thing number {k}",
                                 "cb": f"a {c2} thing number {k}", "cc": f"one {c1} object, item {k}",
                                 "boxes": [[0, 0, 4, 8], [4, 0, 4, 8]]}) + "\n")
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\n" + "".join(f"{k}\t{k}_{1 + k % 4}\n" for k in range(n)))


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--tiny", action="store_true", help="50 items: a check of the script only")
    opts = ap.parse_args(argv)
    n = 50 if opts.tiny else opts.items
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root, folder, cache = Path(tmp) / "data", Path(tmp) / "yaml", Path(tmp) / "cache"
        write_data(root, n)
        folder.mkdir()
        for name, body in TASKS.items():
            (folder / f"{name}.yaml").write_text(f"name: {name}\n{COMMON}{textwrap.dedent(body)}")
        model = KeywordModel()
        for cls in load_folder(folder):
            cold = cls(TaskOptions(root)).evaluate(CachedEvalContext(model, RunSettings(workers=0), EmbeddingCache(cache)))
            ctx = CachedEvalContext(model, RunSettings(workers=0), EmbeddingCache(cache))
            task = cls(TaskOptions(root))
            start = time.perf_counter()
            task.required_files()  # the run's planning: rows read and checked, before any model loads
            read = time.perf_counter() - start
            start, cpu = time.perf_counter(), time.process_time()
            warm = task.evaluate(ctx)
            out[cls.name] = time.perf_counter() - start
            cpu = time.process_time() - cpu  # the CPU time it used: on a shared machine, beside the wall time
            assert warm.metrics == cold.metrics, (cls.name, warm.metrics, cold.metrics)
            assert ctx.counters["texts_encoded"] == 0 and ctx.counters["media_encoded"] == 0, ctx.counters
            print(f"{cls.name:15s} {n:,} items: rows read {read:.3f} s; scored, embeddings cached: "
                  f"{out[cls.name]:.3f} s (CPU {cpu:.3f} s)  {warm.metrics}")
    return out


if __name__ == "__main__":
    main()
