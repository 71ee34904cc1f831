"""Plugin discovery through real entry points (dist-info folders on sys.path), failures, duplicates, blocking."""

import json

import pytest
import torch

from negharness.api import DuplicateNameError, UnknownNameError, UserError
from negharness.api import EmbeddingModel, ModelOptions
from negharness.api import lookalikes
from negharness.discovery.manager import make_host
from negharness.discovery.registry import KINDS, Registry


def test_third_party_plugin_is_listed_and_runs(cli, tmp_path):
    listed = cli("list", plugins=("good",))
    assert listed.returncode == 0, listed.stderr
    assert "mean_colour" in listed.stdout and "example_colours" in listed.stdout
    assert "example" in listed.stdout  # the plugin name is shown beside its entries
    ran = cli("run", "--model", "mean_colour", "--task", "example_colours", plugins=("good",))
    assert ran.returncode == 0, ran.stderr
    record = json.loads((tmp_path / "results" / "mean_colour" / "example_colours.json").read_text())
    assert record["metrics"]["R@1"] == 100.0
    assert record["task"]["plugin"] == "negharness-example" and record["model"]["plugin"] == "negharness-example"
    assert record["versions"]["plugins"]["negharness-example"] == "0.1"


def test_broken_plugin_is_reported_and_others_keep_working(cli):
    res = cli("list", plugins=("broken", "good"))
    assert res.returncode == 0
    assert "broken" in res.stderr and "broken on purpose" in res.stderr
    assert "mean_colour" in res.stdout and "shapes_clip" in res.stdout


def test_strict_mode_turns_a_broken_plugin_into_an_error(cli):
    res = cli("--strict-plugins", "list", plugins=("broken",))
    assert res.returncode == 2
    assert "plugin 'broken'" in res.stderr and "Traceback" not in res.stderr
    env_strict = cli("list", plugins=("broken",), env={"NEGHARNESS_STRICT_PLUGINS": "1"})
    assert env_strict.returncode == 2


def test_blocking_a_plugin_by_name(cli):
    res = cli("-p", "no:broken", "-p", "no:negharness-example", "list", plugins=("broken", "good"))
    assert res.returncode == 0
    assert "broken on purpose" not in res.stderr and "mean_colour" not in res.stdout
    assert "plugin broken: blocked" in res.stdout


def test_duplicate_names_are_an_error_naming_both_plugins(cli):
    """Only a command that uses the name fails (naming both plugins and the fix); `list` shows both
    entries and the fix; runs of other models keep working; blocking one plugin resolves it."""
    listed = cli("list", plugins=("duplicate",))
    assert listed.returncode == 0, listed.stderr
    clip_rows = [line for line in listed.stdout.splitlines() if line.strip("│ ").startswith("clip (duplicate)")]
    assert len(clip_rows) == 2 and any("builtin_models" in r for r in clip_rows) and any("dup" in r for r in clip_rows)
    assert "-p no:dup" in listed.stdout
    used = cli("run", "--model", "clip", "--task", "shapes_t2i_original", plugins=("duplicate",))
    assert used.returncode == 2 and "Traceback" not in used.stderr
    assert "'builtin_models'" in used.stderr and "'dup'" in used.stderr and "-p no:" in used.stderr
    other = cli("run", "--model", "shapes_clip", "--task", "shapes_t2i_original", "--limit", "8", plugins=("duplicate",))
    assert other.returncode == 0, other.stderr
    unblocked = cli("-p", "no:dup", "list", plugins=("duplicate",))
    assert unblocked.returncode == 0 and "(duplicate)" not in unblocked.stdout


def test_registry_duplicate_message_is_independent_of_order():
    messages = []
    for order in (("a", "b"), ("b", "a")):
        reg = Registry()
        reg.add("model", "m", "x:y", "", order[0])
        reg.add("model", "m", "x:y", "", order[1])
        reg.add("model", "other", "x:z", "", order[1])
        assert reg.get("model", "other").plugin == order[1]  # unrelated names still resolve
        assert [e.plugin for e in reg.entries("model") if e.name == "m"] == list(order)
        with pytest.raises(DuplicateNameError) as exc:
            reg.get("model", "m")
        with pytest.raises(DuplicateNameError):
            reg.match("model", "m*")
        messages.append(str(exc.value))
    assert messages[0] == messages[1] and "'a' and 'b'" in messages[0]


