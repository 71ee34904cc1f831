"""What type checkers see (issue 45 item 8, issue 51 item 8): CI's `mypy --strict` covers the whole
package, named by its folder (in an editable install src/ is on the path of installed packages, where
mypy follows imports but reports none of their errors), with no module exempt from any of its checks;
and the context a task receives is typed as what the host passes, so its `evaluate` overrides
`Task.evaluate` cleanly."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
import tomllib
import torch
from layout_rules import SRC, modules

from negharness.api import EditContext, EvalContext, TaskResult, UserError
from negharness.api import Task, TaskOptions
from negharness.discovery.manager import make_host
from negharness.scoring.views import query_scores


def mypy_config() -> dict[str, typing.Any]:
    return tomllib.loads((SRC.parent / "pyproject.toml").read_text())["tool"]["mypy"]


def mypy_files() -> set[str]:
    """The modules pyproject's [tool.mypy] files name (a folder: every module under it)."""
    known = modules()
    out = set()
    for entry in mypy_config()["files"]:
        path = (SRC.parent / entry).resolve()
        out |= {m for m, p in known.items() if p.resolve() == path or path in p.resolve().parents}
    return out


def package_overrides() -> list[str]:
    """The modules of the package (or the README's plugin) that a ``[[tool.mypy.overrides]]`` entry of
    pyproject names, a glob over them too: whatever the entry sets, it checks them otherwise than the rest."""
    out: list[str] = []
    for override in mypy_config().get("overrides", []):
        names = override["module"]
        out += [n for n in ([names] if isinstance(names, str) else names) if n.startswith("negharness")]
    return out


def inline_exemptions() -> list[str]:
    """Lines of the checked modules that turn checks off in the file itself: a ``# mypy:`` setting, or a
    ``# type: ignore`` naming no error code (at a file's top it ignores the whole file)."""
    pattern = re.compile(r"#\s*mypy:|#\s*type:\s*ignore(?!\[)")
    return [f"{p.name}:{n}" for p in [*modules().values(), SRC.parent / "tests/thirdparty/good/negharness_example.py"]
            for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]


def test_ci_mypy_checks_the_whole_package_strictly_with_imports_followed():
    config = mypy_config()
    assert config["strict"] is True and config["follow_imports"] == "normal" and config["mypy_path"] == "src"
    assert "src/negharness" in config["files"]
    assert sorted(set(modules()) - mypy_files()) == [], "modules of the package mypy does not check"


def test_no_module_of_the_package_is_exempt():
    """Every module is checked alike, under --strict: no override or file comment ignores a module's errors
    or relaxes a flag for it (the last three, hf_clip, hf_vlm and openclip_weights, were typed in issue 51
    item 8), and an ignored line names the error it ignores."""
    assert package_overrides() == []
    assert inline_exemptions() == []


def _context_of(cls: type) -> str | None:
    """The context a task class declares through `Task[...]`, by name; None for a bare `Task`."""
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            if typing.get_origin(base) is Task:
                (arg,) = typing.get_args(base)
                return getattr(arg, "__forward_arg__", getattr(arg, "__name__", str(arg)))
    return None


BUILTIN_TASKS = {e.name: e for e in make_host().registry.entries("task") if e.plugin == "builtin_tasks"}


@pytest.mark.parametrize("name", sorted(BUILTIN_TASKS))
def test_each_builtin_task_declares_the_context_the_host_passes(name):
    """An editing task (``edit`` among its modalities) gets an `EditContext`, every other one an
    `EvalContext` (`engine.precheck.run_protocol`); before, every built-in was a bare `Task` whose
    `evaluate` narrowed `RunContext` to another type (15 overrides mypy refused)."""
    cls = BUILTIN_TASKS[name].load()
    assert _context_of(cls) == ("EditContext" if "edit" in cls.modalities else "EvalContext")


def test_a_bare_task_subclass_still_works():
    """Third-party tasks subclass `Task` without a parameter, annotating their context as they like."""
    class Plain(Task):
        name, main_score = "plain", "x"

        def evaluate(self, ctx: typing.Any) -> TaskResult:
            return TaskResult({"x": float(ctx)}, {"rows": 1})

    assert _context_of(Plain) is None
    assert Plain(TaskOptions(Path("."))).evaluate(2).metrics == {"x": 2.0}
    assert Task[EvalContext] is not Task and Task[EditContext] is not Task


def test_an_encoder_method_on_a_model_that_scores_choices_itself_is_refused_by_name():
    """`query_scores` narrows the run's model to an encoder with the host's own check (`as_encoder`),
    so a `ChoiceScorer` there is the host's one clear error, not an AttributeError on ``text_views``."""
    from negharness.api import ChoiceScorer

    class Chooser(ChoiceScorer):
        name = "chooser"

        def describe(self):
            return {}

        def score_choices(self, choices, batch_size, precision):
            raise AssertionError("not asked")

    class Ctx:
        model = Chooser()

    with pytest.raises(UserError, match="model chooser scores choice tasks itself"):
        query_scores(Ctx(), ["a"], torch.ones(1, 4))


def test_the_readme_plugin_is_type_checked_strictly_against_the_floor():
    """The README's example plugin (its code block is tests/thirdparty/good/negharness_example.py, checked
    by test_plugins) is in CI's `mypy --strict` run, so a plugin written the documented way type-checks;
    the package ships `py.typed` (PEP 561), without which a plugin's type checker reads the api as Any."""
    config = tomllib.loads((SRC.parent / "pyproject.toml").read_text())
    assert "tests/thirdparty/good/negharness_example.py" in config["tool"]["mypy"]["files"]
    assert (SRC / "negharness" / "py.typed").is_file()
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["negharness"]
    example = (SRC.parent / "tests/thirdparty/good/negharness_example.py").read_text()
    assert "class ExampleColours(Task[EvalContext]):" in example and "def evaluate(self, ctx: EvalContext) -> TaskResult:" in example


def test_installed_plugins_is_typed_by_the_contract_a_plugin_relies_on():
    """Its return type resolves at run time (it named the host's PluginLookup, imported only for type
    checkers: `typing.get_type_hints` raised NameError) and is the ground floor's `PluginSource`."""
    import typing

    from negharness import api

    assert typing.get_type_hints(api.installed_plugins)["return"] is api.PluginSource
    found = api.installed_plugins()
    assert callable(found.plugin) and callable(found.create)  # what the protocol asks
