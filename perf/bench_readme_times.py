"""The times the README claims, measured as a newcomer meets them (issue 25's "every claim measured").

1. The main job: the README's first command, read from its "The two commands" block (so the script
   times what the README says), run as a shell command in a fresh folder with a fresh HOME, an
   empty cache and data root (the world is generated on the way, as on a first run), offline
   (HF_HUB_OFFLINE=1), at default settings, ``--rounds`` times; then once more on the same folders
   (the cached rerun). Printed: every round's wall time, the median, and the README's figure.
2. The two ends a user feels (issue 38), for this tree and, with ``--before REV``, for the code at
   REV, side by side in one run (same machine, same load, interleaved): the time from start to the
   first thing ``negharness run`` shows in a terminal (a pseudo-terminal here, as a user's), the time
   from its last record's write to its exit, the wall time of the cached rerun, and of
   ``negharness list --brief``; with the ratios after/before.
3. ``--weights``: the bundled weights' recipe (`negharness train --trainer shapes_pretrain`) once,
   its wall time against the README's, and whether the file it writes is bit-identical to the
   shipped one.

Run: python perf/bench_readme_times.py [--rounds 3] [--before b63f646] [--weights]
(``--tiny``: one round of each with ``--limit 16`` added, this tree only: a check of the script)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pty
import re
import select
import shlex
import statistics
import subprocess
import sys
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
            claim = re.search(r"(?:about )?([0-9.]+(?:-[0-9.]+)? s) on", lines[i - 1]) if i else None
            return line.strip(), claim.group(1) if claim else "(no figure)"
    raise SystemExit(f"{README}: no 'negharness run' line in the block under 'The two commands'")


def weights_claim() -> str:
    found = re.search(r"\): ([0-9.]+ s) measured", (ROOT / "docs/guides/training.md").read_text(encoding="utf-8"))
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


def code_tree(rev: str | None) -> Path:
    """The ``src`` folder to run: this tree's, or REV's (``git archive`` into a temporary folder)."""
    if rev is None:
        return ROOT / "src"
    folder = Path(tempfile.mkdtemp(prefix="readme-times-before-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder / "src"


def in_terminal(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """Run ``argv`` on a pseudo-terminal: (seconds to its first visible output, wall seconds, exit time
    as time.time())."""
    master, slave = pty.openpty()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    first, tail = None, b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal closed: every process holding it has exited
                data = b""
            if data and first is None and data.strip():
                first = time.perf_counter() - start
            tail = (tail + data)[-4000:]
            if data:
                continue
        if proc.poll() is not None:
            break
    wall, ended = time.perf_counter() - start, time.time()
    os.close(master)
    if proc.returncode != 0:
        raise SystemExit(f"{shlex.join(argv)} exited {proc.returncode}:\n{tail.decode(errors='replace')}")
    return (first if first is not None else wall), wall, ended


def last_record_written(results: Path) -> float:
    return max(p.stat().st_mtime for p in results.rglob("*.json"))


def ends(src: Path, extra: list[str]) -> dict[str, float]:
    """The four figures for the code under ``src`` in a fresh folder: a first run, then its rerun."""
    command, _ = readme_command()
    args = shlex.split(command.split(" && ")[0])[1:] + extra  # the run, without `&& negharness leaderboard`
    folder = Path(tempfile.mkdtemp(prefix="readme-ends-"))
    (folder / "home").mkdir()
    env = {**newcomer_env(folder / "home"), "PYTHONPATH": str(src), "TERM": "xterm"}
    cli = [sys.executable, "-m", "negharness.cli"]
    first, _, ended = in_terminal(cli + args, folder, env)
    teardown = ended - last_record_written(folder / "results")
    _, rerun, _ = in_terminal(cli + args, folder, env)
    start = time.perf_counter()
    subprocess.run(cli + ["list", "--brief"], cwd=folder, env=env, capture_output=True, check=True)
    return {"first output (s)": first, "last record -> exit (s)": teardown, "cached rerun (s)": rerun,
            "list --brief (s)": time.perf_counter() - start}


def compare_ends(rounds: int, before: str | None, extra: list[str]) -> dict[str, list[dict[str, float]]]:
    """Each round runs the code at ``before`` (when given) then this tree's, so both meet one load."""
    trees = {**({f"before ({before})": code_tree(before)} if before else {}), "after (this tree)": code_tree(None)}
    got: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(rounds):
        for name, src in trees.items():
            got[name].append(ends(src, extra))
    figures = list(next(iter(got.values()))[0])
    print(f"the two ends, median of {rounds} round(s) (load {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores):")
    print(f"  {'':26}" + "".join(f"{name:>24}" for name in got) + ("       after/before" if before else ""))
    for fig in figures:
        medians = [statistics.median(r[fig] for r in runs) for runs in got.values()]
        ratio = f"{medians[-1] / medians[0]:>19.2f}" if before and medians[0] > 0 else ""
        print(f"  {fig:26}" + "".join(f"{m:>24.2f}" for m in medians) + ratio)
    return got


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
    parser.add_argument("--before", metavar="REV", help="also time the code at git revision REV (e.g. b63f646, "
                        "the commit before issue 38) beside this tree's, for the two ends")
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args(argv)
    main_job(1 if args.tiny else args.rounds, "--limit 16" if args.tiny else "")
    compare_ends(1 if args.tiny else args.rounds, args.before, ["--limit", "16"] if args.tiny else [])
    if args.weights:
        weights()


if __name__ == "__main__":
    main()
