"""Nothing silent (issue 24, items 3-6): inputs a user could hand the CLI that used to pass quietly or
fail without a cause are refused by name, in one line, with exit 2. Each case runs the CLI in a
subprocess the way a user would."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
import torch
from test_checkpoints import RunsACommand  # the one pickle that would run a command

TINY_VIT = {"model_cfg": {"embed_dim": 32, "quick_gelu": True,
                          "vision_cfg": {"image_size": 32, "layers": 1, "width": 64, "patch_size": 16},
                          "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 1, "layers": 1}}}


def one_error_line(res, code: int, *needles: str) -> str:
    """The run exits ``code`` with one `error:` line (the last) holding every needle, no traceback."""
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, res.stderr
    tail = res.stderr[res.stderr.index("error:"):].strip()
    assert "\n" not in tail, tail
    for n in needles:
        assert n in tail, tail
    return tail


# item 3: checkpoints ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny open_clip architecture (JSON) and its randomly initialised weights."""
    from negharness.api import ModelOptions
    from negharness.plugins.openclip_model import OpenClipModel

    folder = tmp_path_factory.mktemp("tiny")
    cfg = folder / "tiny_vit.json"
    cfg.write_text(json.dumps(TINY_VIT))
    torch.manual_seed(5)
    model = OpenClipModel.create("src", ModelOptions(arch=str(cfg)), default_pretrained=None)
    return cfg, {k: v.clone() for k, v in model.model.state_dict().items()}


def _run_clip(cli, cfg: Path, ckpt: Path, env=None):
    return cli("run", "--model", "clip", "--arch", str(cfg), "--checkpoint", str(ckpt),
               "--task", "shapes_t2i_original", "--limit", "4", env=env)


