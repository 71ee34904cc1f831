"""The house holds, read from the real tree under src/ (no copy of a mapping): the folders are the
import tree; built-ins reach the host only through `negharness.api`; the host imports no built-in;
no import circle, counting imports inside functions; an in-function import of the project's own
code says why. Each rule is also shown failing on a small tree written here."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib
from layout_rules import (
    BUILTINS,
    SRC,
    builtin_violations,
    cycles,
    graph,
    host_violations,
    modules,
    unjustified_lazy,
)

ROOT = SRC.parent


@pytest.fixture(scope="module")
def edges():
    return graph()


def test_folders_are_the_import_tree():
    """setuptools finds packages under src/; no package-dir mapping renames a folder."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = config["tool"]["setuptools"]
    assert "package-dir" not in setuptools and setuptools["packages"]["find"]["where"] == ["src"]
    found = modules()
    assert "negharness.api" in found and "negharness.engine.runner" in found
    for package in {m.rpartition(".")[0] for m in found if "." in m}:
        assert (SRC / package.replace(".", "/") / "__init__.py").is_file(), package


def test_builtins_import_only_the_public_api(edges):
    assert builtin_violations(edges) == []


def test_the_host_imports_no_builtin(edges):
    assert host_violations(edges) == []


def test_no_import_circles(edges):
    assert cycles(edges) == []


def test_in_function_imports_say_why(edges):
    assert unjustified_lazy(edges) == []


def test_api_exports_resolve():
    """Every documented name of `negharness.api` imports, and `__all__` is exactly that contract."""
    import negharness.api as api

    missing = [name for name in api.__all__ if not hasattr(api, name)]
    assert missing == [] and len(api.__all__) == len(set(api.__all__))


def test_the_api_top_level_is_the_contracts_and_the_rest_lives_in_named_facades():
    """About 25 top-level names (the contracts, context, options, errors, registration); each facade's
    names resolve; a name that moved to a facade still resolves from the top level, to the same object
    (plugins written against 0.x keep working), but is not in ``__all__``; importing the top level and
    every facade but the training contracts (whose types are torch's) loads no torch."""
    import importlib
    import subprocess
    import sys

    import negharness.api as api

    assert len(api.__all__) <= 33, api.__all__
    for facade in api.FACADES:
        module = importlib.import_module(f"negharness.api.{facade}")
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        assert [n for n in names if not hasattr(module, n)] == [], facade
    for name, facade in api._MOVED.items():
        with pytest.warns(DeprecationWarning, match=f"moved to {facade}"):
            moved = getattr(api, name)
        assert name not in api.__all__ and moved is getattr(importlib.import_module(facade), name), name
    probe = ("import sys, negharness.api as a, importlib\n"
             "[importlib.import_module('negharness.api.' + f) for f in a.FACADES if f not in ('training',)]\n"
             "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_builtins_take_the_moved_names_from_their_facades():
    """The built-ins show plugin authors the way: what moved into a facade is imported from it, not
    from the top level's 0.x fallback."""
    import ast

    import negharness.api as api

    found = []
    for room in BUILTINS:
        for path in sorted((SRC / "negharness" / room).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module == "negharness.api":
                    found += [f"{path.name}:{node.lineno} {a.name}" for a in node.names if a.name in api._MOVED]
    assert found == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "src"
    for rel, text in files.items():
        path = src / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return src


def test_each_rule_can_fail(tmp_path):
    """A plugin reaching the runner, the host reaching a task, a circle through a lazy import and an
    unexplained lazy import are each found; a justified lazy import is not reported."""
    src = _tree(tmp_path, {
        "negharness/__init__.py": "",
        "negharness/api/__init__.py": "from negharness.engine import runner\n",
        "negharness/engine/__init__.py": "",
        "negharness/engine/runner.py": "def f():\n    from ..report import board\n",
        "negharness/report/__init__.py": "",
        "negharness/report/board.py": "from negharness.engine.runner import f\n"
                                      "def g():\n    from negharness.tasks import mine  # lazy: start-up time\n",
        "negharness/plugins/__init__.py": "",
        "negharness/plugins/clip.py": "from negharness.api import x\nfrom negharness.engine.runner import f\n",
        "negharness/tasks/__init__.py": "",
        "negharness/tasks/mine.py": "X = 1\n",
    })
    edges = graph(src)
    assert builtin_violations(edges) == ["negharness.plugins.clip:2 imports negharness.engine.runner"]
    assert host_violations(edges) == ["negharness.report.board:3 imports negharness.tasks.mine"]
    assert cycles(edges) == [["negharness.engine.runner", "negharness.report.board"]]
    assert unjustified_lazy(edges) == [
        "negharness.engine.runner:2 imports negharness.report.board inside a function without a '# lazy:' reason"]
