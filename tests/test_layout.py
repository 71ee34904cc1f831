"""The house holds, read from the real tree under src/ (no copy of a mapping): the folders are the
import tree; built-ins reach the host only through `negharness.api`; the host imports no built-in;
no import circle, counting imports inside functions; an in-function import of the project's own
code says why; the floors (`layout_rules.FLOORS`): no host room imports the face, the ground floor
imports no room, the engine no CLI, and no room arrow runs back up a floor (a type-only import
counts). Each rule is also shown failing on a small tree written here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import tomllib
from layout_rules import (
    BUILTINS,
    SRC,
    all_problems,
    back_arrows,
    builtin_violations,
    cycles,
    engine_imports_cli,
    face_importers,
    graph,
    ground_violations,
    host_violations,
    modules,
    room,
    unjustified_lazy,
    unplaced_rooms,
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


def test_no_host_room_imports_the_face(edges):
    assert face_importers(edges) == []


def test_the_ground_floor_imports_no_room(edges):
    assert ground_violations(edges) == []


def test_the_engine_imports_no_cli(edges):
    assert engine_imports_cli(edges) == []


def test_every_room_has_a_floor_and_every_arrow_runs_down(edges):
    """No room arrow runs back up a floor, not even a type-only one (``if TYPE_CHECKING:``): a type the
    ground floor names lives on the ground floor (`contracts.media_set.MediaSet`,
    `contracts.pixel_transform.PixelTransform`), re-exported from the room that builds it."""
    assert unplaced_rooms(edges) == []
    assert back_arrows(edges) == {}


def test_each_face_lists_its_names_literally():
    """`negharness.api` and every facade keep a literal ``__all__`` that matches what they define and
    import (type checkers read it), and each listed name resolves at run time."""
    import importlib

    faces = sorted((SRC / "negharness" / "api").glob("*.py"))
    assert len(faces) >= 7 and [p for f in faces for p in all_problems(f)] == []
    for path in faces:
        name = "negharness.api" if path.stem == "__init__" else f"negharness.api.{path.stem}"
        module = importlib.import_module(name)
        assert [n for n in module.__all__ if not hasattr(module, n)] == [], name


def test_api_exports_resolve():
    """Every documented name of `negharness.api` imports, and `__all__` is exactly that contract."""
    import negharness.api as api

    missing = [name for name in api.__all__ if not hasattr(api, name)]
    assert missing == [] and len(api.__all__) == len(set(api.__all__))


def test_the_api_top_level_is_the_contracts_and_the_rest_lives_in_named_facades():
    """The face holds the contracts, context, options, errors, names, hashes, precision and registration
    (the former mirror modules, folded in); a name that moved to a facade still resolves from the top
    level, to the same object (plugins written against 0.x keep working), but is not in ``__all__``;
    importing the face and the two facades a task module imports (scoring, media) loads no torch, so a
    plugin's registration module stays quick."""
    import importlib
    import subprocess
    import sys

    import negharness.api as api

    assert len(api.__all__) <= 90, api.__all__
    for name, facade in api._MOVED.items():
        with pytest.warns(DeprecationWarning, match=f"moved to {facade}"):
            moved = getattr(api, name)
        assert name not in api.__all__ and moved is getattr(importlib.import_module(facade), name), name
    light = ("scoring", "media")  # the two a task module imports resolve each name on first use
    probe = ("import sys, importlib\nfrom negharness.api import hookimpl, Registrar\n"
             f"[importlib.import_module('negharness.api.' + f) for f in {light!r}]\n"
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


def test_each_floor_rule_can_fail(tmp_path):
    """A room importing the face, the ground floor importing a room (at run time or for type checkers
    only), the engine importing the CLI, a room arrow up a floor (a type-only one too), a room with no
    floor, and a face whose ``__all__`` is computed or out of step are each found."""
    src = _tree(tmp_path, {
        "negharness/__init__.py": "",
        "negharness/api/__init__.py": "from negharness.contracts.errors import UserError as UserError\n__all__ = ['UserError']\n",
        "negharness/api/bad.py": "from negharness.io.paths import data_root as data_root\n__all__ = sorted(['data_root'])\n",
        "negharness/api/stale.py": "from negharness.io.paths import data_root as data_root, cache_root as cache_root\n"
                                  "__all__ = ['data_root', 'gone']\n",
        "negharness/contracts/__init__.py": "",
        "negharness/contracts/errors.py": "from typing import TYPE_CHECKING\nfrom negharness.store import atomic\n"
                                          "if TYPE_CHECKING:\n    from negharness.io import paths\n",
        "negharness/store/__init__.py": "",
        "negharness/store/atomic.py": "from negharness.api import UserError\nfrom negharness.records import metrics\n",
        "negharness/io/__init__.py": "",
        "negharness/io/paths.py": "from negharness.contracts.errors import x\n",
        "negharness/records/__init__.py": "",
        "negharness/records/metrics.py": "",
        "negharness/engine/__init__.py": "",
        "negharness/engine/run.py": "def f():\n    from negharness.cli import main  # lazy: a loop\n",
        "negharness/cli/__init__.py": "",
        "negharness/cli/main.py": "",
        "negharness/attic/__init__.py": "from negharness.io import paths\n",
    })
    edges = graph(src)
    assert face_importers(edges) == ["negharness.store.atomic:1 imports negharness.api"]
    assert ground_violations(edges) == ["negharness.contracts.errors:2 imports negharness.store.atomic",
                                        "negharness.contracts.errors:4 imports negharness.io.paths"]
    assert engine_imports_cli(edges) == ["negharness.engine.run:2 imports negharness.cli.main"]
    assert unplaced_rooms(edges) == ["attic"]
    assert sorted(back_arrows(edges)) == [("contracts", "io"), ("contracts", "store"), ("engine", "cli"),
                                          ("store", "api"), ("store", "records")]
    assert back_arrows(edges)[("contracts", "io")] == ["negharness.contracts.errors:4 imports negharness.io.paths"]
    api = src / "negharness" / "api"
    assert all_problems(api / "__init__.py") == []
    assert all_problems(api / "bad.py") == ["bad.py: __all__ is not a literal list of strings"]
    assert all_problems(api / "stale.py") == ["stale.py: gone is listed but neither defined nor imported",
                                              "stale.py: imports cache_root but does not list it"]


@pytest.mark.parametrize("facade", ["negharness.api.scoring", "negharness.api.media"])
def test_a_facade_resolved_on_first_use_gives_what_type_checkers_read(facade):
    """`scoring` and `media` keep their names in one list, the ``if TYPE_CHECKING:`` imports type checkers
    read; at run time each listed name is the very object that import names, and only those exist."""
    import ast
    import importlib

    module = importlib.import_module(facade)
    assert set(module.__all__) <= set(dir(module))  # listed before first use too
    tree = ast.parse(Path(module.__file__).read_text())
    guarded = {a.asname or a.name: (n.module, a.name) for stmt in tree.body if isinstance(stmt, ast.If)
               for n in stmt.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert sorted(guarded) == sorted(module.__all__)
    assert module._HOMES == guarded  # the literal table read at run time is the list type checkers read
    for name, (home, real) in guarded.items():
        assert getattr(module, name) is getattr(importlib.import_module(home), real), name
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        module.not_a_name


def test_a_facade_resolves_its_names_in_an_install_without_sources(tmp_path):
    """An install of .pyc files alone (no .py beside them): the facades still resolve each name on
    first use (they read the compiled imports, never the source file)."""
    import compileall
    import shutil
    import subprocess
    import sys

    import negharness

    package = tmp_path / "negharness"
    shutil.copytree(Path(negharness.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    assert compileall.compile_dir(str(package), legacy=True, quiet=1)
    for source in package.rglob("*.py"):
        source.unlink()
    code = ("import negharness.api.media as m, negharness.api.scoring as s; "
            "assert m.read_rgb.__module__ == 'negharness.io.image_files', m.read_rgb.__module__; "
            "print(m.__file__, len(s.TEXT_TO_MEDIA_METRICS))")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split()[0].endswith(".pyc")


def test_io_never_imports_store():
    """Files and media (io) sit below the caches built on them (store): one direction only."""
    edges = graph(SRC)
    found = [f"{e.source}:{e.line} imports {e.target}" for e in edges
             if room(e.source) == "io" and room(e.target) == "store"]
    assert found == []


def test_the_face_is_one_literal_module_and_its_lazy_names_are_what_type_checkers_read():
    """`negharness.api` is the one face (the contract mirrors folded into it, as `pytest` over `_pytest`):
    no sub-module repeats a contract module; its torch-bound names (`_LAZY`) are its TYPE_CHECKING imports,
    resolve to those very objects, and importing the face loads no torch."""
    import ast
    import importlib
    import subprocess
    import sys

    import negharness.api as face

    contracts = {p.stem for p in (SRC / "negharness" / "contracts").glob("*.py")} - {"__init__"}
    facades = {p.stem for p in (SRC / "negharness" / "api").glob("*.py")} - {"__init__", "exports"}
    assert facades == set(face.FACADES) and not facades & contracts
    tree = ast.parse(Path(face.__file__).read_text())
    guarded = {a.asname or a.name: (n.module, a.name) for stmt in tree.body if isinstance(stmt, ast.If)
               for n in stmt.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert face._LAZY == guarded and set(guarded) <= set(face.__all__)
    for name, (home, real) in guarded.items():  # PRECISIONS is built anew at each ask: equal, not one object
        assert getattr(face, name) == getattr(importlib.import_module(home), real), name
    code = "import negharness.api, sys; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_the_ground_floor_loads_neither_torch_nor_numpy():
    """As `negharness.contracts` says: every module there imports torch and numpy lazily (choices.py once
    imported torch at its top), so a task built before any model (the plan) loads neither."""
    import subprocess
    import sys

    probe = ("import sys, pkgutil, importlib\nimport negharness.contracts as c\n"
             "for m in pkgutil.iter_modules(c.__path__):\n"
             "    importlib.import_module('negharness.contracts.' + m.name)\n"
             "    if 'torch' in sys.modules or 'numpy' in sys.modules:\n"
             "        print(m.name)\n        break\n"
             "print('clean')")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "clean", out.stdout + out.stderr