def test_checkpoint_with_other_shapes_is_one_line_naming_file_tensors_and_shapes(cli, tmp_path, tiny):
    cfg, state = tiny
    bad = dict(state)
    bad["text_projection"] = torch.zeros(32, 16)
    bad["visual.proj"] = torch.zeros(64, 8)
    path = tmp_path / "other_shapes.pt"
    torch.save({"epoch": 1, "state_dict": {f"module.{k}": v for k, v in bad.items()}}, path)
    line = one_error_line(_run_clip(cli, cfg, path), 2, "other_shapes.pt", "2 tensor(s) of another shape",
                          "text_projection: checkpoint [32, 16], model [32, 32]",
                          "visual.proj: checkpoint [64, 8], model [64, 32]")
    assert "size mismatch" not in line and "plugin" not in line


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.complex64])
def test_checkpoint_with_integer_boolean_or_complex_weights_is_refused(cli, tmp_path, tiny, dtype):
    """torch would cast them into the float model without a word (weights x1000 as int64 ran, exit 0)."""
    from safetensors.torch import save_file

    cfg, state = tiny
    bad = {k: (v * 1000).to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    path = tmp_path / ("weights.pt" if dtype == torch.complex64 else "weights.safetensors")
    torch.save(bad, path) if dtype == torch.complex64 else save_file(bad, str(path))
    one_error_line(_run_clip(cli, cfg, path), 2, path.name, "not floating point", f"checkpoint {dtype}",
                   "model torch.float32")


def test_an_empty_checkpoint_file_is_named_as_empty(cli, tmp_path, tiny):
    path = tmp_path / "zero.pt"
    path.write_bytes(b"")
    one_error_line(_run_clip(cli, tiny[0], path), 2, "zero.pt: empty file (0 bytes), not a torch checkpoint")


def test_a_boolean_model_option_takes_only_true_or_false_words(cli, tmp_path):
    res = cli("run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "--limit", "4", "-M", "quick_gelu=maybe")
    one_error_line(res, 2, "-M quick_gelu=maybe (model 'shapes_clip'): expected true or false")


def test_pickle_that_would_call_a_command_is_refused_unless_calls_are_skipped(cli, tmp_path, tiny):
    cfg, state = tiny
    marker = tmp_path / "MARKER"
    path = tmp_path / "model_best.pth.tar"
    opt = argparse.Namespace(lr=1e-5, nested={"runner": [RunsACommand(marker)]})
    torch.save({"epoch": 4, "model": state, "opt": opt}, path)
    one_error_line(_run_clip(cli, cfg, path), 2, "model_best.pth.tar", f"would call {os.system.__module__}.system",
                   "nothing was run", "NEGHARNESS_SKIP_PICKLE_CALLS=1")
    assert not marker.exists() and not list(tmp_path.rglob("shapes_t2i_original*.json"))
    ok = _run_clip(cli, cfg, path, env={"NEGHARNESS_SKIP_PICKLE_CALLS": "1"})
    assert ok.returncode == 0, ok.stderr
    assert not marker.exists()
    assert f"skipped calls to {os.system.__module__}.system" in ok.stderr
    (record,) = tmp_path.rglob("shapes_t2i_original*[0-9a-f].json")
    notes = json.loads(record.read_text())["model"]["describe"]["checkpoint_notes"]
    assert notes["skipped_calls"] == [f"{os.system.__module__}.system"]


def test_data_objects_in_a_pickle_are_read_as_stand_ins(tmp_path, tiny):
    """Config objects (NEWOBJ), protocol-0/1 objects (copyreg._reconstructor), numpy scalars and a
    torch.device are data, not calls: read without the skip option."""
    import numpy as np

    from negharness.io.checkpoints import read_checkpoint

    _, state = tiny
    for protocol in (1, 2, 4):  # 1: copyreg._reconstructor; 2 (torch's default), 4: NEWOBJ
        path = tmp_path / f"p{protocol}.pt"
        torch.save({"model": state, "opt": argparse.Namespace(lr=1e-5), "best_perf": np.float64(0.404),
                    "device": torch.device("cpu")}, path, pickle_protocol=protocol)
        with pytest.warns(UserWarning, match="argparse.Namespace"):
            ckpt = read_checkpoint(path)
        assert set(ckpt.ignored) == {"argparse.Namespace", f"{np.float64(0).__reduce__()[0].__module__}.scalar",
                                     "numpy.dtype", "torch.device"}, protocol
        assert ckpt.skipped == [] and ckpt.state.keys() == state.keys(), protocol
        assert all(torch.equal(ckpt.state[k], v) for k, v in state.items())


# item 4: NegBench MCQ files --------------------------------------------------------------------------
SHARED_CSVS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "negbench" / "negbench_eval_csvs"
COCO_MCQ = "COCO_val_mcq_llama3.1_rephrased.csv"
IMAGE = "data/coco/images/val2017/000000000001.jpg"


def _mcq_file(root: Path, header: list[str], rows: list[list]) -> Path:
    """A COCO MCQ CSV as a user would drop it under the data root, with the one image it names."""
    import csv

    import numpy as np
    from PIL import Image

    (root / "negbench").mkdir(parents=True, exist_ok=True)
    (root / "coco" / "val2017").mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8, 3), (255, 0, 0), np.uint8)).save(root / "coco" / "val2017" / "000000000001.jpg")
    path = root / "negbench" / COCO_MCQ
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([header, *rows])
    return path


FOUR = ["image_path", "correct_answer", "caption_0", "caption_1", "caption_2", "caption_3", "correct_answer_template"]
GOOD_ROW = [IMAGE, 0, "a red picture", "a red picture but no dog", "a dog", "no dog", "positive"]


def _run_mcq(cli, root: Path):
    return cli("run", "--model", "mean_colour", "--task", "negbench_mcq_coco", "--data-root", str(root),
               plugins=("good",))


