"""Numbers a user can trust (issue 13, items 2, 4, 7, 12): honest reuse, broken media never scored,
paths inside the data root, variants beside the default run. Each test reproduces the failure first
(it fails on the code before the fix) and runs at default settings, through the CLI where the issue
describes CLI behaviour."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from negharness.api import UserError
from negharness.engine.evaluate import RunRequest, evaluate_request
from negharness.cli.process import LogProgress
from negharness.testing import COLOURS, KeywordModel, host_with_models, keyword_model

MCQ_CSV = "COCO_val_mcq_llama3.1_rephrased.csv"


# a tiny NegBench layout -------------------------------------------------------------------------------
def _image(path: Path, colour: str) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8, 3), COLOURS[colour], dtype=np.uint8)).save(path)


def _truncated_jpeg(path: Path) -> None:
    buf = io.BytesIO()
    from PIL import Image

    Image.fromarray(np.full((64, 64, 3), 128, dtype=np.uint8)).save(buf, "JPEG")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue()[:40])  # a header and nothing else: PIL cannot decode it


def _mcq_csv(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["image_path", "correct_answer", "caption_0", "caption_1", "caption_2", "caption_3",
                    "correct_answer_template"])
        w.writerows(rows)


def _p(name: str) -> str:
    return f"data/coco/images/val2017/{name}"


RIGHT = ["a red picture", "a blue picture", "a green picture", "a plain thing", "positive"]  # red image: right
WRONG = ["a green picture", "a blue picture", "a red picture", "a plain thing", "positive"]  # blue image: wrong


def _mcq_layout(root: Path, broken: int = 2) -> None:
    """Four questions, correct answer first in each (as most NegBench files): 1 right, 1 wrong,
    ``broken`` of them on images that cannot be decoded."""
    _image(root / "coco/val2017/red.jpg", "red")
    _image(root / "coco/val2017/blue.jpg", "blue")
    rows = [[_p("red.jpg"), 0, *RIGHT], [_p("blue.jpg"), 0, *WRONG]]
    for k in range(broken):
        _truncated_jpeg(root / f"coco/val2017/bad{k}.jpg")
        rows.append([_p(f"bad{k}.jpg"), 0, *RIGHT])
    _mcq_csv(root / "negbench" / MCQ_CSV, rows)


def _run_mcq(cli, root: Path, *extra: str):
    return cli("run", "--model", "mean_colour", "--task", "negbench_mcq_coco", "--data-root", str(root),
               *extra, plugins=("good",))


def _record(tmp_path: Path, name: str = "negbench_mcq_coco.json", model: str = "mean_colour") -> dict:
    return json.loads((tmp_path / "results" / model / name).read_text())


# 4. broken media are never scored ------------------------------------------------------------------------
def test_mcq_with_unreadable_images_scores_only_the_readable_questions(cli, tmp_path):
    root = tmp_path / "data"
    _mcq_layout(root)
    plain = _run_mcq(cli, root)  # without the flag: an error naming the file
    assert plain.returncode == 2 and "bad0.jpg" in plain.stderr and "Traceback" not in plain.stderr
    res = _run_mcq(cli, root, "--skip-broken-media")
    assert res.returncode == 0, res.stderr
    rec = _record(tmp_path)
    # 1 right of 2 readable; the old code scored the two NaN rows as option 0 = right: 75
    assert rec["metrics"]["accuracy"] == pytest.approx(50.0)
    assert rec["n_items"]["questions"] == 2 and rec["n_items"]["images"] == 2
    assert rec["n_skipped_media"] == 2
    assert rec["skipped_media"] == {"negbench/images": ["coco/val2017/bad0.jpg", "coco/val2017/bad1.jpg"]}
    assert rec["notes"]["questions_dropped"] == 2
    assert "2 unreadable media left out of scoring" in res.stdout and "bad0.jpg" in res.stdout


def test_mcq_with_half_the_images_unreadable_is_not_100(tmp_path):
    """The issue's case: 2 of 4 images unreadable, every readable answer wrong -> 0, not 100 (the
    green image's correct answer says red; it has a green option to pick instead)."""
    root = tmp_path / "data"
    _image(root / "coco/val2017/blue.jpg", "blue")
    _image(root / "coco/val2017/green.jpg", "green")
    for k in range(2):
        _truncated_jpeg(root / f"coco/val2017/bad{k}.jpg")
    _mcq_csv(root / "negbench" / MCQ_CSV, [[_p("blue.jpg"), 0, *WRONG], [_p("green.jpg"), 0, *RIGHT],
                                           [_p("bad0.jpg"), 0, *RIGHT], [_p("bad1.jpg"), 0, *RIGHT]])
    req = RunRequest(model="kw", tasks=["negbench_mcq_coco"], data_root=str(root), output_dir=str(tmp_path / "r"),
                     cache_dir=str(tmp_path / "c"), skip_broken_media=True, workers=0)
    rec = evaluate_request(host_with_models({"kw": keyword_model}), req)[0].record
    assert rec["metrics"]["accuracy"] == 0.0 and rec["n_skipped_media"] == 2


