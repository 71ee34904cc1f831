"""negharness against the peers users would run instead, on the same inputs, as interleaved fresh processes.

(a) NegBench Retrieval-Neg COCO: ``negharness run --task negbench_retrieval_coco`` against CLIP_benchmark
    1.6.2's own code path for ``zeroshot_retrieval`` (its ``load_clip``, ``build_dataset("mscoco_captions")``
    over a COCO-captions annotation file written from the NegBench CSV, its collate function, and
    ``clip_benchmark.metrics.zeroshot_retrieval.evaluate``: what its CLI's ``run`` does, minus the CLI module,
    whose import needs pycocoevalcap for captioning). Both caption files run in one CLIP_benchmark process
    (one model load; a CLI user would start it twice). Pairings: fp32 vs fp32 (CLIP_benchmark ``--no_amp``),
    bf16 vs bf16 (its ``--amp``: bf16 autocast, also on the CPU) and each tool at its defaults (negharness
    fp32 on the CPU against CLIP_benchmark's amp), the last from the same processes as the first two.
(b) NegBench MCQ COCO: ``negharness run --task negbench_mcq_coco`` against the NegBench authors' MCQ evaluation
    (github.com/m1k2zoo/negbench, benchmarks/src/evaluation/mcq.py ``evaluate_model`` and
    training/data.py ``CsvMCQDataset``), re-implemented below: per batch, every row's 4 captions tokenised and
    encoded, image and text features L2-normalised, argmax of the dot products, tallies per template. Their
    evaluation casts inputs only (no autocast), so it is fp32 at their default ``--precision amp``.

Inputs: the real NegBench CSVs (../shared/data/negbench; their first rows), one generated stand-in JPEG per
distinct image path (640x480, smooth random content), and a random-weight open_clip ViT-B-32 (seed 0) saved
once to a file that every tool loads. Peers use their own data-loading defaults (CLIP_benchmark's CLI:
batch 64, 4 workers; the authors' eval script: batch 64, 8 workers) unless ``--peer-workers`` says otherwise.
Each round runs every process once (in reverse order every second round) and prints wall time, ru_maxrss of the
child (wait4), the peak PSS of its process tree (workers included; sampled every second), the load average
before it, the ratio negharness / peer, and whether the values are equal (R@1/5/10 on both caption files;
accuracy and per-template accuracy). Each round also times, first and last, a process that only starts (the
faster taken): a fresh interpreter importing torch and open_clip (and, on CUDA, its first tensor there), what
every side pays before its own work;
the ratio after it, (negharness - start-up) / (peer - start-up), is the one that can show a harness's work at
sizes where start-up is most of the wall (on the H200, 500 rows: ~9 s of 12-14 s).

``--omp-rounds N`` instead measures ``OMP_WAIT_POLICY=PASSIVE`` (what the CLI sets) against unset: text
encoding (texts/s over real captions), a whole ``negharness run`` of the Retrieval-Neg protocol, and
decoding in the loop (perf/bench_decode_throughput.py, threads:auto), interleaved.

Run: python perf/peer_clip_benchmark.py [--rounds 3] [--rows 200] [--mcq-rows 500] [--parts retrieval mcq]
     [--precisions fp32 bf16] [--json FILE] [--omp-rounds 3] [--tiny: a few rows, a tiny model config, one round]
Without clip_benchmark installed the Retrieval-Neg comparison is skipped with one line (the MCQ part runs).
"""

from __future__ import annotations

