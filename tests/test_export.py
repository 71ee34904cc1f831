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

from negharness.api import UserError
from negharness.engine.reuse import model_revision
from negharness.engine.devices import device_name
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
    import negharness.engine.devices as devices

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: f"NVIDIA H100 80GB HBM3 #{i}")
    assert device_name(torch.device("cuda")) == "cuda:0 (NVIDIA H100 80GB HBM3 #0)"
    assert device_name(torch.device("cuda:1")) == "cuda:1 (NVIDIA H100 80GB HBM3 #1)"
    monkeypatch.setattr(devices, "cpu_name", lambda: "AMD EPYC 7B13")
    assert device_name(torch.device("cpu")) == "cpu (AMD EPYC 7B13)"
    monkeypatch.setattr(devices, "cpu_name", lambda: None)
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
    from negharness.engine.devices import cpu_name

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


def test_a_catalogue_name_a_record_declares_in_the_other_direction_is_left_aside(tmp_path):
    """A lower-is-better number under a catalogue name is another quantity: no format can say its unit."""
    model = ModelConfig("m", {})
    write_fake_record(tmp_path, model, "lower", {"R@1": _hits(0.5), "accuracy": _hits(0.2)},
                      lower_is_better=["accuracy"])
    done = export(tmp_path, tmp_path / "out", "mteb")
    assert [s.split("/")[-1].split(" (")[0] for s in done.left_aside] == ["lower.json: metric accuracy left out"]


# a metric's unit is the record's declaration ---------------------------------------------------------
SHARE = [1.0 if i % 3 else 0.0 for i in range(200)]  # a third-party task's accuracy: 0.665 as a share of 1


def _exported(root: Path, out: Path, task: str, metric: str) -> dict[str, tuple]:
    """format -> (value, interval's bounds, standard error) of one record's metric as each format's file
    holds it (lm-eval keeps no interval), and EEE's unit and bounds for it."""
    got = {}
    export(root, out / "mteb", "mteb")
    [mteb_file] = (out / "mteb").glob(f"*/*/{task}.json")
    [scores] = json.loads(mteb_file.read_text())["scores"]["test"]
    assert scores["main_score"] == scores[metric]
    got["mteb"] = (scores[metric], *scores["confidence_interval_95"][metric], scores["standard_error"][metric])
    export(root, out / "lm", "lm-eval")
    [lm_file] = (out / "lm").glob("*/results_*.json")
    values = json.loads(lm_file.read_text())["results"][task]
    got["lm-eval"] = (values[f"{metric},none"], values[f"{metric}_stderr,none"])
    for path in export(root, out / "eee", "eee").files:
        for result in json.loads(path.read_text())["evaluation_results"]:
            if result["evaluation_result_id"] == f"{task}/{metric}":
                c, u = result["metric_config"], result["score_details"]["uncertainty"]
                got["eee"] = (result["score_details"]["score"], u["confidence_interval"]["lower"],
                              u["confidence_interval"]["upper"], u["standard_error"]["value"])
                got["eee unit"] = (c["metric_unit"], c["min_score"], c["max_score"])
    return got


