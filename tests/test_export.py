"""`negharness export`: records in MTEB's, lm-eval's and Every Eval Ever's layouts, each read back by
the peer tool's own loader or validator where it is installed (the `peers` extra; EEE needs Python
3.12, so CI installs its package without its dependencies to read its schema and run its validator),
and the numbers equal; and the record fields those formats need (model revision, accelerator name)."""

import json
import math
from importlib import metadata
from pathlib import Path

import pytest
import torch

from negharness.api.errors import UserError
from negharness.engine.reuse import model_revision
from negharness.engine.runner import device_name
from negharness.records.export import export, stable_uuid
from negharness.records.fake import write_fake_record
from negharness.records.published import PublishedRow
from negharness.records.results import ModelConfig


def _hits(rate: float, n: int = 200) -> list[float]:
    k = round(rate * n)
    return [100.0] * k + [0.0] * (n - k)


A, B = ModelConfig("clip", {}), ModelConfig("clip", {"arch": "ViT-L-14"}, "bf16")
# the fixture's metrics written per hundred in a record (percent): MTEB and lm-eval keep shares of 1, so
# they must hold these / 100; every other metric (MIR a proportion, MeanR a rank) the same number
PER_HUNDRED = {"R@1", "accuracy", "add_att", "mean"}
# what Every Eval Ever must declare for each: its unit and bounds, in the record's own unit
EEE_UNITS = {"R@1": ("percent", 0.0, 100.0), "accuracy": ("percent", 0.0, 100.0), "add_att": ("percent", 0.0, 100.0),
             "mean": ("percent", 0.0, 100.0), "MIR": ("proportion", 0.0, 1.0), "MeanR": ("rank", 1.0, math.inf)}


def _per_one(metric: str, value: float) -> float:
    return value / 100 if metric in PER_HUNDRED else value


def _edit(path: Path, **fields) -> None:
    rec = json.loads(path.read_text())
    for key, value in fields.items():
        rec.setdefault(key, {}).update(value)
    path.write_text(json.dumps(rec))


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """Two models on t1 (one with a revision), one on t2 (with a metric of no known unit) and on a suite,
    a record whose main score has no known unit, and a --limit run and a seed variant beside."""
    root = tmp_path / "results"
    mir = [1.0] * 50 + [0.5] * 100 + [0.25] * 50
    path = write_fake_record(root, A, "t1", {"R@1": _hits(0.6), "MeanR": [3.0] * 100 + [4.0] * 100, "MIR": mir},
                             lower_is_better=["MeanR"], family="fam")
    _edit(path, model={"revision": "0123456789abcdef0123456789abcdef01234567"})
    write_fake_record(root, B, "t1", {"R@1": _hits(0.4), "MeanR": [5.0] * 200, "MIR": mir[::-1]},
                      lower_is_better=["MeanR"], family="fam", created="2026-01-02T00:00:00+00:00")
    write_fake_record(root, A, "t2", {"accuracy": _hits(0.3), "wobble": [7.0] * 200}, family="other")
    write_fake_record(root, A, "t2", {"accuracy": _hits(0.9)}, family="other", limit=10, variant={"limit": 10})
    write_fake_record(root, A, "t2", {"accuracy": _hits(0.5)}, family="other", variant={"seed": 1})
    write_fake_record(root, A, "t3", {"wobble": [7.0] * 200}, family="other")
    suite = write_fake_record(root, A, "suite", {"add_att": _hits(0.25), "mean": _hits(0.25)}, main="mean",
                              family="other")
    _edit(suite, config={"task": {"members": {"add_att": "suite_add_att"}}})  # a suite's columns: members' accuracy
    return root


def _records(root: Path) -> dict[tuple[str, str], dict]:
    """(model folder, task) -> record, of the records an export takes (its metrics of a known unit)."""
    out = {}
    for p in sorted(root.glob("*/*.json")):
        rec = json.loads(p.read_text())
        if not p.name.endswith(".perquery.json") and not rec.get("limited") and not rec.get("variant_label"):
            rec["metrics"] = {m: v for m, v in rec["metrics"].items() if m != "wobble"}
            if rec["metrics"]:
                out[(p.parent.name, rec["task"]["name"])] = rec
    return out


PAPER_ROW = PublishedRow("Paper 2025", "Table 2", "CLIP ViT-B/32", "clip", "", (), "t1", "R@1", 48.0, "48.0",
                         "", "tables.csv", 3)
UNKNOWN_ROW = PublishedRow("Paper 2025", "Table 2", "CLIP ViT-B/32", "clip", "", (), "t1", "wobble", 7.0, "7.0",
                           "", "tables.csv", 4)


