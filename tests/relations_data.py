"""Tiny data for every registered task, row by row, so tests/test_relations.py can write the same
measurement two ways: shuffled, cut to N rows, with a row's media broken or its row removed, with a
list cell written as list, tuple, set or JSON.

A `Data` is the rows (the unit ``--limit`` counts, in file order) and a writer that lays them out
under a data root in the benchmark's published format; `media` names the files one row alone
reads. `builder_for(name, family)` is the per-family table; `NO_BUILDER` lists, with the reason,
the tasks no relation can be run on offline.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from test_negbench import _mcq_csv
from test_nt2vr_tasks import CAPTIONS, VIDEOS

from negharness.tasks.negbench.catalog import BINARY, MCQ, RETRIEVAL
from negharness.tasks.nt2vr.collections import COLLECTIONS
from negharness.testing import COLOURS, KeywordModel

FORMS = ("list", "tuple", "set", "json")


@dataclass
class Data:
    """One task's rows and how to write them; ``forms``: the cell forms its list cells take (R3)."""

    rows: list[Any]
    write: Callable[[Path, Sequence[Any], str], None]
    media: Callable[[Path, Any], list[Path]] = lambda root, row: []
    model: str = "kw"
    extra: dict[str, str] = field(default_factory=dict)  # -T options; "{root}" is the run's data root
    forms: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()  # outside resources: 'nltk', 'av'
    # files the task reads when present, left out by `build` (R12 adds them after a run): path under the root -> text
    later: dict[str, str] = field(default_factory=dict)
    judge: str | None = None  # the --judge a judged task's runs name (`colour_judge`, registered by the relations' host)

    def options(self, root: Path) -> dict[str, str]:
        return {k: v.format(root=root) for k, v in self.extra.items()}

    def add_later(self, root: Path) -> None:
        for name, text in self.later.items():
            (root / name).write_text(text)

    def build(self, root: Path, rows: Sequence[Any] | None = None, form: str = "list") -> Path:
        root.mkdir(parents=True, exist_ok=True)
        self.write(root, list(self.rows if rows is None else rows), form)
        return root


def cell(values: Sequence[str], form: str) -> str:
    """A list of strings written as a Python list, tuple or set literal, or as JSON (order kept)."""
    if form == "tuple":
        return repr(tuple(values))
    if form == "set":
        return "{" + ", ".join(map(repr, values)) + "}"
    if form == "json":
        return json.dumps(list(values))
    return repr(list(values))


def image(path: Path, colour: str, size: int = 8) -> Path:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((size, size, 3), COLOURS[colour], dtype=np.uint8)).save(path)
    return path


