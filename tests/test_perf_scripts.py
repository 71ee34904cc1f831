"""Every script in perf/ runs on the current record format: each is imported and run on tiny inputs
(its ``--tiny`` or smallest options), so a moved record field fails here, not for a user.

The two experiments (``exp_*``) take minutes by nature (kill -9 at three moments; training several
recipes): they are imported and their helpers that read records, shards and samples are run on a
tiny real run instead."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from negharness.discovery.manager import make_host
from negharness.engine.evaluate import RunRequest, run_evaluation

PERF = Path(__file__).resolve().parents[1] / "perf"

TINY: dict[str, list[str]] = {
    "bench_cache_integrity.py": ["--tiny"],
    "bench_concurrent_runs.py": ["--tiny"],
    "bench_decode_throughput.py": ["--tiny"],
    "bench_embedding_checks.py": ["--tiny"],
    "bench_leaderboard.py": ["--models", "2", "--diagnosed", "1", "--rounds", "1"],
    "bench_item_kinds.py": ["--tiny"],
    "bench_mcq.py": ["--tiny"],  # with a folder that has no CSV: generated rows in NegBench's layout
    "bench_metrics.py": ["--tiny"],
    "bench_nein_memory.py": ["--sizes", "4", "--side", "32"],
    "bench_readme_times.py": ["--tiny"],
    "bench_reuse_checks.py": ["--images", "5", "--videos", "3", "--image-kb", "1", "--video-kb", "1"],
    "bench_run_cache.py": ["--tiny"],
    # one process both ways: the 2-rank torchrun path is tested in tests/test_sharded_eval.py; run here
    # after the whole newcomer suite, its rank 1 aborted at teardown ("terminate called without an
    # active exception", twice; never alone or beside ../shared) -- an open problem, not hidden: see
    # the session note
    "bench_sharded_eval.py": ["--tiny", "--ranks", "1"],
    "bench_shared_encoding.py": ["--tiny"],
    "bench_text_lengths.py": ["--tiny"],
    "bench_training.py": ["--videos", "4", "--steps", "1", "--batch", "2", "--size", "32", "--workers", "0"],
    "bench_vlm_choice.py": ["--questions", "2", "--batch-sizes", "1"],
    "profile_cold_run.py": ["--tiny", "--top", "3", "--rounds", "1"],
    "sim_cluster_coverage.py": ["--tiny"],  # both runs profiled, then timed once unprofiled
}
HELPERS_ONLY = {"exp_kill_resume.py", "exp_negation_training.py", "text_builders_counts.py",
                "sample_query_builders.py"}
VALUES_CHECKED = {"peer_clip_benchmark.py"}  # run in --tiny mode by its own test, which checks the values it compares


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"perf_{Path(name).stem}", PERF / name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_perf_script_is_covered():
    assert {p.name for p in PERF.glob("*.py")} == set(TINY) | HELPERS_ONLY | VALUES_CHECKED


NEEDS_NLTK = {"bench_nein_memory.py", "bench_training.py"}  # real-caption builders: the tagger


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.needs("nltk")) if n in NEEDS_NLTK else n
                                  for n in sorted(TINY)])
def test_script_runs_on_tiny_inputs(name, tmp_path, capsys):
    argv = list(TINY[name])
    if name == "bench_mcq.py":
        argv = [str(tmp_path / "no-csvs"), *argv]
    if name == "bench_sharded_eval.py":  # the session's world, generated once for every test
        argv += ["--data-root", os.environ["NEGHARNESS_DATA"]]
    load(name).main(argv)
    assert capsys.readouterr().out.strip()


@pytest.fixture
def tiny_run(tmp_path):
    """A real run of the embedded world's t2i task, 8 items, with samples logged."""
    req = RunRequest(model="shapes_clip", tasks=["shapes_t2i_original"], limit=8, device="cpu", log_samples=True,
                     output_dir=str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"))
    return tmp_path, run_evaluation(make_host(), req)[0]


def test_kill_resume_helpers_read_records_and_shards(tiny_run):
    root, outcome = tiny_run
    mod = load("exp_kill_resume.py")
    rec = mod.record(root / "out", "shapes_t2i_original")
    assert set(rec["metrics"]) >= {"R@1", "MIR"} and rec["counts"]["media_encoded"] == 8
    assert mod.stored(root / "cache", "image") == 8 and mod.stored(root / "cache", "text") > 0


def test_negation_training_helpers_read_samples(tiny_run, monkeypatch):
    root, outcome = tiny_run
    mod = load("exp_negation_training.py")
    values = mod.per_query(outcome.path.with_suffix(".samples.jsonl"), "shapes_t2i_original")
    assert len(values["query"]) == len(values["MIR"]) > 0
    monkeypatch.setattr(mod, "TEST_ITEMS", "24")
    monkeypatch.setattr(mod, "TASKS", ["shapes_t2v_negated", "shapes_mcq"])
    got = mod.evaluate(make_host(), "shapes_clip", None, root / "exp")
    assert set(got["shapes_t2v_negated"]) == {"query", "ΔMIR"} and set(got["shapes_mcq"]) == {"query", "accuracy"}


def test_sharded_eval_reads_records_not_sidecars(tiny_run):
    root, _ = tiny_run
    found = load("bench_sharded_eval.py").records(root / "out")
    (stem, rec), = found.items()
    assert stem.startswith("shapes_t2i_original") and "total_s" in rec["timings"]


def _peer_benchmark_installed() -> bool:
    return load("peer_clip_benchmark.py").clip_benchmark_installed()


@pytest.mark.parametrize("hide_peer", [True] + ([False] if _peer_benchmark_installed() else []))
def test_peer_benchmark_values_equal_where_computed(hide_peer, monkeypatch, capsys):
    """perf/peer_clip_benchmark.py --tiny: negharness's MCQ equals the NegBench authors' MCQ logic as re-implemented
    there; where clip_benchmark is installed, negharness's R@K equal CLIP_benchmark's at fp32; without it
    (``hide_peer``, or a clone without it) that part is skipped with one line and our side still runs."""
    module = load("peer_clip_benchmark.py")
    if hide_peer:
        monkeypatch.setattr(module, "clip_benchmark_installed", lambda: False)
    outcome = module.main(["--tiny"])
    out = capsys.readouterr().out
    (ratio, equal), = outcome["MCQ fp32 vs fp32"]
    assert ratio > 0 and equal is True
    if hide_peer:
        assert out.count(module.SKIP_CB) >= 1 and "VALUES DIFFER" not in out
        assert outcome["retrieval fp32 vs fp32"] == [(None, None)]  # negharness ran; nothing to compare with
    else:
        assert outcome["retrieval fp32 vs fp32"][0][1] is True


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

