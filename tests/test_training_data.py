"""Training sets in the authors' layouts, on generated data: a tiny MSR-VTT train split with videos
(PyAV), pre-extracted frames, the authors' negation file, a NegBench fine-tuning CSV with images, the
user's own captions; a few steps from the CLI end to end, and clear errors for missing files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from negharness.api import UserError
from negharness.api import TrainSetOptions
from negharness.io.video import FrameSampling

av = pytest.importorskip("av")

TINY_VIT = {"model_cfg": {"embed_dim": 32, "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16,
                                                           "head_width": 16},
                          "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}},
            "preprocess_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}}
CAPTIONS = ["a man is dancing on a stage", "a dog is running in the park", "a woman is cooking in a kitchen",
            "two children are playing football", "a cat is sleeping on a sofa", "a car is driving down a road"]


def tiny_vit(tmp_path: Path) -> Path:
    path = tmp_path / "tiny_vit.json"
    path.write_text(json.dumps(TINY_VIT))
    return path


def write_video(path: Path, colour: int, n_frames: int = 12, size: int = 32) -> Path:
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=6)
        stream.width = stream.height = size
        stream.pix_fmt = "yuv420p"
        for i in range(n_frames):
            frame = np.full((size, size, 3), (colour + 7 * i) % 255, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def write_collection(root: Path, name: str, ids: list[str], negation_file: bool = False) -> None:
    folder = root / name
    (folder / "TextData").mkdir(parents=True)
    (folder / "VideoSets").mkdir()
    (folder / "videos").mkdir()
    (folder / "VideoSets" / f"{name}.txt").write_text("".join(f"{v}\n" for v in ids))
    lines, neg = [], []
    for n, v in enumerate(ids):
        for k in range(2):
            cap = CAPTIONS[(n + k) % len(CAPTIONS)]
            lines.append(f"{v}#enc#{k} {cap}\n")
            neg.append(json.dumps({"id": f"{v}#enc#{k}", "truth": cap,
                                   "false": [{"falsesent": cap.replace(" is ", " is not ", 1), "id": f"{v}#enc#{k}Fn0"}]}))
        write_video(folder / "videos" / f"{v}.mp4", 20 * n)
    (folder / "TextData" / f"{name}.caption.txt").write_text("".join(lines))
    if negation_file:
        (folder / "TextData" / f"{name}.caption.negation.txt").write_text("\n".join(neg) + "\n")


@pytest.fixture
def msrvtt_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    write_collection(root, "msrvtt10ktrain", [f"video{i}" for i in range(6)], negation_file=True)
    write_collection(root, "msrvtt10kval", [f"video{i}" for i in range(6, 9)])
    return root


def test_msrvtt_train_split_reads_the_authors_layout(msrvtt_root):
    from negharness.tasks.nt2vr.training import msrvtt10ktrain

    ts = msrvtt10ktrain(TrainSetOptions(msrvtt_root))
    (train,) = ts.streams
    assert train.kind == "video" and len(train) == 6 and len(ts.val) == 3
    assert train.captions[0] == [CAPTIONS[0], CAPTIONS[1]]
    assert train.negated[0][0] == "a man is not dancing on a stage"  # from the authors' negation file
    frames = train.load(2)
    assert frames.shape == (8, 32, 32, 3)  # uniform:8, the authors' sample_frame
    assert "negation.txt" in ts.notes[0]


def test_uniform_sampling_is_the_authors_linspace():
    assert FrameSampling.parse("uniform:8").indices(20, 2.0).tolist() == np.linspace(0, 19, 8, dtype=int).tolist()
    assert FrameSampling.parse("uniform:8").indices(3, 2.0).tolist() == [0, 0, 0, 0, 1, 1, 1, 2]  # 2k/7 truncated


def test_missing_files_say_where_to_get_them(msrvtt_root, tmp_path):
    from negharness.tasks.nt2vr.training import msrvtt10ktrain, vatex_train

    with pytest.raises(UserError, match="github.com/ruc-aimc-lab/nT2VR"):
        vatex_train(TrainSetOptions(msrvtt_root))
    (msrvtt_root / "msrvtt10ktrain" / "videos" / "video3.mp4").unlink()
    with pytest.raises(UserError, match="1 media file.*video3"):
        msrvtt10ktrain(TrainSetOptions(msrvtt_root))
    (msrvtt_root / "msrvtt10ktrain" / "TextData" / "msrvtt10ktrain.caption.negation.txt").write_text("{not json\n")
    with pytest.raises(UserError, match="negation.txt:1"):
        msrvtt10ktrain(TrainSetOptions(msrvtt_root, {"negatives": "file"}))


@pytest.mark.needs("nltk")  # real (open-vocabulary) captions: the tagger
def test_frame_index_layout_and_negator_negatives(msrvtt_root, tmp_path):
    from PIL import Image

    from negharness.tasks.nt2vr.training import msrvtt10ktrain

    folder = msrvtt_root / "msrvtt10ktrain"
    (folder / "TextData" / "msrvtt10ktrain.caption.negation.txt").unlink()
    lines = []
    for v in range(6):
        for f in range(5):
            p = folder / "frames" / f"video{v}_{f}.jpg"
            p.parent.mkdir(exist_ok=True)
            Image.fromarray(np.full((32, 32, 3), 10 * f, np.uint8)).save(p)
            lines.append(f"video{v}_{f} frames/video{v}_{f}.jpg\n")
    (folder / "id.imagepath.txt").write_text("".join(lines))
    ts = msrvtt10ktrain(TrainSetOptions(msrvtt_root, {"frames": "uniform:3"}, cache_dir=tmp_path / "cache"))
    assert ts.streams[0].load(0).shape == (3, 32, 32, 3)
    assert "negator" in ts.notes[0]
    negs = [n for caps in ts.streams[0].negated for n in caps if n]
    assert negs and all("not" in n or "n't" in n for n in negs)


def write_negbench(root: Path) -> None:
    from PIL import Image

    (root / "coco" / "val2017").mkdir(parents=True)
    ft = root / "negbench" / "finetuning"
    ft.mkdir(parents=True)
    rows, mcq = ["filepath\tcaptions"], ["correct_answer,caption_0,caption_1,caption_2,caption_3,correct_answer_template,image_path"]
    for i in range(8):
        rel = f"/data/healthy-ml/coco/images/val2017/{i:012d}.jpg"
        Image.fromarray(np.full((40, 40, 3), 25 * i, np.uint8)).save(root / "coco" / "val2017" / f"{i:012d}.jpg")
        rows.append(f"{rel}\t['a photo with object {i}', 'object {i} but no object {i + 1}']")
        mcq.append(f"{i % 4},A{i},B{i},C{i},D{i},negative,{rel}")
    (ft / "cc12m_negcap.csv").write_text("\n".join(rows) + "\n")
    (ft / "cc12m_negmcq.csv").write_text("\n".join(mcq) + "\n")


def test_negbench_fine_tuning_csvs(tmp_path):
    from negharness.tasks.negbench.training import negbench_cc12m, negbench_negfull

    root = tmp_path / "data"
    write_negbench(root)
    ts = negbench_negfull(TrainSetOptions(root))
    caps, mcqs = ts.streams
    assert caps.kind == "image" and caps.contrastive and len(caps) == 8
    assert caps.captions[1] == ["a photo with object 1", "object 1 but no object 2"]
    assert caps.ids[0] == "coco/val2017/000000000000.jpg"  # the evaluation CSVs' path rule
    assert not mcqs.contrastive and mcqs.mcq[3] == (("A3", "B3", "C3", "D3"), 3)
    (root / "negbench" / "finetuning" / "cc12m.csv").write_text(
        "filepath,title\n" + "".join(f"coco/val2017/{i:012d}.jpg,plain caption {i}\n" for i in range(3)))
    (plain,) = negbench_cc12m(TrainSetOptions(root)).streams
    assert plain.captions == [["plain caption 0"], ["plain caption 1"], ["plain caption 2"]] and plain.mcq is None
    (root / "coco" / "val2017" / "000000000005.jpg").unlink()
    with pytest.raises(UserError, match="1 media file.*github.com/m1k2zoo/negbench"):
        negbench_negfull(TrainSetOptions(root))


def test_cli_trains_a_few_steps_on_msrvtt_and_negbench_layouts(cli, msrvtt_root, tmp_path):
    write_negbench(msrvtt_root)
    arch = str(tiny_vit(tmp_path))
    common = ["--model", "clip", "--arch", arch, "--data-root", str(msrvtt_root), "--device", "cpu", "--workers", "1",
              "--batch-size", "4", "-O", "epochs=1", "-O", "lr=1e-5"]
    res = cli("train", "--trainer", "bnl", "--task", "msrvtt10ktrain", "--out", str(tmp_path / "bnl"), *common,
              "--max-steps", "2")
    assert res.returncode == 0, res.stderr
    record = json.loads((tmp_path / "bnl" / "training.json").read_text())
    assert record["optimizer_steps"] == 2 and record["stopped_by"] == "max_steps"
    assert record["trainset_notes"][1] == "frames uniform:8" and record["data_hash"]
    assert "samples/s" in res.stderr  # the log line outside a terminal
    res = cli("train", "--trainer", "negbench", "--task", "negbench_negfull", "--out", str(tmp_path / "nb"), *common)
    assert res.returncode == 0, res.stderr
    record = json.loads((tmp_path / "nb" / "training.json").read_text())
    assert record["recipe"]["alpha"] == 0.99 and record["recipe"]["optimizer"] == "adamw"
    assert record["optimizer_steps"] == 2 and record["val_items"] == 0
    ran = cli("run", "--model", "clip_bnl", "--checkpoint", str(tmp_path / "bnl"), "--task", "shapes_t2v_original",
              "--limit", "20", "--device", "cpu")
    assert ran.returncode == 0, ran.stderr
    bad = cli("train", "--trainer", "bnl", "--task", "msrvtt_nope", "--out", str(tmp_path / "x"), *common)
    assert bad.returncode == 2 and "--task msrvtt_nope" in bad.stderr


@pytest.mark.needs("nltk")  # real (open-vocabulary) captions: the tagger
def test_own_captions_csv(tmp_path):
    from PIL import Image

    from negharness.tasks.nt2vr.training import captions

    media = tmp_path / "mine"
    media.mkdir()
    for i in range(3):
        Image.fromarray(np.full((20, 20, 3), 50 * i, np.uint8)).save(media / f"img{i}.png")
    (tmp_path / "caps.csv").write_text("image_id,captions\nimg0,a man is walking\nimg1,a dog is barking\n"
                                        "img2,\"['a bird is flying', 'a bird is singing']\"\n")
    ts = captions(TrainSetOptions(tmp_path, {"file": str(tmp_path / "caps.csv"), "media": str(media)},
                                  cache_dir=tmp_path / "cache"))
    (s,) = ts.streams
    assert s.kind == "image" and s.captions[2] == ["a bird is flying", "a bird is singing"]
    assert s.load(1).size == (20, 20)
    with pytest.raises(UserError, match="-T file"):
        captions(TrainSetOptions(tmp_path, {"media": str(media)}))


def test_own_captions_csv_errors_name_the_options_train_takes(tmp_path):
    """Issue 46: a missing column was reported as `--id-column`, a flag `train` does not have."""
    from negharness.tasks.nt2vr.training import captions

    (tmp_path / "mine").mkdir()
    (tmp_path / "caps.csv").write_text("video,text\nv0,a man is walking\n")
    with pytest.raises(UserError, match=r"no column 'image_id' \(-T id_column=\)"):
        captions(TrainSetOptions(tmp_path, {"file": str(tmp_path / "caps.csv"), "media": str(tmp_path / "mine"),
                                            "negatives": "none"})).streams
    with pytest.raises(UserError, match="-T id_column= .default image_id. and -T caption_column="):
        captions(TrainSetOptions(tmp_path, {"media": str(tmp_path / "mine")}))


@pytest.mark.parametrize("cell", ['["a dog on grass", "no cat here"]', "('a dog on grass', 'no cat here')",
                                  "{'no cat here', 'a dog on grass'}"])
def test_negbench_training_captions_read_every_cell_form_alike(tmp_path, cell):
    """The NegBench fine-tuning reader parsed only ``[...]`` cells: a set literal (as CREPE writes) became one
    caption. It now shares the readers' cell, BOM and caption-limit rules."""
    from negharness.tasks.negbench.training import read_caption_csv

    import csv
    import io

    body = io.StringIO()
    csv.writer(body).writerows([["filepath", "captions"], ["img.jpg", cell]])
    path = tmp_path / "caps.csv"
    path.write_text("\ufeff" + body.getvalue(), encoding="utf-8")  # a BOM, as some editors write
    [(media, caps)] = read_caption_csv(path, tmp_path)
    assert media.name == "img.jpg" and sorted(caps) == ["a dog on grass", "no cat here"]


