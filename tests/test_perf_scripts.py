"""Every script in perf/ runs on the current record format: each is imported and run on tiny inputs
(its ``--tiny`` or smallest options), so a moved record field fails here, not for a user, and the
figures it prints lie in a sane range (marked `perf`: minutes in all, so out of the default run and
in CI's second pass, ``-m "needs or perf"``).

The two experiments (``exp_*``) take minutes by nature (kill -9 at three moments; training several
recipes): they are imported and their helpers that read records, shards and samples are run on a
tiny real run instead."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from negharness.discovery.manager import make_host
from negharness.engine.evaluate import RunRequest, evaluate_request

PERF = Path(__file__).resolve().parents[1] / "perf"

TINY: dict[str, list[str]] = {
    "bench_cache_integrity.py": ["--tiny"],
    "bench_decode_throughput.py": ["--tiny"],
    "bench_embedding_checks.py": ["--tiny"],
    "bench_leaderboard.py": ["--models", "2", "--scale", "2", "--diagnosed", "1", "--rounds", "1"],
    "bench_item_kinds.py": ["--tiny"],
    "bench_mcq.py": ["--tiny"],  # with a folder that has no CSV: generated rows in NegBench's layout
    "bench_metrics.py": ["--tiny"],
    "bench_nein_memory.py": ["--sizes", "4", "--side", "32"],
    "bench_readme_times.py": ["--tiny"],
    "bench_record_reader.py": ["--records", "2", "--queries", "50", "--rounds", "1"],
    "bench_reuse_checks.py": ["--images", "5", "--videos", "3", "--image-kb", "1", "--video-kb", "1"],
    "bench_read_once.py": ["--tiny"],
    "bench_run_cache.py": ["--tiny"],
    # one process both ways: the 2-rank torchrun path is tested in tests/test_sharded_eval.py; run here
    # after the whole newcomer suite, its rank 1 aborted at teardown ("terminate called without an
    # active exception", twice; never alone or beside ../shared) -- an open problem, not hidden: see
    # the session note
    "bench_sharded_eval.py": ["--tiny", "--ranks", "1"],
    "bench_shared_encoding.py": ["--tiny"],
    "bench_tensor_decode_difference.py": ["--tiny"],
    "bench_text_lengths.py": ["--tiny"],
    "bench_tokenizer.py": ["--tiny"],
    "bench_plugin_cost.py": ["--tiny"],
    "bench_training.py": ["--videos", "4", "--steps", "1", "--batch", "2", "--size", "32", "--workers", "0"],
    "bench_vlm_choice.py": ["--questions", "2", "--batch-sizes", "1"],
    "bench_jpeg_decoders.py": ["--images", "4", "--rounds", "1"],
    "profile_cold_run.py": ["--tiny", "--run", "negbench", "--top", "3", "--rounds", "1"],  # the world run is the simpler path
    "sim_cluster_coverage.py": ["--tiny"],  # both runs profiled, then timed once unprofiled
    "trace_request.py": ["--limit", "8"],
}
# bench_concurrent_runs.py's --tiny (three CLI processes: ~60 s of CI's second pass) repeated
# tests/test_cache_sharing.py's property (runs on one cache encode each item once and agree): its record and
# shard readers run on the tiny run here instead
HELPERS_ONLY = {"exp_kill_resume.py", "exp_negation_training.py", "text_builders_counts.py", "bench_concurrent_runs.py",
                "sample_query_builders.py"}
NUM = r"(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)"
# What each script prints on its tiny inputs, as (pattern with one number, low, high): generous where the
# figure is a timing (a shared machine's load moves those several-fold), tight where it is a count or a
# difference the script exists to show; a figure outside its range is a broken script or a broken harness.
FIGURES: dict[str, list[tuple[str, float, float]]] = {
    "bench_cache_integrity.py": [(rf"run cold .*?ms, ratio {NUM}", 0.05, 20.0)],
    "bench_decode_throughput.py": [(rf"image: pure forward {NUM}/s", 0.1, 1e6),
                                   (rf"image: in the loop, \S+\s+[\d.]+/s ratio {NUM}", 0.01, 50.0),
                                   (rf"image: in the loop, tensor:1\s+[\d.]+/s ratio {NUM}", 0.01, 50.0)],
    "bench_embedding_checks.py": [(rf"the check alone: {NUM} us per 512-d row", 0.001, 1e4),
                                  (rf"cold: .*ratio with / without {NUM}", 0.9, 1.5)],
    "bench_leaderboard.py": [(rf"markdown {NUM} s, with --html", 0.0, 120.0), (rf"page: {NUM} MB", 0.01, 50.0),
                             (rf"cli cold: 40 records .*?ratio {NUM} to 20", 0.05, 50.0),
                             (rf"cli warm: 40 records .*?ratio {NUM} to 20", 0.05, 50.0),
                             (rf"goal: 40 records cold in at most 30 s -> {NUM} s", 0.0, 300.0)],
    "bench_mcq.py": [(rf"encoded: {NUM} texts", 24, 24), (rf"ratio {NUM} \(decoding", 0.1, 100.0)],
    "bench_jpeg_decoders.py": [(rf"torchvision.io.decode_jpeg \(deprecated\):\s+{NUM} img/s", 0.1, 1e6)],
    "bench_metrics.py": [(rf"all metrics, vectorised: {NUM} s", 0.0, 60.0), (rf"original: .*MIR {NUM}", 0.0, 1.0)],
    "bench_nein_memory.py": [(rf"growth\s+{NUM} MiB", 0.0, 2048.0)],
    "bench_readme_times.py": [(rf"median {NUM} s", 0.1, 900.0), (rf"cached rerun {NUM} s", 0.05, 900.0)],
    "bench_record_reader.py": [(rf"\ncold\s+{NUM}", 0.0, 120.0), (rf"\nwarm\s+\S+\s+\S+\s+{NUM}", 0.0, 1e4)],
    "bench_reuse_checks.py": [(rf"warm hash \(memo\).*?{NUM} us/file", 0.0, 1e5)],
    "bench_run_cache.py": [(rf"ratio warm / cold:\s+{NUM}", 0.0, 0.5),
                           (rf"warm run, tasks' evaluate time:.*'texts_encoded': {NUM}", 0, 0)],
    "bench_sharded_eval.py": [(rf"largest metric difference: {NUM}", 0.0, 1e-6),
                              (rf"speed-up, evaluation:\s+{NUM}x", 0.05, 20.0)],
    "bench_shared_encoding.py": [(rf"video encodes {NUM}x fewer", 2.5, 10.0)],
    # the property, not the time: with the index or declared entries no torch is imported (x: against no plugin)
    "bench_plugin_cost.py": [(rf"hook module, indexed\s+[\d.]+ s\s+x\s*{NUM}  torch imported: False", 0.0, 1e3),
                             (rf"declared entries\s+[\d.]+ s\s+x\s*{NUM}  torch imported: False", 0.0, 1e3)],
    "bench_read_once.py": [(rf"read once / read twice: {NUM}", 0.05, 5.0)],  # a ratio of two CPU times: sane, not a goal
    "bench_tokenizer.py": [(rf"tokenizer fast/open_clip {NUM}x", 0.5, 1e3),
                           (rf"after vs before {NUM}", 0.0, 1e-4)],
    "bench_tensor_decode_difference.py": [(rf"photos: .*pixels max {NUM} levels", 0.0, 2.0),
                                          (rf"photos: .*embeddings max abs diff {NUM}", 0.0, 1e-3),
                                          (rf"shapes: .*largest R@K difference {NUM}", 0.0, 0.0)],
    "bench_text_lengths.py": [(rf"against the full context: cut {NUM}", 0.0, 1e-3),
                              (rf"against the full context: .*pure {NUM}", 0.0, 1e-3),
                              (rf"against the full context: .*pure_cut {NUM}", 0.0, 1e-3),
                              (rf"min cosine \(planned\) {NUM}", 0.999, 1.0 + 1e-6)],
    "bench_training.py": [(rf"bare loop \(pre-decoded\)\s*:\s*{NUM} samples/s", 0.01, 1e6),
                          (rf"ratio loop / bare\s*:\s*{NUM}", 0.01, 20.0)],
    "bench_vlm_choice.py": [(rf"loglik batch\s+1:\s+{NUM} questions/s", 0.001, 1e6)],
    "profile_cold_run.py": [(rf"-- main: .*?\({NUM}% of wall\)", 30.0, 105.0), (rf"round 1: this {NUM} s", 0.1, 900.0)],
    # the tiny run has only 40 replicates over 20 clusters: coverage is loose, the gap between the two is the point
    "sim_cluster_coverage.py": [(rf"interval over clusters covers the true mean in {NUM}%", 75.0, 100.0),
                                (rf"interval over rows covers it in {NUM}%", 20.0, 85.0)],
    # the request carried back up the import tree: issue 51's goal is at most 10 (0 since the plan)
    "trace_request.py": [(rf"cold run: exit 0; {NUM} stops", 1, 60), (rf"cold run: .* climbs {NUM} ", 0, 10),
                         (rf"rerun from its records: .* climbs {NUM} ", 0, 10)],
    "bench_item_kinds.py": [(rf"bench_group\s+50 items: .*scored, embeddings cached: {NUM} s", 0.0, 30.0),
                            (rf"bench_tot\s+50 items: .*'accuracy': {NUM}", 0.0, 100.0)],
}
# run in --tiny mode once, as gpu_check.sh's peers step (tests/test_gpu_check.py checks the values it compares)
VALUES_CHECKED = {"peer_clip_benchmark.py"}
RUN_BY_CI = {"gpu_sim.py"}  # `python perf/gpu_sim.py --quick` is a line of .ci/run (~30 s): its helpers are tested here


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"perf_{Path(name).stem}", PERF / name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_perf_script_is_covered():
    assert {p.name for p in PERF.glob("*.py")} == set(TINY) | HELPERS_ONLY | VALUES_CHECKED | RUN_BY_CI
    assert set(FIGURES) == set(TINY)  # every script run here has its figures checked


def check_figures(name: str, out: str) -> None:
    """Each of the script's figures is printed and lies in its range."""
    for pattern, low, high in FIGURES[name]:
        found = re.search(pattern, out)
        assert found, f"{name} printed no {pattern!r}:\n{out}"
        assert low <= float(found.group(1)) <= high, f"{name}: {found.group(0)!r} outside [{low}, {high}]:\n{out}"