def test_retrieval_neg_never_counts_an_unreadable_image_as_a_hit(tmp_path):
    root = tmp_path / "data"
    for name, colour in (("a.jpg", "red"), ("b.jpg", "blue"), ("c.jpg", "green")):
        _image(root / "coco/val2017" / name, colour)
    _truncated_jpeg(root / "coco/val2017/bad.jpg")
    header = "positive_objects,negative_objects,filepath,image_id,captions\n"
    rows = [("a.jpg", "a green picture"), ("b.jpg", "a blue picture"), ("c.jpg", "a red picture"),
            ("bad.jpg", "a red picture")]  # a and c are swapped: R@1 = 1/3 over the readable ones
    body = "".join(f"[],[],data/coco/images/val2017/{f},{i},\"['{c}']\"\n" for i, (f, c) in enumerate(rows))
    (root / "negbench").mkdir()
    (root / "negbench" / "COCO_val_retrieval.csv").write_text(header + body)
    (root / "negbench" / "COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv").write_text(header + body)
    req = RunRequest(model="kw", tasks=["negbench_retrieval_coco"], data_root=str(root),
                     output_dir=str(tmp_path / "r"), cache_dir=str(tmp_path / "c"), skip_broken_media=True, workers=0)
    rec = evaluate_request(host_with_models({"kw": keyword_model}), req)[0].record
    assert rec["metrics"]["R@1"] == pytest.approx(100 / 3)
    assert rec["n_items"]["original_captions"] == 3 and rec["n_items"]["images_original"] == 3
    assert rec["n_skipped_media"] == 1 and rec["notes"]["queries_dropped_original"] == 1


@pytest.mark.needs("nltk")  # real (open-vocabulary) captions: the tagger
def test_negated_deltas_leave_out_pairs_whose_video_is_unreadable(tmp_path):
    from test_nt2vr_tasks import COLL, write_layout

    folder = write_layout(tmp_path / "data")
    (folder / "frames" / "video4" / "1.png").write_bytes(b"not a png")
    req = RunRequest(model="kw", tasks=["msrvtt1k_negated"], data_root=str(tmp_path / "data"),
                     output_dir=str(tmp_path / "r"), cache_dir=str(tmp_path / "c"), task_extra={"build": "true"},
                     skip_broken_media=True, workers=0)
    rec = evaluate_request(host_with_models({"kw": keyword_model}), req)[0].record
    assert rec["n_items"]["videos"] == 4 and rec["n_skipped_media"] == 1
    negated = (folder / "TextData" / f"{COLL}.negated.txt").read_text().splitlines()
    on_video4 = sum(1 for line in negated if line.startswith("video4#"))
    assert rec["n_items"]["negated_queries"] == len(negated) - on_video4
    assert rec["notes"]["negated_queries_dropped"] == on_video4