def _published(task: str) -> list[PublishedRow]:
    return [PAPER_ROW, UNKNOWN_ROW] if task == "t1" else []


def test_export_leaves_aside_limit_variant_and_unknown_unit_runs_and_refuses_an_empty_folder(results, tmp_path):
    done = export(results, tmp_path / "out", "eee", _published)
    assert len(done.left_aside) == 4 and any("--limit" in s for s in done.left_aside)
    assert any("variant seed=1" in s for s in done.left_aside)
    assert any("t3.json (main score wobble: its unit is not in" in s for s in done.left_aside)
    assert any("t2.json: metric wobble left out" in s for s in done.left_aside)
    assert len(done.files) == 5  # four runs and the paper's row
    assert done.files == export(results, tmp_path / "out", "eee", _published).files  # stable names
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no record to export"):
        export(tmp_path / "empty", tmp_path / "out2", "mteb")
    with pytest.raises(UserError, match="--format csv: not a format"):
        export(results, tmp_path / "out2", "csv")


def test_export_command(results, tmp_path, cli):
    proc = cli("export", "--format", "lm-eval", str(results), str(tmp_path / "lm"))
    assert proc.returncode == 0, proc.stderr
    assert "left aside" in proc.stdout and "wrote 2 lm-eval file(s)" in proc.stdout
    assert "metric wobble left out" in proc.stdout
    proc = cli("export", "--format", "mteb", str(tmp_path / "missing"), str(tmp_path / "m"))
    assert proc.returncode == 2 and "RESULTS_DIR" in proc.stderr and "no such folder" in proc.stderr


def test_mteb_round_trip_through_mtebs_own_result_cache(results, tmp_path):
    """MTEB keeps shares of 1 and its board shows ``round(main_score * 100, 2)``
    (``mteb.leaderboard.table._format_scores``, which needs gradio to import): a percent record's
    number comes back on that board as the record shows it, and each metric, interval and standard
    error as a share of 1."""
    pytest.importorskip("mteb", reason="mteb not installed (pip install -e '.[peers]')")
    from mteb.cache import ResultCache
    from mteb.models.model_meta import ModelMeta

    export(results, tmp_path / "mteb" / "results", "mteb")
    loaded = ResultCache(cache_path=tmp_path / "mteb").load_results(include_remote=False)
    want = _records(results)
    got, board = {}, {}
    for model in loaded:
        folder = model.model_name.split("/", 1)[1]
        for task in model.task_results:
            got[(folder, task.task_name)] = (model.model_revision, task)
        for row in model.to_dataframe(format="long").itertuples():  # the table MTEB's board is built from
            board[(folder, row.task_name)] = row.score
    assert set(got) == set(want) == set(board)
    for key, rec in want.items():
        revision, task = got[key]
        main, value = rec["main_score"]["name"], rec["main_score"]["value"]
        assert revision == (rec["model"].get("revision") or "no_revision_available")
        assert task.get_score() == pytest.approx(_per_one(main, value), abs=1e-9)
        if main in PER_HUNDRED:
            assert round(board[key] * 100, 2) == round(value, 2)
        [scores] = task.scores["test"]
        assert "wobble" not in scores
        for metric, value in rec["metrics"].items():
            assert scores[metric] == pytest.approx(_per_one(metric, value), abs=1e-9)
            assert scores["confidence_interval_95"][metric] == pytest.approx(
                [_per_one(metric, x) for x in rec["intervals"][metric]], abs=1e-9)
            assert scores["standard_error"][metric] == pytest.approx(
                _per_one(metric, rec["standard_errors"][metric]), abs=1e-9)
    assert board[("clip", "t1")] == pytest.approx(0.6) and board[("clip", "t2")] == pytest.approx(0.3)
    for meta in (tmp_path / "mteb" / "results").glob("*/*/model_meta.json"):
        assert ModelMeta.model_validate_json_resolved(meta.read_text()).name.startswith("negharness/")


def _lm_eval_table(results: dict) -> dict[tuple[str, str], tuple[str, str]]:
    """(task, metric) -> (value, stderr) as lm-eval's own ``make_table`` prints them."""
    from lm_eval.utils import make_table

    rows, task = {}, ""
    for line in make_table(results).splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        task = cells[0] or task
        rows[(task, cells[4])] = (cells[6], cells[8])
    return rows