def test_mcq_file_with_fewer_options_than_the_layout_is_refused_at_its_header(cli, tmp_path):
    three = [c for c in FOUR if c != "caption_3"]
    _mcq_file(tmp_path / "data", three, [[IMAGE, 0, "a red picture", "a dog", "no dog", "positive"]] * 2)
    one_error_line(_run_mcq(cli, tmp_path / "data"), 2, f"{COCO_MCQ}:1", "header has 3 option column(s)",
                   "caption_0, caption_1, caption_2", "layout has 4")
    assert not list(tmp_path.rglob("negbench_mcq_coco*.json"))


@pytest.mark.parametrize("bad, needle", [("a red\x00 picture", "U+0000 (NUL)"), ("a red \x1b[31mpicture", "U+001B (ESC)"),
                                         ("a red\x85picture", "U+0085")])
def test_mcq_caption_with_a_control_character_is_refused_by_row(cli, tmp_path, bad, needle):
    row = list(GOOD_ROW)
    row[4] = bad  # caption_2 of the second data row
    _mcq_file(tmp_path / "data", FOUR, [GOOD_ROW, row])
    one_error_line(_run_mcq(cli, tmp_path / "data"), 2, f"{COCO_MCQ}:3: caption_2", needle, "control character")


@pytest.mark.parametrize("copy", ["a red picture", "A red  picture "])
def test_mcq_row_repeating_the_correct_caption_as_a_distractor_is_refused(cli, tmp_path, copy):
    row = [IMAGE, 1, "a dog", "a red picture", copy, "no dog", "hybrid"]
    _mcq_file(tmp_path / "data", FOUR, [GOOD_ROW, GOOD_ROW, row])
    one_error_line(_run_mcq(cli, tmp_path / "data"), 2, f"{COCO_MCQ}:4: caption_2 repeats the correct caption",
                   "caption_1")


@pytest.mark.skipif(not SHARED_CSVS.is_dir(), reason="../shared NegBench CSVs absent")
def test_no_published_negbench_file_trips_the_new_checks():
    """Every MCQ file under its task's layout and every retrieval file read whole: no header of
    another option count, no control character, no copy of the correct caption."""
    from negharness.tasks.negbench.catalog import BINARY, MCQ, RETRIEVAL
    from negharness.tasks.negbench.data import read_mcq, read_retrieval

    root, seen = Path("/R"), 0
    for task, (csv_name, _kind, layout, _desc) in MCQ.items():
        for path in SHARED_CSVS.glob(f"*/{csv_name}"):
            rows = read_mcq(path, root, layout, task in BINARY)
            seen += len(rows)
            assert all(len(set(r.options)) == len(r.options) for r in rows)
    assert seen == 5914 + 5031 + 5031 + 1000 + 1000 + 9997
    for originals, negated, *_ in RETRIEVAL.values():
        for name in (originals, negated):
            (path,) = SHARED_CSVS.glob(f"*/{name}")
            assert read_retrieval(path, root, [])


def test_retrieval_caption_keeps_coco_newlines_but_not_nul(tmp_path):
    """COCO's own captions carry a newline (COCO_val_retrieval.csv:3185 writes it as \\n): kept; a NUL is refused."""
    from negharness.api import UserError
    from negharness.tasks.negbench.data import read_retrieval

    path = tmp_path / "r.csv"
    path.write_text("filepath,captions\n" f"{IMAGE},\"['a dog\\non grass']\"\n")
    assert read_retrieval(path, tmp_path, [])[0][1] == ["a dog\non grass"]
    path.write_text("filepath,captions\n" f"{IMAGE},\"['a dog']\"\n" f"{IMAGE},\"['a\\x00 dog']\"\n")
    with pytest.raises(UserError, match=r"r.csv:3: control character U\+0000 \(NUL\)"):
        read_retrieval(path, tmp_path, [])


# item 5: records with NaN/inf, and what --check recomputes ------------------------------------------
@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """One real run's results folder (shapes_clip on the embedded world's image retrieval), board made."""
    from conftest import run_cli

    folder = tmp_path_factory.mktemp("scored")
    env = {"NEGHARNESS_DATA": str(tmp_path_factory.getbasetemp() / "data-root"),
           "NEGHARNESS_CACHE": str(tmp_path_factory.mktemp("cache"))}
    for args in (["run", "--model", "shapes_clip", "--task", "shapes_t2i_original"], ["leaderboard"]):
        res = run_cli(args, folder, env=env)
        assert res.returncode == 0, res.stderr
    return folder / "results"


