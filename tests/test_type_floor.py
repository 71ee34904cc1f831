"""What type checkers see (issue 45 item 8, issue 51 item 8): CI's `mypy --strict` covers the whole
package, named by its folder (in an editable install src/ is on the path of installed packages, where
mypy follows imports but reports none of their errors), with no module of the floor (`negharness.api`
and all it imports) among those whose errors are left for later; and the context a task receives is
typed as what the host passes, so its `evaluate` overrides `Task.evaluate` cleanly."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
import tomllib
import torch
from layout_rules import SRC, graph, modules

from negharness.api import EditContext, EvalContext, TaskResult, UserError
from negharness.api import Task, TaskOptions
from negharness.discovery.manager import make_host
from negharness.scoring.views import query_scores


def floor_closure() -> set[str]:
    """`negharness.api` and its sub-modules, then everything they import (in functions and under
    TYPE_CHECKING too, as mypy follows them) and every package above a module (mypy reads those)."""
    known, succ = modules(), {}
    for e in graph():
        succ.setdefault(e.source, set()).add(e.target)
    todo = [m for m in known if m == "negharness.api" or m.startswith("negharness.api.")]
    seen = set(todo)
    while todo:
        module = todo.pop()
        parts = module.split(".")
        for nxt in succ.get(module, set()) | {".".join(parts[:i]) for i in range(1, len(parts))}:
            if nxt in known and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


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


def errors_ignored() -> list[str]:
    """The modules whose errors pyproject leaves for a later session (``ignore_errors`` overrides)."""
    out: list[str] = []
    for override in mypy_config().get("overrides", []):
        if override.get("ignore_errors"):
            names = override["module"]
            out += [names] if isinstance(names, str) else names
    return out


def test_ci_mypy_checks_the_whole_package_strictly_with_imports_followed():
    config = mypy_config()
    assert config["strict"] is True and config["follow_imports"] == "normal" and config["mypy_path"] == "src"
    assert "src/negharness" in config["files"]
    assert sorted(set(modules()) - mypy_files()) == [], "modules of the package mypy does not check"


def test_errors_are_left_for_later_only_in_named_modules_outside_the_floor():
    """An override that ignores errors names existing modules one by one (no wildcard hides a new
    module), none of them the floor every plugin stands on."""
    ignored = errors_ignored()
    assert all("*" not in m for m in ignored), ignored
    assert sorted(set(ignored) - set(modules())) == [], "an override names a module that does not exist"
    assert sorted(set(ignored) & floor_closure()) == [], "the floor's errors are never ignored"


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