def test_lm_eval_round_trip_through_lm_evals_result_schema_and_table(results, tmp_path):
    """lm-eval keeps shares of 1: ``make_table`` prints a record's R@1 of 60.0 as 0.6000 ± its
    standard error / 100, and a rank or MIR as the record's number."""
    pytest.importorskip("lm_eval", reason="lm-eval not installed (pip install -e '.[peers]')")
    from lm_eval.result_schema import EvalResults
    from lm_eval.utils import get_latest_filename, get_results_filenames
    from pydantic import TypeAdapter

    export(results, tmp_path / "lm", "lm-eval")
    want = _records(results)
    seen = set()
    for folder in sorted((tmp_path / "lm").iterdir()):
        files = get_results_filenames([str(p) for p in folder.iterdir()])
        loaded = TypeAdapter(EvalResults).validate_json(Path(get_latest_filename(files)).read_text())
        table = _lm_eval_table(loaded)
        model_dir = loaded["model_name"].split("/", 1)[1]
        for task, values in loaded["results"].items():
            rec = want[(model_dir, task)]
            seen.add((model_dir, task))
            assert "wobble,none" not in values
            for metric, value in rec["metrics"].items():
                assert values[f"{metric},none"] == pytest.approx(_per_one(metric, value), abs=1e-9)
                se = _per_one(metric, rec["standard_errors"][metric])
                assert values[f"{metric}_stderr,none"] == pytest.approx(se, abs=1e-9)
                assert table[(task, metric)] == (f"{_per_one(metric, value):.4f}", f"{se:.4f}")
                assert loaded["higher_is_better"][task][metric] == rec["metric_info"][metric]["higher_is_better"]
            n = rec["interval_method"]["queries"]
            assert loaded["n-samples"][task] == {"original": n, "effective": n}
            assert task in loaded["task_hashes"] and task in loaded["configs"]
    assert seen == set(want)
    assert _lm_eval_table(json.loads(next((tmp_path / "lm").glob("negharness__clip/*.json")).read_text()))[
        ("t1", "R@1")][0] == "0.6000"


def _eee_schema() -> dict:
    try:
        dist = metadata.distribution("every-eval-ever")
    except metadata.PackageNotFoundError:
        pytest.skip("every-eval-ever not installed (pip install --no-deps --ignore-requires-python every-eval-ever)")
    return json.loads(Path(dist.locate_file("every_eval_ever/schemas/eval.schema.json")).read_text())


def test_eee_round_trip_through_its_schema_validator_and_types(results, tmp_path):
    """Every Eval Ever declares each metric's unit and bounds: a score keeps the record's number and says
    its unit (percent in [0, 100], a proportion in [0, 1], a rank from 1 up), its interval and standard
    error in that unit, and the validator finds every score inside its bounds."""
    schema = _eee_schema()
    jsonschema = pytest.importorskip("jsonschema")
    from every_eval_ever.eval_types import EvaluationLog
    from every_eval_ever.validator.validation_core import validate_aggregate

    out = tmp_path / "eee"
    files = export(results, out, "eee", _published).files
    want = _records(results)
    kinds, seen = [], set()
    for path in files:
        repo_path = path.relative_to(out).as_posix()
        report = validate_aggregate(path, repo_path=repo_path, run_semantic_checks=True)
        assert report.valid and not report.warnings, (repo_path, report.errors, report.warnings)
        data = json.loads(path.read_text())
        jsonschema.validate(data, schema)
        log = EvaluationLog.model_validate(data)
        kind = data["source_metadata"]["source_type"]
        kinds.append(kind)
        for result, typed in zip(data["evaluation_results"], log.evaluation_results):
            task, metric = result["evaluation_result_id"].split("/")
            config = typed.metric_config
            assert (config.metric_unit, config.min_score, config.max_score) == EEE_UNITS[metric]
            assert config.score_type.value == "continuous"
            if kind == "documentation":
                assert (task, metric, typed.score_details.score) == ("t1", "R@1", 48.0)
                assert data["model_info"]["name"] == "CLIP ViT-B/32"
                continue
            rec = want[(data["model_info"]["id"].split("/", 1)[1], task)]
            seen.add((data["model_info"]["id"], metric))
            assert typed.score_details.score == pytest.approx(rec["metrics"][metric], abs=1e-9)
            u = typed.score_details.uncertainty
            assert [u.confidence_interval.lower, u.confidence_interval.upper] == pytest.approx(
                rec["intervals"][metric], abs=1e-9)
            assert u.standard_error.value == pytest.approx(rec["standard_errors"][metric], abs=1e-9)
            assert config.lower_is_better == (not rec["metric_info"][metric]["higher_is_better"])
    assert sorted(kinds) == ["documentation"] + ["evaluation_run"] * 4
    assert {m for _, m in seen} == {"R@1", "MIR", "MeanR", "accuracy", "add_att", "mean"}


