"""Every command in the README and the documentation pages (docs/, in the order mkdocs.yml's nav
gives them) that needs no outside data runs as written (in a scratch folder, offline), and the figures
the README quotes for the embedded default hold. A documented claim that stops holding fails here, not
on a user's machine. Times the docs quote are measured in perf/, not here.

Training commands run with a step cap appended (`--max-steps 2`, or `-O steps=2` for the
pre-training recipe): what is checked is that the command as written is accepted and produces
its outputs; the full runs' figures come from perf/exp_negation_training.py."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
WORLD_MODELS = ("shapes_clip", "identity", "detect_inpaint", "clip_bnl", "boolean")
WORLD_TASKS = re.compile(r"^(shapes_\S*|'shapes_\*'|nein_shapes)$")


def doc_pages() -> list[Path]:
    """The README, then every page of the documentation site in its navigation's order."""
    def walk(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [p for v in node.values() for p in walk(v)]
        return [p for item in node for p in walk(item)] if isinstance(node, list) else []

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    return [ROOT / "README.md", *(ROOT / "docs" / p for p in walk(nav))]


def headings(lines: list[str]) -> dict[int, str]:
    """{line number (1-based): heading text} of the Markdown headings outside fenced blocks (a `# ` line
    inside a ```bash block is a comment)."""
    out, fence = {}, False
    for i, line in enumerate(lines, 1):
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            out[i] = line.lstrip("#").strip()
    return out


def bash_commands(page: Path) -> list[tuple[str, str]]:
    """(where: "page:line", command) of every `negharness ...` line in the page's ```bash blocks,
    comments dropped, `a && b` split."""
    text = page.read_text()
    out = []
    for block in re.finditer(r"```bash\n(.*?)```", text, re.S):
        first = text[: block.start()].count("\n") + 2
        for i, line in enumerate(block.group(1).splitlines()):
            code = line.split(" #")[0].strip()
            for part in code.split("&&"):
                if part.strip().startswith("negharness "):
                    out.append((f"{page.relative_to(ROOT)}:{first + i}", part.strip()))
    return out


def needs_no_outside_data(command: str) -> bool:
    args = shlex.split(command)[1:]
    if "--data-root" in args or "--include-path" in args or "..." in args:
        return False
    if args[0] == "compare":  # two record folders of the world's models, which the commands before it wrote
        return all(f.startswith("results/") and f.removeprefix("results/").split("@")[0] in WORLD_MODELS
                   for f in args[1:3])
    if args[0] in ("list", "leaderboard"):
        return "--results-dir" not in args or args[args.index("--results-dir") + 1] == "leaderboard/results"
    if args[0] == "train":
        return "--task" not in args or args[args.index("--task") + 1] == "shapes"
    if args[0] != "run":
        return False
    model = args[args.index("--model") + 1]
    tasks = [args[i + 1] for i, a in enumerate(args) if a == "--task"]
    checkpoint = args[args.index("--checkpoint") + 1] if "--checkpoint" in args else None
    return (model in WORLD_MODELS and all(WORLD_TASKS.match(shlex.quote(t)) or WORLD_TASKS.match(t) for t in tasks)
            and (checkpoint is None or checkpoint.startswith("runs/")))


# Sections (a heading's text, of any level, in any page) whose commands need nothing an earlier
# section's commands wrote: each runs in a scratch folder of its own (under xdist, beside the others).
# Every other section, and every page, continues the folder of the section before it, so a renamed
# heading or a moved page only merges parts: no command is left out.
OWN_FOLDER = ("NeIn", "Training a negation-aware model", "Reproducing the bundled weights")


def readme_parts() -> dict[str, list[tuple[str, str]]]:
    """The runnable commands, in reading order (README, then the docs' pages), grouped by the scratch
    folder they run in (keyed by the heading that starts it; "start" for the first)."""
    parts: dict[str, list[tuple[str, str]]] = {"start": []}
    for page in doc_pages():
        titles = headings(page.read_text().splitlines())
        for where, command in bash_commands(page):
            if not needs_no_outside_data(command):
                continue
            line = int(where.rsplit(":", 1)[1])
            heading = next((titles[i] for i in sorted(titles, reverse=True) if i < line), "")
            key = heading if heading.startswith(OWN_FOLDER) else next(reversed(parts))
            parts.setdefault(key, []).append((where, command))
    return parts


def run_part(commands: list[tuple[str, str]], folder: Path) -> None:
    """Each command as written, in order, in ``folder`` (with a copy of the leaderboard's records)."""
    shutil.copytree(ROOT / "leaderboard", folder / "leaderboard")
    for where, command in commands:
        res = run_cli(as_run(command), folder)
        assert res.returncode == 0, f"{where}: {command}\n{res.stderr[-2000:]}"


def as_run(command: str) -> list[str]:
    args = shlex.split(command)[1:]
    if args[0] == "train":
        args += ["-O", "steps=2"] if "shapes_pretrain" in args else ["--max-steps", "2"]
    return args


def test_the_readme_has_the_commands_this_test_runs():
    runnable = [c for page in doc_pages() for _, c in bash_commands(page) if needs_no_outside_data(c)]
    assert "negharness run --model shapes_clip --task 'shapes_*'" in runnable  # the first command
    assert any(c.startswith("negharness train") for c in runnable) and "negharness list" in runnable
    assert len(runnable) >= 9
    parts = readme_parts()
    assert [c for part in parts.values() for _, c in part] == runnable  # each command in one part, in order
    assert len(parts) == 1 + len(OWN_FOLDER)  # each section that runs apart still has commands


def test_every_self_contained_readme_command_runs_and_its_figures_hold(tmp_path):
    """The first part's commands as written, in order, in one scratch folder (the other parts in the
    test below); then the figures the README quotes for the embedded default ("R@1 ≈ 84%, R@10 ≈ 100%,
    MIR ≈ 0.91 on original captions ... MIR ≈ 0.36 on composed") from the records the first command wrote,
    and its tour's boolean baseline ("composed ... MIR 0.424 against 0.355")."""
    run_part(readme_parts()["start"], tmp_path)
    records = tmp_path / "results" / "shapes_clip"
    rec = {name: json.loads((records / f"{name}.json").read_text())["metrics"]
           for name in ("shapes_t2v_original", "shapes_t2v_composed")}
    readme = (ROOT / "README.md").read_text()
    assert "R@1 ≈ 84%" in readme and "MIR ≈ 0.91" in readme and "MIR ≈ 0.36" in readme
    original, composed = rec["shapes_t2v_original"], rec["shapes_t2v_composed"]
    assert original["R@1"] == pytest.approx(84, abs=1.0) and original["R@10"] == pytest.approx(100, abs=0.5)
    assert original["MIR"] == pytest.approx(0.91, abs=0.006) and composed["MIR"] == pytest.approx(0.36, abs=0.006)
    assert "MIR 0.424 against 0.355" in readme
    boolean = json.loads((tmp_path / "results" / "boolean@f64e5541" / "shapes_t2v_composed.json").read_text())
    assert boolean["metrics"]["MIR"] == pytest.approx(0.424, abs=0.0005)
    assert composed["MIR"] == pytest.approx(0.355, abs=0.0005)


@pytest.mark.heavy  # tens of seconds: scheduled first (tests/conftest.py)
@pytest.mark.parametrize("section", OWN_FOLDER, ids=lambda h: h.split(":")[0].removeprefix("## ").replace(" ", "_"))
def test_each_readme_section_that_runs_apart_runs_as_written(tmp_path, section):
    """The commands of a section that needs nothing earlier sections wrote, as written, in order."""
    part = next(p for key, p in readme_parts().items() if key.startswith(section))
    run_part(part, tmp_path)