def video(path: Path, colour: str, n_frames: int = 8) -> Path:
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=4)
        stream.width, stream.height, stream.pix_fmt = 16, 16, "yuv420p"
        for _ in range(n_frames):
            frame = np.full((16, 16, 3), COLOURS[colour], dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


# choice rows: (image colour, true caption, false captions); right, wrong, near-ties, a colour-less tie
CHOICE_ROWS = [
    ("red", "a red car", ["a blue car", "a red red car"]),  # wrong: as one caption ("('a blue..', ..)") right
    ("green", "a green field", ["a green field at night", "a field"]),
    ("blue", "a red sky", ["a blue sky", "a sky"]),
    ("yellow", "a yellow bird", ["a cyan bird", "a magenta bird"]),
    ("cyan", "a cyan cup", ["a blue cup", "a red cup"]),
    ("magenta", "a photo", ["a picture", "an image"]),
]
ROWS = list(enumerate(CHOICE_ROWS))  # (row id: names its own media file, row)


def _json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def _csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


# YAML choice suites ------------------------------------------------------------------------------
SUGARCREPE_SPLITS = ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")


def sugarcrepe(name: str) -> Data:
    splits = SUGARCREPE_SPLITS if name == "sugarcrepe_mean" else (name.removeprefix("sugarcrepe_"),)

    def write(root: Path, rows, form: str) -> None:
        for i, (colour, _, _) in rows:
            image(root / f"coco/val2017/{i:012d}.jpg", colour)
        for split in splits:
            _json(root / f"sugarcrepe/{split}.json", {str(k): {"filename": f"{i:012d}.jpg", "caption": t,
                                                              "negative_caption": f[0]}
                                                      for k, (i, (_, t, f)) in enumerate(rows)})
    return Data(ROWS, write, lambda root, r: [root / f"coco/val2017/{r[0]:012d}.jpg"])


def aro_vg(name: str) -> Data:
    relation = name == "aro_vg_relation"
    file = "visual_genome_relation.json" if relation else "visual_genome_attribution.json"

    def write(root: Path, rows, form: str) -> None:
        out = []
        for i, (colour, t, f) in rows:
            image(root / f"aro/images/{i}.jpg", colour)
            row = {"image_path": f"{i}.jpg", "bbox_x": 0, "bbox_y": 0, "bbox_w": 8, "bbox_h": 8,
                   "true_caption": t, "false_caption": f[0]}
            row.update({"relation_name": ("on", "under")[i % 2]} if relation else
                       {"attributes": [("white", "black"), ("red", "small")][i % 2]})
            out.append(row)
        _json(root / "aro" / file, out)
    return Data(ROWS, write, lambda root, r: [root / f"aro/images/{r[0]}.jpg"])


def aro_order(name: str) -> Data:
    folder, file = ("coco", "coco_karpathy_test.json") if "coco" in name else ("flickr30k", "flickr30k_test.json")
    sub = "val2014" if folder == "coco" else "flickr30k-images"

    def write(root: Path, rows, form: str) -> None:
        for i, (colour, _, _) in rows:
            image(root / folder / sub / f"{i}.jpg", colour)
        _json(root / "aro" / file, [{"image": f"{sub}/{i}.jpg", "caption": [t + " on a long road today"]}
                                    for i, (_, t, _) in rows])
    return Data(ROWS, write, lambda root, r: [root / folder / sub / f"{r[0]}.jpg"], needs=("nltk",))


def valse(name: str) -> Data:
    def write(root: Path, rows, form: str) -> None:
        data = {}
        for i, (colour, t, f) in rows:
            image(root / f"visual7w/images/v7w_{i}.jpg", colour)
            data[f"existence_visual7w_{i}"] = {"dataset": "visual7w", "dataset_idx": str(i), "image_file": f"v7w_{i}.jpg",
                                               "caption": t, "foil": f[0], "classes": 0, "classes_foil": [1],
                                               "mturk": {"foil": 0, "caption": 3, "other": 0}}
        _json(root / "valse/existence.json", data)
    return Data(ROWS, write, lambda root, r: [root / f"visual7w/images/v7w_{r[0]}.jpg"])


CREPE = "crepe/prod_hard_negatives/negate/prod_vg_hard_negs_negate_complexity_{}.csv"


def crepe(name: str) -> Data:
    """Rows 0-2 in complexity file 4, 3-5 in file 5 (6..12 hold only their header), so the files read
    in order are the rows in order (--limit counts across them); a row's hard negatives are a list cell (R3)."""

    def write(root: Path, rows, form: str) -> None:
        by_file: dict[int, list] = {c: [] for c in range(4, 13)}
        for i, (colour, t, f) in rows:
            image(root / f"visual_genome/VG_100K/{i + 1}.jpg", colour)
            by_file[4 + i // 3].append([i + 1, 0, 0, 8, 8, t, cell(f, form)])
        for c, body in by_file.items():
            _csv(root / CREPE.format(c), ["image_id", "x", "y", "width", "height", "caption", "hard_negs"], body)
    return Data(ROWS, write, lambda root, r: [root / f"visual_genome/VG_100K/{r[0] + 1}.jpg"], forms=FORMS)


def ccneg(name: str) -> Data:
    prefix = "/workspace/datasets/cc3m/imgs"

    def write(root: Path, rows, form: str) -> None:
        for i, (colour, _, _) in rows:
            image(root / f"ccneg/imgs/{i}.jpg", colour)
        data = {"image_paths": [f"{prefix}/{i}.jpg" for i, _ in rows],
                "annotations": [{"json": {"caption": t}, "sop_data": {"negative-prompt": f[0]}} for _, (_, t, f) in rows]}
        torch.save(data, root / "ccneg/ccneg_preprocessed.pt")
    return Data(ROWS, write, lambda root, r: [root / f"ccneg/imgs/{r[0]}.jpg"])


# the item kinds: SugarCrepe++ (multi_choice, ITT and TOT), NegRefCOCOg (image_choice over boxes),
# Winoground (group, images embedded in a parquet file as the Hub's conversion stores them) ------------
OTHER = {"red": "blue", "green": "magenta", "blue": "yellow", "yellow": "red", "cyan": "green", "magenta": "cyan"}


def sugarcrepepp(name: str) -> Data:
    split, text_only = name.removeprefix("sugarcrepepp_")[:-4], name.endswith("_tot")

    def write(root: Path, rows, form: str) -> None:
        for i, (colour, _, _) in ([] if text_only else rows):  # the text-only task reads no image
            image(root / f"coco/val2017/{i:012d}.jpg", colour)
        _json(root / f"sugarcrepepp/{split}.json", [{"id": k, "filename": f"{i:012d}.jpg", "caption": t,
                                                     "caption2": f[1] if text_only else t + " here",
                                                     "negative_caption": f[0]}
                                                    for k, (i, (_, t, f)) in enumerate(rows)])
    return Data(ROWS, write, (lambda root, r: []) if text_only else
                (lambda root, r: [root / f"coco/val2017/{r[0]:012d}.jpg"]))


def two_colours(path: Path, left: str, right: str) -> Path:
    """An 8x8 image, its left half one colour and its right half another (two regions to choose from)."""
    from PIL import Image

    arr = np.zeros((8, 8, 3), dtype=np.uint8)
    arr[:, :4], arr[:, 4:] = COLOURS[left], COLOURS[right]
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path)
    return path


def negrefcocog(name: str) -> Data:
    def write(root: Path, rows, form: str) -> None:
        for i, (colour, _, _) in rows:
            two_colours(root / f"coco/train2014/COCO_train2014_{i:012d}.jpg", colour, OTHER[colour])
        _json(root / "negrefcocog/NegRefCOCOg.json", [
            {"image": f"COCO_train2014_{i:012d}.jpg", "phrase": t, "ref_bbox": [0, 0, 4, 8],
             "bbox_list": [[0, 0, 4, 8], [4, 0, 4, 8]]} for i, (_, t, _) in rows])
    return Data(ROWS, write, lambda root, r: [root / f"coco/train2014/COCO_train2014_{r[0]:012d}.jpg"])


def png_bytes(colour: str) -> bytes:
    import base64

    return base64.b64decode(_png_b64(colour))


def winoground(name: str) -> Data:
    def write(root: Path, rows, form: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = [{"id": i, "image_0": {"bytes": png_bytes(colour), "path": f"ex_{i}_img_0.png"},
                  "image_1": {"bytes": png_bytes(OTHER[colour]), "path": f"ex_{i}_img_1.png"},
                  "caption_0": t, "caption_1": f[0], "tag": "Object"} for i, (colour, t, f) in rows]
        (root / "winoground/default/test").mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(table), root / "winoground/default/test/0000.parquet")
    return Data(ROWS, write)


def naturalbench(name: str) -> Data:
    """NaturalBench-Retrieval's metadata.json and images/ (naturalbench_retrieval.py's layout)."""
    folder = "naturalbench/NaturalBench-Retrieval"

    def write(root: Path, rows, form: str) -> None:
        for i, (colour, _, _) in rows:
            image(root / f"{folder}/images/{i}_0.jpg", colour)
            image(root / f"{folder}/images/{i}_1.jpg", OTHER[colour])
        _json(root / f"{folder}/metadata.json", [{"index": k, "image_0": f"{i}_0.jpg", "image_1": f"{i}_1.jpg",
                                                  "caption_0": t, "caption_1": f[0]}
                                                 for k, (i, (_, t, f)) in enumerate(rows)])
    return Data(ROWS, write, lambda root, r: [root / f"{folder}/images/{r[0]}_0.jpg",
                                              root / f"{folder}/images/{r[0]}_1.jpg"])


def bivlc(name: str) -> Data:
    def write(root: Path, rows, form: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = [{"image": {"bytes": png_bytes(colour), "path": None}, "caption": t,
                  "negative_image": {"bytes": png_bytes(OTHER[colour]), "path": None}, "negative_caption": f[0],
                  "type": "replace", "subtype": "replace_att"} for colour, t, f in (r for _, r in rows)]
        (root / "bivlc/default/test").mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(table), root / "bivlc/default/test/0000.parquet")
    return Data(ROWS, write)



def vinoground(name: str) -> Data:
    """vinoground.csv (index, major, minor, pos_cap, neg_cap) and vinoground_videos/{index}_{pos,neg}.mp4."""
    def write(root: Path, rows, form: str) -> None:
        for i, (colour, _, _) in rows:
            video(root / f"vinoground/vinoground_videos/{i}_pos.mp4", colour)
            video(root / f"vinoground/vinoground_videos/{i}_neg.mp4", OTHER[colour])
        _csv(root / "vinoground/vinoground.csv", ["index", "major", "minor", "pos_cap", "neg_cap"],
             [[i, "action", "", t, f[0]] for i, (_, t, f) in rows])
    return Data(ROWS, write, lambda root, r: [root / f"vinoground/vinoground_videos/{r[0]}_{k}.mp4" for k in ("pos", "neg")],
                needs=("av",))


def mrmr(name: str) -> Data:
    """MRMR Negation's parquet conversion: query (id, image), corpus (id "<query>_<k>", text), qrels. Each
    query's candidates are its own row's captions, so a file cut to N rows equals --limit N."""
    def write(root: Path, rows, form: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        base = root / "mrmr_negation"
        # a colour word in every file (an unread column in two), so R6's change reaches each file's content
        tables = {"query": [{"id": str(i), "image": {"bytes": png_bytes(colour), "path": None}, "text": colour}
                            for i, (colour, _, _) in rows],
                  "corpus": [{"id": f"{i}_{k + 1}", "text": c} for i, (_, t, f) in rows for k, c in enumerate([t, *f])],
                  "qrels": [{"query-id": str(i), "corpus-id": f"{i}_1", "score": 1, "colour": colour}
                            for i, (colour, _, _) in rows]}
        for part, table in tables.items():
            (base / part / "test").mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(table), base / part / "test/0000.parquet")
    return Data(ROWS, write)


def mmvp_vlm(name: str) -> Data:
    """Questions.csv (Question ID,Type,Statement): a pair is rows 2k+1, 2k+2; images under MLLM_VLM Images/<Type>/."""
    def write(root: Path, rows, form: str) -> None:
        lines = ["Question ID,Type,Statement"]
        for k, (i, (colour, t, f)) in enumerate(rows):
            for q, c, text in ((2 * k + 1, colour, t), (2 * k + 2, OTHER[colour], f[0])):
                image(root / f"mmvp_vlm/MLLM_VLM Images/Color/{q}.jpg", c)
                lines.append(f"{q},Color,{text}")
        (root / "mmvp_vlm").mkdir(parents=True, exist_ok=True)
        (root / "mmvp_vlm/Questions.csv").write_text("\n".join(lines) + "\n")
    return Data(ROWS, write)


def vismin(name: str) -> Data:
    """datasets' save_to_disk layout: three Arrow stream files of {id, image_0, text_0, image_1, text_1, category}."""
    def write(root: Path, rows, form: str) -> None:
        import pyarrow as pa

        category = name.removeprefix("vismin_")
        table = [{"id": i, "image_0": {"bytes": png_bytes(colour), "path": None}, "text_0": t,
                  "image_1": {"bytes": png_bytes(OTHER[colour]), "path": None}, "text_1": f[0],
                  "category": category} for i, (colour, t, f) in rows]
        folder = root / "vismin/data/test"
        folder.mkdir(parents=True, exist_ok=True)
        schema = pa.Table.from_pylist(table).schema
        cut = [0, len(table) // 3, 2 * len(table) // 3, len(table)]  # contiguous shards, in row order
        for k in range(3):
            part = pa.Table.from_pylist(table[cut[k]:cut[k + 1]], schema=schema)
            with pa.OSFile(str(folder / f"data-0000{k}-of-00003.arrow"), "wb") as sink, \
                    pa.ipc.new_stream(sink, part.schema) as writer:
                writer.write_table(part)
    return Data(ROWS, write)


# NegBench ------------------------------------------------------------------------------------------
MCQ_ROWS = [(i, colour, [t, *f, "a " + ("blue" if colour != "blue" else "red") + " dog"])
            for i, (colour, t, f) in ROWS]
ANCHOR = {"coco": "data/coco/images/val2017/{}.jpg", "voc2007": "VOC2007/JPEGImages/{}.jpg",
          "hardneg_syn": "synthetic_visual_negation/data/positive/{}.png",
          "chexpert": "CheXpert-v1.0/valid/patient{}/study1/view1_frontal.jpg", "msrvtt": "video{}.mp4"}
MAPPED = {"coco": "coco/val2017/{}.jpg", "voc2007": "voc2007/JPEGImages/{}.jpg",
          "hardneg_syn": "hardneg_syn/positive/{}.png", "chexpert": "chexpert/valid/patient{}/study1/view1_frontal.jpg",
          "msrvtt": "msrvtt/videos/video{}.mp4"}


def _source(name: str) -> str:
    return next(s for s in ("coco", "voc2007", "hardneg_syn", "chexpert", "msrvtt") if s in name)


def _negbench_media(root: Path, source: str, i: int, colour: str) -> None:
    path = root / MAPPED[source].format(i)
    video(path, colour) if source == "msrvtt" else image(path, colour)


def negbench_mcq(name: str) -> Data:
    file, kind, layout, _ = MCQ[name]
    source = _source(name)

    def write(root: Path, rows, form: str) -> None:
        (root / "negbench").mkdir(parents=True, exist_ok=True)
        for i, colour, _ in rows:
            _negbench_media(root, source, i, colour)
        if name in BINARY:
            _csv(root / "negbench" / file, ["image_path", "caption_0", "caption_1", "correct_answer"],
                 [[ANCHOR[source].format(i), o[0], o[1], 0] for i, _, o in rows])
        else:  # the correct answer first (COCO layout) or where the row index puts it
            moved = [(i, c, o, 0 if layout == MCQ["negbench_mcq_coco"][2] else i % 4) for i, c, o in rows]
            _mcq_csv(root / "negbench" / file, [
                [ANCHOR[source].format(i), k, *(o[1:k + 1] + [o[0]] + o[k + 1:]), "positive"] for i, _, o, k in moved])
    return Data(MCQ_ROWS, write, lambda root, r: [root / MAPPED[source].format(r[0])],
                needs=("av",) if kind == "video" else ())


def negbench_retrieval(name: str) -> Data:
    original, negated, kind, _ = RETRIEVAL[name]
    source = _source(name)
    header = ["positive_objects", "negative_objects", "filepath", "image_id", "captions"]

    def write(root: Path, rows, form: str) -> None:
        for i, (colour, _, _) in rows:
            _negbench_media(root, source, i, colour)
        _csv(root / "negbench" / original, header,
             [["[]", "[]", ANCHOR[source].format(i), i, cell([t, t + " here"], form)] for i, (_, t, _) in rows])
        _csv(root / "negbench" / negated, header,
             [["[]", "[]", ANCHOR[source].format(i), i, cell([f"{t} but no {f[0].split()[1]}", f[1]], form)]
              for i, (_, t, f) in rows])
    return Data(ROWS, write, lambda root, r: [root / MAPPED[source].format(r[0])], forms=FORMS,
                needs=("av",) if kind == "video" else ())


# nT2VR: each collection laid out as tests/test_nt2vr_tasks.write_layout does (videos as frame folders),
# with only the query file the task reads (negated or composed queries written, never built) ----------
NEGATED = {"video0": "a man in red is not playing a guitar", "video1": "a man in green is not cooking pasta",
           "video2": "a man without blue is playing a guitar", "video3": "a woman in yellow is not reading a book",
           "video4": "a woman not in cyan is riding a bike"}
QRELS = ("flickr30k_original",)  # read with -T qrels=<data root>/<collection>/qrels.txt
ALSO = {"video0": "video1", "video1": "video2", "video2": "video0", "video3": "video4", "video4": "video3"}
OBJECT = {"video0": "guitar", "video1": "pasta", "video2": "guitar", "video3": "book", "video4": "bike"}
NT2VR_ROWS = [(vid, colour) for vid, colour in VIDEOS.items()]
# the authors' negated_neginfo.txt (read when present): each negated query's positive part and negation scope,
# two of them other than the negator's (so the boolean baseline's numbers change when the file appears)
NEGINFO = {"video0": ("a man", "red"), "video1": ("a man in green", "cooking pasta"),
           "video2": ("a man playing a guitar", "blue"), "video3": ("a woman", "yellow"),
           "video4": ("a woman riding a bike", "cyan")}


def nt2vr(name: str, parts: bool = False) -> Data:
    """``parts``: composed queries carry the builder's parts (subject, positive, negative), as the judged
    tasks' questions need (`nt2vr_judged`)."""
    prefix, query_set = name.rsplit("_", 1)
    collection, kind, _ = COLLECTIONS[prefix]

    def media(root: Path, row) -> list[Path]:
        vid = row[0]
        folder = root / collection
        return [folder / "images" / f"{vid}.jpg"] if kind == "image" else [folder / "frames" / vid / "0.png"]

    def write(root: Path, rows, form: str) -> None:
        folder = root / collection
        (folder / "TextData").mkdir(parents=True, exist_ok=True)
        (folder / "VideoSets").mkdir(exist_ok=True)
        (folder / "VideoSets" / f"{collection}.txt").write_text("".join(f"{v}\n" for v, _ in rows))
        lines = []
        for vid, colour in rows:
            if kind == "image":
                image(folder / "images" / f"{vid}.jpg", colour)
                continue
            for k in range(2):
                image(folder / "frames" / vid / f"{k}.png", colour)
                lines.append(f"{vid}_{k} frames/{vid}/{k}.png\n")
        if lines:
            (folder / "id.imagepath.txt").write_text("".join(lines))
        text = folder / "TextData" / collection
        Path(f"{text}.caption.txt").write_text("".join(f"{v}#enc#{k} {c}\n" for v, _ in rows
                                                      for k, c in enumerate(CAPTIONS[v])))
        if query_set == "negated":
            Path(f"{text}.negated.txt").write_text("".join(f"{v}#enc#0#0 {NEGATED[v]}\n" for v, _ in rows))
        if name in QRELS:  # extra judgements (FIRE): a query also fits the next video, where the rows have it
            ids = {v for v, _ in rows}
            (folder / "qrels.txt").write_text("".join(f"{v}#enc#{k} {ALSO[v]} 1\n" for v, _ in rows for k in range(2)
                                                      if ALSO[v] in ids))
        if query_set == "composed":
            Path(f"{text}.composed.txt").write_text("".join(
                repr({"cap_id": f"c{v}", "caption": f"a {c} scene without {OBJECT[v]}", "video_ids": [v],
                      **(PARTS[v] if parts else {})}) + "\n" for v, c in rows))
    extra = {"qrels": f"{{root}}/{collection}/qrels.txt"} if name in QRELS else {}
    later = {f"{collection}/TextData/{collection}.negated_neginfo.txt": "".join(
        repr({"cap_id": f"{v}#enc#0#0", "caption": NEGATED[v], "poscap": pos, "negcap": neg}) + "\n"
        for v, (pos, neg) in NEGINFO.items())} if query_set == "negated" else {}
    return Data(NT2VR_ROWS, write, media, extra=extra, later=later)


class AskingKeywordModel(KeywordModel):
    """Scores each (question + option) as the keyword model scores a caption against the image: a
    model that scores choices itself, as NegVQA's tasks require (no embedding of the medium is cached)."""

    scores_choices_itself = True

    def score_choices(self, choices: Any, batch_size: int, precision: str) -> torch.Tensor:
        out = torch.full((len(choices), max(len(o) for o in choices.options)), float("-inf"))
        for r in range(len(choices)):
            pixels = self.preprocess_image(np.asarray(choices.media.load(choices.media_index[r]).convert("RGB")))
            image_emb = self.encode_image(pixels[None])[0]
            texts = [f"{choices.question(r)} {o}" for o in choices.options[r]]
            out[r, : len(texts)] = self.encode_text(texts) @ image_emb
        return out


def _png_b64(colour: str) -> str:
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), COLOURS[colour], dtype=np.uint8)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def negvqa(name: str) -> Data:
    """NegVQA's jsonl: images embedded as base64 (no media file to break), options A/B from a row's captions."""

    def write(root: Path, rows, form: str) -> None:
        items = [{"index": i, "image": _png_b64(colour), "original_question": "Which is it?",
                  "negated_question": "Which is it not?", "A": t, "B": f[0], "original_answer": "A",
                  "negated_answer": "B", "category": "colour"} for i, (colour, t, f) in rows]
        (root / "negvqa").mkdir(parents=True, exist_ok=True)
        (root / "negvqa/NegVQA-7379.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return Data(ROWS, write, model="asking_kw")


def nein_val(name: str) -> Data:
    def write(root: Path, rows, form: str) -> None:
        entries = []
        for i, (colour, t, _) in rows:
            image(root / f"coco/val2017/{397133 + i:012d}.jpg", colour, 32)
            image(root / f"nein/images/NeIn_{i}_1.png", colour, 32)
            entries.append({"COCO": str(397133 + i), "T_original": f"A man with a dog on {t}.",
                            "T_generated": "Add a cat.", "T_negative": "The image lacks cat.", "NeIn": f"NeIn_{i}_1"})
        _json(root / "nein/val.json", entries)
    return Data(ROWS, write, lambda root, r: [root / f"nein/images/NeIn_{r[0]}_1.png"], model="identity",
                extra={"detector": "shapes_exact", "clip_model": "none", "dino_model": "none"}, needs=("nltk",))


def generated(name: str, model: str = "kw", **extra: str) -> Data:
    """A task that makes its own data (the embedded world, the example plugin): no rows, no files."""
    return Data([], lambda root, rows, form: None, model=model, extra=dict(extra))


# judged retrieval: SimpleNeg's layout and nT2VR's composed queries with their parts, judged by a stand-in
# judge that reads the colour an image shows and the colour word a question asks about -----------------
class ColourJudge:
    """Says "Yes." when the question's colour word is the colour the image shows (the nearest of
    `COLOURS` to its mean pixel: a JPEG's solid colour drifts), "No" otherwise; a video by its first frame."""

    takes_frames = True

    def describe(self) -> dict[str, Any]:
        return {"kind": "colour stand-in", "version": 1}

    def answer(self, items: Sequence[tuple[bytes, str]]) -> list[str]:
        import io

        from PIL import Image

        out = []
        for shown, prompt in items:
            data = shown[0] if isinstance(shown, list) else shown
            mean = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=float).reshape(-1, 3).mean(0)
            shown = min(COLOURS, key=lambda c: float(((np.array(COLOURS[c]) - mean) ** 2).sum()))
            asked = [w.strip("?.,") for w in prompt.lower().split() if w.strip("?.,") in COLOURS]
            out.append("Yes." if asked and asked[0] == shown else "No")
        return out


