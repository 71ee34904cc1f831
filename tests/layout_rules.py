"""The import graph of the real tree under src/negharness, read from the source (module level and
inside functions, relative imports resolved), and the rules tests/test_layout.py holds it to."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
BUILTINS = ("plugins", "tasks", "text", "world")
LAZY_TAG = "lazy:"  # an in-function import of the project's own code says why, e.g. "# lazy: start-up time"
GROUND = "contracts"  # the ground floor: what every room shares (contracts, errors, options, hashes)
FACE = "api"  # the plugins' face, on top: only built-ins and the face itself import it

# The floors of the host, lowest first: a room imports rooms on its own floor or below. The ground
# floor imports no room; the two faces (the console's and the plugins') sit above every room they
# reach; the package root (`negharness.run`), `python -m negharness` and the test helpers on top.
# Built-ins (plugins/, tasks/, text/, world/) stand outside: they reach the host through the face only.
FLOORS: dict[str, int] = {
    GROUND: 0, "version": 0,
    "io": 1,  # files and media: reading them bounded, writing them atomically
    "store": 2, "scoring": 2,  # caches on those files (store's content hashes read io's paths); io never imports store
    "records": 3, "fetch": 3, "discovery": 3, "declarative": 3,
    "engine": 4,
    "report": 5,
    "cli": 6, FACE: 6,
    "": 7, "__main__": 7, "testing": 7,
}



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
    """Every import of a project module in ``path``: at module level, inside functions and under
    ``if TYPE_CHECKING:`` alike (a type-only import is an arrow too: type checkers follow it)."""
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


def face_importers(edges: list[Import]) -> list[str]:
    """Host rooms never import the plugins' face (as pytest's rooms never import `pytest`): only
    built-ins and the face itself do, so the face can sit on top and import any room."""
    return [f"{e.source}:{e.line} imports {e.target}" for e in edges
            if room(e.target) == FACE and room(e.source) not in (FACE, *BUILTINS)]


def ground_violations(edges: list[Import]) -> list[str]:
    """The ground floor imports no room, not even for type checkers (a type it names lives on it)."""
    return [f"{e.source}:{e.line} imports {e.target}" for e in edges
            if room(e.source) == GROUND and FLOORS.get(room(e.target), 0) > 0]


def engine_imports_cli(edges: list[Import]) -> list[str]:
    """The engine runs what the CLI asks; it never imports the CLI back (a room loop)."""
    return [f"{e.source}:{e.line} imports {e.target}" for e in edges
            if room(e.source) == "engine" and room(e.target) == "cli"]


def unplaced_rooms(edges: list[Import]) -> list[str]:
    """Host rooms the `FLOORS` table does not place (a new room names its floor there)."""
    found = {room(m) for e in edges for m in (e.source, e.target)}
    return sorted(r for r in found - set(FLOORS) if r not in BUILTINS)


def back_arrows(edges: list[Import]) -> dict[tuple[str, str], list[str]]:
    """Room arrows that run up a floor, type-only imports included: (importing room, imported room) ->
    the imports that make it."""
    found: dict[tuple[str, str], list[str]] = {}
    for e in edges:
        a, b = room(e.source), room(e.target)
        if a in FLOORS and b in FLOORS and FLOORS[b] > FLOORS[a]:
            found.setdefault((a, b), []).append(f"{e.source}:{e.line} imports {e.target}")
    return found


def all_problems(path: Path) -> list[str]:
    """A face module's ``__all__`` is a literal list that type checkers read: every listed name is
    defined or imported there, and every public name it imports from the project is listed."""
    tree = ast.parse(path.read_text(), str(path))
    listed: list[str] | None = None
    defined: set[str] = set()
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            if isinstance(node.value, ast.List) and all(isinstance(e, ast.Constant) for e in node.value.elts):
                listed = [e.value for e in node.value.elts]  # type: ignore[attr-defined]
    # top-level statements, then those under a top-level ``if`` (TYPE_CHECKING: named, not re-exported)
    guarded = [n for stmt in tree.body if isinstance(stmt, ast.If) for n in stmt.body + stmt.orelse]
    for node in tree.body + guarded:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            names = {a.asname or a.name for a in node.names}
            defined.update(names)
            if (node.module or "").startswith("negharness") and node not in guarded:
                imported.update(n for n in names if not n.startswith("_"))
    if listed is None:
        return [f"{path.name}: __all__ is not a literal list of strings"]
    return ([f"{path.name}: {n} is listed but neither defined nor imported" for n in listed if n not in defined]
            + [f"{path.name}: imports {n} but does not list it" for n in sorted(imported - set(listed))])