def test_nan_embeddings_from_the_model_are_an_error_not_a_skip():
    from negharness.engine.runner import CachedEvalContext, RunSettings
    from negharness.io.media import MediaSet
    from negharness.scoring.metrics import Relevance
    from negharness.scoring.retrieval import evaluate_text_to_media

    class NanModel(KeywordModel):
        def encode_image(self, pixels):
            out = super().encode_image(pixels)
            out[0] = float("nan")
            return out

    images = [np.full((8, 8, 3), COLOURS[c], dtype=np.uint8) for c in ("red", "blue")]
    media = MediaSet("t/nan", "image", ["r", "b"], lambda i: images[i], cheap=True)
    ctx = CachedEvalContext(NanModel(), RunSettings(skip_broken_media=True))
    with pytest.raises(UserError, match="non-finite embeddings.*r"):
        evaluate_text_to_media(ctx, ["q0", "q1"], ["red", "blue"], Relevance.from_lists([[0], [1]], 2), media)


# 2. honest reuse --------------------------------------------------------------------------------------------
def test_replaced_csv_or_image_reruns_and_says_why(cli, tmp_path):
    root = tmp_path / "data"
    _mcq_layout(root, broken=0)
    first = _run_mcq(cli, root)
    assert first.returncode == 0, first.stderr
    assert _record(tmp_path)["metrics"]["accuracy"] == 50.0
    again = _run_mcq(cli, root)
    assert "(cached)" in again.stdout
    # the wrong row's answer corrected: the old rule printed "(cached)" and the stale 50
    _mcq_csv(root / "negbench" / MCQ_CSV, [[_p("red.jpg"), 0, *RIGHT], [_p("blue.jpg"), 1, *WRONG]])
    rerun = _run_mcq(cli, root)
    assert "(cached)" not in rerun.stdout and f"rerun: data file negbench/{MCQ_CSV} changed" in rerun.stdout
    rec = _record(tmp_path)
    assert rec["metrics"]["accuracy"] == 100.0 and rec["rerun_reason"] == f"data file negbench/{MCQ_CSV} changed"
    _image(root / "coco/val2017/blue.jpg", "green")  # a replaced image, same name
    # --no-cache: keying cached embeddings by content is issue 13 item 1, not this test's subject
    rerun = _run_mcq(cli, root, "--no-cache")
    assert "rerun: data file coco/val2017/blue.jpg changed" in rerun.stdout
    assert _record(tmp_path)["metrics"]["accuracy"] == 50.0


def test_new_weights_at_the_same_checkpoint_path_rerun(cli, tmp_path):
    from safetensors.torch import load_file, save_file

    from negharness.plugins.shapes_clip import WEIGHTS

    ckpt = tmp_path / "w.safetensors"
    state = load_file(str(WEIGHTS))
    save_file(state, str(ckpt))
    args = ("run", "--model", "shapes_clip", "--checkpoint", str(ckpt), "--task", "shapes_t2i_original",
            "-T", "n_items=20")
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    assert "(cached)" in cli(*args).stdout
    torch.manual_seed(0)
    state["text_projection"] = state["text_projection"] + (0.1 * torch.randn(state["text_projection"].shape)).half()
    save_file(state, str(ckpt))  # new weights at the same path
    rerun = cli(*args)
    assert rerun.returncode == 0, rerun.stderr
    assert "(cached)" not in rerun.stdout and "rerun: model weights changed" in rerun.stdout
    path = next(p for p in (tmp_path / "results").glob("shapes_clip@*/shapes_t2i_original@*.json")
                if not p.name.endswith(".perquery.json"))
    rec = json.loads(path.read_text())
    assert rec["rerun_reason"] == "model weights changed" and rec["model"]["sources"]["--checkpoint"]