@pytest.mark.parametrize("fmt", [".3f", ".2%"])
def test_a_share_of_one_a_record_declares_is_exported_as_that_share_in_every_format(tmp_path, fmt):
    """A third-party task's ``accuracy`` written as a share of 1 (``.3f``, MetricInfo's default and the
    lm-eval/sklearn convention, or ``.2%``) was read by the catalogue's name as a percent: MTEB and lm-eval
    got 0.00665, Every Eval Ever 0.665 labelled percent (``.2%`` records were left aside). Each format now
    holds 0.665, its interval and standard error alike, and EEE says it is a proportion in [0, 1]; a
    percent (R@1 ``.1f``) beside it is still divided by 100."""
    from negharness.discovery.manager import make_host
    from negharness.scoring import catalog

    root = tmp_path / "results"
    path = write_fake_record(root, ModelConfig("m", {}), "third", {"accuracy": SHARE}, fmt=fmt)
    rec = json.loads(path.read_text())
    value, iv, se = rec["metrics"]["accuracy"], rec["intervals"]["accuracy"], rec["standard_errors"]["accuracy"]
    assert value == pytest.approx(0.665)
    got = _exported(root, tmp_path / "out", "third", "accuracy")
    assert got["mteb"] == pytest.approx((value, *iv, se), abs=1e-12)
    assert got["lm-eval"] == pytest.approx((value, se), abs=1e-12)
    assert got["eee"] == pytest.approx((value, *iv, se), abs=1e-12)
    assert got["eee unit"] == ("proportion", 0.0, 1.0)
    paper = PublishedRow("Paper 2025", "Table 1", "CLIP", "clip", "", (), "third", "accuracy", 70.0, "70.0", "",
                         "t.csv", 2)
    docs = [json.loads(f.read_text()) for f in export(root, tmp_path / "papers", "eee", lambda task: [paper]).files]
    [doc] = [d for d in docs if d["source_metadata"]["source_type"] == "documentation"]
    assert doc["evaluation_results"][0]["metric_config"]["metric_unit"] == "percent"  # the paper's: the catalogue's
    percent = write_fake_record(tmp_path / "pct", ModelConfig("m", {}), "t1", {"R@1": _hits(0.6)})  # fmt .1f
    assert _exported(percent.parent.parent, tmp_path / "out_pct", "t1", "R@1")["mteb"][0] == pytest.approx(0.6)
    # every built-in task's own declaration keeps the catalogue's unit (its percents are .1f / .2f)
    for entry in make_host().registry.entries("task"):
        cls = entry.load()
        members = getattr(cls, "members", ())
        for name, info in cls.metric_info.items():
            declared = {"fmt": info.fmt, "higher_is_better": info.higher_is_better}
            assert catalog.record_scale(name, declared, members) == catalog.scale_of(name, members), (entry.name, name)


# nothing leaves OUT ------------------------------------------------------------------------------------
def _files_under(root: Path) -> set[Path]:
    """Every file under ``root``, links not followed (what a write anywhere in the tree would add)."""
    import os

    return {Path(d) / f for d, _, files in os.walk(root) for f in files}


def _unsafe(root: Path) -> Path:
    """A record whose revision, task name and family are paths leading up out of OUT."""
    path = write_fake_record(root, ModelConfig("m", {}), "t1", {"R@1": _hits(0.6)})
    rec = json.loads(path.read_text())
    rec["model"]["revision"] = "../../../elsewhere"
    rec["task"].update(name="t1/../../../../../escaped", family="../../../fam")
    path.write_text(json.dumps(rec))
    return path


def test_a_record_naming_a_path_writes_nothing_outside_out_even_past_the_check(tmp_path, monkeypatch):
    """MTEB's folder was ``<revision>/<task>.json`` from the record: a revision ``../../../elsewhere`` put
    ``model_meta.json`` outside OUT. Past the checked reader (as if it missed a field), every format
    still keeps every file inside OUT: each path part from a record is one plain name. (OUT is deep
    enough that the old code's escapes stayed inside tmp_path, where this test looks.)"""
    import negharness.records.export.common as common

    root = tmp_path / "results"
    _unsafe(root)
    monkeypatch.setattr(common, "checked_records",
                        lambda d: ((p, json.loads(p.read_text())) for p in sorted(Path(d).glob("*/t1.json"))))
    for fmt in ("mteb", "lm-eval", "eee"):
        before = _files_under(tmp_path)
        out = tmp_path / "a" / "b" / "c" / "d" / "e" / fmt
        files = export(root, out, fmt).files
        added = _files_under(tmp_path) - before
        assert added and all(f.is_relative_to(out) for f in added), (fmt, sorted(added))
        assert set(files) == added


