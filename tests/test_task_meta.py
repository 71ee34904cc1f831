"""Typed task metadata, the one option parser, the hook API version and host isolation."""

from __future__ import annotations

import types

import pytest

from negharness.api import UserError
from negharness.api import OptionSpec, parse_bool, parse_options
from negharness.api import (
    MetricInfo,
    Task,
    TaskDefinitionError,
    TaskOptions,
    TaskResult,
)


class _Good(Task):
    name = "good_task"
    family = "test"
    modalities = frozenset({"text", "image"})
    main_score = "acc"
    metric_info = {"acc": MetricInfo(True, ".1f")}
    leaderboard_metrics = ("acc",)
    task_options = {"n": OptionSpec(int, 5, "items", minimum=1), "fast": OptionSpec(bool, False, changes_numbers=False)}

    def evaluate(self, ctx):
        return TaskResult({"acc": 1.0}, {"n": self.opts["n"]})


def test_valid_metadata_and_typed_options(tmp_path):
    task = _Good(TaskOptions(tmp_path, extra={"n": "7", "fast": "yes"}))
    assert task.meta.validate("here").main_score == "acc"
    assert task.opts == {"n": 7, "fast": True}
    assert task.config()["n"] == 7 and "fast" not in task.config()  # speed knobs leave the config alone


@pytest.mark.parametrize("attrs, message", [
    ({"main_score": "recall"}, "main_score 'recall' is not in metric_info"),
    ({"leaderboard_metrics": ("acc", "mAP")}, "leaderboard metric 'mAP'"),
    ({"modalities": frozenset({"text", "audio"})}, "modalities"),
    ({"metric_info": {"acc": (True, ".1f")}}, "not a MetricInfo"),
    ({"name": "bad name*"}, "glob character"),
    ({"task_options": {"n": 5}}, "not an OptionSpec"),
])
def test_each_metadata_mistake_is_named(tmp_path, attrs, message):
    bad = type("Bad", (_Good,), attrs)
    with pytest.raises(TaskDefinitionError, match=message):
        bad(TaskOptions(tmp_path)).meta.validate("task 'bad' from plugin 'p'")


def test_option_errors_name_flag_key_and_owner():
    specs = {"n_items": OptionSpec(int, 1), "build": OptionSpec(bool, False)}
    with pytest.raises(UserError, match=r"-T n_itmes: not an option of task 'x'; did you mean n_items\?"):
        parse_options({"n_itmes": "50"}, specs, "-T", "task 'x'")
    with pytest.raises(UserError, match=r"-T n_items=many \(task 'x'\): expected int"):
        parse_options({"n_items": "many"}, specs, "-T", "task 'x'")
    with pytest.raises(UserError, match="expected true or false"):
        parse_options({"build": "maybe"}, specs, "-T", "task 'x'")
    assert [parse_bool(v) for v in ("On", "1", "YES", "false", "0", "off")] == [True] * 3 + [False] * 3


def test_undeclared_metric_is_refused(tmp_path):
    from negharness.api import check_result

    task = _Good(TaskOptions(tmp_path))
    with pytest.raises(TaskDefinitionError, match="from plugin 'p' returned metric 'R@1'"):
        check_result(task, TaskResult({"acc": 1.0, "R@1": 3.0}, {}), "p")


