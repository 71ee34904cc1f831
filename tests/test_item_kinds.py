"""The item kinds (group, multi_choice, image_choice), retrieval with qrels and the parquet source,
scored by negharness on files built exactly as the authors' files / dataset cards lay them out, against
the authors' evaluation code re-implemented here from their repositories:

- NegRefCOCOg: parkquasar/NegationCLIP NegRefCOCOg/negrefcocog_eval.py (crop each [x, y, w, h] box,
  cosine with the phrase, ``np.argmax``, right when ``bbox_list[pred] == ref_bbox``);
- SugarCrepe++: Sri-Harsha/scpp VLMs/test_Variants_CLIP.py (ITT: cos_p1 > cos_neg and cos_p2 >
  cos_neg; TOT: cos_p1p2 > cos_p1_neg and cos_p1p2 > cos_p2_neg);
- Winoground: the paper's text_correct / image_correct / group_correct over c{j}_i{k} scores;
- MRMR-style qrels retrieval: Hit@1 = the top item is judged relevant;
- MRMR Negation (image to text, each query against its own four descriptions): mteb's MRMR loader
  (corpus id ``rsplit("_", 1)[0]`` == query id gives the top_ranked candidates), Hit@1 over them.

The model embeds as 16 entries of +-1/4 (norm 1): every score is a multiple of 1/8 computed exactly,
so ties are real ties in both scorers.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import textwrap
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest
import torch
from choice_helpers import evaluate

from negharness.api import UserError
from negharness.api import EmbeddingModel
from negharness.api import TaskOptions
from negharness.declarative.register import load_folder
from negharness.tasks.builtin import GENERATORS

BUILTIN = {c.name: c for c in load_folder(Path(__file__).resolve().parents[1] / "src/negharness/tasks/choice",
                                          GENERATORS)}
SPLITS = ("replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")


def _bits(text: str) -> np.ndarray:
    return np.unpackbits(np.frombuffer(hashlib.sha256(text.encode()).digest()[:2], dtype=np.uint8))


class GridModel(EmbeddingModel):
    """A text: the signs of its SHA-256's first 16 bits, times 1/4. An image (any size): its 4x4
    box-averaged grey levels above or below mid-grey, times 1/4."""

    name = "grid16"
    modalities = frozenset({"text", "image"})

    def modules(self) -> list[torch.nn.Module]:
        return []  # no torch modules: nothing to move to a device

    def describe(self) -> dict[str, Any]:
        return {"arch": "grid16"}

    def preprocess_image(self, image: Any) -> torch.Tensor:
        from PIL import Image

        image = Image.fromarray(image) if isinstance(image, np.ndarray) else image  # a video's frame
        small = image.convert("L").resize((4, 4), Image.Resampling.BOX)
        return torch.from_numpy(np.asarray(small, dtype=np.float32).reshape(-1))

    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        return torch.where(pixels > 127.5, 0.25, -0.25)

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """Whitespace-cleaned first, as CLIP's tokenizer does: the authors' files have captions ending in
        a space, which their scripts pass on and negharness strips."""
        cleaned = [" ".join(t.split()) for t in texts]
        return torch.tensor(np.array([np.where(_bits(t) > 0, 0.25, -0.25) for t in cleaned]), dtype=torch.float32)


def _blocks(name: str, size: tuple[int, int]) -> Any:
    """A black-and-white picture of 8x8-pixel blocks drawn from the name's hash (PNG: exact pixels)."""
    from PIL import Image

    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little"))
    w, h = size
    grid = rng.integers(0, 2, ((h + 7) // 8, (w + 7) // 8)) * 255
    arr = np.kron(grid, np.ones((8, 8)))[:h, :w].astype(np.uint8)
    return Image.fromarray(np.stack([arr] * 3, -1))


def _save(image: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format="PNG")
    return path


def _png(image: Any) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _cos(model: GridModel, images: list[Any], texts: list[str]) -> np.ndarray:
    """(images, texts) cosines as the authors' scripts compute them: encode, normalise, dot."""
    img = model.encode_image(torch.stack([model.preprocess_image(i) for i in images]))
    txt = model.encode_text(texts)
    img, txt = img / img.norm(dim=-1, keepdim=True), txt / txt.norm(dim=-1, keepdim=True)
    return (img @ txt.t()).numpy()


# NegRefCOCOg ----------------------------------------------------------------------------------------
def _negrefcocog(root: Path, n: int = 24) -> list[dict[str, Any]]:
    """NegRefCOCOg.json's layout: {image, phrase, ref_bbox, bbox_list} with [x, y, w, h] float boxes,
    the reference box first; a uniform image (every region alike: a tie) every seventh item."""
    from PIL import Image

    items = []
    for i in range(n):
        name = f"COCO_train2014_{i:012d}.jpg"
        image = Image.new("RGB", (64, 48), (255, 255, 255)) if i % 7 == 3 else _blocks(name, (64, 48))
        _save(image, root / "coco/train2014" / name)
        boxes = [[0.0, 0.0, 32.0, 48.0], [32.0, 0.0, 32.0, 47.5], [8.25, 8.0, 40.0, 24.0]][: 2 + i % 2]
        items.append({"image": name, "phrase": f"a thing with no hat {i}", "ref_bbox": list(boxes[0]),
                      "bbox_list": boxes})
    path = root / "negrefcocog/NegRefCOCOg.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(items, indent=4))
    return items


def _negrefcocog_eval(model: GridModel, items: list[dict[str, Any]], image_dir: Path) -> dict[str, Any]:
    """negrefcocog_eval.py's evaluate(): crop each box, similarity with the phrase, np.argmax."""
    from PIL import Image

    correct, strict = 0, 0
    for item in items:
        image = Image.open(image_dir / item["image"])
        crops = [image.crop((x, y, x + w, y + h)) for x, y, w, h in item["bbox_list"]]
        similarities = _cos(model, crops, [item["phrase"]])[:, 0].tolist()
        pred_idx = np.argmax(similarities)
        if item["bbox_list"][pred_idx] == item["ref_bbox"]:
            correct += 1
        ref = item["bbox_list"].index(item["ref_bbox"])  # the tie-safe rule: the reference strictly highest
        strict += all(similarities[ref] > s for k, s in enumerate(similarities) if k != ref)
    return {"accuracy": correct / len(items), "strict": strict / len(items)}


def test_negrefcocog_scores_as_negrefcocog_eval_with_both_rules(tmp_path):
    items = _negrefcocog(tmp_path)
    model = GridModel()
    authors = _negrefcocog_eval(model, items, tmp_path / "coco/train2014")
    res = evaluate(BUILTIN["negrefcocog"], tmp_path, model)
    assert res.n_items["rows"] == len(items)
    assert res.metrics["accuracy_authors_rule"] == pytest.approx(authors["accuracy"] * 100, abs=1e-9)
    assert res.metrics["accuracy"] == pytest.approx(authors["strict"] * 100, abs=1e-9)
    assert res.metrics["accuracy"] < res.metrics["accuracy_authors_rule"]  # the uniform images tie
    assert res.metrics["tie_rate"] > 0


class ConstantModel(GridModel):
    def encode_image(self, pixels: torch.Tensor) -> torch.Tensor:
        return torch.full((pixels.shape[0], 16), 0.25)


def test_negrefcocog_a_constant_model_gets_100_by_the_authors_rule_and_0_by_the_safe_one(tmp_path):
    _negrefcocog(tmp_path, 5)
    res = evaluate(BUILTIN["negrefcocog"], tmp_path, ConstantModel())
    assert (res.metrics["accuracy_authors_rule"], res.metrics["accuracy"], res.metrics["tie_rate"]) == (100, 0, 100)


# SugarCrepe++ ---------------------------------------------------------------------------------------
def _sugarcrepepp(root: Path, split: str, n: int = 40) -> list[dict[str, Any]]:
    """data/<split>.json's layout: a list of {id, filename, caption, caption2, negative_caption}."""
    rows = []
    for i in range(n):
        name = f"{i % 9:012d}.jpg"  # images shared between items, as COCO's are
        if not (root / "coco/val2017" / name).exists():
            _save(_blocks(name, (32, 32)), root / "coco/val2017" / name)
        rows.append({"id": i, "filename": name, "caption": f"{split} a dog {i}", "caption2": f"{split} one dog {i}",
                     "negative_caption": f"{split} a cat {i % 13}"})
    path = root / f"sugarcrepepp/{split}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1))
    return rows


def _scpp_eval(model: GridModel, data: list[dict[str, Any]], img_path: Path) -> dict[str, Any]:
    """VLMs/test_Variants_CLIP.py's loop: correct_full (ITT) and correct_text (TOT) over the file."""
    from PIL import Image

    total = correct_full = correct_text = 0
    for line in data:
        p1, neg, p2 = line["caption"], line["negative_caption"], line["caption2"]
        cos_p1, cos_p2, cos_neg = _cos(model, [Image.open(img_path / line["filename"])], [p1, p2, neg])[0]
        t = model.encode_text([p1, p2, neg])
        t = t / t.norm(dim=-1, keepdim=True)
        cos_p1p2, cos_p1_neg, cos_p2_neg = float(t[0] @ t[1]), float(t[0] @ t[2]), float(t[1] @ t[2])
        total += 1
        correct_full += cos_p1 > cos_neg and cos_p2 > cos_neg
        correct_text += cos_p1p2 > cos_p1_neg and cos_p1p2 > cos_p2_neg
    return {"itt": correct_full / total, "tot": correct_text / total}


@pytest.mark.parametrize("split", SPLITS)
def test_sugarcrepepp_itt_and_tot_score_as_the_authors_test_script(tmp_path, split):
    data = _sugarcrepepp(tmp_path, split)
    model = GridModel()
    authors = _scpp_eval(model, data, tmp_path / "coco/val2017")
    assert 0 < authors["itt"] < 1 and 0 < authors["tot"] < 1
    itt = evaluate(BUILTIN[f"sugarcrepepp_{split}_itt"], tmp_path, model)
    tot = evaluate(BUILTIN[f"sugarcrepepp_{split}_tot"], tmp_path, model)
    assert itt.metrics["accuracy"] == pytest.approx(authors["itt"] * 100, abs=1e-9)
    assert tot.metrics["accuracy"] == pytest.approx(authors["tot"] * 100, abs=1e-9)
    assert itt.n_items == {"rows": len(data), "images": 9} and tot.n_items == {"rows": len(data)}


def test_the_text_only_task_lists_no_image(tmp_path):
    _sugarcrepepp(tmp_path, "swap_obj", 3)
    task = BUILTIN["sugarcrepepp_swap_obj_tot"](TaskOptions(tmp_path))
    assert task.modalities == frozenset({"text"})
    assert [p.name for p in task.required_files()] == ["swap_obj.json"]


# Winoground -----------------------------------------------------------------------------------------
def _winoground(root: Path, n: int = 30, broken: dict[int, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The Hub's parquet conversion of facebook/winoground: image_0/image_1 as {bytes, path} structs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for i in range(n):
        img = [_blocks(f"ex_{i}_img_{k}", (32, 32)) for k in range(2)]
        rows.append({"id": i, "image_0": {"bytes": _png(img[0]), "path": f"ex_{i}_img_0.png"},
                     "image_1": {"bytes": _png(img[1]), "path": f"ex_{i}_img_1.png"},
                     "caption_0": f"the dog chases the cat {i % 11}", "caption_1": f"the cat chases the dog {i % 7}",
                     "tag": "Object", "secondary_tag": "", "num_main_preds": 1, "collapsed_tag": "Object",
                     **(broken or {}).get(i, {})})
    path = root / "winoground/default/test/0000.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return rows


def _winoground_eval(model: GridModel, rows: list[dict[str, Any]]) -> dict[str, float]:
    """The paper's scoring: c{j}_i{k} = score(caption j, image k); text / image / group correct."""
    from PIL import Image

    def text_correct(r): return r["c0_i0"] > r["c1_i0"] and r["c1_i1"] > r["c0_i1"]
    def image_correct(r): return r["c0_i0"] > r["c0_i1"] and r["c1_i1"] > r["c1_i0"]
    def group_correct(r): return image_correct(r) and text_correct(r)

    text = image = group = 0
    for row in rows:
        images = [Image.open(io.BytesIO(row[f"image_{k}"]["bytes"])) for k in range(2)]
        s = _cos(model, images, [row["caption_0"], row["caption_1"]])
        r = {f"c{j}_i{k}": s[k, j] for j in range(2) for k in range(2)}
        text, image, group = text + text_correct(r), image + image_correct(r), group + group_correct(r)
    return {"text_score": text / len(rows) * 100, "image_score": image / len(rows) * 100,
            "group_score": group / len(rows) * 100}


def test_winoground_parquet_scores_as_the_papers_text_image_group(tmp_path):
    rows = _winoground(tmp_path)
    model = GridModel()
    authors = _winoground_eval(model, rows)
    assert 0 < authors["group_score"] < authors["text_score"]
    _scores_as_authors("winoground", tmp_path, model, rows, authors, "refs/convert/parquet")


def _scores_as_authors(name: str, root: Path, model: GridModel, rows: list, authors: dict[str, float],
                       revision: str) -> None:
    """A group task over image pairs: the authors' numbers, one item per row, the pinned revision recorded."""
    task = BUILTIN[name]
    res = evaluate(task, root, model)
    assert res.metrics == pytest.approx(authors, abs=1e-9)
    assert res.n_items == {"rows": len(rows), "images": 2 * len(rows)}
    assert task(TaskOptions(root)).config()["revision"] == revision


def _bivlc_eval(model: GridModel, rows: list[dict[str, Any]]) -> dict[str, float]:
    """IMirandaM/BiVLC CLIP_utils.evaluate_BiVLC: Ipos_2T, Ineg_2T, Tpos_2I, Tneg_2I; I2T, T2I, group."""
    from PIL import Image

    i2t = t2i = group = 0
    for row in rows:
        images = [Image.open(io.BytesIO(row[k]["bytes"])) for k in ("image", "negative_image")]
        s = _cos(model, images, [row["caption"], row["negative_caption"]])
        s_c0_i0, s_c0_i1, s_c1_i0, s_c1_i1 = s[0, 0], s[1, 0], s[0, 1], s[1, 1]
        ipos_2t, ineg_2t = s_c0_i0 > s_c1_i0, s_c1_i1 > s_c0_i1
        tpos_2i, tneg_2i = s_c0_i0 > s_c0_i1, s_c1_i1 > s_c1_i0
        i2t, t2i = i2t + (ipos_2t and ineg_2t), t2i + (tpos_2i and tneg_2i)
        group += ipos_2t and ineg_2t and tpos_2i and tneg_2i
    return {"text_score": 100 * i2t / len(rows), "image_score": 100 * t2i / len(rows),
            "group_score": 100 * group / len(rows)}


def test_bivlc_parquet_scores_as_evaluate_bivlc(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"image": {"bytes": _png(_blocks(f"pos{i}", (32, 32))), "path": None}, "caption": f"a red bus {i % 9}",
             "negative_image": {"bytes": _png(_blocks(f"neg{i}", (32, 32))), "path": None},
             "negative_caption": f"a bus in red {i % 5}", "type": "replace", "subtype": "replace_att"}
            for i in range(30)]
    path = tmp_path / "bivlc/default/test/0000.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    model = GridModel()
    authors = _bivlc_eval(model, rows)
    assert 0 < authors["group_score"] < authors["image_score"]
    assert evaluate(BUILTIN["bivlc"], tmp_path, model).metrics == pytest.approx(authors, abs=1e-9)


# Vinoground -----------------------------------------------------------------------------------------
def _video(path: Path, pictures: list[Any], per_picture: int = 4) -> Path:
    """An MP4 showing each picture for ``per_picture`` frames in turn (lossless x264: exact grey levels)."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=8)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv444p"
        stream.options = {"crf": "0"}
        for picture in pictures:
            for _ in range(per_picture):
                for packet in stream.encode(av.VideoFrame.from_ndarray(np.asarray(picture), format="rgb24")):
                    out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def _vinoground(root: Path, n: int = 24) -> list[dict[str, Any]]:
    """vinoground.csv (index, major, minor, ..., pos_cap, neg_cap; the authors' get_score_all.py reads
    columns 1 and 2 as the categories) and vinoground_videos/{i}_pos.mp4 / {i}_neg.mp4. Most videos hold
    one picture; every fifth pair is a true temporal counterfactual (picture A then B, and B then A):
    a model that pools its frames scores the two videos alike, so that pair ties and is wrong."""
    import csv

    rows = []
    for i in range(n):
        a, b = _blocks(f"vino_{i}_a", (32, 32)), _blocks(f"vino_{i}_b", (32, 32))
        pos, neg = ([a, b], [b, a]) if i % 5 == 0 else ([a], [b])
        _video(root / f"vinoground/vinoground_videos/{i}_pos.mp4", pos, 8 // len(pos))
        _video(root / f"vinoground/vinoground_videos/{i}_neg.mp4", neg, 8 // len(neg))
        rows.append({"index": i, "major": "action", "minor": "cyclical" if i % 3 else "",
                     "pos_vid": f"v{i}a", "pos_cap": f"a man jumps and then sits {i % 11}",
                     "neg_vid": f"v{i}b", "neg_cap": f"a man sits and then jumps {i % 7}"})
    with open(root / "vinoground/vinoground.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows


def _vinoground_eval(model: GridModel, root: Path, n: int) -> dict[str, float]:
    """Vinoground's eval/imagebind_eval.py and eval/langbind.py: results[video][caption] for the pair
    ({i}_pos.mp4, {i}_neg.mp4) x (pos_cap, neg_cap) of row i; every comparison strict. A video's
    embedding pools its frames as CLIP-style video models do: the normalised mean of normalised frames,
    over every decoded frame (PyAV, independently of negharness's sampler)."""
    import csv

    import av

    def embed(path: Path) -> torch.Tensor:
        with av.open(str(path)) as container:
            frames = [f.to_image() for f in container.decode(video=0)]
        per_frame = model.encode_image(torch.stack([model.preprocess_image(f) for f in frames]))
        pooled = (per_frame / per_frame.norm(dim=-1, keepdim=True)).mean(0)
        return pooled / pooled.norm()

    with open(root / "vinoground/vinoground.csv", newline="") as fh:  # pd.read_csv in the authors' scripts
        table = list(csv.DictReader(fh))
    vino = {k: [r[k] for r in table] for k in ("pos_cap", "neg_cap")}
    text_correct = video_correct = group_correct = 0
    for i in range(n):
        videos = torch.stack([embed(root / f"vinoground/vinoground_videos/{i}_{k}.mp4") for k in ("pos", "neg")])
        texts = model.encode_text([vino["pos_cap"][i], vino["neg_cap"][i]])
        results = videos @ (texts / texts.norm(dim=-1, keepdim=True)).T
        video_correct += bool(results[0][0] > results[1][0] and results[1][1] > results[0][1])
        text_correct += bool(results[0][0] > results[0][1] and results[1][1] > results[1][0])
        group_correct += bool(results[0][0] > results[1][0] and results[1][1] > results[0][1]
                              and results[0][0] > results[0][1] and results[1][1] > results[1][0])
    return {"text_score": 100 * text_correct / n, "image_score": 100 * video_correct / n,
            "group_score": 100 * group_correct / n}


def test_vinoground_video_groups_score_as_the_authors_eval_scripts(tmp_path):
    """Two videos x two captions per row, each video's sampled frames pooled by the model: text, video
    (= image_score) and group scores equal Vinoground's own strict comparisons."""
    rows = _vinoground(tmp_path)
    model = GridModel()
    authors = _vinoground_eval(model, tmp_path, len(rows))
    assert 0 < authors["group_score"] < min(authors["text_score"], authors["image_score"])
    res = evaluate(BUILTIN["vinoground"], tmp_path, model)
    assert res.metrics == pytest.approx(authors, abs=1e-9)
    assert res.n_items == {"rows": len(rows), "videos": 2 * len(rows)}
    reversed_pairs = [s for s in res.samples if s["row"].endswith(tuple(f"line {i + 2}" for i in range(0, len(rows), 5)))]
    assert len(reversed_pairs) == 5 and not any(s["text"] or s["image"] for s in reversed_pairs)  # pooled alike: a tie
# NaturalBench-Retrieval ------------------------------------------------------------------------------
def _naturalbench(root: Path, n: int = 30) -> list[dict[str, Any]]:
    """NaturalBench-Retrieval.zip unzipped as naturalbench_retrieval.py reads it: metadata.json (a list of
    {index, image_0, image_1, caption_0, caption_1}) and images/; every fifth group's two images alike (a tie)."""
    folder = root / "naturalbench/NaturalBench-Retrieval"
    rows = []
    for i in range(n):
        names = [f"{i}_{k}.jpg" for k in range(2)]
        for k, name in enumerate(names):
            _save(_blocks(f"nb{i}" if i % 5 == 0 else f"nb{i}_{k}", (32, 24)), folder / "images" / name)
        rows.append({"index": i, "image_0": names[0], "image_1": names[1],
                     "caption_0": f"a man rides a bike {i % 7}", "caption_1": f"a man walks a bike {i % 4}"})
    (folder / "metadata.json").write_text(json.dumps(rows))
    return rows


def _naturalbench_eval(model: GridModel, rows: list[dict[str, Any]], image_dir: Path) -> dict[str, float]:
    """naturalbench_retrieval.py: scores[i][image][caption]; c0_i1 = scores[i][1][0]; get_retrieval_acc's
    strict text / image / group correct, as fractions (x 100 here)."""
    from PIL import Image

    counts = {"text_score": 0, "image_score": 0, "group_score": 0}
    for row in rows:
        assert row["index"] == rows.index(row)  # the loader's own check
        s = _cos(model, [Image.open(image_dir / row[f"image_{k}"]) for k in range(2)],
                 [row["caption_0"], row["caption_1"]])  # (image, caption)
        r = {"c0_i0": s[0][0], "c0_i1": s[1][0], "c1_i0": s[0][1], "c1_i1": s[1][1]}
        text = r["c0_i0"] > r["c1_i0"] and r["c1_i1"] > r["c0_i1"]
        image = r["c0_i0"] > r["c0_i1"] and r["c1_i1"] > r["c1_i0"]
        counts["text_score"] += text
        counts["image_score"] += image
        counts["group_score"] += text and image
    return {k: v / len(rows) * 100 for k, v in counts.items()}


def test_naturalbench_retrieval_scores_as_the_authors_get_retrieval_acc(tmp_path):
    rows = _naturalbench(tmp_path)
    model = GridModel()
    authors = _naturalbench_eval(model, rows, tmp_path / "naturalbench/NaturalBench-Retrieval/images")
    assert 0 < authors["group_score"] < authors["text_score"]
    _scores_as_authors("naturalbench_retrieval", tmp_path, model, rows, authors,
                       "b6a84a18ba24544169681d4b15543dd103d4d3bb")


def test_naturalbench_a_group_with_a_missing_image_names_the_file_and_row(tmp_path):
    _naturalbench(tmp_path, 6)
    (tmp_path / "naturalbench/NaturalBench-Retrieval/images/4_1.jpg").unlink()
    with pytest.raises(UserError, match=r"metadata\.json: record 4.*4_1\.jpg"):
        BUILTIN["naturalbench_retrieval"](TaskOptions(tmp_path)).required_files()
# MMVP-VLM -------------------------------------------------------------------------------------------
MMVP_FOLDERS = ("Orientation", "Presence", "State", "Quantity", "Spatial", "Color", "Structural Character", "Text",
                "Camera Perspective")  # Questions.csv's Type, 30 rows each in the scorer's order of patterns


def _mmvp(root: Path) -> list[list[str]]:
    """MMVP/MMVP_VLM's layout: Questions.csv (Question ID,Type,Statement; 270 rows, a pair = Question IDs
    2k-1, 2k) and MLLM_VLM Images/<Type>/<Question ID>.jpg. Every ninth pair shows one picture twice (a tie)."""
    import csv

    rows = [["Question ID", "Type", "Statement"]]
    for qid in range(1, 271):
        folder = MMVP_FOLDERS[(qid - 1) // 30]
        pair = (qid + 1) // 2
        name = f"mmvp{pair}" if pair % 9 == 4 else f"mmvp{qid}"
        _save(_blocks(name, (32, 32)), root / "mmvp_vlm/MLLM_VLM Images" / folder / f"{qid}.jpg")
        rows.append([str(qid), folder, f"the dog is {'left' if qid % 2 else 'right'}, {qid % 17}"])
    with open(root / "mmvp_vlm/Questions.csv", "w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    return rows


def _mmvp_eval(model: GridModel, rows: list[list[str]], image_dir: Path) -> dict[str, Any]:
    """scripts/evaluate_vlm.py: rows read two at a time, both images from the first row's folder, text
    "a photo of " + statement, softmax over the two images of 100 x cosine, img1 when it is above 0.5;
    a pair counts when both predictions equal the truth (img1 for the odd Question ID); per pattern
    (pair index // 15) the share of its 15 pairs, in percent. Also the same pairs with ties wrong."""
    from PIL import Image

    patterns, strict_patterns = [0] * 9, [0] * 9
    strict = 0
    body = rows[1:]
    for n, k in enumerate(range(0, len(body), 2)):
        (q1, t1, s1), (q2, _, s2) = body[k], body[k + 1]
        images = [Image.open(image_dir / t1 / f"{q}.jpg") for q in (q1, q2)]
        cos = _cos(model, images, ["a photo of " + s1, "a photo of " + s2])  # (images, texts)
        probs = torch.softmax(torch.from_numpy(100 * cos.T), dim=-1).numpy()  # per text, over the images
        pred = ["img1" if probs[j][0] > 0.5 else "img2" for j in range(2)]
        gt = ["img1" if int(q) % 2 == 1 else "img2" for q in (q1, q2)]
        patterns[n // 15] += pred == gt
        strict += cos[0, 0] > cos[1, 0] and cos[1, 1] > cos[0, 1]
        strict_patterns[n // 15] += cos[0, 0] > cos[1, 0] and cos[1, 1] > cos[0, 1]
    per_pattern = [p / (len(body) // 2 // 9) * 100 for p in patterns]
    return {"average": sum(per_pattern) / 9, "strict": strict / (len(body) // 2) * 100, "per_pattern": per_pattern,
            "strict_per_pattern": [p / (len(body) // 2 // 9) * 100 for p in strict_patterns]}


def test_mmvp_vlm_scores_as_evaluate_vlm_a_tie_on_the_second_statement_aside(tmp_path):
    rows = _mmvp(tmp_path)
    model = GridModel()
    authors = _mmvp_eval(model, rows, tmp_path / "mmvp_vlm/MLLM_VLM Images")
    res = evaluate(BUILTIN["mmvp_vlm"], tmp_path, model)
    assert res.n_items == {"rows": 135, "images": 270}
    assert res.metrics["image_score"] == pytest.approx(authors["strict"], abs=1e-9)
    # the authors' img2 default on a tie (0.5 is not above 0.5) rescues pairs whose second statement ties
    rescued = 0
    for s in res.samples:
        (a, b), (c, d) = s["scores"]  # [image][caption]
        rescued += a > c and b == d
    assert rescued > 0
    assert authors["average"] == pytest.approx(res.metrics["image_score"] + 100 * rescued / 135, abs=1e-9)
    # per pattern (group_by: 0.Type): each of the 9 patterns' 15 pairs, the authors' table with ties wrong
    by = res.notes["by_group"]
    assert by["fields"] == ["0.Type"] and list(by["groups"]) == list(MMVP_FOLDERS)
    assert [g["items"] for g in by["groups"].values()] == [15] * 9
    assert [g["image_score"] for g in by["groups"].values()] == pytest.approx(authors["strict_per_pattern"], abs=1e-9)
    assert len(set(authors["strict_per_pattern"])) > 1 and authors["strict_per_pattern"] != authors["per_pattern"]
    first = res.samples[0]
    assert first["media"][0].endswith("MLLM_VLM Images/Orientation/1.jpg") and first["media"][1].endswith("/2.jpg")


def test_a_patterns_by_group_scores_equal_the_task_filtered_to_that_pattern(tmp_path):
    """One measurement two ways: notes.by_group's scores for a pattern, and the same task with a `where`
    filter keeping only that pattern's pairs."""
    _mmvp(tmp_path)
    model = GridModel()
    whole = evaluate(BUILTIN["mmvp_vlm"], tmp_path, model).notes["by_group"]["groups"]
    spec = (Path(__file__).resolve().parents[1] / "src/negharness/tasks/choice/mmvp_vlm.yaml").read_text()
    for pattern in ("Orientation", "Camera Perspective"):
        one = _yaml(tmp_path / f"yaml_{pattern[:3]}",
                    spec.replace("  rows_per_item: 2", f"  rows_per_item: 2\n  where: {{0.Type: {{in: [{pattern}]}}}}"))
        res = evaluate(one, tmp_path, model)
        assert res.n_items["rows"] == whole[pattern]["items"] == 15
        assert res.metrics == pytest.approx({k: whole[pattern][k] for k in res.metrics}, abs=1e-9)


def test_rows_per_item_refuses_a_file_that_splits_a_pair(tmp_path):
    rows = _mmvp(tmp_path)
    with open(tmp_path / "mmvp_vlm/Questions.csv", "a") as fh:
        fh.write("271,Text,an odd row out\n")
    with pytest.raises(UserError, match=r"Questions.csv:line 272.*271 rows do not make whole items of 2 rows"):
        BUILTIN["mmvp_vlm"](TaskOptions(tmp_path)).required_files()
    assert len(rows) == 271


# VisMin ---------------------------------------------------------------------------------------------
VISMIN_CATEGORIES = ("object", "attribute", "relation", "counting")


def _vismin(root: Path, n: int = 48) -> list[dict[str, Any]]:
    """mair-lab/vismin-bench's data/test: datasets' save_to_disk Arrow stream files data-0000N-of-00003.arrow
    of {id, image_0, text_0, image_1, text_1, text_question_0/1, image_question_0/1, category}."""
    import pyarrow as pa

    rows = []
    for i in range(n):
        img = [_blocks(f"vismin{i}_{k}", (32, 32)) for k in range(2)]
        rows.append({"id": i, "image_0": {"bytes": _png(img[0]), "path": None}, "text_0": f"two cups on a table {i % 7}",
                     "image_1": {"bytes": _png(img[1]), "path": None}, "text_1": f"three cups on a table {i % 5}",
                     "text_question_0": "", "text_question_1": "", "image_question_0": "", "image_question_1": "",
                     "category": VISMIN_CATEGORIES[i % 4]})
    table = pa.Table.from_pylist(rows)
    folder = root / "vismin/data/test"
    folder.mkdir(parents=True, exist_ok=True)
    for k, part in enumerate((table.slice(0, 16), table.slice(16, 16), table.slice(32))):
        with pa.OSFile(str(folder / f"data-0000{k}-of-00003.arrow"), "wb") as sink, pa.ipc.new_stream(sink, part.schema) as w:
            w.write_table(part)
    return rows


def _vismin_eval(model: GridModel, rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """vismin-bench/eval.py + metric.py compute_contrastive_accuracy: T{j}_I{k} = cosine(text j, image k);
    per category text, image, group in percent, rounded to 2 places."""
    from PIL import Image

    counts: dict[str, dict[str, int]] = {}
    for row in rows:
        images = [Image.open(io.BytesIO(row[f"image_{k}"]["bytes"])) for k in range(2)]
        s = _cos(model, images, [row["text_0"], row["text_1"]])
        p = {"T0_I0": s[0, 0], "T0_I1": s[1, 0], "T1_I0": s[0, 1], "T1_I1": s[1, 1]}
        text = p["T0_I0"] > p["T1_I0"] and p["T1_I1"] > p["T0_I1"]
        image = p["T0_I0"] > p["T0_I1"] and p["T1_I1"] > p["T1_I0"]
        c = counts.setdefault(row["category"], {"text": 0, "image": 0, "group": 0, "count": 0})
        c["text"], c["image"] = c["text"] + text, c["image"] + image
        c["group"], c["count"] = c["group"] + (text and image), c["count"] + 1
    return {k: {m: round(c[m] * 100 / c["count"], 2) for m in ("text", "image", "group")} for k, c in counts.items()}


def test_vismin_arrow_scores_as_the_authors_metric_per_category(tmp_path):
    rows = _vismin(tmp_path)
    model = GridModel()
    authors = _vismin_eval(model, rows)
    assert any(0 < a["group"] < a["text"] for a in authors.values())
    for category in VISMIN_CATEGORIES:
        task = BUILTIN[f"vismin_{category}"]
        res = evaluate(task, tmp_path, model)
        assert res.n_items["rows"] == 12 and res.n_items["rows_filtered"] == 36
        assert {m: res.metrics[f"{m}_score"] for m in ("text", "image", "group")} == pytest.approx(
            authors[category], abs=0.005)
    assert task(TaskOptions(tmp_path)).config()["revision"] == "2f379d5b9a3af7f10d3266f6389b7b351e54c493"


def test_a_damaged_arrow_file_is_refused_naming_it(tmp_path):
    _vismin(tmp_path, 6)
    (tmp_path / "vismin/data/test/data-00001-of-00003.arrow").write_bytes(b"not arrow")
    with pytest.raises(UserError, match=r"data-00001-of-00003.arrow: not a readable Arrow file"):
        BUILTIN["vismin_object"](TaskOptions(tmp_path)).required_files()


# declared in a user's folder: a group over files, xyxy boxes, qrels retrieval ------------------------
def _yaml(folder: Path, text: str) -> type:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.yaml").write_text(textwrap.dedent(text))
    [cls] = load_folder(folder)
    return cls


GROUP_FILES = """\
    name: my_group
    kind: group
    family: mine
    description: "two images and two captions per line"
    citation: "none"
    data_help: "none"
    data:
      file: g/groups.jsonl
    media:
      members: ["g/{a}.png", "g/{b}.png"]
    captions:
      members: [ca, cb]
    main_score: group_score
"""


def test_a_group_with_a_missing_image_names_the_row_before_anything_is_scored(tmp_path):
    cls = _yaml(tmp_path / "yaml", GROUP_FILES)
    root = tmp_path / "data"
    _save(_blocks("x", (16, 16)), root / "g/x.png")
    (root / "g/groups.jsonl").write_text(json.dumps({"a": "x", "b": "x", "ca": "one", "cb": "two"}) + "\n"
                                         + json.dumps({"a": "x", "b": "gone", "ca": "one", "cb": "two"}) + "\n")
    with pytest.raises(UserError, match=r"groups\.jsonl:line 2: image 1 .*gone\.png.* not found"):
        cls(TaskOptions(root)).required_files()


BOXES = """\
    name: my_regions
    kind: image_choice
    family: mine
    description: "a phrase and regions in x1, y1, x2, y2"
    citation: "none"
    data_help: "none"
    data:
      file: r/regions.json
    media:
      path: "r/{image}"
      boxes: boxes
      box_format: xyxy
    captions:
      text: phrase
    main_score: accuracy
"""


def test_xyxy_boxes_crop_the_same_regions_as_xywh_and_a_box_outside_names_the_row(tmp_path):
    xywh = BUILTIN["negrefcocog"]
    items = _negrefcocog(tmp_path / "data")
    model = GridModel()
    want = evaluate(xywh, tmp_path / "data", model)
    converted = [{"image": it["image"], "phrase": it["phrase"],
                  "boxes": [[x, y, x + w, y + h] for x, y, w, h in it["bbox_list"]]} for it in items]
    (tmp_path / "data/r").mkdir()
    (tmp_path / "data/r/regions.json").write_text(json.dumps(converted))
    for it in items:
        (tmp_path / "data/r" / it["image"]).symlink_to(tmp_path / "data/coco/train2014" / it["image"])
    cls = _yaml(tmp_path / "yaml", BOXES)
    assert evaluate(cls, tmp_path / "data", model).metrics["accuracy"] == want.metrics["accuracy"]
    converted[2]["boxes"][1] = [30, 0, 66, 48]  # the image is 64 wide
    (tmp_path / "data/r/regions.json").write_text(json.dumps(converted))
    with pytest.raises(UserError, match=r"regions\.json: record 2: field 'boxes\.1': box .* outside its image"):
        cls(TaskOptions(tmp_path / "data")).required_files()


QRELS = """\
    name: my_qrels
    kind: retrieval
    family: mine
    description: "queries with several relevant images"
    citation: "none"
    data_help: "none"
    data:
      file: q/corpus.parquet
      revision: 0123abc
    media:
      embedded: image
      id: corpus_id
    queries: {file: q/queries.jsonl, id: _id, text: text}
    qrels: {file: q/qrels.tsv, query: query-id, item: corpus-id, score: score}
    metrics: [R@1, R@5, C@1, mAP]
    main_score: R@1
"""


def _untied(query: str, corpus: list[dict[str, Any]]) -> str:
    """A query text whose best item is one item (Hit@1 needs no tie rule): the first of a few wordings."""
    from PIL import Image

    images = [Image.open(io.BytesIO(c["image"]["bytes"])) for c in corpus]
    for k in range(50):
        sims = _cos(GridModel(), images, [f"a picture {query} {k}"])[:, 0]
        if (sims == sims.max()).sum() == 1:
            return f"a picture {query} {k}"
    raise AssertionError(query)


def _qrels_data(root: Path, bad_line: str | None = None) -> tuple[list[str], dict[str, set[str]]]:
    """BEIR / MRMR layout: a corpus (ids, embedded images), queries.jsonl and a qrels TSV with a header."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (root / "q").mkdir(parents=True, exist_ok=True)
    corpus = [{"corpus_id": f"c{i}", "image": {"bytes": _png(_blocks(f"c{i}", (32, 32))), "path": None}}
              for i in range(12)]
    pq.write_table(pa.Table.from_pylist(corpus), root / "q/corpus.parquet")
    queries = [f"q{i}" for i in range(9)]
    (root / "q/queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": _untied(q, corpus)}) + "\n"
                                                  for q in queries))
    relevant = {q: {f"c{(i * 5 + k) % 12}" for k in range(1 + i % 3)} for i, q in enumerate(queries[:8])}
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{c}\t1" for q, cs in relevant.items() for c in sorted(cs)]
    lines.append("q0\tc11\t0")  # judged not relevant
    if bad_line:
        lines.insert(2, bad_line)
    (root / "q/qrels.tsv").write_text("\n".join(lines) + "\n")
    return queries, relevant


def test_qrels_retrieval_hit_at_1_as_mrmr_counts_it(tmp_path):
    from PIL import Image

    root = tmp_path / "data"
    queries, relevant = _qrels_data(root)
    cls = _yaml(tmp_path / "yaml", QRELS)
    model = GridModel()
    import pyarrow.parquet as pq

    corpus = pq.read_table(root / "q/corpus.parquet").to_pylist()
    images = [Image.open(io.BytesIO(c["image"]["bytes"])) for c in corpus]
    judged = [q for q in queries if q in relevant]
    sims = _cos(model, images, [_untied(q, corpus) for q in judged])  # (items, queries)
    # Hit@1: the first item by score (np.argsort descending, stable) is judged relevant
    hits = [corpus[int(np.argsort(-sims[:, j], kind="stable")[0])]["corpus_id"] in relevant[q] for j, q in enumerate(judged)]
    res = evaluate(cls, root, model)
    assert res.n_items["queries"] == 8 and res.notes["queries_unjudged"] == 1
    assert not any((sims[:, j] == sims[:, j].max()).sum() > 1 for j in range(len(judged)))  # no tie at the top
    assert 0 < np.mean(hits) < 1
    assert res.metrics["R@1"] == pytest.approx(np.mean(hits) * 100, abs=1e-9)
    assert res.metrics["C@1"] == res.metrics["R@1"] and 0 < res.metrics["R@5"] <= 100
    assert cls(TaskOptions(root)).config()["revision"] == "0123abc"


def _mrmr(root: Path, n: int = 30, int_ids: bool = True) -> tuple[list[dict], list[dict], list[dict]]:
    """MRMRbenchmark/negation's parquet conversion: query (id, image, text None), corpus (id "<query>_<k>",
    text, vision), qrels (query-id, corpus-id, score); the query ids are integers there as mteb casts them
    to text (``int_ids``). One description in four is relevant; a tie-free query every time (GridModel)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    rng = np.random.default_rng(5)
    queries, corpus, qrels = [], [], []
    for i in range(n):
        qid = 150000 + 7 * i
        picture = _blocks(f"mrmr{i}", (24, 24))
        queries.append({"id": qid if int_ids else str(qid), "image": {"bytes": _png(picture), "path": None},
                        "text": None, "modality": "image"})
        texts = [f"a scene {i} without item {k}" for k in range(4)]
        sims = _cos(GridModel(), [picture], texts)[0]
        while len(set(sims.tolist())) < 4:  # reword until the four scores differ: Hit@1 needs no tie rule
            texts = [t + " ." for t in texts]
            sims = _cos(GridModel(), [picture], texts)[0]
        for k, t in enumerate(texts):
            corpus.append({"id": f"{qid}_{k + 1}", "text": t, "vision": {"bytes": _png(Image.new("L", (4, 4))), "path": None}})
        qrels.append({"query-id": str(qid), "corpus-id": f"{qid}_{int(rng.integers(1, 5))}", "score": 1})
    for part, table in (("query", queries), ("corpus", corpus), ("qrels", qrels)):
        (root / "mrmr_negation" / part / "test").mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(table), root / "mrmr_negation" / part / "test/0000.parquet")
    return queries, corpus, qrels


def _mrmr_hit_at_1(model: GridModel, queries: list[dict], corpus: list[dict], qrels: list[dict]) -> float:
    """mteb's MRMR loader and retrieval with top_ranked: each query scores only the corpus ids whose
    ``rsplit("_", 1)[0]`` is its id; Hit@1 = the best-scored of them is judged relevant."""
    from PIL import Image

    groups: dict[str, list[dict]] = {}
    for doc in corpus:
        groups.setdefault(str(doc["id"]).rsplit("_", 1)[0], []).append(doc)
    relevant = {(str(r["query-id"]), str(r["corpus-id"])) for r in qrels if int(r["score"]) > 0}
    hits = []
    for q in queries:
        qid, docs = str(q["id"]), groups[str(q["id"])]
        sims = _cos(model, [Image.open(io.BytesIO(q["image"]["bytes"]))], [d["text"] for d in docs])[0]
        hits.append((qid, str(docs[int(np.argmax(sims))]["id"])) in relevant)
    return float(np.mean(hits) * 100)


@pytest.mark.parametrize("int_ids", [True, False])
def test_mrmr_negation_ranks_each_image_against_its_own_four_descriptions_as_mteb_does(tmp_path, int_ids):
    queries, corpus, qrels = _mrmr(tmp_path, int_ids=int_ids)
    model = GridModel()
    authors = _mrmr_hit_at_1(model, queries, corpus, qrels)
    res = evaluate(BUILTIN["mrmr_negation"], tmp_path, model)
    assert 10 < authors < 90
    assert res.metrics["R@1"] == pytest.approx(authors, abs=1e-9)
    assert res.n_items == {"queries": 30, "texts": 120} and res.notes["candidates_per_query"] == 4
    assert all(len(s["top"]) == 4 for s in res.samples)  # the other 116 texts are never ranked
    ids = [str(q["id"]) for q in queries]  # queries are named by their ids, as the qrels name them
    assert res.per_query["ids"] == ids and [s["id"] for s in res.samples] == ids
    assert all(s["top"][0].startswith(s["id"] + "_") for s in res.samples)
    # ranked against all 120 descriptions (no candidates), the same files give another number
    spec = (Path(__file__).resolve().parents[1] / "src/negharness/tasks/choice/mrmr_negation.yaml").read_text()
    whole = _yaml(tmp_path / "yaml", spec.replace("candidates: {item: '(.*)_[^_]*'}", ""))
    assert evaluate(whole, tmp_path, model).metrics["R@1"] < res.metrics["R@1"]


def test_mrmr_negation_refuses_a_relevant_description_outside_the_querys_own_four(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    queries, corpus, qrels = _mrmr(tmp_path, 4)
    qrels[2]["corpus-id"] = f"{queries[0]['id']}_1"  # another query's description
    pq.write_table(pa.Table.from_pylist(qrels), tmp_path / "mrmr_negation/qrels/test/0000.parquet")
    with pytest.raises(UserError, match=r"qrels/test/0000\.parquet: row 2: item '150000_1', judged relevant to "
                                        r"query '150014', is not among its candidates"):
        evaluate(BUILTIN["mrmr_negation"], tmp_path, GridModel())
    corpus[5]["id"] = "nounderscore"
    pq.write_table(pa.Table.from_pylist(corpus), tmp_path / "mrmr_negation/corpus/test/0000.parquet")
    with pytest.raises(UserError, match=r"corpus/test/0000\.parquet: row 5: item id 'nounderscore' does not match"):
        evaluate(BUILTIN["mrmr_negation"], tmp_path, GridModel())


def test_candidates_on_text_to_media_equal_the_collection_cut_to_each_querys_set(tmp_path):
    """The same measurement two ways: qrels retrieval with ``candidates`` against, per query, a task whose
    collection holds only that query's candidates."""
    root = tmp_path / "data"
    queries, relevant = _qrels_data(root)
    cand = QRELS + "    candidates: {query: 'q(\\d+)', item: 'c(\\d+)'}\n"
    # keys: a query's number and an item's number mod 3 (rewritten below into the ids)
    import pyarrow as pa
    import pyarrow.parquet as pq

    corpus = pq.read_table(root / "q/corpus.parquet").to_pylist()
    judged = [q for q in queries if q in relevant]
    per_query = {}
    for q in judged:  # the collection: its relevant items plus two others, keyed by the query's number
        keep = sorted(relevant[q]) + [c["corpus_id"] for c in corpus if c["corpus_id"] not in relevant[q]][:2]
        per_query[q] = keep
    rows, lines = [], ["query-id\tcorpus-id\tscore"]
    for q, keep in per_query.items():
        for c in keep:
            rows.append({"corpus_id": f"{c}-{q}", "image": next(x["image"] for x in corpus if x["corpus_id"] == c)})
        lines += [f"{q}\t{c}-{q}\t1" for c in sorted(relevant[q])]
    pq.write_table(pa.Table.from_pylist(rows), root / "q/corpus.parquet")
    (root / "q/qrels.tsv").write_text("\n".join(lines) + "\n")
    cls = _yaml(tmp_path / "yaml", cand.replace("q(\\d+)", "(q\\d+)").replace("c(\\d+)", "c\\d+-(q\\d+)"))
    res = evaluate(cls, root, GridModel())
    assert res.notes["candidates_per_query"] == pytest.approx(np.mean([len(k) for k in per_query.values()]))
    for q, keep in per_query.items():  # one query, one small collection, no candidates rule
        sub = tmp_path / f"one_{q}"
        (sub / "q").mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist([r for r in rows if r["corpus_id"].endswith(f"-{q}")]), sub / "q/corpus.parquet")
        (sub / "q/queries.jsonl").write_text((root / "q/queries.jsonl").read_text())
        (sub / "q/qrels.tsv").write_text("\n".join([lines[0]] + [l for l in lines[1:] if l.startswith(q + "\t")]) + "\n")
        one = evaluate(_yaml(tmp_path / f"yaml_{q}", QRELS), sub, GridModel())
        sample = next(s for s in res.samples if s["id"] == q)
        assert sample["rank"] == one.samples[0]["rank"] and sample["ap"] == pytest.approx(one.samples[0]["ap"])


# bad input: one error naming the file and row, nothing scored ---------------------------------------
def test_a_qrels_line_naming_an_unknown_id_names_the_file_and_line(tmp_path):
    root = tmp_path / "data"
    _qrels_data(root, "q1\tc99\t1")
    cls = _yaml(tmp_path / "yaml", QRELS)
    with pytest.raises(UserError, match=r"qrels\.tsv:line 3: item id 'c99' is not in .*corpus\.parquet"):
        evaluate(cls, root, GridModel())
    _qrels_data(root, "nobody\tc1\t1")
    with pytest.raises(UserError, match=r"qrels\.tsv:line 3: query id 'nobody'"):
        evaluate(cls, root, GridModel())


@pytest.mark.parametrize("broken, expected", [
    ({4: {"caption_1": None}}, r"0000\.parquet: row 4: field 'caption_1' must be a caption"),
    ({2: {"image_1": {"bytes": None, "path": None}}}, r"0000\.parquet: row 2: field 'image_1' holds no image"),
])
def test_a_malformed_parquet_row_names_the_file_and_row(tmp_path, broken, expected):
    _winoground(tmp_path, 6, broken)
    with pytest.raises(UserError, match=expected):
        BUILTIN["winoground"](TaskOptions(tmp_path)).required_files()


def test_a_damaged_parquet_file_names_the_file(tmp_path):
    path = tmp_path / "winoground/default/test/0000.parquet"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(UserError, match=r"0000\.parquet: not a readable parquet file"):
        BUILTIN["winoground"](TaskOptions(tmp_path)).required_files()


def test_a_negrefcocog_box_outside_its_image_names_the_file_and_row(tmp_path):
    items = _negrefcocog(tmp_path, 4)
    items[3]["bbox_list"][1] = [40.0, 0.0, 32.0, 48.0]  # 40 + 32 > 64
    (tmp_path / "negrefcocog/NegRefCOCOg.json").write_text(json.dumps(items))
    with pytest.raises(UserError, match=r"NegRefCOCOg\.json: record 3: field 'bbox_list\.1': box \(x=40.*64x48"):
        BUILTIN["negrefcocog"](TaskOptions(tmp_path)).required_files()


# the YAML checker: the new keys, each refusal naming the file and key -------------------------------
@pytest.mark.parametrize("edit, expected", [
    (("box_format: xyxy", "box_format: yxyx"), r"key 'media\.box_format': 'yxyx' is not one of xywh, xyxy"),
    (("      boxes: boxes\n", "      boxes: boxes\n      true_box: ref\n      members: [a, b]\n"),
     r"key 'media\.members': not read by a image_choice task"),
    (("kind: image_choice", "kind: group"), r"key 'media\.members': missing"),
    (("    main_score: accuracy\n", "    main_score: accuracy\n    text_only: true\n"),
     r"key 'text_only': not read by a image_choice task"),
    (("      text: phrase", "      positives: phrase"), r"key 'captions\.positives': unknown key \(known: text\)"),
])
def test_the_checker_refuses_new_keys_out_of_place(tmp_path, edit, expected):
    with pytest.raises(UserError, match=expected):
        _yaml(tmp_path, BOXES.replace(*edit))


@pytest.mark.parametrize("yaml_text, expected", [
    # a key the scoring would drop unseen is refused (each gave a number as if it were not there)
    (GROUP_FILES.replace("      members: [\"g/{a}.png\", \"g/{b}.png\"]\n",
                         "      members: [\"g/{a}.png\", \"g/{b}.png\"]\n      crop: [x, y, w, h]\n"),
     r"key 'media\.crop': not read with members or embedded images"),
    (GROUP_FILES.replace("    media:\n", "    media:\n      kind: video\n      box: region\n"),
     r"key 'media\.box': regions of a video are not read"),
    (BOXES.replace("kind: image_choice", "kind: multi_choice").replace("      text: phrase", "      positives: phrase\n"
                   "      false: other"), r"key 'media\.boxes': not read by a multi_choice task"),
    (GROUP_FILES.replace("      file: g/groups.jsonl\n", "      file: g/groups.jsonl\n      rows_per_item: 2\n"
                         "      slice: [1, -1]\n"), r"key 'data\.slice': the slice cuts rows .* multiple of 2"),
])
def test_the_checker_refuses_a_key_the_scoring_would_drop(tmp_path, yaml_text, expected):
    with pytest.raises(UserError, match=expected):
        _yaml(tmp_path, yaml_text)


def test_an_imagefolder_reads_its_path_cells_inside_the_folder(tmp_path):
    """A metadata file's paths are relative to the folder holding it (the imagefolder), not its parent."""
    folder = tmp_path / "data/ds/test"
    rows = []
    for i in range(6):
        for k in "ab":
            _save(_blocks(f"{i}{k}", (32, 32)), folder / "imgs" / f"{i}{k}.png")
        rows.append({"file_name": f"imgs/{i}a.png", "other": f"imgs/{i}b.png", "ca": f"a {i}", "cb": f"b {i}"})
    (folder / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cls = _yaml(tmp_path / "yaml", GROUP_FILES.replace("      file: g/groups.jsonl\n", "      file: ds/test\n"
                                                       "      format: imagefolder\n")
                .replace("      members: [\"g/{a}.png\", \"g/{b}.png\"]\n", "      embedded: [file_name, other]\n"))
    res = evaluate(cls, tmp_path / "data", GridModel())
    assert res.n_items == {"rows": 6, "images": 12}
    assert res.samples[0]["media"] == ["ds/test/imgs/0a.png", "ds/test/imgs/0b.png"]


def test_text_only_reads_no_media_and_qrels_reads_no_captions(tmp_path):
    tot = (Path(__file__).resolve().parents[1] / "src/negharness/tasks/choice/sugarcrepepp_swap_obj_tot.yaml").read_text()
    with pytest.raises(UserError, match=r"key 'media': not read with text_only"):
        _yaml(tmp_path / "a", tot.replace("text_only: true", "media: {path: x}\ntext_only: true"))
    with pytest.raises(UserError, match=r"key 'captions': not read with qrels"):
        _yaml(tmp_path / "b", QRELS + "    captions: {field: text}\n")
    with pytest.raises(UserError, match=r"key 'media\.id': missing"):
        _yaml(tmp_path / "c", QRELS.replace("      id: corpus_id\n", ""))


@pytest.mark.parametrize("pattern, why", [
    ("(a+)+_x", "repeats or alternates"), (r"(\w+\s?)+_(.*)", "repeats or alternates"), ("(x*)*", "repeats"),
    ("(" * 3, "not a regular expression"), ("a" * 201, "201 characters (at most 200)")])
def test_a_task_files_id_pattern_that_could_run_without_bound_is_refused_when_read(tmp_path, pattern, why):
    """A task file is untrusted input: its ``candidates`` pattern runs on every id with Python's backtracking
    `re`, which has no time limit, and ``(a+)+`` takes exponential time on one long id; it is refused naming
    the file and key, before any row is read. The MRMR file's own ``(.*)_[^_]*`` (no nesting) and a
    repeat whose turns start with a literal stand."""
    import yaml as pyyaml

    spec = (Path(__file__).resolve().parents[1] / "src/negharness/tasks/choice/mrmr_negation.yaml").read_text()
    bad = spec.replace("candidates: {item: '(.*)_[^_]*'}", "candidates: {item: " + json.dumps(pattern) + "}")
    assert bad != spec and pyyaml.safe_load(bad)["candidates"]["item"] == pattern
    with pytest.raises(UserError, match=re.escape(why)):
        _yaml(tmp_path / "yaml", bad)


@pytest.mark.parametrize("pattern", [r"(.*)_[^_]*", r"^(\d+)(?:-\d+)*$", r"^((?:[a-z]+_)+)\d+$", r"(\d{3})-\d+", r"(a{2})+"])
def test_an_id_pattern_whose_repeats_are_delimited_stands(pattern):
    from negharness.declarative.kind_specs import pattern_problem

    assert pattern_problem(pattern) is None


def test_an_item_with_more_regions_than_an_item_may_hold_is_refused_by_row(tmp_path):
    """Scores are laid out (items, widest media, widest captions): one row of 101 boxes is refused
    naming its record; 100 stand."""
    from negharness.io.data_limits import MAX_ITEM_WIDTH

    cls = _yaml(tmp_path / "yaml", BOXES)
    root = tmp_path / "data"
    _save(_blocks("x", (16, 16)), root / "r/x.png")
    for n, refused in ((MAX_ITEM_WIDTH, False), (MAX_ITEM_WIDTH + 1, True)):
        rows = [{"image": "x.png", "phrase": "a box", "boxes": [[0, 0, 8, 8], [8, 8, 16, 16]]},
                {"image": "x.png", "phrase": "a box", "boxes": [[0, 0, 8 + k % 8, 8] for k in range(n)]}]
        (root / "r/regions.json").write_text(json.dumps(rows))
        if refused:
            with pytest.raises(UserError, match=rf"regions\.json: record 1: {n} media in one item.*at most {MAX_ITEM_WIDTH}"):
                cls(TaskOptions(root)).required_files()
        else:
            assert len(cls(TaskOptions(root)).items[1].media) == n