def test_look_alike_and_unsafe_names_are_refused_at_registration_naming_the_plugin():
    """A Greek omicron in a task name registered a second task with the same title (round 4, item 3)."""
    reg = Registry()
    reg.add("task", "negbench_mcq_coco", "x:y", "", "builtin")
    for name in ("negbench_mcq_c\u03bfco", "clip\uff21", "a\u200bb", "-model", "../up", "a b", "", "x" * 200):
        with pytest.raises(UserError, match=r"plugin 'sneaky': invalid task name") as err:
            reg.add("task", name, "x:y", "", "sneaky")
        assert "ASCII" in str(err.value)
    assert "U+03BF GREEK SMALL LETTER OMICRON" in _refusal(reg, "negbench_mcq_c\u03bfco")
    assert reg.names("task") == ["negbench_mcq_coco"]
    assert lookalikes("clip (checkpoint=/data/\u043c\u043e\u0434\u0435\u043b\u0438/x.pt)") == []  # a Cyrillic folder
    assert lookalikes("clip (arch=ViT-\u0392-32)") and lookalikes("cl\u0456p") and lookalikes("clip\uff21")
    host = make_host()  # every built-in name passes the rule: no built-in plugin fails to register
    assert not host.failures() and all(host.registry.names(kind) for kind in KINDS)


def _refusal(reg: Registry, name: str) -> str:
    with pytest.raises(UserError) as err:
        reg.add("task", name, "x:y", "", "sneaky")
    return str(err.value)


def test_unknown_names_suggest_close_matches_and_globs_match():
    reg = Registry()
    for name in ("msrvtt3k_original", "msrvtt3k_negated", "msrvtt3k_composed", "vatex_original"):
        reg.add("task", name, "x:y", "", "p")
    with pytest.raises(UnknownNameError, match="did you mean msrvtt3k_negated"):
        reg.get("task", "msrvtt3k_negatd")
    assert [e.name for e in reg.match("task", "msrvtt3k_*")] == [
        "msrvtt3k_composed", "msrvtt3k_negated", "msrvtt3k_original"]
    assert [e.name for e in reg.match("task", "*_original")] == ["msrvtt3k_original", "vatex_original"]
    with pytest.raises(UnknownNameError, match="no task matches"):
        reg.match("task", "coco_*")


def test_list_shows_each_plugins_options(cli):
    """-M options of models, -T of tasks, -O of trainers, read from what each declares."""
    out = cli("list").stdout
    assert "-M options" in out and "quick_gelu=bool" in out and "base=str" in out
    assert "-T options" in out and "n_items=int" in out and "build=bool" in out
    assert "-O options" in out and "lambda_v=float" in out


