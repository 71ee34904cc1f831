"""How far a run's request travels: from `negharness run` to the written record (issue 51's measure).

The command runs in this process under a profile hook (main thread). A *stop* is a call of negharness's own
code that receives the run's request (`RunRequest`) or its plan (`RunPlan`, `PlannedTask`) as an argument; its
*room* is the sub-package it is in (engine, cli, records, ...); a *climb* is a stop whose room sits on a
higher floor than its caller's (tests/layout_rules.FLOORS: contracts 0 ... engine 4, report 5, cli 6): the
request carried back up the import tree, by a callback or a lower room reaching into a higher one. Issue 51's
goal: at most 10 climbs from `negharness run` to the record (23 on `2ec9531`, before the plan). Printed: the
stops, rooms and climbs for a cold run and for its rerun answered from the records, with every climb named.

Run: python perf/trace_request.py [--limit 50] [--task shapes_t2i_original]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from negharness.cli.main import main as cli_main
from negharness.engine.plan import PlannedTask, RunPlan
from negharness.engine.request import RunRequest

GOAL_CLIMBS = 10
_RULES = Path(__file__).resolve().parents[1] / "tests" / "layout_rules.py"


def _floors() -> dict[str, int]:
    """The floors tests/layout_rules.py holds the import graph to: one truth for both."""
    spec = importlib.util.spec_from_file_location("layout_rules", _RULES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return dict(module.FLOORS)


@dataclass
class Trace:
    floors: dict[str, int]
    stops: int = 0
    rooms: Counter[str] = field(default_factory=Counter)
    climbs: list[str] = field(default_factory=list)

    def room(self, module: str) -> str | None:
        """``negharness.engine.plan`` -> ``engine``; None outside the host's rooms (built-ins, others)."""
        if module != "negharness" and not module.startswith("negharness."):
            return None
        name = module.split(".")[1] if "." in module else ""
        return name if name in self.floors else None

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        room = self.room(frame.f_globals.get("__name__", ""))
        if room is None or not self._carries(frame):
            return
        self.stops += 1
        self.rooms[room] += 1
        caller = frame.f_back
        above = self.room(caller.f_globals.get("__name__", "")) if caller is not None else None
        if above is not None and self.floors[room] > self.floors[above]:
            self.climbs.append(f"{caller.f_globals['__name__']}.{caller.f_code.co_name} -> "  # type: ignore[union-attr]
                               f"{frame.f_globals['__name__']}.{frame.f_code.co_name}")

    @staticmethod
    def _carries(frame: FrameType) -> bool:
        code = frame.f_code
        count = code.co_argcount + code.co_kwonlyargcount
        return any(isinstance(frame.f_locals.get(name), (RunRequest, RunPlan, PlannedTask))
                   for name in code.co_varnames[:count])


def traced(argv: list[str], floors: dict[str, int]) -> tuple[int, Trace]:
    trace = Trace(floors)
    sys.setprofile(trace.hook)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = cli_main(argv)
    finally:
        sys.setprofile(None)
    return code, trace


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--task", default="shapes_t2i_original")
    args = parser.parse_args(argv)
    floors = _floors()
    with tempfile.TemporaryDirectory() as tmp:
        command = ["run", "--model", "shapes_clip", "--task", args.task, "--limit", str(args.limit), "--output-dir",
                   f"{tmp}/res", "--cache-dir", f"{tmp}/cache", "--data-root", f"{tmp}/data"]
        for label in ("cold run", "rerun from its records"):
            code, trace = traced(command, floors)
            rooms = ", ".join(f"{r or 'negharness'} {n}" for r, n in trace.rooms.most_common())
            verdict = "pass" if len(trace.climbs) <= GOAL_CLIMBS else "FAIL"
            print(f"{label}: exit {code}; {trace.stops} stops in {len(trace.rooms)} rooms ({rooms}); "
                  f"climbs {len(trace.climbs)} (goal <= {GOAL_CLIMBS}: {verdict})")
            for climb, n in Counter(trace.climbs).most_common():
                print(f"  climb x{n}: {climb}")


if __name__ == "__main__":
    main()
