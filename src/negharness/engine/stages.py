"""Where a run's time goes, stage by stage, for its records (``timings``): named here once.

A record's ``timings`` has ``wall_s`` (process start to the record, where the process's start is
known: runs from the command line), ``total_s`` (the task's evaluation, from its first embedding to its
metrics), ``encode_s`` (the runner's encoding loops) and one ``<stage>_s`` per stage in `STAGES`
that the run measured; a stage nothing measured is absent, never 0. The run-wide stages (`RUN_WIDE`) are the same in every record of one run; the others are
the task's own. Parts never add to more than the whole they are part of: ``forward`` + ``decode`` +
``tokenise`` fit in the task's embedding time, and that plus ``score`` is ``total_s``.

The loops that decode media and tokenise texts (`negharness.engine.runner`) report through the
context's clock: ``ctx.stages.add("decode", seconds)`` for the time the loop waited on a decoded
batch, ``ctx.stages.add("tokenise", seconds)`` for the time spent tokenising outside the model's
forward. Torch-free: the CLI imports it before deciding whether torch is needed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from typing import Any, Callable, Iterator, Mapping, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

# stage -> what it measures; a record's timings name each as "<stage>_s"
STAGES: dict[str, str] = {
    "startup": "process start (the command's, when `main` is called from Python) to the CLI ready: "
               "the interpreter, the CLI's imports, the parse",
    "plan": "the CLI ready to the run's planning: the plugin host",
    "torch_import": "how long the run waited for `import torch, open_clip` (0 where they were already loaded)",
    "data": "the run planned (`negharness.engine.plan.make_plan`): the request's checks, building the tasks, "
            "checking and hashing their data files, each record's verdict",
    "model_import": "importing the model plugin's module and what it imports at its top",
    "model_build": "the plugin's factory: the libraries it imports inside (open_clip's plugin imports open_clip, "
                   "torchvision, timm and transformers here), building the model, loading its weights",
    "decode": "time the media loop waited on decoded batches (reported by the runner's media loop)",
    "tokenise": "tokenising texts outside the forward pass (reported by the runner's text loop)",
    "forward": "the model's encode calls, transfers to and from the device included",
    "embed": "the task's embedding calls: cache lookups, media hashing, the encoding loops",
    "score": "the task's evaluation outside its embedding calls: reading its files, scoring",
    "write": "building the record and writing its per-query and sample files (the record's own write excluded)",
}
RUN_WIDE = ("startup", "plan", "torch_import", "data", "model_import", "model_build")


class StageClock:
    """Seconds per stage, added from any thread (the decode pool too). ``add`` refuses a name not
    in `STAGES`, so a typo is an error, not a silent new field."""

    def __init__(self, started_at: float | None = None) -> None:
        self.started_at = started_at  # the process's start on `time.perf_counter`'s scale, where known
        self._seconds: dict[str, float] = {}
        self._lock = threading.Lock()
        self._watchers: list[Callable[[str, bool], None]] = []

    def watch(self, watcher: Callable[[str, bool], None]) -> None:
        """Call ``watcher(stage, True)`` as each `timed` stage starts and ``(stage, False)`` as it ends:
        what lets the console say a long stage is still going (`negharness.cli.heartbeat`)."""
        self._watchers.append(watcher)

    def fork(self, shared: tuple[str, ...] = ("startup", "plan")) -> StageClock:
        """A clock for one model of a run of several: the process's start, watchers and ``shared``
        stages (what the process paid once, before any model), the rest its own, so a model's records
        never count another model's planning, import or build."""
        child = StageClock(self.started_at)
        child._watchers = list(self._watchers)
        for stage, s in self.seconds().items():
            if stage in shared:
                child.add(stage, s)
        return child

    def wall(self) -> float | None:
        """Seconds since the process started (None where unknown): a record's ``wall_s``."""
        return None if self.started_at is None else time.perf_counter() - self.started_at

    def add(self, stage: str, seconds: float) -> None:
        if stage not in STAGES:
            raise KeyError(f"unknown stage {stage!r} (stages: {', '.join(STAGES)})")
        with self._lock:
            self._seconds[stage] = self._seconds.get(stage, 0.0) + max(0.0, seconds)

    @contextlib.contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        for watcher in self._watchers:
            watcher(stage, True)
        try:
            yield
        finally:
            self.add(stage, time.perf_counter() - start)
            for watcher in self._watchers:
                watcher(stage, False)

    def seconds(self) -> dict[str, float]:
        with self._lock:
            return dict(self._seconds)


def timed_method(stage: str) -> Callable[[F], F]:
    """A method whose calls count towards ``stage`` on its object's ``stages`` clock."""
    def wrap(method: F) -> F:
        @functools.wraps(method)
        def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            with self.stages.timed(stage):
                return method(self, *args, **kwargs)
        return cast(F, timed)  # cast: `functools.wraps` keeps the method's signature, which mypy cannot see
    return wrap


def stage_timings(*clocks: Mapping[str, float]) -> dict[str, float]:
    """The record's ``<stage>_s`` fields from one or more clocks' seconds, in `STAGES` order."""
    merged: dict[str, float] = {}
    for clock in clocks:
        for stage, s in clock.items():
            merged[stage] = merged.get(stage, 0.0) + s
    return {f"{stage}_s": round(merged[stage], 3) for stage in STAGES if stage in merged}


def seconds_since_process_start() -> float | None:
    """Seconds since the kernel started this process (Linux: /proc), None where it does not say.
    What `import` costs before any of our code runs (the interpreter, site, the console script)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        ticks = os.sysconf("SC_CLK_TCK")
        return max(0.0, uptime - int(fields[19]) / ticks)  # field 22 of stat: starttime, in clock ticks
    except (OSError, ValueError, IndexError):
        return None