import argparse
import ast
import csv
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NEGHARNESS_SHARED") or REPO.parent / "shared")
CSVS = SHARED / "data" / "negbench" / "negbench_eval_csvs" / "images"
RET_ORIG = "COCO_val_retrieval.csv"
RET_NEG = "COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv"
MCQ_CSV = "COCO_val_mcq_llama3.1_rephrased.csv"
RET_TASK, MCQ_TASK = "negbench_retrieval_coco", "negbench_mcq_coco"
ANCHOR = re.compile(r"(?:^|/)coco/images/val2017/(.+)$")  # the task's own path rule for COCO (tasks/negbench/data.py)
TINY_CONFIG = {"embed_dim": 32, "quick_gelu": False,
               "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "patch_size": 16},
               "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2}}
SKIP_CB = ("CLIP_benchmark comparison skipped: clip_benchmark is not installed "
           "(pip install --no-deps clip_benchmark==1.6.2 pycocotools)")
KS = (1, 5, 10)


# ---- inputs ---------------------------------------------------------------------------------------------
def first_rows(source: Path, rows: int) -> tuple[list[str], list[list[str]]]:
    with source.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, [r for _, r in zip(range(rows), reader)]


def generated_rows(name: str, rows: int) -> tuple[list[str], list[list[str]]]:
    """Rows in the layout of ``name`` when the real CSV is absent (a newcomer's clone): a check of the script only."""
    things = ["dog", "cat", "car", "chair", "cup", "bowl", "kite", "boat"]
    path = "data/coco/images/val2017/{:012d}.jpg".format
    if name == MCQ_CSV:
        return (["image_path", "correct_answer", "caption_0", "caption_1", "caption_2", "caption_3", "correct_answer_template"],
                [[path(i // 2), "0", f"A {a} is not in this image.", f"This image shows a {b}, but no {a} is present.",
                  f"A {b} is present in this image.", f"No {a} here.", ("negative", "hybrid", "positive")[i % 3]]
                 for i, (a, b) in enumerate(zip(things * rows, things[1:] * rows)) if i < rows])
    neg = name == RET_NEG
    caps = [[f"A {a} next to a {b}" + (f", but no {c}." if neg else "."), f"Some {b}s on a table" + (" without any cup." if neg else ".")]
            for a, b, c in zip(things * rows, things[2:] * rows, things[3:] * rows)][:rows]
    return (["positive_objects", "negative_objects", "filepath", "image_id", "captions"],
            [["[]", "[]", path(i), str(i), repr(c)] for i, c in enumerate(caps)])


def write_csv(target: Path, header: list[str], rows: list[list[str]]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])


def image_file(root: Path, raw: str) -> Path:
    m = ANCHOR.search(raw.strip())
    if not m:
        raise SystemExit(f"{raw!r}: not a COCO val2017 path")
    return root / "coco" / "val2017" / m.group(1)


def stand_in_images(paths: list[Path], size: tuple[int, int]) -> None:
    """One JPEG per path, smooth random content (a photo's cost to decode, not noise's), seeded by position."""
    import numpy as np
    from PIL import Image

    for i, p in enumerate(paths):
        rng = np.random.default_rng(i)
        small = Image.fromarray(rng.integers(0, 255, (6, 8, 3), dtype=np.uint8)).resize(size, Image.BICUBIC)
        noisy = np.asarray(small, dtype=np.int16) + rng.integers(-8, 9, (size[1], size[0], 3))
        p.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(noisy.clip(0, 255).astype(np.uint8)).save(p, quality=90)


def coco_annotations(target: Path, rows: list[list[str]], header: list[str], root: Path) -> int:
    """A COCO-captions file (what torchvision's CocoCaptions, so CLIP_benchmark's mscoco_captions, reads): image
    ids in row order, each row's captions in order, empty ones left out as negharness does. Returns captions."""
    col, cap = header.index("filepath"), header.index("captions")
    images, anns = [], []
    for i, row in enumerate(rows):
        images.append({"id": i, "file_name": image_file(root, row[col]).name})
        for c in ast.literal_eval(row[cap]):
            if c.strip():
                anns.append({"id": len(anns), "image_id": i, "caption": c.strip()})
    target.write_text(json.dumps({"images": images, "annotations": anns}), encoding="utf-8")
    return len(anns)


@dataclass
class Inputs:
    root: Path
    arch: str
    checkpoint: Path
    cb_root: Path
    annotations: dict[str, Path]
    captions: dict[str, int]
    mcq_rows: int
    images: int
    mcq_images: int
    sample_captions: list[str] = field(default_factory=list)


def prepare(work: Path, rows: int, mcq_rows: int, tiny: bool, csvs: Path) -> Inputs:
    import torch

    root = work / "data"
    tables = {}
    for name, n in ((RET_ORIG, rows), (RET_NEG, rows), (MCQ_CSV, mcq_rows)):
        tables[name] = first_rows(csvs / name, n) if (csvs / name).is_file() else generated_rows(name, n)
        write_csv(root / "negbench" / name, *tables[name])
    ret_paths = [image_file(root, r[tables[RET_ORIG][0].index("filepath")]) for r in tables[RET_ORIG][1]]
    mcq_paths = [image_file(root, r[0]) for r in tables[MCQ_CSV][1]]
    paths = list(dict.fromkeys(ret_paths + mcq_paths))
    stand_in_images(paths, (64, 48) if tiny else (640, 480))
    cb_root = work / "cb"
    cb_root.mkdir()
    (cb_root / "val2014").symlink_to(root / "coco" / "val2017")  # where mscoco_captions looks for its images
    annotations, captions = {}, {}
    for key, name in (("original", RET_ORIG), ("negated", RET_NEG)):
        annotations[key] = cb_root / f"{key}.json"
        captions[key] = coco_annotations(annotations[key], tables[name][1], tables[name][0], root)
    import logging

    import open_clip

    logging.getLogger().setLevel(logging.ERROR)  # open_clip's "no pretrained weights loaded": random on purpose
    torch.manual_seed(0)
    if tiny:
        arch_file = work / "tiny-clip.json"
        arch_file.write_text(json.dumps(TINY_CONFIG))
        open_clip.add_model_config(arch_file)
        model, arch = open_clip.create_model(arch_file.stem), str(arch_file)
    else:
        model, arch = open_clip.create_model("ViT-B-32"), "ViT-B-32"
    checkpoint = work / "random-vit.pt"
    torch.save(model.state_dict(), checkpoint)
    cap = tables[RET_ORIG][0].index("captions")
    sample = [c for r in tables[RET_ORIG][1] for c in ast.literal_eval(r[cap]) if c.strip()]
    return Inputs(root, arch, checkpoint, cb_root, annotations, captions, mcq_rows, len(dict.fromkeys(ret_paths)),
                  len(dict.fromkeys(mcq_paths)), sample)


# ---- children (run as fresh processes: python peer_clip_benchmark.py --child KIND ARGS.json) -------------
def _open_clip_model(arch: str, checkpoint: str):
    """open_clip model, transform and tokenizer as the peers build them; a config file is registered first."""
    import open_clip

    if arch.endswith(".json"):
        open_clip.add_model_config(arch)
        arch = Path(arch).stem
    return arch, open_clip


def child_clip_benchmark(a: dict[str, Any]) -> dict[str, Any]:
    """CLIP_benchmark's own path for zeroshot_retrieval (clip_benchmark/cli.py ``run``), both caption files."""
    import torch
    from clip_benchmark.datasets.builder import build_dataset, get_dataset_collate_fn
    from clip_benchmark.metrics import zeroshot_retrieval
    from clip_benchmark.models import load_clip

    arch, _ = _open_clip_model(a["arch"], a["checkpoint"])
    torch.manual_seed(0)  # as its run() does
    model, transform, tokenizer = load_clip(model_type="open_clip", model_name=arch, pretrained=a["checkpoint"],
                                            cache_dir=None, device=a.get("device", "cpu"))
    model.eval()
    if a.get("fp32_scores"):  # diagnosis only: its encoders' bf16 outputs widened, so normalising and scoring run in fp32
        image_tower, text_tower = model.encode_image, model.encode_text
        model.encode_image = lambda x, **kw: image_tower(x, **kw).float()
        model.encode_text = lambda x, **kw: text_tower(x, **kw).float()
    out = {}
    for key, ann in a["annotations"].items():
        ds = build_dataset(dataset_name="mscoco_captions", root=a["cb_root"], transform=transform, split="test",
                           annotation_file=ann, download=True, language="en", task="zeroshot_retrieval")
        dl = torch.utils.data.DataLoader(ds, batch_size=a["batch_size"], shuffle=False, num_workers=a["workers"],
                                         collate_fn=get_dataset_collate_fn("mscoco_captions"))
        out[key] = zeroshot_retrieval.evaluate(model, dl, tokenizer, recall_k_list=list(KS), device=a.get("device", "cpu"),
                                               amp=a["amp"])
    return out


def child_clip_benchmark_standin(a: dict[str, Any]) -> dict[str, Any]:
    """A stand-in for `child_clip_benchmark` where clip_benchmark is not installed (CI): the same output shape
    ({"original"|"negated": {"image_retrieval_recall@K": fraction, "text_retrieval_recall@K": ...}}) from the
    same model, transform and tokenizer (open_clip's), computed as its ``zeroshot_retrieval.evaluate`` does:
    a text's image is retrieved at K when it is among the K highest-scoring images. It checks this script's
    own code (the record's metric names, the comparison, the JSON) without the peer; its wall is no peer's."""
    import torch
    import torch.nn.functional as F
    from PIL import Image

    arch, open_clip = _open_clip_model(a["arch"], a["checkpoint"])
    torch.manual_seed(0)
    model, _, transform = open_clip.create_model_and_transforms(arch, pretrained=a["checkpoint"], device=a.get("device", "cpu"))
    tokenizer = open_clip.get_tokenizer(arch)
    model.eval()
    out = {}
    for key, ann in a["annotations"].items():
        data = json.loads(Path(ann).read_text(encoding="utf-8"))
        folder = Path(a["cb_root"]) / "val2014"
        with torch.no_grad():
            images = F.normalize(torch.cat([model.encode_image(torch.stack([transform(Image.open(folder / im["file_name"])
                                                                                       .convert("RGB")) for im in
                                                                             data["images"][lo:lo + 64]]))
                                            for lo in range(0, len(data["images"]), 64)]), dim=-1)
            texts = F.normalize(model.encode_text(tokenizer([c["caption"] for c in data["annotations"]])), dim=-1)
        owner = torch.tensor([c["image_id"] for c in data["annotations"]])  # image ids are row positions
        ranked = (texts @ images.T).argsort(dim=1, descending=True)
        by_image = (images @ texts.T).argsort(dim=1, descending=True)
        out[key] = {}
        for k in KS:
            out[key][f"image_retrieval_recall@{k}"] = float((ranked[:, :k] == owner[:, None]).any(1).float().mean())
            out[key][f"text_retrieval_recall@{k}"] = float((owner[by_image[:, :k]] == torch.arange(len(images))[:, None])
                                                           .any(1).float().mean())
    return out


class AuthorsMcqRows:
    """The authors' CsvMCQDataset in spirit: per row the image through the model's eval transform, the option
    captions in column order, the correct index and the correct answer's template. Paths are re-rooted by the
    COCO anchor (their CSVs carry their own cluster prefixes)."""

    def __init__(self, csv_path: str, root: str, transform: Any) -> None:
        with open(csv_path, newline="", encoding="utf-8") as f:
            self.rows = list(csv.DictReader(f))
        self.options = sorted((c for c in self.rows[0] if re.fullmatch(r"caption_\d+", c)), key=lambda c: int(c[8:]))
        self.root, self.transform = Path(root), transform

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
        from PIL import Image

        row = self.rows[i]
        image = self.transform(Image.open(image_file(self.root, row["image_path"])))
        return image, [row[c] for c in self.options], int(row["correct_answer"]), row["correct_answer_template"]


def child_authors_mcq(a: dict[str, Any]) -> dict[str, Any]:
    """The NegBench authors' MCQ scoring, re-implemented: every row's options encoded with its batch, features
    L2-normalised, the answer is the argmax of image . option; accuracy overall and per correct-answer template."""
    import torch
    import torch.nn.functional as F

    arch, open_clip = _open_clip_model(a["arch"], a["checkpoint"])
    device = a.get("device", "cpu")
    model, _, transform = open_clip.create_model_and_transforms(arch, pretrained=a["checkpoint"], device=device)
    tokenizer = open_clip.get_tokenizer(arch)
    model.eval()
    data = AuthorsMcqRows(a["csv"], a["root"], transform)
    loader = torch.utils.data.DataLoader(data, batch_size=a["batch_size"], shuffle=False, num_workers=a["workers"])
    right = {t: 0 for t in ("positive", "negative", "hybrid")}
    seen = dict.fromkeys(right, 0)
    with torch.no_grad():
        for images, options, correct, templates in loader:
            n_opt, batch = len(options), images.shape[0]
            tokens = torch.cat([tokenizer(list(column)) for column in options]).to(device)  # option-major: (n_opt * B, L)
            img = F.normalize(model.encode_image(images.to(device)), dim=-1)
            txt = F.normalize(model.encode_text(tokens), dim=-1).view(n_opt, batch, -1)
            chosen = torch.einsum("bf,nbf->bn", img, txt).argmax(dim=1).cpu()
            for t, ok in zip(templates, (chosen == correct).tolist()):
                seen[t] += 1
                right[t] += int(ok)
    total = len(data)
    out = {"total_accuracy": sum(right.values()) / total}
    out.update({f"{t}_accuracy": right[t] / seen[t] if seen[t] else float("nan") for t in right})
    return out


def child_startup(a: dict[str, Any]) -> dict[str, Any]:
    """What every side of a pairing pays before its own work: importing torch and open_clip, and on CUDA the
    device's initialisation (a first tensor there)."""
    import open_clip  # noqa: F401
    import torch

    device = a.get("device", "cpu")
    if device != "cpu":
        torch.zeros(1, device=device)
        torch.cuda.synchronize()
    return {}


def child_text_encode(a: dict[str, Any]) -> dict[str, Any]:
    """negharness's text path (the clip plugin's encode_text), batches of 64, over the given captions."""
    import torch

    from negharness.api import ModelOptions
    from negharness.plugins.openclip_model import clip

    model = clip(ModelOptions(arch=a["arch"], checkpoint=a["checkpoint"]))
    texts = a["texts"]
    start = time.perf_counter()
    with torch.inference_mode():
        for lo in range(0, len(texts), 64):
            model.encode_text(texts[lo:lo + 64])
    return {"texts_per_s": len(texts) / (time.perf_counter() - start),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}


CHILDREN = {"clip_benchmark": child_clip_benchmark, "clip_benchmark_standin": child_clip_benchmark_standin,
            "authors_mcq": child_authors_mcq, "text_encode": child_text_encode, "startup": child_startup}


# ---- running and measuring ---------------------------------------------------------------------------
def _tree_pss_kb(pid: int) -> int:
    pids, i, total = [pid], 0, 0
    while i < len(pids):
        try:
            for t in os.listdir(f"/proc/{pids[i]}/task"):
                with open(f"/proc/{pids[i]}/task/{t}/children") as f:
                    pids.extend(int(x) for x in f.read().split())
        except OSError:
            pass
        i += 1
    for p in pids:
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("Pss:")), 0)
        except OSError:
            pass
    return total


