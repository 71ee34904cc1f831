"""The times the README claims, measured as a newcomer meets them (issue 25's "every claim measured").

1. The main job: the README's first command, read from its "The two commands" block (so the script
   times what the README says), run as a shell command in a fresh folder with a fresh HOME, an
   empty cache and data root (the world is generated on the way, as on a first run), offline
   (HF_HUB_OFFLINE=1), at default settings, ``--rounds`` times; then once more on the same folders
   (the cached rerun). Printed: every round's wall time, the median, and the README's figure.
2. ``--weights``: the bundled weights' recipe (`negharness train --trainer shapes_pretrain`) once,
   its wall time against the README's, and whether the file it writes is bit-identical to the
   shipped one.

Run: python perf/bench_readme_times.py [--rounds 3] [--weights]
(``--tiny``: one round of the main job with ``--limit 16`` added, a check of the script only)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def readme_command() -> tuple[str, str]:
    """(the main-job command line, the time the README gives for it) from its first bash block."""
    text = README.read_text(encoding="utf-8")
    block = text.split("## The two commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    lines = block.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("negharness run"):
            claim = re.search(r"about ([0-9.]+ s)", lines[i - 1]) if i else None
            return line.strip(), claim.group(1) if claim else "(no figure)"
    raise SystemExit(f"{README}: no 'negharness run' line in the block under 'The two commands'")


def weights_claim() -> str:
    found = re.search(r"\): ([0-9.]+ s) measured", README.read_text(encoding="utf-8"))
    return found.group(1) if found else "(no figure)"


def newcomer_env(home: Path) -> dict[str, str]:
    """A first run's environment: a fresh HOME (so ~/.cache/negharness is empty), nothing of ours set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEGHARNESS_") and k != "NLTK_DATA"}
    env.update(HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def timed(command: str, cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{command!r} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def main_job(rounds: int, extra: str) -> None:
    command, claim = readme_command()
    if extra:
        command = command.replace(" && ", f" {extra} && ", 1) if " && " in command else f"{command} {extra}"
    walls, rerun = [], 0.0
    for r in range(rounds):
        folder = Path(tempfile.mkdtemp(prefix="readme-times-"))
        (folder / "home").mkdir()
        env = newcomer_env(folder / "home")
        walls.append(timed(command, folder, env))
        if r == rounds - 1:
            rerun = timed(command, folder, env)
        print(f"round {r + 1}: {walls[-1]:.1f} s (load {os.getloadavg()[0]:.2f})", flush=True)
    print(f"main job `{command}`: median {statistics.median(walls):.1f} s over {rounds} fresh rounds "
          f"(min {min(walls):.1f}); cached rerun {rerun:.1f} s; README says about {claim}; {os.cpu_count()} cores")


def weights() -> None:
    folder = Path(tempfile.mkdtemp(prefix="readme-weights-"))
    (folder / "home").mkdir()
    out = folder / "shapes_clip.safetensors"
    wall = timed(f"negharness train --trainer shapes_pretrain --out {out}", folder, newcomer_env(folder / "home"))
    shipped = ROOT / "src" / "negharness" / "plugins" / "weights" / "shapes_clip.safetensors"
    same = hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(shipped.read_bytes()).digest()
    print(f"bundled weights: {wall:.1f} s (README: {weights_claim()}); bit-identical to the shipped file: {same}; "
          f"load {os.getloadavg()[0]:.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--weights", action="store_true", help="also time the bundled weights' recipe")
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args(argv)
    main_job(1 if args.tiny else args.rounds, "--limit 16" if args.tiny else "")
    if args.weights:
        weights()


if __name__ == "__main__":
    main()