def _results(scored: Path, tmp_path: Path) -> Path:
    import shutil

    shutil.copytree(scored, tmp_path / "results")
    return tmp_path / "results" / "shapes_clip" / "shapes_t2i_original.json"


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=2))  # Python writes NaN and Infinity as JSON would not


@pytest.mark.parametrize("edit, field", [
    (lambda r: r["metrics"].__setitem__("MIR", float("nan")), "metrics.MIR = nan"),
    (lambda r: r["metrics"].__setitem__("R@1", float("-inf")), "metrics.R@1 = -inf"),
    (lambda r: r["intervals"].__setitem__("MIR", [0.9, float("inf")]), "intervals.MIR = [0.9, inf]"),
])
def test_record_with_nan_or_inf_is_refused_by_board_check_and_compare(cli, tmp_path, scored, edit, field):
    record = _results(scored, tmp_path)
    _edit_json(record, edit)
    for args in (["leaderboard"], ["compare", "shapes_clip", "shapes_clip"]):
        one_error_line(cli(*args), 2, str(Path("results", "shapes_clip", "shapes_t2i_original.json")), field,
                       "not a finite number")
    check = cli("leaderboard", "--check")  # the CI gate lists every invalid record's problems, exit 1
    out = " ".join(check.stdout.split())
    assert check.returncode == 1 and field in out and "not a finite number" in out, check.stdout + check.stderr


def test_nan_in_per_query_values_is_refused(cli, tmp_path, scored):
    record = _results(scored, tmp_path)
    _edit_json(record.with_suffix(".perquery.json"), lambda pq: pq["values"]["MIR"].__setitem__(3, float("nan")))
    one_error_line(cli("compare", "shapes_clip", "shapes_clip"), 2, "shapes_t2i_original.perquery.json",
                   "'MIR': per-query value nan", "not a finite number")
    res = cli("leaderboard", "--check")
    assert res.returncode == 1 and "'MIR': per-query value nan" in res.stdout.replace("\n", " "), res.stdout


def test_check_recomputes_medr_from_the_ranks(cli, tmp_path, scored):
    """MedR is no mean: --check takes it as the median of the ranks kept per query for MeanR."""
    record = _results(scored, tmp_path)
    assert cli("leaderboard", "--check").returncode == 0
    _edit_json(record, lambda r: r["metrics"].__setitem__("MedR", r["metrics"]["MedR"] + 1))
    res = cli("leaderboard", "--check")
    out = " ".join(res.stdout.split())
    assert res.returncode == 1 and "'MedR': lower median of the 'MeanR' per-query values" in out, res.stdout


def test_check_lists_what_it_cannot_verify(cli, tmp_path, scored):
    record = _results(scored, tmp_path)
    fresh = cli("leaderboard", "--check")
    assert fresh.returncode == 0 and "not verifiable" not in fresh.stdout, fresh.stdout  # every metric recomputed
    _edit_json(record.with_suffix(".perquery.json"), lambda pq: pq["values"].pop("R@5"))
    res = cli("leaderboard", "--check")
    out = " ".join(res.stdout.split())
    assert res.returncode == 0 and "not verifiable" in out and "shapes_t2i_original: R@5 (1 record)" in out, out


def test_lower_median_is_torch_median():
    from negharness.scoring import perquery

    for values in ([3.0, 1.0, 4.0, 2.0], [5.0], [2.0, 2.0, 9.0], [1.0, 7.0]):
        assert perquery.lower_median(values + [None]) == float(torch.tensor(values).median())
    assert perquery.unverifiable({"ids": ["a"], "values": {"MeanR": [1]}}, {"MeanR": 1, "MedR": 1, "mAP": 0.5}) == ["mAP"]