@dataclass
class Measured:
    wall_s: float
    maxrss_mb: float
    peak_pss_mb: float
    load: tuple[float, float, float]
    result: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)  # a negharness record's timings (encode_s, total_s)


def run_child(cmd: list[str], env: dict[str, str], log: Path, result: Path | None = None) -> Measured:
    """Run one fresh process; wall time, its ru_maxrss (wait4), the peak PSS of its tree, the load before it."""
    load = os.getloadavg()
    peak = [0]
    with log.open("w") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        done = threading.Event()

        def sample() -> None:
            while not done.wait(1.0):
                peak[0] = max(peak[0], _tree_pss_kb(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} ... exited with {proc.returncode}; its output:\n{log.read_text()[-3000:]}")
    data = json.loads(result.read_text()) if result is not None else {}
    return Measured(wall, usage.ru_maxrss / 1024, peak[0] / 1024, load, data)


def child_env(omp: str | None = "default") -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("HF_HUB_OFFLINE", "1")
    if omp != "default":
        env.pop("OMP_WAIT_POLICY", None)
        if omp is not None:
            env["OMP_WAIT_POLICY"] = omp
    return env


DEVICE = "cpu"  # --device: where every side of the comparison runs


def negharness_cmd(inp: Inputs, task: str, precision: str | None, out: Path, passive: bool = True) -> list[str]:
    """The CLI as a user runs it. ``passive=False``: torch is imported before the CLI's entry point, so the CLI
    leaves OMP_WAIT_POLICY unset (its rule: a policy is only chosen before torch loads)."""
    entry = (["-m", "negharness.cli"] if passive else
             ["-c", "import sys, torch; from negharness.cli.main import main; sys.exit(main(sys.argv[1:]))"])
    return [sys.executable, *entry, "run", "--model", "clip", "--arch", inp.arch, "--checkpoint", str(inp.checkpoint),
            "-M", "quick_gelu=false",  # random weights built with GELU; the layout alone cannot say (the CLI refuses)
            "--task", task, "--data-root", str(inp.root), "--device", DEVICE, "--output-dir", str(out / "results"),
            "--cache-dir", str(out / "cache"), *(["--precision", precision] if precision else [])]


def record(out: Path, task: str) -> dict[str, Any]:
    found = list((out / "results").rglob(f"{task}.json"))
    if len(found) != 1:
        raise SystemExit(f"expected one record for {task} under {out / 'results'}, found {[str(p) for p in found]}")
    return json.loads(found[0].read_text())


def retrieval_equal(nh: dict[str, float], cb: dict[str, dict[str, float]], captions: dict[str, int]) -> tuple[bool, str]:
    """R@K of both caption files: negharness's percentages against CLIP_benchmark's fractions (x100), to within
    a tenth of one caption's share (each value is hits/N)."""
    diffs = []
    for key in ("original", "negated"):
        for k in KS:
            name = retrieval_metric(key, k)
            if name not in nh:
                raise SystemExit(f"the {RET_TASK} record has no {name} (its metrics: {', '.join(sorted(nh))}): update "
                                 "retrieval_metric in perf/peer_clip_benchmark.py")
            ours, theirs = nh[name], 100 * cb[key][f"image_retrieval_recall@{k}"]
            if abs(ours - theirs) > 10 / captions[key]:
                diffs.append(f"{name} {ours:.3f} vs {theirs:.3f}")
    return not diffs, "; ".join(diffs) or ", ".join(f"{retrieval_metric(key, k)}={nh[retrieval_metric(key, k)]:.2f}"
                                                    for key in ("original", "negated") for k in KS)


def retrieval_metric(captions: str, k: int) -> str:
    """The record's name of R@K on ``captions`` ("original" or "negated"): NegBench's R-Neg@K on the negated
    ones (records before issue 51 said neg_R@K; `negharness.scoring.catalog.RENAMED`)."""
    return f"R@{k}" if captions == "original" else f"R-Neg@{k}"


MCQ_PAIRS = (("accuracy", "total_accuracy"), ("acc_positive", "positive_accuracy"),
             ("acc_negative", "negative_accuracy"), ("acc_hybrid", "hybrid_accuracy"))


def mcq_equal(nh: dict[str, float], au: dict[str, float], rows: int) -> tuple[bool, str]:
    """Accuracy overall and per template: negharness's percentages against the authors' fractions (x100), to
    within a tenth of one row's share."""
    import math

    diffs, shown = [], []
    for ours_key, theirs_key in MCQ_PAIRS:
        ours, theirs = nh.get(ours_key, math.nan), 100 * au[theirs_key]
        same = (math.isnan(ours) and math.isnan(theirs)) or abs(ours - theirs) <= 10 / rows
        (shown if same else diffs).append(f"{ours_key} {ours:.4g}" + ("" if same else f" vs {theirs:.4g}"))
    return not diffs, "; ".join(diffs or shown)


def after_startup(ours: float, theirs: float, startup: float) -> float | None:
    """(ours - start-up) / (theirs - start-up): each side's wall less what a process that only imports torch and
    open_clip took in the same round (0 where ours took no longer than that: no work of its own to see); None
    where the peer's did not (nothing of its own to compare with)."""
    if theirs <= startup:
        return None
    return max(0.0, ours - startup) / (theirs - startup)


def fmt(m: Measured) -> str:
    return f"{m.wall_s:6.1f} s (maxrss {m.maxrss_mb:5.0f} MB, tree PSS {m.peak_pss_mb:5.0f} MB, load {m.load[0]:.2f})"


def peer_rounds(inp: Inputs, work: Path, rounds: int, parts: list[str], have_cb: bool, peer_workers: int | None,
                diagnose_bf16: bool = False, first: int = 1, precisions: tuple[str, ...] = ("fp32", "bf16"),
                runs: list[dict[str, Any]] | None = None, standin: bool = False,
                on_round: Any = None, startups: int = 2) -> dict[str, list]:
    """Interleaved rounds; returns per pairing the (ratio, values equal, ratio after start-up) of each round
    (`after_startup`). ``runs``, if given,
    gets one entry per process run (name, round, wall, memory, a negharness record's timings). ``standin``:
    without clip_benchmark, `child_clip_benchmark_standin` takes its place. ``on_round(outcome)`` is called
    after each round (the check writes its figures as soon as it has them). ``startups``: start-up processes a
    round (2: first and last; 1, ``--tiny``'s: last only)."""
    cb_child = "clip_benchmark" if have_cb else "clip_benchmark_standin"
    have_cb = have_cb or standin
    jobs: list[tuple[str, list[str], Path | None, Path]] = []
    cb_workers = 4 if peer_workers is None else peer_workers  # CLIP_benchmark's CLI default
    au_workers = 8 if peer_workers is None else peer_workers  # the authors' eval script and params default
    if "retrieval" in parts:
        for prec in precisions:
            jobs.append((f"nh_ret_{prec}", [], None, work / f"nh_ret_{prec}"))
            if have_cb:
                spec = {"arch": inp.arch, "checkpoint": str(inp.checkpoint), "cb_root": str(inp.cb_root),
                        "annotations": {k: str(v) for k, v in inp.annotations.items()}, "amp": prec == "bf16",
                        "batch_size": 64, "workers": cb_workers, "device": DEVICE}
                jobs.append((f"cb_ret_{prec}", [cb_child], spec, work / f"cb_ret_{prec}"))  # type: ignore[arg-type]
                if prec == "bf16" and diagnose_bf16:
                    jobs.append(("cb_ret_bf16w", [cb_child], {**spec, "fp32_scores": True}, work / "cb_ret_bf16w"))  # type: ignore[arg-type]
    if "mcq" in parts:
        jobs.append(("nh_mcq", [], None, work / "nh_mcq"))
        spec = {"arch": inp.arch, "checkpoint": str(inp.checkpoint), "csv": str(inp.root / "negbench" / MCQ_CSV),
                "root": str(inp.root), "batch_size": 64, "workers": au_workers, "device": DEVICE}
        jobs.append(("au_mcq", ["authors_mcq"], spec, work / "au_mcq"))  # type: ignore[arg-type]
    if jobs:  # at both ends of the round, the faster taken: the first process of a round reads torch from a cold disk
        ends = [("startup", ["startup"], {"device": DEVICE}, work / "startup"),
                ("startup_end", ["startup"], {"device": DEVICE}, work / "startup_end")][2 - startups:]
        jobs = [*ends[:-1], *jobs, ends[-1]]  # type: ignore[list-item]
    outcome: dict[str, list] = {}
    for r in range(first - 1, first - 1 + rounds):
        print(f"round {r + 1}: {subprocess.run(['uptime'], capture_output=True, text=True, check=False).stdout.strip()}")
        got: dict[str, Measured] = {}
        for name, kind, spec, out in (jobs if r % 2 == 0 else jobs[::-1]):
            if out.exists():
                import shutil

                shutil.rmtree(out)
            out.mkdir(parents=True)
            if kind:
                args = out / "args.json"
                args.write_text(json.dumps(spec))
                cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind[0], str(args), str(out / "result.json")]
                got[name] = run_child(cmd, child_env(), out / "log.txt", out / "result.json")
            else:
                task = RET_TASK if name.startswith("nh_ret") else MCQ_TASK
                cmd = negharness_cmd(inp, task, "bf16" if name.endswith("bf16") else None, out)
                got[name] = run_child(cmd, child_env(), out / "log.txt")
                rec = record(out, task)
                got[name].result, got[name].timings = rec["metrics"], rec.get("timings", {})
            shown = ""
            if name.startswith("nh_"):
                shown = " " + ", ".join(f"{k}={v:.2f}" for k, v in got[name].result.items()
                                        if re.fullmatch(r"R(-Neg)?@\d+|acc(uracy|_\w+)", k) and isinstance(v, float))
            print(f"  {name:12s} {fmt(got[name])}{shown}")
            if runs is not None:
                runs.append({"name": name, "round": r + 1, "wall_s": got[name].wall_s, "maxrss_mb": got[name].maxrss_mb,
                             "peak_pss_mb": got[name].peak_pss_mb, "timings": got[name].timings})
        pairs = [("retrieval fp32 vs fp32", "nh_ret_fp32", "cb_ret_fp32"), ("retrieval bf16 vs bf16", "nh_ret_bf16", "cb_ret_bf16"),
                 ("retrieval defaults (nh fp32 vs CB amp)", "nh_ret_fp32", "cb_ret_bf16"),
                 ("retrieval bf16 vs bf16, CB scoring in fp32 (diagnosis)", "nh_ret_bf16", "cb_ret_bf16w"), ("MCQ fp32 vs fp32", "nh_mcq", "au_mcq")]
        for label, ours, theirs in pairs:
            if ours not in got:
                continue
            if theirs not in got:
                if theirs == "cb_ret_bf16w":
                    continue
                outcome.setdefault(label, []).append((None, None, None))
                print(f"  {label}: negharness {got[ours].wall_s:.1f} s; {SKIP_CB if not have_cb else 'peer not run'}")
                continue
            if theirs.startswith("cb"):
                ok, why = retrieval_equal(got[ours].result, got[theirs].result, inp.captions)
                equal_expected = ours[-4:] == theirs[-4:] or theirs == "cb_ret_bf16w"
            else:
                ok, why = mcq_equal(got[ours].result, got[theirs].result, inp.mcq_rows)
                equal_expected = True
            ratio = got[ours].wall_s / got[theirs].wall_s
            startup = min(got[k].wall_s for k in ("startup", "startup_end") if k in got)
            after = after_startup(got[ours].wall_s, got[theirs].wall_s, startup)
            pss = got[ours].peak_pss_mb / max(got[theirs].peak_pss_mb, 1e-9)
            outcome.setdefault(label, []).append((ratio, ok if equal_expected else None, after))
            verdict = ("values equal" if ok else "VALUES DIFFER") if equal_expected else ("values equal" if ok else "values differ (precisions differ)")
            shown = f"{after:.2f}" if after is not None else "n/a (the peer's wall is no longer than start-up)"
            print(f"  {label}: ratio {ratio:.2f}, after start-up ({startup:.1f} s) {shown} (PSS {pss:.2f}), "
                  f"{verdict}: {why}")
        if on_round is not None:
            on_round(outcome)
    return outcome