def test_a_diverged_checkpoint_with_nan_text_projection_is_refused_not_scored_100(cli, tmp_path):
    """A NaN text projection made every option tie: MCQ 100.0 (tie rate 0) on the board. Now the run
    stops where the text embeddings enter the host, naming model, plugin and checkpoint; no record."""
    from safetensors.torch import load_file, save_file

    from negharness.plugins.shapes_clip import WEIGHTS

    ckpt = tmp_path / "diverged.safetensors"
    state = load_file(str(WEIGHTS))
    state["text_projection"] = torch.full_like(state["text_projection"], float("nan"))
    save_file(state, str(ckpt))
    res = cli("run", "--model", "shapes_clip", "--checkpoint", str(ckpt), "--task", "shapes_mcq", "-T", "n_items=20")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert f"model 'shapes_clip' (plugin 'builtin_models', checkpoint {ckpt})" in res.stderr, res.stderr
    assert "non-finite embeddings" in res.stderr and "text(s)" in res.stderr
    assert not list((tmp_path / "results").rglob("*.json"))


def test_a_record_scored_by_another_release_reruns(cli, tmp_path):
    """A record is reused only when the code that scored it is the same release: a negharness or
    plugin upgrade (a metric fix) reruns, and says why; an unchanged release is reused."""
    args = ("run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "-T", "n_items=20")
    assert cli(*args).returncode == 0
    path = next(p for p in (tmp_path / "results").glob("shapes_clip*/shapes_t2i_original@*.json")
                if not p.name.endswith(".perquery.json"))
    assert "(cached)" in cli(*args).stdout
    rec = json.loads(path.read_text())
    now = rec["versions"]["negharness"]
    rec["versions"]["negharness"] = "0.0.1"
    path.write_text(json.dumps(rec))
    rerun = cli(*args)
    assert rerun.returncode == 0, rerun.stderr
    assert f"rerun: negharness 0.0.1 -> {now}" in rerun.stdout
    assert json.loads(path.read_text())["rerun_reason"] == f"negharness 0.0.1 -> {now}"
    rec = json.loads(path.read_text())
    assert rec["versions"]["plugins"], "the built-in plugins' distribution is recorded"
    dist = sorted(rec["versions"]["plugins"])[0]
    rec["versions"]["plugins"][dist] = "0.0.1"
    rec["versions"]["plugins"]["a-plugin-installed-since"] = "9"  # absent now: no reason by itself
    path.write_text(json.dumps(rec))
    assert f"rerun: plugin {dist} 0.0.1 -> " in cli(*args).stdout
    assert "(cached)" in cli(*args).stdout


def test_a_model_without_weight_files_is_loaded_and_its_fingerprint_compared(tmp_path):
    """No option names the weights (a pretrained tag, bundled weights): the model is loaded and
    its fingerprint checked; a record of other weights is rerun, with the reason."""
    from negharness.testing import ColourRetrievalTask

    class Other(KeywordModel):
        def describe(self):
            return {"arch": "keyword", "dim": self.dim, "weights": "retrained"}

    host = host_with_models({"kw": keyword_model})
    req = RunRequest(model="kw", tasks=["colour_retrieval"], output_dir=str(tmp_path / "r"),
                     cache_dir=str(tmp_path / "c"))
    import types

    from negharness.discovery.hookspecs import hookimpl

    @hookimpl
    def negharness_register_tasks(registry):
        registry.add("colour_retrieval", lambda options: ColourRetrievalTask(options), "colours")

    host.register(types.SimpleNamespace(negharness_register_tasks=negharness_register_tasks), "colour_tasks")
    assert not evaluate_request(host, req)[0].skipped
    assert evaluate_request(host, req)[0].skipped
    host2 = host_with_models({"kw": lambda options: Other()})
    host2.register(types.SimpleNamespace(negharness_register_tasks=negharness_register_tasks), "colour_tasks")
    out = evaluate_request(host2, req)[0]
    assert not out.skipped and out.reason.startswith("model weights changed (fingerprint")


# 7. inside the data root -----------------------------------------------------------------------------------
def test_csv_path_leaving_the_data_root_is_an_error_naming_file_and_row(cli, tmp_path):
    root = tmp_path / "data"
    _mcq_layout(root, broken=0)
    secret = tmp_path / "secret.jpg"
    _image(secret, "red")
    _mcq_csv(root / "negbench" / MCQ_CSV, [[_p("red.jpg"), 0, *RIGHT], ["../secret.jpg", 0, *RIGHT]])
    res = _run_mcq(cli, root)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"{MCQ_CSV}:3" in res.stderr and "leaves the data root" in res.stderr
    _mcq_csv(root / "negbench" / MCQ_CSV, [[_p("red.jpg"), 0, *RIGHT], [_p("../../../../secret.jpg"), 0, *RIGHT]])
    assert f"{MCQ_CSV}:3" in _run_mcq(cli, root).stderr


def test_symlink_out_of_the_data_root_needs_the_opt_in(cli, tmp_path):
    root = tmp_path / "data"
    _mcq_layout(root, broken=0)
    outside = tmp_path / "store" / "blue.jpg"
    _image(outside, "blue")
    (root / "coco/val2017/blue.jpg").unlink()
    (root / "coco/val2017/blue.jpg").symlink_to(outside)
    res = _run_mcq(cli, root)
    assert res.returncode == 2 and f"{MCQ_CSV}:3" in res.stderr and "NEGHARNESS_ALLOW_LINKS_OUT" in res.stderr
    ok = cli("run", "--model", "mean_colour", "--task", "negbench_mcq_coco", "--data-root", str(root),
             plugins=("good",), env={"NEGHARNESS_ALLOW_LINKS_OUT": "1"})
    assert ok.returncode == 0, ok.stderr


def test_a_fifo_is_refused_not_opened(cli, tmp_path):
    root = tmp_path / "data"
    _mcq_layout(root, broken=0)
    (root / "coco/val2017/blue.jpg").unlink()
    os.mkfifo(root / "coco/val2017/blue.jpg")
    res = _run_mcq(cli, root)  # the old code blocked forever on open(); the fixture's timeout would fire
    assert res.returncode == 2 and "blue.jpg is a FIFO, not a regular file" in res.stderr
    (root / "negbench" / MCQ_CSV).unlink()
    os.mkfifo(root / "negbench" / MCQ_CSV)
    res = _run_mcq(cli, root)
    assert res.returncode == 2 and f"{MCQ_CSV} is a FIFO" in res.stderr


def test_nt2vr_video_ids_and_frame_paths_stay_under_the_data_root(tmp_path):
    from test_nt2vr_tasks import COLL, write_layout

    folder = write_layout(tmp_path / "data")
    index = folder / "id.imagepath.txt"
    lines = index.read_text().splitlines()
    index.write_text("\n".join(lines[:4] + ["video1_1 ../../../etc/passwd"] + lines[5:]) + "\n")
    req = RunRequest(model="kw", tasks=["msrvtt1k_original"], data_root=str(tmp_path / "data"),
                     output_dir=str(tmp_path / "r"), cache_dir=str(tmp_path / "c"))
    with pytest.raises(UserError, match=r"id\.imagepath\.txt:5: path .* leaves the data root"):
        evaluate_request(host_with_models({"kw": keyword_model}), req)
    index.unlink()  # videos by id: an id with ../ points outside
    (folder / "videos").mkdir()
    (folder / "VideoSets" / f"{COLL}.txt").write_text("video0\n../../../outside\n")
    with pytest.raises(UserError, match=rf"VideoSets/{COLL}\.txt:2: video id '../../../outside'.*leaves the data root"):
        evaluate_request(host_with_models({"kw": keyword_model}), req)


# 12. variants beside, not over ------------------------------------------------------------------------------
def test_a_limit_run_goes_beside_the_default_record_and_stays_off_the_board(cli, tmp_path):
    base = ("run", "--model", "mean_colour", "--task", "example_colours")
    full = cli(*base, plugins=("good",))
    assert full.returncode == 0, full.stderr
    default = tmp_path / "results" / "mean_colour" / "example_colours.json"
    before = default.read_bytes()
    limited = cli(*base, "--limit", "2", plugins=("good",))
    assert limited.returncode == 0, limited.stderr
    assert "example_colours [limit=2]" in limited.stdout
    assert default.read_bytes() == before  # the old code wrote the limit run over the default record
    beside = json.loads((tmp_path / "results" / "mean_colour" / "example_colours.limit2.json").read_text())
    assert beside["limited"] and beside["variant"] == {"limit": 2}
    board = cli("leaderboard")
    assert board.returncode == 0, board.stderr
    md = (tmp_path / "results" / "README.md").read_text()  # beside the records it read
    assert not (tmp_path / "leaderboard").exists()  # never the tracked leaderboard/README.md of a clone
    assert "example_colours.json" in md and "limit2" not in md  # --limit runs stay out
    check = cli("leaderboard", "--check")  # --check leaves them aside too, and says so
    assert "left aside: 1 --limit record(s)" in check.stdout
    assert "limit2.json:" not in check.stdout  # never a problem (the example task keeps no per-query values)


def test_task_option_variants_get_their_own_records_and_columns(tmp_path):
    import types

    from negharness.api import OptionSpec
    from negharness.discovery.hookspecs import hookimpl
    from negharness.records.results import iter_records
    from negharness.report.leaderboard import build_tables, to_markdown
    from negharness.testing import ColourRetrievalTask

    class Sized(ColourRetrievalTask):
        task_options = {"n_items": OptionSpec(int, 6, "colours to use", minimum=1)}

        def __init__(self, options):
            super().__init__(options)
            self.colours = self.colours[: self.opts["n_items"]]

    @hookimpl
    def negharness_register_tasks(registry):
        registry.add("colour_retrieval", lambda options: Sized(options), "colours")

    host = host_with_models({"kw": keyword_model})
    host.register(types.SimpleNamespace(negharness_register_tasks=negharness_register_tasks), "sized")
    out = tmp_path / "r"
    for extra in ({}, {"n_items": "3"}, {"n_items": "6"}):  # n_items=6 is the default's config
        req = RunRequest(model="kw", tasks=["colour_retrieval"], task_extra=extra, output_dir=str(out),
                         cache_dir=str(tmp_path / "c"))
        evaluate_request(host, req)
    names = sorted(p.name for p in (out / "kw").glob("*.json") if not p.name.endswith(".perquery.json"))
    assert len(names) == 2 and names[0] == "colour_retrieval.json" and names[1].startswith("colour_retrieval@")
    assert json.loads((out / "kw" / "colour_retrieval.json").read_text())["n_items"] == {"images": 6}
    md = to_markdown(build_tables(iter_records(out)), out / "README.md")
    header = next(line for line in md.splitlines() if line.startswith("| model |"))
    assert "colour_retrieval R@1" in header and "colour_retrieval [n_items=3] R@1" in header


def test_leaderboard_keeps_two_configs_in_two_columns(tmp_path):
    from negharness.records.fake import write_fake_record
    from negharness.records.results import ModelConfig, iter_records
    from negharness.report.leaderboard import build_tables, to_markdown

    root = tmp_path / "results"
    for model, n, v in (("a", None, 10.0), ("b", 100, 90.0)):
        write_fake_record(root, ModelConfig(model, {}), "t", {"R@1": [v] * 4}, variant={"n_items": n} if n else None)
    md = to_markdown(build_tables(iter_records(root)), root / "README.md")
    header = next(line for line in md.splitlines() if line.startswith("| model |"))
    assert header == "| model | t R@1 ↑ | t [n_items=100] R@1 ↑ |"  # 500 items and 100 never share a column


def test_progress_outside_a_terminal_is_a_log_line_every_few_seconds():
    now = [0.0]
    out = io.StringIO()
    progress = LogProgress(out, interval=5.0, clock=lambda: now[0])
    bar = progress.add_task("encoding videos", total=3000)
    for _ in range(10):
        now[0] += 1.0
        progress.advance(bar, 100)
    lines = out.getvalue().splitlines()
    assert lines == ["[negharness] encoding videos: 500/3000 (17%), 5s", "[negharness] encoding videos: 1000/3000 (33%), 10s"]


def test_run_outside_a_terminal_logs_progress_on_stderr(cli, tmp_path):
    res = cli("run", "--model", "mean_colour", "--task", "example_colours", plugins=("good",),
              env={"NEGHARNESS_PROGRESS_INTERVAL": "0"})
    assert res.returncode == 0, res.stderr
    assert "[negharness] encoding images: 3/3 (100%)" in res.stderr
    assert "[negharness]" not in res.stdout


# one data-root rule for the tasks' own data files too (issue 24, item 1) ------------------------------------
def _linked_out(link: Path, target: Path) -> None:
    """``link`` (under the data root) made a symlink to ``target`` (outside it), holding what it held."""
    target.parent.mkdir(parents=True, exist_ok=True)
    link.replace(target)
    link.symlink_to(target)


def test_a_negbench_csv_linked_out_of_the_data_root_is_refused_naming_it(cli, tmp_path):
    root = tmp_path / "data"
    _mcq_layout(root, broken=0)
    _linked_out(root / "negbench" / MCQ_CSV, tmp_path / "elsewhere" / MCQ_CSV)
    res = _run_mcq(cli, root)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"NegBench CSV {MCQ_CSV}" in res.stderr and "outside the data root" in res.stderr
    assert "NEGHARNESS_ALLOW_LINKS_OUT" in res.stderr
    ok = cli("run", "--model", "mean_colour", "--task", "negbench_mcq_coco", "--data-root", str(root),
             plugins=("good",), env={"NEGHARNESS_ALLOW_LINKS_OUT": "1"})
    assert ok.returncode == 0, ok.stderr


def test_an_nt2vr_caption_file_linked_out_of_the_data_root_is_refused(tmp_path):
    from test_nt2vr_tasks import COLL, write_layout

    folder = write_layout(tmp_path / "data")
    _linked_out(folder / "TextData" / f"{COLL}.caption.txt", tmp_path / "elsewhere" / "captions.txt")
    req = RunRequest(model="kw", tasks=["msrvtt1k_original"], data_root=str(tmp_path / "data"),
                     output_dir=str(tmp_path / "r"), cache_dir=str(tmp_path / "c"))
    with pytest.raises(UserError, match=rf"task msrvtt1k_original: data file: .*{COLL}\.caption\.txt leads through a "
                                        r"symlink to .*outside the data root"):
        evaluate_request(host_with_models({"kw": keyword_model}), req)


def test_nein_entries_and_files_stay_under_the_data_root(tmp_path):
    from negharness.api import TaskOptions
    from negharness.discovery.manager import make_host

    root = tmp_path / "data"
    (root / "nein").mkdir(parents=True)
    entry = {"COCO": "1", "T_original": "a dog.", "T_generated": "Add a cat.", "T_negative": "no cat.",
             "NeIn": "../../../../etc/passwd"}
    (root / "nein" / "val.json").write_text(json.dumps([entry]))
    task = make_host().registry.get("task", "nein_val").load()(TaskOptions(root))
    with pytest.raises(UserError, match=r"val\.json entry 0 .*leaves the data root"):
        next(iter(task.samples()))
    _linked_out(root / "nein" / "val.json", tmp_path / "elsewhere" / "val.json")
    with pytest.raises(UserError, match=r"task nein_val: data file: .*val\.json leads through a symlink"):
        task.required_files()


def test_a_refused_record_reruns_saying_why(cli, tmp_path):
    """A record the one reader refuses (its R@1 edited, its per-query values not) is run again, and the
    rerun names the refusal: it reran with no reason at all before."""
    args = ("run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "-T", "n_items=20")
    assert cli(*args).returncode == 0
    path = next(p for p in (tmp_path / "results").rglob("shapes_t2i_original*.json")
                if not p.name.endswith(".perquery.json"))
    rec = json.loads(path.read_text())
    rec["metrics"]["R@1"] = 100.0 if rec["metrics"]["R@1"] != 100.0 else 0.0
    path.write_text(json.dumps(rec))
    rerun = cli(*args)
    assert rerun.returncode == 0, rerun.stderr
    assert "(cached)" not in rerun.stdout and "rerun: the record there is refused" in rerun.stdout
    assert json.loads(path.read_text())["rerun_reason"].startswith("the record there is refused (")