# item 6: causes in messages; warnings on one line ----------------------------------------------------
def _flickr(root: Path, n: int = 4) -> Path:
    """An nT2VR-style image collection (flickr30k) of solid-colour JPEGs and one caption each."""
    import numpy as np
    from PIL import Image

    folder = root / "flickr30ktest"
    for sub in ("TextData", "VideoSets", "images"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    colours = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}
    names = [list(colours)[i % 3] for i in range(n)]
    for i, c in enumerate(names):
        Image.fromarray(np.full((16, 16, 3), colours[c], np.uint8)).save(folder / "images" / f"im{i}.jpg")
    (folder / "VideoSets" / "flickr30ktest.txt").write_text("".join(f"im{i}\n" for i in range(n)))
    (folder / "TextData" / "flickr30ktest.caption.txt").write_text(
        "".join(f"im{i}#enc#0 a {c} picture\n" for i, c in enumerate(names)))
    return folder


def _run_flickr(cli, root: Path, *extra: str):
    return cli("run", "--model", "mean_colour", "--task", "flickr30k_original", "--data-root", str(root),
               *extra, plugins=("good",))


def _audio_only_mp4(path: Path) -> None:
    import av
    import numpy as np

    with av.open(str(path), "w") as container:
        stream = container.add_stream("aac", rate=16000)
        for i in range(8):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 16000, i * 1024
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def test_audio_only_mp4_says_no_video_stream(cli, tmp_path):
    pytest.importorskip("av")
    folder = tmp_path / "data" / "msrvtt10ktest"
    for sub in ("TextData", "VideoSets", "videos"):
        (folder / sub).mkdir(parents=True)
    (folder / "VideoSets" / "msrvtt10ktest.txt").write_text("video0\n")
    (folder / "TextData" / "msrvtt10ktest.caption.txt").write_text("video0#enc#0 a red circle\n")
    _audio_only_mp4(folder / "videos" / "video0.mp4")
    res = cli("run", "--model", "shapes_clip", "--task", "msrvtt3k_original", "--data-root", str(tmp_path / "data"),
              "--workers", "0")
    line = one_error_line(res, 2, "video0.mp4", "no video stream (1 audio stream)")
    assert "IndexError" not in line and "tuple index" not in line


@pytest.mark.parametrize("which", ["images/im2.jpg", "TextData/flickr30ktest.caption.txt"])
def test_symlink_loop_is_named_as_such_not_missing(cli, tmp_path, which):
    folder = _flickr(tmp_path / "data")
    target = folder / which
    target.unlink()
    (target.parent / "b").symlink_to(target.name)
    target.symlink_to("b")  # target -> b -> target
    line = one_error_line(_run_flickr(cli, tmp_path / "data"), 2, Path(which).name, "symlink loop")
    assert "missing" not in line and "not found" not in line


def test_symlink_loop_in_a_negbench_csv_row(cli, tmp_path):
    path = _mcq_file(tmp_path / "data", FOUR, [GOOD_ROW, [IMAGE.replace("01.jpg", "02.jpg"), *GOOD_ROW[1:]]])
    loop = path.parents[1] / "coco" / "val2017" / "000000000002.jpg"
    loop.symlink_to(loop.name)
    one_error_line(_run_mcq(cli, tmp_path / "data"), 2, f"{COCO_MCQ}:3", "000000000002.jpg", "symlink loop")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_caption_file_says_utf16(cli, tmp_path, encoding):
    folder = _flickr(tmp_path / "data")
    cap = folder / "TextData" / "flickr30ktest.caption.txt"
    cap.write_bytes(cap.read_text().encode(encoding))  # Notepad's "Unicode"; -le/-be: no BOM
    one_error_line(_run_flickr(cli, tmp_path / "data"), 2, "flickr30ktest.caption.txt", "UTF-16 text (expected UTF-8)")
    caps = tmp_path / "caps.txt"
    caps.write_bytes("v1#enc#0 a dog runs on the grass\n".encode(encoding))
    one_error_line(cli("build-queries", "--captions", str(caps), "--out", str(tmp_path / "out")), 2,
                   "caps.txt", "UTF-16 text (expected UTF-8)")


