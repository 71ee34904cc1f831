"""`negharness export`: records in MTEB's, lm-eval's and Every Eval Ever's layouts, each read back by
the peer tool's own loader or validator where it is installed (the `peers` extra; EEE needs Python
3.12, so CI installs its package without its dependencies to read its schema and run its validator),
and the numbers equal; and the record fields those formats need (model revision, accelerator name)."""

import json
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


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """Two models on t1 (one with a revision), one on t2, a --limit run and a seed variant beside."""
    root = tmp_path / "results"
    path = write_fake_record(root, A, "t1", {"R@1": _hits(0.6), "MeanR": [3.0] * 100 + [4.0] * 100},
                             lower_is_better=["MeanR"], family="fam")
    rec = json.loads(path.read_text())
    rec["model"]["revision"] = "0123456789abcdef0123456789abcdef01234567"
    path.write_text(json.dumps(rec))
    write_fake_record(root, B, "t1", {"R@1": _hits(0.4), "MeanR": [5.0] * 200}, lower_is_better=["MeanR"],
                      family="fam", created="2026-01-02T00:00:00+00:00")
    write_fake_record(root, A, "t2", {"acc": _hits(0.3)}, family="other")
    write_fake_record(root, A, "t2", {"acc": _hits(0.9)}, family="other", limit=10, variant={"limit": 10})
    write_fake_record(root, A, "t2", {"acc": _hits(0.5)}, family="other", variant={"seed": 1})
    return root


def _records(root: Path) -> dict[tuple[str, str], dict]:
    """(model folder, task) -> record, of the records an export takes."""
    out = {}
    for p in sorted(root.glob("*/*.json")):
        rec = json.loads(p.read_text())
        if not p.name.endswith(".perquery.json") and not rec.get("limited") and not rec.get("variant_label"):
            out[(p.parent.name, rec["task"]["name"])] = rec
    return out


PAPER_ROW = PublishedRow("Paper 2025", "Table 2", "CLIP ViT-B/32", "clip", "", (), "t1", "R@1", 48.0, "48.0",
                         "", "tables.csv", 3)


def _published(task: str) -> list[PublishedRow]:
    return [PAPER_ROW] if task == "t1" else []


def test_export_leaves_aside_limit_and_variant_runs_and_refuses_an_empty_folder(results, tmp_path):
    done = export(results, tmp_path / "out", "eee", _published)
    assert len(done.left_aside) == 2 and any("--limit" in s for s in done.left_aside)
    assert any("variant seed=1" in s for s in done.left_aside)
    assert len(done.files) == 4  # three runs and the paper's row
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
    proc = cli("export", "--format", "mteb", str(tmp_path / "missing"), str(tmp_path / "m"))
    assert proc.returncode == 2 and "RESULTS_DIR" in proc.stderr and "no such folder" in proc.stderr


def test_mteb_round_trip_through_mtebs_own_result_cache(results, tmp_path):
    pytest.importorskip("mteb", reason="mteb not installed (pip install -e '.[peers]')")
    from mteb.cache import ResultCache
    from mteb.models.model_meta import ModelMeta

    export(results, tmp_path / "mteb" / "results", "mteb")
    loaded = ResultCache(cache_path=tmp_path / "mteb").load_results(include_remote=False)
    want = _records(results)
    got = {}
    for model in loaded:
        for task in model.task_results:
            got[(model.model_name.split("/", 1)[1], task.task_name)] = (model.model_revision, task)
    assert set(got) == set(want)
    for key, rec in want.items():
        revision, task = got[key]
        assert revision == (rec["model"].get("revision") or "no_revision_available")
        assert task.get_score() == pytest.approx(rec["main_score"]["value"], abs=1e-6)
        [scores] = task.scores["test"]
        for metric, value in rec["metrics"].items():
            assert scores[metric] == pytest.approx(value, abs=1e-6)
            assert scores["confidence_interval_95"][metric] == pytest.approx(rec["intervals"][metric], abs=1e-6)
    for meta in (tmp_path / "mteb" / "results").glob("*/*/model_meta.json"):
        assert ModelMeta.model_validate_json_resolved(meta.read_text()).name.startswith("negharness/")