def test_unknown_task_option_in_a_run_is_an_error(cli):
    res = cli("run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "-T", "n_itmes=50")
    assert res.returncode == 2 and "-T n_itmes" in res.stderr and "n_items" in res.stderr
    assert "Traceback" not in res.stderr


def _host_with(plugin, name):
    from negharness.discovery.manager import PluginHost

    host = PluginHost()
    host.register(plugin, name)
    return host


def test_hook_api_mismatch_and_misspelt_hooks_are_reported_by_plugin():
    from negharness import HOOK_API
    from negharness.discovery.hookspecs import hookimpl

    @hookimpl
    def negharness_register_models(registry):
        registry.add("m", "x:y")

    future = types.SimpleNamespace(NEGHARNESS_HOOK_API=HOOK_API + 1, negharness_register_models=negharness_register_models)
    host = _host_with(future, "future")
    assert host.failures()[0].name == "future" and "upgrade negharness" in host.failures()[0].error

    @hookimpl
    def negharness_register_modles(registry):
        pass

    host = _host_with(types.SimpleNamespace(negharness_register_modles=negharness_register_modles), "typo")
    assert [f.name for f in host.failures()] == ["typo"] and "negharness_register_modles" in host.failures()[0].error

    @hookimpl
    def negharness_register_tasks(registri):  # misspelt argument: pluggy refuses it at register
        pass

    host = _host_with(types.SimpleNamespace(negharness_register_tasks=negharness_register_tasks), "badarg")
    assert host.failures()[0].name == "badarg" and "registri" in host.failures()[0].error
    assert host.registry.names("task") == []  # the rest of the host still builds


def test_factory_returning_the_wrong_type_names_plugin_and_entry(tmp_path):
    from negharness.api import ModelOptions
    from negharness.discovery.lookup import PluginLookup
    from negharness.discovery.registry import Registry

    reg = Registry()
    reg.add("model", "notamodel", lambda options: object(), "", "someplugin")
    with pytest.raises(UserError, match="model 'notamodel' from plugin 'someplugin'.*not a negharness.api.EmbeddingModel"):
        PluginLookup(reg).create("model", "notamodel", ModelOptions())


@pytest.mark.parametrize("metrics, got", [({}, "no such metric"), ({"acc": None}, "None"),
                                          ({"acc": float("nan")}, "nan")])
def test_a_result_without_its_main_score_as_a_number_is_refused(tmp_path, metrics, got):
    """Old code wrote the record with ``main_score: {value: null}`` and exited 0."""
    from negharness.api import check_result

    task = _Good(TaskOptions(tmp_path))
    with pytest.raises(TaskDefinitionError, match=rf"task 'good_task' from plugin 'p': its main score 'acc' is not "
                                                  rf"a finite number in the result \({got}"):
        check_result(task, TaskResult(metrics, {}), "p")


def test_a_run_whose_task_lacks_its_main_score_writes_no_record(tmp_path):
    from negharness.discovery.hookspecs import hookimpl
    from negharness.engine.evaluate import RunRequest, evaluate_request
    from negharness.testing import host_with_models, keyword_model

    class NoMain(_Good):
        name = "no_main"
        metric_info = {"acc": MetricInfo(True, ".1f"), "other": MetricInfo(True, ".1f")}

        def evaluate(self, ctx):
            return TaskResult({"other": 1.0}, {"n": 1})

    @hookimpl
    def negharness_register_tasks(registry):
        registry.add("no_main", NoMain, "no main score", family="test")

    host = host_with_models({"kw": keyword_model})
    host.register(types.SimpleNamespace(negharness_register_tasks=negharness_register_tasks), "nomainplugin")
    req = RunRequest(model="kw", tasks=["no_main"], data_root=str(tmp_path), output_dir=str(tmp_path / "res"),
                     cache_dir=str(tmp_path / "c"))
    with pytest.raises(TaskDefinitionError, match="task 'no_main' from plugin 'nomainplugin': its main score 'acc'"):
        evaluate_request(host, req)
    assert not list((tmp_path / "res").rglob("*.json"))


def test_every_builtin_task_declares_its_cluster():
    """Issue 37: queries on one image, video or source item resample together; each built-in task
    says which (or "row": each query its own), and the name passes the metadata check."""
    from negharness.api import cluster_problems
    from negharness.discovery.manager import make_host

    declared = {e.name: getattr(e.load(), "cluster", None) for e in make_host().registry.entries("task")}
    assert all(cluster_problems(c) == [] for c in declared.values())
    want = {"negbench_mcq_coco": "image", "negbench_retrieval_coco": "image", "msrvtt3k_original": "video",
            "msrvtt3k_negated": "video", "msrvtt3k_composed": "row", "sugarcrepe_add_att": "image",
            "sugarcrepe_mean": "image", "aro_vg_relation": "image", "valse_existence": "image",
            "crepe_negate": "image", "nein_val": "source image", "nein_shapes": "source image",
            "shapes_t2v_original": "video", "shapes_t2v_negated": "video", "shapes_t2i_original": "image",
            "shapes_mcq": "image", "shapes_t2v_composed": "row", "negrefcocog": "image",
            "sugarcrepepp_swap_obj_itt": "image", "sugarcrepepp_swap_obj_tot": "image"}
    assert {k: declared.get(k) for k in want} == want


@pytest.mark.parametrize("cluster", ["", "   ", "x" * 41, "image\nvideo", 3])
def test_a_malformed_cluster_is_named(tmp_path, cluster):
    bad = type("Bad", (_Good,), {"cluster": cluster})
    with pytest.raises(TaskDefinitionError, match="cluster .* must be a short printable name"):
        bad(TaskOptions(tmp_path)).meta.validate("here")