def test_list_brief_does_not_import_torch():
    import subprocess
    import sys

    code = ("import sys; from negharness.cli.main import main; main(['list', '--brief']); "
            "print('TORCH' if 'torch' in sys.modules else 'NO_TORCH')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("NO_TORCH")


def test_wrapper_plugins_resolve_names_through_the_runs_host(tmp_path):
    """--model boolean -M base=kw finds a model that only this run's host has (not a fresh host)."""
    from negharness.engine.evaluate import RunRequest, evaluate_request
    from negharness.testing import host_with_models, keyword_model

    req = RunRequest(model="boolean", model_options=ModelOptions(extra={"base": "kw"}), tasks=["shapes_t2i_original"],
                     limit=5, output_dir=str(tmp_path / "res"), use_cache=False)
    record = evaluate_request(host_with_models({"kw": keyword_model}), req)[0].record
    assert record["model"]["label"] == "boolean (base=kw)"
    from negharness.api import UserError, installed_plugins
    from negharness.plugins.boolean_model import boolean

    with pytest.raises(UnknownNameError, match="kw"):  # outside a run: the installed plugins, given
        boolean(ModelOptions(extra={"base": "kw"}, plugins=installed_plugins()))
    with pytest.raises(UserError, match="installed_plugins"):  # and never a silent fallback to them
        boolean(ModelOptions(extra={"base": "kw"}))


def test_readme_plugin_example_is_the_tested_plugin_installs_and_passes_the_leaderboard_check(tmp_path):
    """The plugin guide's code blocks (docs/guides/plugins.md) are the files under tests/thirdparty/good, and its pyproject.toml
    installs (offline, no build isolation) into a folder where `negharness list` finds the plugin;
    run as installed, its records carry per-query values and intervals, so the CI gate
    (`leaderboard --check`) accepts them (it used to reject them: no per-query sidecar)."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    from conftest import THIRDPARTY, run_cli

    section = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "plugins.md").read_text()
    python_block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    toml_block = re.search(r"```toml\n(.*?)```", section, re.S).group(1)
    good = THIRDPARTY / "good"
    assert python_block == (good / "negharness_example.py").read_text()
    imported = set(re.findall(r"^(?:from|import) (negharness[\w.]*)", python_block, re.M))
    assert imported and all(m == "negharness.api" or m.startswith("negharness.api.") for m in imported), imported
    assert toml_block == (good / "pyproject.toml").read_text()
    model_lines = python_block[python_block.index("class MeanColourModel"):python_block.index("class ExampleColours")]
    task_lines = python_block[python_block.index("class ExampleColours"):python_block.index("def mean_colour")]
    assert len(model_lines.strip().splitlines()) <= 25 and len(task_lines.strip().splitlines()) <= 40

    src = tmp_path / "src"
    src.mkdir()
    (src / "negharness_example.py").write_text(python_block)
    (src / "pyproject.toml").write_text(toml_block)
    site = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(site), str(src)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    listed = run_cli(["list"], tmp_path, [site])
    assert listed.returncode == 0 and "mean_colour" in listed.stdout and "example_colours" in listed.stdout
    ran = run_cli(["run", "--model", "mean_colour", "--task", "example_colours"], tmp_path, [site])
    assert ran.returncode == 0, ran.stderr
    record = json.loads((tmp_path / "results" / "mean_colour" / "example_colours.json").read_text())
    assert set(record["intervals"]) == {"R@1", "MIR"} and record["per_query_file"]
    board = run_cli(["leaderboard", "--results-dir", "results"], tmp_path, [site])
    assert board.returncode == 0, board.stderr
    check = run_cli(["leaderboard", "--results-dir", "results", "--check"], tmp_path, [site])
    assert check.returncode == 0, check.stdout + check.stderr
    assert "not verifiable" not in check.stdout + check.stderr  # both metrics recomputed from the per-query values


class _Recording(torch.nn.Sequential):
    """A torch module that records the devices the host moves it to."""

    def __init__(self, *modules: torch.nn.Module) -> None:
        super().__init__(*modules)
        self.moved_to: list = []

    def to(self, *args, **kwargs):
        self.moved_to.append(args[0] if args else kwargs.get("device"))
        return super().to(*args, **kwargs)


class _ThirdPartyModel(EmbeddingModel):
    """Written as a third party would: a torch module as an attribute, no `modules()` override."""

    name = "dropout_model"

    def __init__(self) -> None:
        super().__init__()
        self.net = _Recording(torch.nn.Linear(3, 4), torch.nn.Dropout(0.5))  # a fresh module: training mode

    def describe(self):
        return {"arch": "dropout"}

    def preprocess_image(self, image):
        return torch.zeros(3)

    def encode_image(self, pixels):
        return torch.nn.functional.normalize(self.net(pixels), dim=-1)

    def encode_text(self, texts):
        return torch.nn.functional.normalize(torch.ones(len(texts), 4), dim=-1)


class _Weightless(_ThirdPartyModel):
    name = "weightless"

    def __init__(self) -> None:
        EmbeddingModel.__init__(self)  # holds no torch module and does not say so


def test_the_host_moves_a_third_party_models_torch_modules_to_the_device_in_eval_mode():
    """A model's torch modules are found without a `modules()` override (it used to default to [],
    leaving them on the CPU with dropout on under --device cuda); a model holding none must say so
    (`modules()` returning []), or loading it is an error naming the model and the fix. The 'meta'
    device stands in for a GPU: the parameters really move."""
    from negharness.discovery.lookup import PluginLookup
    from negharness.testing import keyword_model, lookup

    factories = {"dropout_model": lambda o: _ThirdPartyModel(), "weightless": lambda o: _Weightless(),
                 "keyword": keyword_model}
    host = PluginLookup(lookup(model=factories).registry, torch.device("meta"))
    model = host.create("model", "dropout_model", ModelOptions())
    assert model.net.moved_to == [torch.device("meta")] and model.device == torch.device("meta")
    assert model.net[0].weight.device.type == "meta"
    assert not model.net.training and not model.net[1].training  # eval mode: dropout off
    with pytest.raises(UserError, match=r"model weightless \(_Weightless\): holds no torch.nn.Module.*return \[\]"):
        host.create("model", "weightless", ModelOptions())
    assert host.create("model", "keyword", ModelOptions()).modules() == []  # says so explicitly


def test_a_choice_scorer_is_a_model_of_its_own_contract_and_is_refused_on_retrieval(tmp_path):
    """Issue 32: the model contract split into an encoder (EmbeddingModel) and a choice scorer
    (ChoiceScorer): a scorer has no encode_* to stub, and a task that embeds refuses it by name."""
    import torch

    from negharness.api import ChoiceScorer
    from negharness.engine.evaluate import RunRequest, evaluate_request
    from negharness.testing import host_with_models

    class FirstOption(ChoiceScorer):
        name = "first_option"

        def describe(self):
            return {"rule": "first"}

        def modules(self):
            return []

        def score_choices(self, choices, batch_size, precision):
            return torch.zeros(len(choices.options), max(map(len, choices.options)))

    assert not hasattr(FirstOption(), "encode_text") and not isinstance(FirstOption(), EmbeddingModel)
    host = host_with_models({"first_option": lambda options: FirstOption()})
    req = RunRequest(model="first_option", tasks=["shapes_t2i_original"], limit=10, output_dir=str(tmp_path / "r"),
                     cache_dir=str(tmp_path / "c"))
    with pytest.raises(UserError, match="first_option scores choice tasks itself"):
        evaluate_request(host, req)


def test_the_host_parses_declared_model_options_once_into_typed_read_only_values():
    """-M strings are parsed once, by the host, against the options the factory declares: the factory
    gets typed values with the declared defaults (no default restated, no raw string re-read); an
    unknown key or a bad value is refused before the factory runs, naming the model; a wrapper that
    passes the rest on gets the undeclared keys raw, and its base model checks them in turn."""
    from negharness.api import OptionSpec, takes_options
    from negharness.discovery.lookup import PluginLookup
    from negharness.testing import keyword_model, lookup

    seen = []

    @takes_options({"threshold": OptionSpec(float, 0.1), "deep": OptionSpec(bool, False)})
    def declared(options):
        seen.append(options.values)
        return keyword_model(ModelOptions())

    factories = {"declared": declared, "kw": keyword_model}
    host = PluginLookup(lookup(model=factories).registry)
    host.create("model", "declared", ModelOptions(extra={"deep": "yes"}))
    assert dict(seen[-1]) == {"threshold": 0.1, "deep": True}
    with pytest.raises(TypeError):
        seen[-1]["deep"] = False  # read-only: a factory cannot change what the record says it ran with
    calls = len(seen)
    with pytest.raises(UserError, match=r"-M thresold: not an option of model 'declared'; did you mean threshold"):
        host.create("model", "declared", ModelOptions(extra={"thresold": "0.3"}))
    with pytest.raises(UserError, match=r"-M threshold=high.*expected float"):
        host.create("model", "declared", ModelOptions(extra={"threshold": "high"}))
    assert len(seen) == calls  # refused before the factory ran

    from negharness.plugins.boolean_model import boolean

    factories["boolean"] = boolean
    host = PluginLookup(lookup(model=factories).registry)
    wrapped = host.create("model", "boolean", ModelOptions(extra={"base": "declared", "threshold": "0.5"}))
    assert dict(seen[-1]) == {"threshold": 0.5, "deep": False} and wrapped.name == "boolean(declared)"
    with pytest.raises(UserError, match=r"-M colour: not an option of model 'declared'"):
        host.create("model", "boolean", ModelOptions(extra={"base": "declared", "colour": "red"}))