def test_lm_eval_round_trip_through_lm_evals_result_schema(results, tmp_path):
    pytest.importorskip("lm_eval", reason="lm-eval not installed (pip install -e '.[peers]')")
    from lm_eval.result_schema import EvalResults
    from lm_eval.utils import get_latest_filename, get_results_filenames
    from pydantic import TypeAdapter

    export(results, tmp_path / "lm", "lm-eval")
    want = _records(results)
    for folder in sorted((tmp_path / "lm").iterdir()):
        files = get_results_filenames([str(p) for p in folder.iterdir()])
        loaded = TypeAdapter(EvalResults).validate_json(Path(get_latest_filename(files)).read_text())
        model_dir = loaded["model_name"].split("/", 1)[1]
        for task, values in loaded["results"].items():
            rec = want[(model_dir, task)]
            for metric, value in rec["metrics"].items():
                assert values[f"{metric},none"] == pytest.approx(value, abs=1e-9)
                assert loaded["higher_is_better"][task][metric] == rec["metric_info"][metric]["higher_is_better"]
            n = rec["interval_method"]["queries"]
            assert loaded["n-samples"][task] == {"original": n, "effective": n}
            assert task in loaded["task_hashes"] and task in loaded["configs"]


def _eee_schema() -> dict:
    try:
        dist = metadata.distribution("every-eval-ever")
    except metadata.PackageNotFoundError:
        pytest.skip("every-eval-ever not installed (pip install --no-deps --ignore-requires-python every-eval-ever)")
    return json.loads(Path(dist.locate_file("every_eval_ever/schemas/eval.schema.json")).read_text())


def test_eee_round_trip_through_its_schema_and_validator(results, tmp_path):
    schema = _eee_schema()
    jsonschema = pytest.importorskip("jsonschema")
    from every_eval_ever.validator.validation_core import validate_aggregate

    out = tmp_path / "eee"
    files = export(results, out, "eee", _published).files
    want = _records(results)
    kinds = []
    for path in files:
        repo_path = path.relative_to(out).as_posix()
        report = validate_aggregate(path, repo_path=repo_path, run_semantic_checks=True)
        assert report.valid and not report.warnings, (repo_path, report.errors, report.warnings)
        data = json.loads(path.read_text())
        jsonschema.validate(data, schema)
        kind = data["source_metadata"]["source_type"]
        kinds.append(kind)
        for result in data["evaluation_results"]:
            task, metric = result["evaluation_result_id"].split("/")
            score = result["score_details"]
            if kind == "documentation":
                assert (task, metric, score["score"]) == ("t1", "R@1", 48.0)
                assert data["model_info"]["name"] == "CLIP ViT-B/32"
                continue
            rec = want[(data["model_info"]["id"].split("/", 1)[1], task)]
            assert score["score"] == pytest.approx(rec["metrics"][metric], abs=1e-9)
            ci = score["uncertainty"]["confidence_interval"]
            assert [ci["lower"], ci["upper"]] == pytest.approx(rec["intervals"][metric], abs=1e-9)
            assert result["metric_config"]["lower_is_better"] == (not rec["metric_info"][metric]["higher_is_better"])
    assert sorted(kinds) == ["documentation"] + ["evaluation_run"] * 3


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
    from negharness.plugins import openclip_model

    cached = tmp_path / "hub" / "models--timm--x" / "snapshots" / "5d2f1c" / "open_clip_model.safetensors"
    monkeypatch.setattr(openclip_model, "cached_pretrained_file", lambda arch, tag: cached)
    assert openclip_model.pretrained_revision("ViT-B-32", "openai") == "5d2f1c"
    monkeypatch.setattr(openclip_model, "cached_pretrained_file", lambda arch, tag: None)
    assert openclip_model.pretrained_revision("ViT-B-32", "openai") is None