def omp_rounds(inp: Inputs, work: Path, rounds: int, tiny: bool) -> None:
    """OMP_WAIT_POLICY=PASSIVE (the CLI's choice) against unset, interleaved: text encoding, a whole
    Retrieval-Neg run, decoding in the loop."""
    texts = inp.sample_captions[: (16 if tiny else 512)]
    spec = work / "omp_text.json"
    spec.write_text(json.dumps({"arch": inp.arch, "checkpoint": str(inp.checkpoint), "texts": texts}))
    decode = [sys.executable, str(REPO / "perf" / "bench_decode_throughput.py"), "--models", "micro",
              "--setups", "threads:auto", "--kinds", "image", "--rounds", "1", *(["--tiny"] if tiny else [])]
    seen: dict[str, list[float]] = {}
    for r in range(rounds):
        print(f"omp round {r + 1}/{rounds}: {subprocess.run(['uptime'], capture_output=True, text=True, check=False).stdout.strip()}")
        for policy in (("PASSIVE", None) if r % 2 == 0 else (None, "PASSIVE")):
            tag = policy or "unset"
            out = work / f"omp_{tag}_{r}"
            out.mkdir(parents=True)
            m = run_child([sys.executable, str(Path(__file__).resolve()), "--child", "text_encode", str(spec), str(out / "t.json")],
                          child_env(policy), out / "t.log", out / "t.json")
            seen.setdefault(f"text {tag}", []).append(m.result["texts_per_s"])
            w = run_child(negharness_cmd(inp, RET_TASK, None, out, passive=policy is not None), child_env(policy), out / "run.log")
            seen.setdefault(f"run {tag}", []).append(w.wall_s)
            wrapper = ("import runpy, sys, torch; sys.argv = sys.argv[1:]; "  # torch first: the policy stays unset
                       "runpy.run_path(sys.argv[0], run_name='__main__')")
            d_cmd = decode if policy else [sys.executable, "-c", wrapper, *decode[1:]]
            d = subprocess.run(d_cmd, env=child_env(policy), capture_output=True, text=True, cwd=REPO, check=False)
            rates = re.findall(r"in the loop, threads:auto ([\d.]+)/s", d.stdout)
            print(f"  {tag:8s} text {m.result['texts_per_s']:6.1f} texts/s (load {m.load[0]:.2f}); whole run {w.wall_s:6.1f} s "
                  f"(load {w.load[0]:.2f}); decode-in-loop: {' | '.join(d.stdout.strip().splitlines()[-3:]) if d.returncode == 0 else 'failed: ' + d.stderr[-300:]}")
            if rates:
                seen.setdefault(f"decode {tag}", []).append(float(rates[-1]))
    for key, values in sorted(seen.items()):
        print(f"  median {key}: {statistics.median(values):.2f} ({', '.join(f'{v:.2f}' for v in values)})")