def _warning_lines(stderr: str) -> list[str]:
    assert "warnings.warn(" not in stderr and "UserWarning" not in stderr and ".py:" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


def test_warnings_are_one_line_without_the_source_line(cli, tmp_path):
    folder = _flickr(tmp_path / "data")
    (folder / "images" / "im2.jpg").write_bytes(b"")
    res = _run_flickr(cli, tmp_path / "data", "--skip-broken-media", "--workers", "0")
    assert res.returncode == 0, res.stderr
    assert "warning: skipped unreadable media: cannot read image" in "\n".join(_warning_lines(res.stderr))
    (folder / "images" / "im2.jpg").unlink()
    _flickr(tmp_path / "data")  # whole again
    cache = tmp_path / "fresh-cache"
    assert _run_flickr(cli, tmp_path / "data", "--overwrite", "--cache-dir", str(cache)).returncode == 0
    (shard,) = cache.rglob("image*/shard-*.safetensors")
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0x10  # inside the embedding bytes: the header still parses
    shard.write_bytes(bytes(data))
    res = _run_flickr(cli, tmp_path / "data", "--overwrite", "--cache-dir", str(cache))
    assert res.returncode == 0, res.stderr
    (line,) = [w for w in _warning_lines(res.stderr) if "damaged cache shard" in w]
    assert shard.name in line and "checksum mismatch" in line, line


@pytest.mark.parametrize("copy", ["folder", "file"])
def test_two_records_for_one_model_and_task_are_refused(cli, tmp_path, scored, copy):
    """A copied model folder, or an old record renamed beside the new one: the board would show
    whichever sorts later and --check would pass; both refuse, naming both files."""
    import shutil

    record = _results(scored, tmp_path)
    if copy == "folder":
        shutil.copytree(record.parent, record.parent.with_name("shapes_clip_backup"))
        second = Path("results", "shapes_clip_backup", "shapes_t2i_original.json")
    else:
        shutil.copy(record, record.with_name("shapes_t2i_original_old.json"))
        second = Path("results", "shapes_clip", "shapes_t2i_original_old.json")
    one_error_line(cli("leaderboard"), 2, str(second), str(Path("results", "shapes_clip", "shapes_t2i_original.json")),
                   "a second record for model 'shapes_clip', task 'shapes_t2i_original'")


def test_check_lists_every_second_record_at_once(cli, tmp_path, scored):
    """`leaderboard --check` stopped at the first duplicate; it lists each one, beside the other problems,
    and fails (exit 1) as for any problem it finds."""
    import shutil

    record = _results(scored, tmp_path)
    for name in ("old", "older"):
        shutil.copy(record, record.with_name(f"shapes_t2i_original_{name}.json"))
    res = cli("leaderboard", "--check")
    assert res.returncode == 1, (res.stdout, res.stderr)
    said = [line for line in res.stdout.splitlines() if "a second record for model 'shapes_clip'" in line]
    assert sorted(Path(line.split(": ")[0]).name for line in said) == [
        "shapes_t2i_original_old.json", "shapes_t2i_original_older.json"]
    assert "Traceback" not in res.stderr


def test_a_file_given_as_data_root_or_include_path_is_named_a_file(cli, tmp_path):
    """Before: "does not exist" / "no such folder" for a path that does exist, as a file."""
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    res = cli("run", "--model", "shapes_clip", "--task", "negbench_mcq_coco", "--data-root", str(afile))
    one_error_line(res, 2, f"data root {afile}", "is a file, not a folder")
    one_error_line(cli("list", "--include-path", str(afile)), 2, f"--include-path {afile}: is a file, not a folder")
