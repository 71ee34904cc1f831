"""The layout holds: plugins and tasks never import each other; the host imports neither, nor the world.

Every import is read from the source (module level and inside functions), relative ones resolved,
so a lazy import inside a function is caught as well as a top-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"harness": "negharness", "plugins": "negharness.plugins", "tasks": "negharness.tasks",
            "world": "negharness.world", "text": "negharness.text"}
FORBIDDEN = {  # folder -> packages it must not import
    "plugins": ("negharness.tasks",),
    "tasks": ("negharness.plugins",),
    "harness": ("negharness.plugins", "negharness.tasks", "negharness.world"),
    "world": ("negharness.plugins", "negharness.tasks"),
    "text": ("negharness.plugins", "negharness.tasks", "negharness.world"),
}


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT)
    parts = [PACKAGES[rel.parts[0]], *rel.parts[1:-1]]
    return ".".join(parts + ([] if path.stem == "__init__" else [path.stem]))


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in the file."""
    module = _module(path)
    package = module if path.stem == "__init__" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            found += [(node.lineno, f"{name}.{a.name}") for a in node.names]
    return found


def _violations(folder: str) -> list[str]:
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for line, name in imports(path):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[folder]):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return bad


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_no_forbidden_imports(folder):
    assert _violations(folder) == []


def test_the_walker_sees_relative_and_lazy_imports(tmp_path, monkeypatch):
    """The check itself can fail: a lazy relative import of a task module from a plugin is found."""
    fake = ROOT / "plugins" / "_layout_probe.py"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: "def f():\n    from ..tasks.nt2vr import tasks\n"
                        if self == fake else Path.read_bytes(self).decode())
    found = imports(fake)
    assert (2, "negharness.tasks.nt2vr") in found and (2, "negharness.tasks.nt2vr.tasks") in found