def test_over_long_cells_in_training_and_caption_tables_are_refused_by_line(tmp_path):
    from negharness.api import UserError
    from negharness.tasks.negbench.training import read_caption_csv
    from negharness.text.nt2vr_files import read_caption_table

    long_row = "x" * 200_000  # over the csv module's field limit and the caption limit
    for name, read in (("train.csv", lambda p: read_caption_csv(p, tmp_path)), ("table.csv", read_caption_table)):
        path = tmp_path / name
        header = "filepath,captions" if name == "train.csv" else "image_id,captions"
        path.write_text(f"{header}\nimg.jpg,a dog\nimg2.jpg,{long_row}\n", encoding="utf-8")
        with pytest.raises(UserError, match=rf"{name}:3"):
            read(path)


def test_training_sets_declare_their_t_options_and_the_host_parses_them_once(tmp_path):
    """-T strings reach a training set as typed values parsed against what it declares (shown by
    `negharness list`): a bad value or an unknown key is refused, naming the set, before any data is read."""
    from negharness.api import declared_options
    from negharness.api import TrainSetOptions
    from negharness.discovery.lookup import PluginLookup
    from negharness.tasks.nt2vr.training import msrvtt10ktrain
    from negharness.tasks.shapes.training import shapes
    from negharness.testing import lookup

    assert declared_options(msrvtt10ktrain)["negatives"].default == "auto"
    assert declared_options(shapes)["n_train"].default == 6000
    host = PluginLookup(lookup(trainset={"shapes": shapes, "msrvtt10ktrain": msrvtt10ktrain}).registry)
    with pytest.raises(UserError, match=r"-T n_train=many.*training set 'shapes'.*expected int"):
        host.create("trainset", "shapes", TrainSetOptions(tmp_path, {"n_train": "many"}))
    with pytest.raises(UserError, match=r"-T negatives=somewhere.*choose one of auto, file, negator"):
        host.create("trainset", "msrvtt10ktrain", TrainSetOptions(tmp_path, {"negatives": "somewhere"}))
    with pytest.raises(UserError, match=r"-T vall: not an option of training set 'msrvtt10ktrain'; did you mean val"):
        host.create("trainset", "msrvtt10ktrain", TrainSetOptions(tmp_path, {"vall": "none"}))