def clip_benchmark_installed() -> bool:
    """CLIP_benchmark and what its mscoco_captions loader imports (torchvision's CocoCaptions: pycocotools)."""
    return all(importlib.util.find_spec(m) is not None for m in ("clip_benchmark", "pycocotools"))


def main(argv: list[str] | None = None) -> dict[str, list]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csvs", type=Path, default=CSVS, help="folder of the NegBench image CSVs")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=200, help="Retrieval-Neg rows (one image each)")
    ap.add_argument("--mcq-rows", type=int, default=500, help="MCQ rows (500: 333 images)")
    ap.add_argument("--parts", nargs="+", default=["retrieval", "mcq"], choices=["retrieval", "mcq"])
    ap.add_argument("--peer-workers", type=int, help="DataLoader workers of the peers (default: their own defaults)")
    ap.add_argument("--first-round", type=int, default=1, help="number the rounds from here (even-numbered rounds run in reverse order)")
    ap.add_argument("--diagnose-bf16", action="store_true",
                    help="also run CLIP_benchmark at bf16 with its embeddings widened to fp32 before scoring")
    ap.add_argument("--omp-rounds", type=int, default=0, help="measure OMP_WAIT_POLICY PASSIVE vs unset instead")
    ap.add_argument("--tiny", action="store_true", help="12 + 8 rows, a tiny model config, one round: a check of the script")
    ap.add_argument("--device", default="cpu", help="cpu or cuda: every side (negharness, CLIP_benchmark, the authors') runs there")
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"],
                    help="the Retrieval-Neg pairings to run (fp32: the one whose values must be equal)")
    ap.add_argument("--json", type=Path, help="also write each pairing's rounds and each process's wall to this JSON file")
    ap.add_argument("--peer-standin", action="store_true",
                    help="without clip_benchmark, compare with a stand-in of its output (this script's own check; no peer wall)")
    ap.add_argument("--child", nargs=3, metavar=("KIND", "ARGS", "RESULT"), help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    global DEVICE
    DEVICE = opts.device
    if opts.child:
        kind, args, result = opts.child
        Path(result).write_text(json.dumps(CHILDREN[kind](json.loads(Path(args).read_text()))))
        return {}
    if opts.tiny:
        opts.rows, opts.mcq_rows, opts.rounds = 12, 8, 1  # 12 images: R@10 needs 10 candidates
        opts.omp_rounds = min(opts.omp_rounds, 1)
        opts.peer_workers = 0 if opts.peer_workers is None else opts.peer_workers
    have_cb = clip_benchmark_installed()
    with tempfile.TemporaryDirectory(prefix="peer-bench-") as tmp:
        work = Path(tmp)
        inp = prepare(work, opts.rows, opts.mcq_rows, opts.tiny, opts.csvs)
        print(f"inputs: {inp.images} Retrieval-Neg images, captions {inp.captions}; MCQ {inp.mcq_rows} rows, {inp.mcq_images} "
              f"images; model {Path(inp.arch).name} random (seed 0); CSVs {'real' if (opts.csvs / MCQ_CSV).is_file() else 'generated'}")
        standin = opts.peer_standin and not have_cb
        if "retrieval" in opts.parts and not have_cb:
            print(SKIP_CB + ("; its values are compared with a stand-in of its output (no peer wall)" if standin else ""))
        if opts.omp_rounds:
            omp_rounds(inp, work, opts.omp_rounds, opts.tiny)
            return {}
        runs: list[dict[str, Any]] = []

        def save(outcome: dict[str, list]) -> None:  # after every round: a time limit keeps the rounds done
            if opts.json:
                write_json(opts.json, opts, inp, have_cb, standin, outcome, runs)

        outcome = peer_rounds(inp, work, opts.rounds, opts.parts, have_cb, opts.peer_workers, opts.diagnose_bf16,
                              opts.first_round, tuple(opts.precisions), runs, standin, save, 1 if opts.tiny else 2)
    for label, values in outcome.items():
        ratios = [r for r, _, _ in values if r is not None]
        if ratios:
            equal = [e for _, e, _ in values if e is not None]
            work = [w for _, _, w in values if w is not None]
            print(f"{label}: ratios {' / '.join(f'{r:.2f}' for r in ratios)} (median {statistics.median(ratios):.2f})"
                  + (f"; after start-up {' / '.join(f'{w:.2f}' for w in work)}" if work else "")
                  + (f"; values equal in {sum(equal)}/{len(equal)} rounds" if equal else ""))
    return outcome


def write_json(path: Path, opts: argparse.Namespace, inp: Inputs, have_cb: bool, standin: bool,
               outcome: dict[str, list], runs: list[dict[str, Any]]) -> None:
    """The rounds so far: each pairing's (ratio, values equal), each process's wall and record timings."""
    from negharness.io.atomic_files import atomic_write_json

    atomic_write_json(path, {"clip_benchmark_installed": have_cb, "retrieval_peer": "clip_benchmark" if have_cb else
                             ("stand-in" if standin else None), "device": DEVICE, "rows": opts.rows,
                             "mcq_rows": opts.mcq_rows, "images": inp.images, "captions": inp.captions,
                             "csvs_real": (opts.csvs / MCQ_CSV).is_file(), "rounds": opts.rounds,
                             "pairings": {k: [{"ratio": r, "equal": e, "after_startup": w} for r, e, w in v]
                                          for k, v in outcome.items()},
                             "runs": runs})


if __name__ == "__main__":
    main()