def test_check_refuses_a_revision_or_task_name_that_is_a_path_and_export_writes_nothing(tmp_path, cli):
    from negharness.report.check import invalid_records

    root = tmp_path / "results"
    path = write_fake_record(root, ModelConfig("m", {}), "t1", {"R@1": _hits(0.6)})
    for field, value in (("model.revision", "../../../elsewhere"), ("task.name", "t1/../../x"),
                         ("model.revision", "refs/pr/3"), ("model.revision", "..")):
        good = path.read_text()
        rec = json.loads(good)
        holder, key = field.split(".")
        rec[holder][key] = value
        path.write_text(json.dumps(rec))
        found = invalid_records(root)
        assert len(found) == 1 and found[0].startswith(f"{path}: field {field!r} {value!r}: names are"), found
        before = _files_under(tmp_path)
        for fmt in ("mteb", "lm-eval", "eee"):
            with pytest.raises(UserError, match=f"{path}: field '{field}'"):
                export(root, tmp_path / "a" / "b" / "out", fmt)
        assert _files_under(tmp_path) == before
        path.write_text(good)
    res = cli("leaderboard", "--results-dir", str(root), "--out", str(tmp_path / "board.md"), "--check")
    assert "model.revision" not in res.stdout + res.stderr  # the record restored, a null revision passes
    rec = json.loads(path.read_text())
    rec["model"]["revision"] = "../../../elsewhere"
    path.write_text(json.dumps(rec))
    res = cli("leaderboard", "--results-dir", str(root), "--out", str(tmp_path / "board.md"), "--check")
    assert res.returncode == 1 and f"{path}: field 'model.revision'" in res.stdout, res.stdout + res.stderr


def test_a_link_inside_out_that_leads_out_refuses_the_export_naming_the_record(tmp_path):
    """The last guard: every file is checked to resolve inside OUT before any is written."""
    root = tmp_path / "results"
    path = write_fake_record(root, ModelConfig("m", {}), "t1", {"R@1": _hits(0.6)})
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    out.mkdir()
    (out / "negharness__m").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UserError, match=f"{path}: export file .* outside OUT"):
        export(root, out, "lm-eval")
    assert list(elsewhere.iterdir()) == []


def test_a_unit_the_record_declares_is_the_unit_of_its_number(tmp_path):
    """`MetricInfo(unit=...)`: a task says its numbers are percents or shares of 1 outright, and every format
    follows it: a catalogue percent (``accuracy``) declared a share even printed ``.1f``; a name the catalogue
    does not know (once left out of every format, no unit vouched for) exported in the unit it declares; a
    quantity that is neither (a mean rank) declared a percent is left out, never mislabelled."""
    from negharness.scoring import catalog

    root = tmp_path / "results"
    write_fake_record(root, ModelConfig("m", {}), "third", {"accuracy": SHARE}, unit="share")  # fmt .1f
    got = _exported(root, tmp_path / "out", "third", "accuracy")
    assert got["mteb"][0] == pytest.approx(0.665) and got["eee unit"] == ("proportion", 0.0, 1.0)
    own = tmp_path / "own"
    write_fake_record(own, ModelConfig("m", {}), "own", {"neg_precision_custom": [100.0 * v for v in SHARE]},
                      unit="percent")
    got = _exported(own, tmp_path / "out_own", "own", "neg_precision_custom")
    assert got["mteb"][0] == pytest.approx(0.665) and got["eee"][0] == pytest.approx(66.5)
    assert got["eee unit"] == ("percent", 0.0, 100.0)
    assert catalog.record_scale("neg_precision_custom", {"fmt": ".3f"}) is None  # no unit declared: none vouched
    assert catalog.record_scale("MeanR", {"fmt": ".1f", "higher_is_better": False, "unit": "percent"}) is None
    assert catalog.record_scale("R@1", {"fmt": ".3f", "unit": "percent"}) == catalog.PERCENT  # the unit over the fmt


def test_a_unit_outside_percent_and_share_is_refused_where_it_is_declared(tmp_path):
    from negharness.api import MetricInfo
    from negharness.contracts.task import TaskDefinitionError, TaskMeta
    from negharness.records.check import RecordError, load_checked

    meta = TaskMeta(name="t", family="f", version="1", description="", modalities=frozenset({"image", "text"}),
                    main_score="acc", metrics={"acc": MetricInfo(unit="fraction")}, leaderboard_metrics=("acc",),
                    options={})
    with pytest.raises(TaskDefinitionError, match=r"metric_info\['acc'\].unit 'fraction' must be one of percent, share"):
        meta.validate("task 't'")
    path = write_fake_record(tmp_path, ModelConfig("m", {}), "third", {"accuracy": SHARE}, unit="fraction")
    with pytest.raises(RecordError, match="metric_info.accuracy.unit"):
        load_checked(path)
