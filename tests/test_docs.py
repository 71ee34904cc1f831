"""The documentation: the README stays a front page (at most 300 lines, the rest in docs/), every
page is in the site's navigation, every relative link resolves, and the generated reference
(docs/reference/*.md) says what the registry says now. The site itself is built with
`mkdocs build --strict` in CI (.ci/run), where a broken link or anchor fails it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav lists, relative to docs/, in order."""
    def walk(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [p for v in node.values() for p in walk(v)]
        return [p for item in node for p in walk(item)] if isinstance(node, list) else []

    return walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])


def generator():
    """docs/gen_reference.py, imported from its path (it is a script beside the pages, not a module)."""
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_a_front_page_that_keeps_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    assert "## The two commands" in readme and "python -m pytest -q -n 2" in readme
    assert "docs/guides/running.md" in readme and "docs/reference/index.md" in readme


def test_every_page_is_in_the_navigation_and_every_relative_link_resolves():
    pages = nav_pages()
    on_disk = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(pages) == on_disk  # no page left out of the site, none listed that is not there
    for source in [ROOT / "README.md", *(DOCS / p for p in pages)]:
        text = re.sub(r"```.*?```", "", source.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (source.parent / target.split("#")[0]).resolve()
            assert path.exists(), f"{source.relative_to(ROOT)}: link to {target}: no such file"


def test_the_reference_is_what_the_registry_registers_now():
    """The committed pages equal what `python docs/gen_reference.py` writes from the registry: a model,
    task or option added, removed or re-described without regenerating them fails here."""
    gen = generator()
    pages = gen.reference_pages()
    committed = {p.name: p.read_text(encoding="utf-8") for p in (DOCS / "reference").glob("*.md")}
    stale = sorted(name for name in pages.keys() | committed.keys() if pages.get(name) != committed.get(name))
    assert stale == [], f"docs/reference/{stale[0]} is stale: run `python docs/gen_reference.py`"
    models = pages["models.md"]
    assert "## shapes_clip" in models and "`-M quick_gelu=bool`" in models  # an entry and a declared option
    assert "`-T n_items=int (default 500)`" in pages["tasks.md"] and "## shapes" in pages["training-sets.md"]