NEEDS_NLTK = {"bench_nein_memory.py", "bench_training.py"}  # real-caption builders: the tagger
# run by `perf/gpu_check.sh --cpu-smoke` on the same tiny inputs: their figures are checked on its logs
# (tests/test_gpu_check.py), not run a second time here
IN_GPU_CHECK = {"bench_text_lengths.py": "text", "bench_training.py": "training"}


@pytest.mark.perf
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.needs("nltk")) if n in NEEDS_NLTK else n
                                  for n in sorted(set(TINY) - set(IN_GPU_CHECK))])
def test_script_runs_on_tiny_inputs(name, tmp_path, capsys):
    argv = list(TINY[name])
    if name == "bench_mcq.py":
        argv = [str(tmp_path / "no-csvs"), *argv]
    if name == "bench_sharded_eval.py":  # the session's world, generated once for every test
        argv += ["--data-root", os.environ["NEGHARNESS_DATA"]]
    load(name).main(argv)
    check_figures(name, capsys.readouterr().out)


@pytest.fixture
def tiny_run(tmp_path):
    """A real run of the embedded world's t2i task, 8 items, with samples logged."""
    req = RunRequest(model="shapes_clip", tasks=["shapes_t2i_original"], limit=8, device="cpu", log_samples=True,
                     output_dir=str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"))
    return tmp_path, evaluate_request(make_host(), req)[0]


def test_kill_resume_helpers_read_records_and_shards(tiny_run):
    root, outcome = tiny_run
    mod = load("exp_kill_resume.py")
    rec = mod.record(root / "out", "shapes_t2i_original")
    assert set(rec["metrics"]) >= {"R@1", "MIR"} and rec["counts"]["media_encoded"] == 8
    assert mod.stored(root / "cache", "image") == 8 and mod.stored(root / "cache", "text") > 0


def test_negation_training_helpers_read_records(tiny_run, monkeypatch):
    """The table reads each record's per-query file with its clusters and bootstrap settings."""
    root, outcome = tiny_run
    mod = load("exp_negation_training.py")
    values = mod.per_query(outcome.path)
    assert len(values["query"]) == len(values["clusters"]) == len(values["MIR"]) > 0
    monkeypatch.setattr(mod, "TEST_ITEMS", "24")
    monkeypatch.setattr(mod, "TASKS", ["shapes_t2v_negated", "shapes_mcq"])
    got = mod.evaluate(make_host(), "shapes_clip", None, root / "exp")
    assert {"query", "clusters", "method", "ΔMIR"} <= set(got["shapes_t2v_negated"])
    assert {"query", "clusters", "method", "accuracy"} <= set(got["shapes_mcq"])
    assert len(set(got["shapes_t2v_negated"]["clusters"])) < len(got["shapes_t2v_negated"]["query"])  # by video
    # the table rebuilt from the saved records (--report-only) reads the same values as the run handed back
    (saved,) = mod.collect(root / "exp")["shapes_clip (no fine-tuning)"]
    for task, values in got.items():
        for key, array in values.items():
            assert np.array_equal(saved[task][key], array, equal_nan=array.dtype.kind == "f"), (task, key)


def test_concurrent_runs_helpers_read_records_and_shards(tiny_run):
    root, _ = tiny_run
    mod = load("bench_concurrent_runs.py")
    rec = mod.record(root / "out")
    assert mod.encodings(rec) == rec["counts"]["media_encoded"] + rec["counts"]["texts_encoded"] and rec["counts"]["media_encoded"] == 8
    size, rows, distinct = mod.disk(root / "cache")
    assert size > 0 and rows == distinct >= 8 + rec["counts"]["texts_encoded"]  # one row per id: nothing stored twice


def test_sharded_eval_reads_records_not_sidecars(tiny_run):
    root, _ = tiny_run
    found = load("bench_sharded_eval.py").records(root / "out")
    (stem, rec), = found.items()
    assert stem.startswith("shapes_t2i_original") and "total_s" in rec["timings"]


def test_peer_retrieval_comparison_reads_the_records_names():
    """`retrieval_equal` takes the names a negharness Retrieval-Neg record has (the task's own naming
    function), not the nT2VR name neg_R@K, and says which value differs."""
    from negharness.tasks.negbench.tasks import negated_name

    module = load("peer_clip_benchmark.py")
    record = {f"R@{k}": 50.0 for k in module.KS} | {negated_name(f"R@{k}"): 25.0 for k in module.KS}
    peer = {"original": {f"image_retrieval_recall@{k}": 0.5 for k in module.KS},
            "negated": {f"image_retrieval_recall@{k}": 0.25 for k in module.KS}}
    assert module.retrieval_equal(record, peer, {"original": 100, "negated": 100})[0] is True
    peer["negated"]["image_retrieval_recall@5"] = 0.40
    ok, why = module.retrieval_equal(record, peer, {"original": 100, "negated": 100})
    assert not ok and why.startswith("R-Neg@5 25.000 vs 40.000")


def test_text_counts_script_imports_and_counts_table1():
    """perf/text_builders_counts.py reads the real MSR-VTT captions (minutes of NLTK tagging): here it is
    imported, and its Table 1 reference counts are the paper's."""
    module = load("text_builders_counts.py")
    assert module.TABLE1 == {"MSR-VTT1k": 3697, "MSR-VTT3k": 18157, "VATEX": 8394} and callable(module.main)


def test_grading_sheet_script_imports_and_the_grades_record_is_well_formed():
    """perf/sample_query_builders.py builds on the real MSR-VTT captions (minutes): here it is imported;
    perf/query_builder_grades.json, the record of every grade (issue 35), names seed, set, counts by
    label, builder version and grader for each."""
    import json

    module = load("sample_query_builders.py")
    assert callable(module.sheet) and module.SHOWN == 6
    grades = json.loads((PERF / "query_builder_grades.json").read_text(encoding="utf-8"))["grades"]
    assert grades and all({"seed", "set", "counts", "builder_version", "grader"} <= set(g) for g in grades)
    assert all(g["set"] in ("composed", "negated") and g["counts"]["n"] > 0 for g in grades)



def test_gpu_sim_inputs_are_distinct_valid_jpegs_and_its_text_rate_follows_tokens(tmp_path):
    """perf/gpu_sim.py's COCO-like files differ byte-wise (the cache keys by content; equal files would be
    encoded once) yet decode as their base does; the simulated text tower costs less for cut texts."""
    from PIL import Image

    from negharness.io.tensor_images import plain_jpeg

    sim = load("gpu_sim.py")
    paths = sim.write_images(tmp_path, 40)
    data = [p.read_bytes() for p in paths]
    assert len(set(data)) == 40 and all(plain_jpeg(d) for d in data)
    assert Image.open(paths[0]).size == sim.SIZES[0] and Image.open(paths[1]).size == sim.SIZES[1]
    assert np.array_equal(np.asarray(Image.open(paths[0])), np.asarray(Image.open(paths[32])))  # same base
    assert sim.text_seconds(1, 14) < sim.text_seconds(1, 77) < sim.text_seconds(2, 77)
    assert 25_000 < 1 / sim.text_seconds(1, 77) < 35_000  # ViT-B-32's text tower: ~2/3 of the image tower's MACs


def test_gpu_sim_rows_ask_what_the_simulated_device_allows():
    """No row asks what no machine can meet (issue 54 item 4): full-context texts are judged as a share of
    their simulated pure rate (~28,700/s, below 50,000/s); the text_lengths=on row keeps 50,000/s only where
    its own pure rate allows it, else 0.9 of pure; GIL per text is shown beside the tokenizer's own cost."""
    sim = load("gpu_sim.py")
    item = {"rate": 1.0, "gil_us": 1.0, "cpu_us": 2.0, "settle_s": 0.0}
    spec = {"nvjpeg_rate": 12_000.0, "n_images": 1, "texts": ["a"], "text_source": "generated"}

    def rows(text_rate: float, cut_rate: float, cut_pure: float) -> dict[str, tuple[str, str]]:
        got = {"images": dict(item, rate=11_000.0), "images_no_cache": dict(item, rate=12_000.0),
               "texts": dict(item, rate=text_rate, pure_rate=28_700.0),
               "texts_lengths_on": dict(item, rate=cut_rate, pure_rate=cut_pure), "tokenizer_us": 7.5,
               "before_first_batch_s": 1.0, "imports_s": 5.0}
        text, _ = sim.table(got, spec)
        cells = [line.split(" | ") for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
        return {c[0].lstrip("| "): (c[2], c[3].rstrip(" |")) for c in cells}

    met = rows(26_000.0, 60_000.0, 160_000.0)
    assert met["texts in the loop (CUDA's choice: full context)"] == (">= 0.9 of pure", "pass")
    assert met["texts in the loop, text_lengths=on"] == (">= 50,000/s", "pass")
    slow = rows(20_000.0, 40_000.0, 50_000.0)  # a tower too slow for 50,000/s: judged against its own pure rate
    assert slow["texts in the loop (CUDA's choice: full context)"][1] == "FAIL"
    assert slow["texts in the loop, text_lengths=on"] == (">= 0.9 of pure", "FAIL")
    assert rows(26_000.0, 46_000.0, 50_000.0)["texts in the loop, text_lengths=on"] == (">= 0.9 of pure", "pass")
    assert met["images in the loop, no cache (as the GPU check's media step)"] == ("reported", "pass")  # not judged
    assert "tokenizer alone 7.5 us" in sim.table({**{"images": dict(item), "images_no_cache": dict(item),
                                                    "texts": dict(item, pure_rate=1.0),
                                                    "texts_lengths_on": dict(item, pure_rate=1.0)},
                                                 "tokenizer_us": 7.5, "before_first_batch_s": 1.0, "imports_s": 5.0},
                                                spec)[0]


def test_gpu_sim_says_where_each_rows_wall_went():
    """Under gpu_sim's table, each row's wall split from the runner's stage clock: the rest is the wall less the
    forward and the loop's waits (worked by hand here), the decoder's waits for cache keys shown for images."""
    sim = load("gpu_sim.py")
    images = {"wall_s": 2.0, "split": {"forward": 0.5, "decode": 1.2, "keys": 0.7, "device": 0.4, "nvjpeg": 0.6}}
    line = sim.wall_went("images", images)
    assert line is not None and line.startswith("- images: 2.00 s = forward 0.50 s (the stand-in device 0.40 s)")
    assert "waiting for decoded batches 1.20 s" in line and "waits for cache keys 0.70 s" in line
    assert line.endswith("outside the loop's waits and forwards 0.30 s")
    texts = sim.wall_went("texts", {"wall_s": 1.0, "split": {"forward": 0.6, "tokenise": 0.15, "device": 0.5}})
    assert texts is not None and "waiting for tokens 0.15 s" in texts and texts.endswith("forwards 0.25 s")
    assert sim.wall_went("texts", {"wall_s": 1.0}) is None  # a round that recorded no split: no line


def test_gpu_sim_keeps_each_rows_fastest_round_and_least_costs():
    """perf/gpu_sim.py's rounds: another process only lowers a rate and raises a cost, so a row keeps its
    fastest round's rate (and that round's own figures) with the GIL figures of its least-GIL round and the CPU
    figures of its least-CPU round."""
    sim = load("gpu_sim.py")

    def round_(rate: float, gil: float, cpu: float, tok: float) -> dict:
        row = {"rate": rate, "gil_us": gil, "gil_share": gil, "probe_samples": 1, "cpu_us": cpu, "wall_s": 1 / rate,
               "pure_rate": 9.0}
        return {**{r: dict(row) for r in sim.ROWS}, "tokenizer_us": tok}

    got = sim.best_of([round_(5.0, 10.0, 30.0, 4.0), round_(7.0, 12.0, 25.0, 6.0), round_(6.0, 8.0, 40.0, 5.0)])
    for row in sim.ROWS:
        assert got[row]["rate"] == 7.0 and got[row]["wall_s"] == 1 / 7.0 and got[row]["rates"] == [5.0, 7.0, 6.0]
        assert got[row]["gil_us"] == 8.0 and got[row]["gil_share"] == 8.0 and got[row]["cpu_us"] == 25.0
    assert got["tokenizer_us"] == 4.0
