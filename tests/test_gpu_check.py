"""perf/gpu_check.sh, the GPU readiness check (issue 44), cannot rot between devices: CI runs its
``--cpu-smoke`` mode (every step, tiny, on the CPU; marked `perf`, so in CI's second pass) and checks
that every step finished and the table names every goal. The table's judging (perf/gpu/table.py) and
the stand-in videos without PyAV are checked here directly, in seconds."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

PERF = Path(__file__).resolve().parents[1] / "perf"


def load(relative: str):
    path = PERF / relative
    spec = importlib.util.spec_from_file_location(f"perf_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def table():
    return load("gpu/table.py")


def results(folder: Path, mode: str, steps: dict[str, int], figures: dict[str, dict]) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "check.json").write_text(json.dumps({"mode": mode, "device": "test"}))
    (folder / "steps.jsonl").write_text("".join(json.dumps({"step": s, "rc": rc, "wall_s": 1, "limit_s": 9}) + "\n"
                                                for s, rc in steps.items()))
    for step, data in figures.items():
        (folder / f"{step}.json").write_text(json.dumps(data))
    return folder


MEDIA = {"setup": "threads:auto", "gpu_setup": None, "gpu_setup_error": "no GPU-decode setup named", "images": 2048,
         "batch": 256, "rounds": 3, "video_items": 768, "frames_per_video": 4,
         "image": {"pure": 20_000.0, "loop": {"threads:auto": {"rate": 18_500.0, "ratio": 0.925}}},
         "video": {"pure": 2_000.0, "loop": {"threads:auto": {"rate": 1_000.0, "ratio": 0.5}}}}
PEERS = {"clip_benchmark_installed": False, "rows": 1000, "mcq_rows": 500, "runs": [
    {"name": "nh_ret_fp32", "round": 1, "wall_s": 26.0, "timings": {"encode_s": 10.0, "total_s": 11.0}}],
    "pairings": {"retrieval fp32 vs fp32": [{"ratio": None, "equal": None}],
                 "MCQ fp32 vs fp32": [{"ratio": 0.4, "equal": False}]}}


def rows(text: str) -> dict[str, list[str]]:
    return {cells[0]: cells[1:] for cells in (
        [c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| "))}


def test_table_judges_each_goal_from_its_figures(table, tmp_path):
    folder = results(tmp_path / "r", "gpu", {"media": 0, "text": 0, "peers": 0, "training": 124, "harness": 1, "sim": 0},
                     {"media": MEDIA, "peers": PEERS, "text": {}})
    text, failed = table.table(folder)
    got = rows(text)
    assert failed == 2  # training timed out, harness crashed
    assert got["images, JPEG decoding in the loop (CPU decode)"][-1] == "pass"  # 18,500 >= 15,000 and 0.925 >= 0.9
    assert "18,500 img/s = 0.93 of pure 20,000" in got["images, JPEG decoding in the loop (CPU decode)"][0]
    assert got["images, JPEG decoding in the loop (GPU decode)"][-1] == "unmeasured (no GPU-decode setup named)"
    assert got["video frames in the loop"][-1] == "FAIL" and "4,000 frames/s in the loop vs 8,000 pure" in got["video frames in the loop"][0]
    assert got["Retrieval-Neg end to end vs CLIP_benchmark, fp32"][-1] == "unmeasured (peer not installed)"
    assert got["MCQ end to end vs the authors' loop, fp32"][-1] == "FAIL"  # 0.4x, but the values differ
    # the record's total_s (11 s) against its encode_s (10 s): process start-up is not the run's overhead
    assert got["a whole run vs its encoding time"][-1] == "pass" and got["a whole run vs its encoding time"][0].startswith("1.10x")
    assert got["texts, real captions (the runner's path)"][-1].startswith("unmeasured (figures unreadable")
    assert got["BNL training step rate vs a bare loop"][-1] == "unmeasured (step training: timed out at 9 s)"
    assert got["negharness.run on the device (shapes tasks)"][-1] == "unmeasured (step harness: exit code 1)"


def test_gpu_sims_prediction_is_printed_under_the_table_for_calibration(table, tmp_path):
    """Item 5: the device's table and gpu_sim's prediction for the same machine in one output; a step that did
    not run is counted, and figures in another layout are said unreadable, not a crash."""
    sim = {"images": {"rate": 7010.4, "gil_us": 56.3}, "texts": {"rate": 19780.0, "pure_rate": 28843.0, "gil_us": 10.9},
           "texts_lengths_on": {"rate": 42733.0, "pure_rate": 165366.0, "gil_us": 3.0}, "before_first_batch_s": 0.93}
    text, failed = table.table(results(tmp_path / "a", "gpu", dict.fromkeys(table.STEPS, 0), {"sim": sim}))
    got = rows(text)
    assert failed == 0 and "gpu_sim's prediction on this machine's CPU" in text
    assert got["images in the loop (nvjpeg path)"] == ["7,010 img/s"]
    assert got["texts in the loop, full context"] == ["19,780 texts/s of pure 28,843"]
    assert "images in the loop, no cache (the media step's GPU-decode loop)" not in got  # an older sim.json: no row
    assert got["GIL held per image / per text"] == ["56.3 / 10.9 us"]
    sim["images_no_cache"] = {"rate": 8123.4}  # the like-for-like row: the device's media loop runs with no cache
    got = rows(table.table(results(tmp_path / "c", "gpu", dict.fromkeys(table.STEPS, 0), {"sim": sim}))[0])
    assert got["images in the loop, no cache (the media step's GPU-decode loop)"] == ["8,123 img/s"]
    text, failed = table.table(results(tmp_path / "b", "gpu", {s: 0 for s in table.STEPS if s != "sim"},
                                       {"sim": {"images": {}}}))
    assert failed == 1 and rows(text)["sim"] == ["not run", "", ""]
    assert "gpu_sim's prediction: unreadable (KeyError" in text


def test_table_in_smoke_mode_shows_figures_unjudged(table, tmp_path):
    slow = {**MEDIA, "image": {"pure": 10.0, "loop": {"threads:auto": {"rate": 1.0, "ratio": 0.1}}}}
    text, failed = table.table(results(tmp_path / "r", "smoke", {"media": 0}, {"media": slow}))
    got = rows(text)
    assert got["images, JPEG decoding in the loop (CPU decode)"][-1] == "smoke"
    assert got["BNL training step rate vs a bare loop"][-1] == "unmeasured (step not run)" and failed == len(table.STEPS) - 1


def test_table_judges_figures_a_stopped_step_wrote_and_says_so(table, tmp_path):
    """Each step writes its figures as soon as it has them: a media step killed at its limit after the image
    part is judged on what it wrote, and the verdict says the step stopped."""
    partial = {k: v for k, v in MEDIA.items() if k != "video"}
    got = rows(table.table(results(tmp_path / "r", "gpu", {"media": 124}, {"media": partial}))[0])
    assert got["images, JPEG decoding in the loop (CPU decode)"][-1] == "pass (step timed out at 9 s: figures so far)"
    assert got["video frames in the loop"][-1] == "unmeasured (no video figure printed; step timed out at 9 s)"


def test_cpu_decode_goal_is_what_the_machines_cores_can_decode(table, tmp_path):
    """CPU decoding is judged against cores / its CPU seconds per image (capped by the pure forward), not a rate
    that needs dozens of cores: 16 cores at 3.5 ms decode 4,571 img/s, and 4,000 in the loop is 0.88 of it."""
    loop = {"rate": 4_000.0, "ratio": 0.2, "decode_cpu_ms": 3.5, "cores": 16}
    media = {**MEDIA, "image": {"pure": 20_000.0, "loop": {"threads:auto": loop}}}
    got = rows(table.table(results(tmp_path / "a", "gpu", {"media": 0}, {"media": media}))[0])
    row = got["images, JPEG decoding in the loop (CPU decode)"]
    assert row[-1] == "pass" and "0.88 of the 4,571 img/s 16 cores decode at 3.5 ms" in row[0]
    media["image"]["loop"]["threads:auto"] = {**loop, "rate": 3_000.0}
    got = rows(table.table(results(tmp_path / "b", "gpu", {"media": 0}, {"media": media}))[0])
    assert got["images, JPEG decoding in the loop (CPU decode)"][-1] == "FAIL"


def test_gpu_decode_row_counts_fallbacks_to_pillow(table, tmp_path):
    media = {**MEDIA, "gpu_setup": "tensor:auto", "gpu_setup_error": None,
             "nvjpeg_fallbacks": {"decoded": 16384, "items": 12, "calls": 64},
             "image": {"pure": 20_000.0, "loop": {"tensor:auto": {"rate": 19_000.0, "ratio": 0.95}}}}
    got = rows(table.table(results(tmp_path / "r", "gpu", {"media": 0}, {"media": media}))[0])
    row = got["images, JPEG decoding in the loop (GPU decode)"]
    assert row[-1] == "FAIL" and "12 of 16,384 items fell back to Pillow" in row[0]


def test_preflight_stop_is_the_tables_first_line(table, tmp_path):
    folder = results(tmp_path / "r", "gpu", {}, {})
    (folder / "preflight.json").write_text(json.dumps({"fatal": ["torch.cuda.is_available() is False", "NLTK data missing"]}))
    text, failed = table.table(folder)
    assert failed == 2 and "preflight: STOPPED the check: torch.cuda.is_available() is False | NLTK data missing" in text


def test_check_without_wheels_stops_at_once(tmp_path):
    """No wheels in the carried folder: the GPU check (and its preflight) stops before anything else, saying
    why, and returns its table and archive (2 files) where $OUT is set."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "out").mkdir()
    env = {**os.environ, "GPU_CHECK_WHEELS": str(tmp_path / "empty"), "GPU_CHECK_RESULTS": str(tmp_path / "r"),
           "OUT": str(tmp_path / "out"), "PYTHON": sys.executable}
    for mode in (["--preflight"], []):
        done = subprocess.run(["bash", str(PERF / "gpu_check.sh"), *mode], env=env, capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 2 and f"STOP: no wheels in {tmp_path / 'empty'}/" in done.stderr
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gpu_check.tar.gz", "table.md"]
        assert "preflight: STOPPED the check: no wheels in" in (tmp_path / "out" / "table.md").read_text()


def test_preflight_names_what_is_missing(tmp_path, monkeypatch):
    """The preflight's findings on a machine without CUDA asked for cuda: NLTK data and real captions missing and
    CUDA unavailable are fatal, each named."""
    pre = load("gpu/preflight.py")
    monkeypatch.setattr(pre, "nltk_dirs", lambda: [tmp_path / "none"])
    fatal = pre.main(["--json", str(tmp_path / "p.json"), "--device", "cuda", "--shared", str(tmp_path)])
    found = json.loads((tmp_path / "p.json").read_text())
    import torch

    assert fatal == len(found["fatal"]) >= 2
    assert any(f.startswith("NLTK data missing: tokenizers/punkt_tab/english/") for f in found["fatal"])
    assert any(f.startswith("no real captions") for f in found["fatal"])
    assert torch.cuda.is_available() or any(f.startswith("torch.cuda.is_available() is False") for f in found["fatal"])


def test_gpu_setup_is_taken_from_the_decode_scripts_help(monkeypatch):
    media = load("gpu/media.py")
    helps = {"threads:N decode threads, processes:N workers, gpu-decode: nvJPEG on the device": "gpu-decode:auto",
             "threads:N decode threads, processes:N workers, tensor:N (-M decode=tensor: nvjpeg)": "tensor:auto",
             "threads:N decode threads, device:auto decodes on the model's device": "device:auto",
             "threads:N decode threads (auto: the runner's default), processes:N workers": None}
    for setups_help, expected in helps.items():
        monkeypatch.setattr(media.bdt, "main", lambda argv, h=setups_help: print(
            f"usage: x [--setups SETUPS] [--device DEVICE]\n  --models M\n  --setups SETUPS [SETUPS ...]\n{' ' * 24}{h}\n"
            f"  --device DEVICE  cpu or cuda (--setups threads:auto gpu)"))
        assert media.gpu_setup_named() == expected


def test_stand_in_videos_need_no_pyav(tmp_path, monkeypatch):
    """The training step's split is written with OpenCV (on the GPU machine `import av` failed) and
    decodes with OpenCV, the one decoder that machine has."""
    pytest.importorskip("cv2")
    from negharness.api import FrameSampling
    from negharness.io.video import decode_video

    monkeypatch.setitem(sys.modules, "av", None)  # import av raises ImportError
    suffix = load("bench_training.py").write_split(tmp_path, 2, 32)
    videos = sorted((tmp_path / "msrvtt10ktrain" / "videos").iterdir())
    assert [p.name for p in videos] == [f"video0{suffix}", f"video1{suffix}"]
    frames = decode_video(videos[1], FrameSampling("uniform", 8), decoder="cv2")
    assert frames.shape == (8, 32, 32, 3) and frames.dtype == np.uint8
    assert len(set(frames[:, 0, 0, 0].tolist())) > 1  # moving content, not one frame repeated


def test_peer_run_states_the_random_checkpoints_activation():
    """The peers' random ViT-B-32 checkpoint is a bare state dict in OpenAI's layout, which the CLI refuses
    without ``-M quick_gelu`` (the H100 run of 2026-11-28); it was built with GELU."""
    peer = load("peer_clip_benchmark.py")
    inp = peer.Inputs(Path("d"), "ViT-B-32", Path("w.pt"), Path("cb"), {}, {}, 1, 1, 1)
    cmd = peer.negharness_cmd(inp, peer.RET_TASK, None, Path("o"))
    assert cmd[cmd.index("-M") + 1] == "quick_gelu=false"


ALLOWED_UNMEASURED = ("peer not installed", "no real captions")


@pytest.mark.perf
@pytest.mark.heavy  # the longest test of CI's second pass (~110 s, five processes): scheduled first (tests/conftest.py)
def test_cpu_smoke_runs_every_step(tmp_path, table):
    """``bash perf/gpu_check.sh --cpu-smoke``: every step finishes (exit 0), the table lists every goal,
    judged "smoke"; only a peer tool that is not installed, the GPU-decode setup (another change adds
    it) or absent real captions may leave a row unmeasured."""
    out = tmp_path / "returned"
    out.mkdir()
    env = {**os.environ, "GPU_CHECK_RESULTS": str(tmp_path), "PYTHON": sys.executable, "OUT": str(out)}
    done = subprocess.run(["bash", str(PERF / "gpu_check.sh"), "--cpu-smoke"], env=env, capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.tar.gz", "table.md"]  # the device returns <= 8 files
    assert "preflight (" in (out / "table.md").read_text()
    steps = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert sorted((s["step"], s["rc"]) for s in steps) == sorted((s, 0) for s in table.STEPS)  # smoke steps run at once
    got = rows(done.stdout[done.stdout.index("| goal |"):])
    assert set(got) >= {g.name for g in table.GOALS}
    for goal in table.GOALS:
        figure, verdict = got[goal.name][0], got[goal.name][-1]
        if goal.name.endswith("(GPU decode)"):
            assert verdict == "smoke" or verdict.startswith("unmeasured ("), verdict
        elif verdict.startswith("unmeasured"):
            assert any(why in verdict for why in ALLOWED_UNMEASURED), f"{goal.name}: {verdict}"
        else:
            assert verdict == "smoke" and figure, f"{goal.name}: {verdict}"
    # the steps that run perf scripts on the same tiny inputs as tests/test_perf_scripts.py: their figures
    # are checked here, once, and the peers' values equal where clip_benchmark is installed
    from test_perf_scripts import IN_GPU_CHECK, check_figures

    for script, step in IN_GPU_CHECK.items():
        check_figures(script, (tmp_path / f"{step}.log").read_text())
    alone = json.loads((tmp_path / "media.json").read_text())["decoding_alone"]  # the decoder apart from the model
    assert alone["nvjpeg"] > 0 and alone["pipeline"] > 0 and alone["setup"].startswith("tensor")
    peers = json.loads((tmp_path / "peers.json").read_text())
    assert [r["equal"] for r in peers["pairings"]["MCQ fp32 vs fp32"]] == [True]
    assert all(r["ratio"] > 0 for pairs in peers["pairings"].values() for r in pairs if r["ratio"] is not None)
    assert "startup_end" in {run["name"] for run in peers["runs"]}  # the start-up every ratio is taken after (tiny: one)
    assert all("after_startup" in r for pairs in peers["pairings"].values() for r in pairs)
    # with clip_benchmark, its values; without it (CI), a stand-in of its output: the comparison's code runs
    assert [r["equal"] for r in peers["pairings"]["retrieval fp32 vs fp32"]] == [True]
    # the record's R-Neg@K read by their names (a KeyError on 'neg_R@1' once hid here, reached only with
    # clip_benchmark installed), and said; no value differs; the skip said where clip_benchmark is absent
    from test_perf_scripts import load

    said = (tmp_path / "peers.log").read_text()
    assert "R-Neg@10=" in said and "VALUES DIFFER" not in said
    assert peers["clip_benchmark_installed"] or load("peer_clip_benchmark.py").SKIP_CB in said


def test_text_row_shows_the_towers_pure_rates_beside_the_runners(table, tmp_path):
    """The device measures the text tower alone (the rate perf/gpu_sim.py scales from the image tower's): the
    row prints it beside the runner's figure; where that tower is slower than 50,000 / 0.9 texts/s (the H200's:
    29,902 at full context, the runner 26,487 = 0.89 of it) the goal is 0.9 of it, else 50,000/s."""
    text = {"median_texts_per_s": {"full": 29_128.0, "runner": 26_487.0, "pure": 29_902.0, "pure_cut": 93_043.0},
            "texts": 16_384, "source": "real COCO captions", "real": True, "batch": 1024, "rounds": 3}
    row = rows(table.table(results(tmp_path / "a", "gpu", {"text": 0}, {"text": text}))[0])["texts, real captions (the runner's path)"]
    assert row[0].startswith("26,487 texts/s (runner; full context 29,128, pure 29,902, pure_cut 93,043)")
    assert row[0].endswith("; 0.89 of the tower alone") and row[-1] == "FAIL"
    text["median_texts_per_s"]["runner"] = 27_000.0  # 0.90 of the tower
    row = rows(table.table(results(tmp_path / "b", "gpu", {"text": 0}, {"text": text}))[0])["texts, real captions (the runner's path)"]
    assert row[-1] == "pass"
    text["median_texts_per_s"].update(pure=80_000.0, runner=45_000.0)  # a tower fast enough: 50,000/s it is
    row = rows(table.table(results(tmp_path / "c", "gpu", {"text": 0}, {"text": text}))[0])["texts, real captions (the runner's path)"]
    assert row[-1] == "FAIL" and "of the tower alone" not in row[0]


def test_video_goal_is_what_the_cores_decode_and_gpu_row_shows_decoding_alone(table, tmp_path):
    """Clips are decoded on the CPU whatever the device: the H200's figures (124 clips/s in the loop, 4,432 pure,
    79.2 ms a clip on 16 cores: a 202 clips/s ceiling) are 0.62 of what its cores decode, a FAIL against 0.8 of
    it, where 0.9 of the pure forward asked for 3,989 clips/s, which would need 316 cores. The GPU-decode row
    prints nvjpeg's and the pipeline's rates measured apart from the model, the rates gpu_sim assumes."""
    video = {"pure": 4_431.9, "loop": {"threads:auto": {"rate": 124.3, "ratio": 0.028, "decode_cpu_ms": 79.2, "cores": 16}}}
    gpu = {"tensor:auto": {"rate": 7_065.1, "ratio": 0.331}}
    media = {**MEDIA, "video": video, "gpu_setup": "tensor:auto", "gpu_setup_error": None,
             "image": {**MEDIA["image"], "loop": {**MEDIA["image"]["loop"], **gpu}},
             "decoding_alone": {"nvjpeg": 15_000.0, "pipeline": 8_000.0}}
    got = rows(table.table(results(tmp_path / "a", "gpu", {"media": 0}, {"media": media}))[0])
    row = got["video frames in the loop"]
    assert row[-1] == "FAIL" and "0.62 of the 202 clips/s 16 cores decode at 79.2 ms" in row[0]
    assert row[1] == ">= 0.8 of min(pure, cores x 1-core decode)"
    video["loop"]["threads:auto"]["rate"] = 170.0  # 0.84 of the ceiling
    assert rows(table.table(results(tmp_path / "b", "gpu", {"media": 0}, {"media": media}))[0])["video frames in the loop"][-1] == "pass"
    gpu_row = got["images, JPEG decoding in the loop (GPU decode)"]
    assert gpu_row[-1] == "FAIL" and gpu_row[0].endswith("decoding alone: nvjpeg 15,000, the pipeline 8,000 img/s")


def test_training_row_is_judged_against_what_its_workers_can_decode(table, tmp_path):
    """The H200's 12 workers decoding 22.6 samples/s a core feed at most 271 of the bare loop's 405 samples/s
    (0.67): the loop's 37.4 (0.09) fails 0.9 of that; where the workers could outrun the step, 0.9 of bare."""
    train = {"ratio": 0.0924, "loop_sps": 37.4, "bare_sps": 404.9, "decode_sps": 22.6, "arch": "ViT-B-32",
             "precision": "bf16", "batch": 64, "rounds": 3, "ceiling": 0.67, "ceiling_of": "workers x 1-core decode",
             "workers": 12}
    row = rows(table.table(results(tmp_path / "a", "gpu", {"training": 0}, {"training": train}))[0])["BNL training step rate vs a bare loop"]
    assert row[-1] == "FAIL" and "ceiling 0.67 (workers x 1-core decode: 12 workers at 22.6 samples/s a core)" in row[0]
    train["ratio"] = 0.62  # >= 0.9 x 0.67
    assert rows(table.table(results(tmp_path / "b", "gpu", {"training": 0}, {"training": train}))[0])["BNL training step rate vs a bare loop"][-1] == "pass"


def test_the_gpu_modes_step_limits_fit_one_device_call(table):
    """One device call runs at most 600 s: the GPU mode's step limits, the preflight's 20 s and ~15 s of wheel
    installs must fit, with room for the table (the H200's training step, timed out at 70 s, needed 141 s)."""
    script = (PERF / "gpu_check.sh").read_text()
    gpu = script[script.index('if [ "$mode" = gpu ]; then'):script.index("\nelse\n", script.index('if [ "$mode" = gpu ]; then'))]
    limits = {m.group(1): int(m.group(2)) for m in re.finditer(r"run_step (\w+) (\d+) ", gpu)}
    assert set(limits) == set(table.STEPS)
    assert sum(limits.values()) + 20 + 15 <= 590, limits
    assert f"the limits sum to {sum(limits.values())} s" in script  # the comment says what the code does


def test_peer_rows_are_judged_after_process_start_up(table, tmp_path):
    """Both sides import torch and open_clip before their own work (~9 s of the H200's 12-14 s walls at 500
    rows): a row is judged on (ours - start-up) / (theirs - start-up), the whole-wall ratio shown beside it."""
    peer = load("peer_clip_benchmark.py")
    assert peer.after_startup(12.0, 14.2, 9.0) == pytest.approx(3.0 / 5.2)
    assert peer.after_startup(8.0, 14.2, 9.0) == 0.0  # ours no longer than start-up: no work of its own to see
    assert peer.after_startup(12.0, 8.5, 9.0) is None  # the peer's no longer than start-up: nothing to compare with
    pairs = {"retrieval fp32 vs fp32": [{"ratio": 0.85, "equal": True, "after_startup": 0.58}],
             "MCQ fp32 vs fp32": [{"ratio": 0.95, "equal": True, "after_startup": 0.45}]}
    peers = {**PEERS, "clip_benchmark_installed": True, "retrieval_peer": "clip_benchmark", "pairings": pairs}
    got = rows(table.table(results(tmp_path / "a", "gpu", {"peers": 0}, {"peers": peers}))[0])
    ret, mcq = got["Retrieval-Neg end to end vs CLIP_benchmark, fp32"], got["MCQ end to end vs the authors' loop, fp32"]
    assert ret[-1] == "FAIL" and ret[0].startswith("0.58x CLIP_benchmark's wall after start-up (0.85x whole)")
    assert mcq[-1] == "pass" and ret[1] == "<= 0.5x its wall after start-up, values equal"


def test_a_rate_of_zero_is_unmeasured_not_a_crash(table, tmp_path):
    """A step that printed a pure rate of 0 (it measured nothing) leaves its row unmeasured; the table is written."""
    video = {**MEDIA, "video": {"pure": 0.0, "loop": {"threads:auto": {"rate": 0.0, "ratio": 0.0, "decode_cpu_ms": 5.0,
                                                                         "cores": 2}}}}
    text = {"median_texts_per_s": {"full": 0.0, "runner": 0.0, "pure": 0.0}, "texts": 1, "source": "real COCO captions",
            "real": True, "batch": 1, "rounds": 1}
    got = rows(table.table(results(tmp_path / "a", "gpu", {"media": 0, "text": 0}, {"media": video, "text": text}))[0])
    assert got["video frames in the loop"][-1].startswith("unmeasured (figures unreadable: ZeroDivisionError")
    assert got["texts, real captions (the runner's path)"][-1].startswith("unmeasured (figures unreadable: ZeroDivisionError")
