"""The import graph of the real tree under src/negharness, read from the source (module level and
inside functions, relative imports resolved), and the rules tests/test_layout.py holds it to."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
BUILTINS = ("plugins", "tasks", "text", "world")
LAZY_TAG = "lazy:"  # an in-function import of the project's own code says why, e.g. "# lazy: start-up time"


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (the deepest one that exists in the tree)
    line: int
    in_function: bool
    justified: bool  # the line (or the one above) carries a "# lazy:" comment


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(src: Path = SRC) -> dict[str, Path]:
    return {module_name(p, src): p for p in sorted(src.rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _function_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(n) for n in ast.walk(node) if n is not node)
    return inside


def imports_of(path: Path, known: dict[str, Path], src: Path = SRC) -> list[Import]:
    """Every import of a project module in ``path``; `negharness.api`'s lazy export table counts too."""
    module = module_name(path, src)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text, str(path))
    inside = _function_nodes(tree)
    found: list[Import] = []

    def add(name: str, node: ast.stmt) -> None:
        target = _resolve(name, known)
        if target and target != module:
            near = " ".join(lines[max(0, node.lineno - 2): node.end_lineno])
            found.append(Import(module, target, node.lineno, id(node) in inside, LAZY_TAG in near))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            for alias in node.names:
                add(f"{name}.{alias.name}", node)
        elif module.startswith("negharness.api") and isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Dict):
            for value in node.value.values:  # the api's and its facades' _EXPORTS: name -> module
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    add(value.value, node)
    return found


def graph(src: Path = SRC) -> list[Import]:
    known = modules(src)
    return [imp for path in known.values() for imp in imports_of(path, known, src)]


def room(module: str) -> str:
    """The top-level sub-package of negharness a module lives in ('' for negharness itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def builtin_violations(edges: list[Import]) -> list[str]:
    """Built-ins reach the host only through negharness.api; plugins and tasks never import each other."""
    bad = []
    forbidden = {"plugins": ("tasks",), "tasks": ("plugins",), "world": ("plugins", "tasks"),
                 "text": ("plugins", "tasks", "world")}
    for e in edges:
        src_room, dst_room = room(e.source), room(e.target)
        if src_room not in BUILTINS or dst_room in BUILTINS and dst_room not in forbidden[src_room]:
            continue
        if dst_room in BUILTINS or e.target != "negharness.api" and not e.target.startswith("negharness.api."):
            bad.append(f"{e.source}:{e.line} imports {e.target}")
    return bad


def host_violations(edges: list[Import]) -> list[str]:
    """The host imports no built-in (plugins, tasks, text, world), not even inside a function."""
    return [f"{e.source}:{e.line} imports {e.target}" for e in edges
            if room(e.source) not in BUILTINS and room(e.target) in BUILTINS]


def unjustified_lazy(edges: list[Import]) -> list[str]:
    return [f"{e.source}:{e.line} imports {e.target} inside a function without a '# {LAZY_TAG}' reason"
            for e in edges if e.in_function and not e.justified]


def cycles(edges: list[Import]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), in-function imports included."""
    succ: dict[str, set[str]] = {}
    for e in edges:
        succ.setdefault(e.source, set()).add(e.target)
        succ.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    return out