def colour_judge(options: Any) -> ColourJudge:
    return ColourJudge()


# SimpleNeg rows over a fixed pool of the six colours: a single colour word retrieves a tie-free top 3
# (itself, then its two neighbours); verified and respected, verified and broken, never verified
SIMPLENEG_ROWS = [("red", "Is there yellow?", "Is there red?"), ("yellow", "Is there red?", "Is there yellow?"),
                  ("cyan", "Is there cyan?", "Is there cyan?"), ("green", "Is there green?", "Is there blue?"),
                  ("blue", "Is there red?", "Is there blue?"), ("magenta", "Is there magenta?", "Is there magenta?")]


def simpleneg(name: str) -> Data:
    def write(root: Path, rows, form: str) -> None:
        for i, colour in enumerate(COLOURS):  # the pool: every colour, whichever rows are written
            image(root / f"coco/val2014/COCO_val2014_{i:012d}.jpg", colour)
        _json(root / "simpleneg/simpleneg.json", [list(r) for r in rows])
    return Data(SIMPLENEG_ROWS, write, extra={"pool_size": "6", "top_k": "3"}, judge="stand_in_colour")


# a composed query's parts: verified by its own image's colour; its negation names another colour (respected)
# or its own (broken)
PARTS = {v: {"subject": "a", "positive": f"a {c} scene",
             "negative": f"{c} thing" if v in ("video1", "video3") else f"{VIDEOS[ALSO[v]]} thing"}
         for v, c in VIDEOS.items()}