def test_stable_uuid_is_a_version_4_uuid():
    import uuid

    value = uuid.UUID(stable_uuid("a", "b"))
    assert value.version == 4 and str(value) == stable_uuid("a", "b") != stable_uuid("a", "c")


# the record: what the formats need ------------------------------------------------------------------
def test_device_names_the_accelerator_and_the_processor(monkeypatch):
    import negharness.engine.runner as runner

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"NVIDIA H100 80GB HBM3 #{i}")
    assert device_name(torch.device("cuda")) == "cuda:0 (NVIDIA H100 80GB HBM3 #0)"
    assert device_name(torch.device("cuda:1")) == "cuda:1 (NVIDIA H100 80GB HBM3 #1)"
    monkeypatch.setattr(runner, "cpu_name", lambda: "AMD EPYC 7B13")
    assert device_name(torch.device("cpu")) == "cpu (AMD EPYC 7B13)"
    monkeypatch.setattr(runner, "cpu_name", lambda: None)
    assert device_name(torch.device("cpu")) == "cpu"


class _Config:
    _commit_hash = "c0ffee" * 6 + "c0ff"


class _HubModule(torch.nn.Module):
    config = _Config()


class _Model:
    revision = None

    def __init__(self, *modules):
        self._modules = list(modules)

    def modules(self):
        return self._modules


def test_model_revision_is_the_checkpoint_hash_else_the_hub_commit_else_a_named_folder():
    hub = _Model(_HubModule())
    assert model_revision(hub, {"--checkpoint": "ab12"}) == "ab12"  # the file's content wins
    assert model_revision(hub, {}) == _Config._commit_hash
    declared = _Model()
    declared.revision = "v2-commit"
    assert model_revision(declared, {"-M model": "f00d"}) == "v2-commit"
    assert model_revision(_Model(), {"-M model": "f00d", "--arch": "cfg"}) == "f00d"
    assert model_revision(_Model(), {"--arch": "cfg"}) is None  # a config file names no weights


def test_a_run_records_the_revision_and_the_device_by_name(tmp_path):
    import negharness
    from negharness.engine.runner import cpu_name

    [out] = negharness.run("shapes_clip", "shapes_t2i_original", limit=20, device="cpu", output_dir=str(tmp_path / "r"),
                           cache_dir=str(tmp_path / "c"))
    assert "revision" in out.record["model"]
    assert out.record["device"] == (f"cpu ({cpu_name()})" if cpu_name() else "cpu")


def test_an_open_clip_tag_records_the_hub_commit_its_weights_came_from(monkeypatch, tmp_path):
    from negharness.plugins import openclip_weights

    cached = tmp_path / "hub" / "models--timm--x" / "snapshots" / "5d2f1c" / "open_clip_model.safetensors"
    monkeypatch.setattr(openclip_weights, "cached_pretrained_file", lambda arch, tag: cached)
    assert openclip_weights.pretrained_revision("ViT-B-32", "openai") == "5d2f1c"
    monkeypatch.setattr(openclip_weights, "cached_pretrained_file", lambda arch, tag: None)
    assert openclip_weights.pretrained_revision("ViT-B-32", "openai") is None


def test_a_catalogue_name_a_record_declares_in_another_unit_is_left_aside(tmp_path):
    """A third-party task may write `accuracy` as a share of 1 (the board formats it `.2%`), or call a
    lower-is-better number by a catalogue name: the catalogue's percent would divide it by 100 once more
    (MTEB read 0.0083 for 83%). The record's own declaration is checked against the catalogue's first."""
    model = ModelConfig("m", {})
    share = [1.0 if i % 5 else 0.0 for i in range(200)]  # 0.8 as a share of 1
    write_fake_record(tmp_path, model, "shares", {"accuracy": share, "R@1": _hits(0.5)}, main="R@1", fmt=".2%")
    write_fake_record(tmp_path, model, "lower", {"R@1": _hits(0.5), "accuracy": _hits(0.2)}, lower_is_better=["accuracy"])
    done = export(tmp_path, tmp_path / "out", "mteb")
    said = sorted(s.split("/")[-1] for s in done.left_aside)
    assert [s.split(" (")[0] for s in said] == ["lower.json: metric accuracy left out", "shares.json"], said
    assert "main score R@1: its unit is not in negharness' metric catalogue, or the record declares it" in said[1]
