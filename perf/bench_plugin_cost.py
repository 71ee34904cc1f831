"""What an installed plugin costs the commands that do not use it (issue 46 item 1).

Times `negharness list --brief`, `negharness leaderboard` (an empty results folder) and a usage error
(`run --model shapes_clp`), each in a fresh process, with: no third-party plugin (the baseline);
the README's example plugin written the old way (a hook module in the group `negharness` that imports
torch at its top), on its first command (imported, then indexed) and after it (replayed from the plugin
index); and the README's example as it is now (entries declared in entry-point metadata). Prints each
wall time (median of ``--rounds``), the ratio to the baseline, and whether torch was imported
(`-X importtime`). Then what replaying costs in itself: the hook module's index read and checked (every
module file its import brought in, torch's included, stat'ed again), in ms and as a share of the
baseline `list --brief`.

Run: python perf/bench_plugin_cost.py [--rounds 3]   (--tiny: one round of `list --brief` only)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOOD = ROOT / "tests" / "thirdparty" / "good"
COMMANDS = {"list --brief": ["list", "--brief"], "leaderboard": ["leaderboard", "--results-dir", "empty"],
            "usage error": ["run", "--model", "shapes_clp", "--task", "shapes_t2i_original"]}
HOOK_STYLE = '''
from negharness.api import hookimpl


@hookimpl
def negharness_register_models(registry):
    registry.add("mean_colour", lambda options: MeanColourModel(), "mean colour of an image")


@hookimpl
def negharness_register_tasks(registry):
    registry.add("example_colours", "negharness_example:ExampleColours", "three solid colours")
'''


def hook_style_plugin(folder: Path) -> Path:
    """The README's example as it was written before declared entries: torch at the top of a hook module."""
    folder.mkdir(parents=True)
    (folder / "negharness_example.py").write_text((GOOD / "negharness_example.py").read_text() + HOOK_STYLE)
    info = folder / "negharness_example-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: negharness-example\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[negharness]\nexample = negharness_example\n")
    return folder


def timed(args: list[str], plugin: Path | None, cwd: Path, cache: Path) -> tuple[float, bool]:
    env = dict(os.environ, NEGHARNESS_CACHE=str(cache), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    paths = [str(ROOT / "src")] + ([str(plugin)] if plugin else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "negharness.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - start
    torch = any(line.startswith("import time:") and line.rsplit("|", 1)[-1].strip() == "torch"
                for line in done.stderr.splitlines())
    return wall, torch


INDEX_COST = """
import json, sys, time
from pathlib import Path
from negharness.discovery.plugin_index import environment_stamp, index_path, read_index
cache, rounds = Path(sys.argv[1]), 20
start = time.perf_counter()
for _ in range(rounds):
    found = read_index(cache, environment_stamp())
print(json.dumps({"ms": (time.perf_counter() - start) / rounds * 1000, "plugins": len(found),
                  "files": sum(len(p.files) for p in found.values()), "bytes": index_path(cache).stat().st_size}))
"""


def index_cost(cache: Path, plugin: Path, cwd: Path) -> dict[str, float]:
    """The index in ``cache`` read and checked as a command with ``plugin`` installed reads it (mean of 20)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(plugin)]))
    done = subprocess.run([sys.executable, "-c", INDEX_COST, str(cache)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    cost: dict[str, float] = json.loads(done.stdout)
    return cost


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tiny", action="store_true", help="one round of list --brief: a check of the script")
    args = ap.parse_args(argv)
    commands = {"list --brief": COMMANDS["list --brief"]} if args.tiny else COMMANDS
    rounds = 1 if args.tiny else args.rounds
    tmp = Path(tempfile.mkdtemp(prefix="plugin-cost-"))
    (tmp / "empty").mkdir()
    hook = hook_style_plugin(tmp / "hook")
    setups = {"no plugin": None, "hook module, first command": hook, "hook module, indexed": hook,
              "declared entries": GOOD}
    times: dict[tuple[str, str], list[float]] = {}
    torch_seen: dict[tuple[str, str], bool] = {}
    for r in range(rounds):
        for cmd, argv in commands.items():
            for setup, plugin in setups.items():
                cache = tmp / f"cache-{r}-{cmd.replace(' ', '_')}"
                if setup == "hook module, first command":
                    shutil.rmtree(cache, ignore_errors=True)  # no index yet
                wall, torch = timed(argv, plugin, tmp, cache)
                times.setdefault((cmd, setup), []).append(wall)
                torch_seen[(cmd, setup)] = torch_seen.get((cmd, setup), False) or torch
    print(f"{rounds} rounds, interleaved; load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores")
    for cmd in commands:
        base = statistics.median(times[(cmd, "no plugin")])
        for setup in setups:
            med = statistics.median(times[(cmd, setup)])
            print(f"{cmd:13} {setup:28} {med:6.2f} s  x{med / base:5.2f}  torch imported: {torch_seen[(cmd, setup)]}")
    cost = index_cost(tmp / "cache-0-list_--brief", hook, tmp)
    base = statistics.median(times[("list --brief", "no plugin")])
    print(f"plugin index of the hook module: {cost['plugins']:.0f} plugin, {cost['files']:.0f} files stamped, "
          f"{cost['bytes'] / 1024:.0f} KiB; read and checked in {cost['ms']:.1f} ms "
          f"({cost['ms'] / 10 / base:.2f}% of list --brief with no plugin)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