def nt2vr_judged(name: str) -> Data:
    base = nt2vr(name.removesuffix("_judged"), parts=True)
    return Data(base.rows, base.write, base.media, judge="stand_in_colour")


# the per-family table: every registered task's family (or name) -> its builder --------------------
FAMILIES: dict[str, Callable[[str], Data]] = {
    "sugarcrepe": sugarcrepe, "valse": valse, "sugarcrepepp": sugarcrepepp, "negrefcocog": negrefcocog,
    "winoground": winoground, "bivlc": bivlc, "vinoground": vinoground, "naturalbench": naturalbench,
    "mmvp_vlm": mmvp_vlm, "vismin": vismin, "mrmr": mrmr, "crepe": crepe, "ccneg": ccneg, "nt2vr": nt2vr,
    "shapes": lambda name: generated(name, n_items="12"), "example": generated,
}
BY_NAME: dict[str, Callable[[str], Data]] = {
    "aro_vg_relation": aro_vg, "aro_vg_attribution": aro_vg, "aro_coco_order": aro_order,
    "aro_flickr_order": aro_order, "nein_val": nein_val, "negvqa_negated": negvqa, "negvqa_original": negvqa,
    "nein_shapes": lambda name: generated(name, "identity", n_items="6", clip_model="none", dino_model="none"),
    **{n: negbench_mcq for n in MCQ}, **{n: negbench_retrieval for n in RETRIEVAL},
    "simpleneg": simpleneg,
    **{f"{p}_composed_judged": nt2vr_judged for p in ("mscoco", "flickr30k", "msrvtt3k", "msrvtt1k", "vatex")},
}
# task -> why no relation is run on it (none today)
NO_BUILDER: dict[str, str] = {}


def builder_for(name: str, family: str) -> Callable[[str], Data] | None:
    return BY_NAME.get(name) or FAMILIES.get(family)
