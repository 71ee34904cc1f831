"""What a `negharness` process does around its command, torch-free: the thread policy before torch
loads, the torchrun rank it is, progress lines outside a terminal, any failure as one line, and the exit.

Every command passes through here, a quick one (``list --brief``, ``leaderboard``, a typo) too; so
nothing here imports torch or a model's code, and ``engine/`` keeps only what runs a model
(tests/test_cli_imports.py runs the console script and fails if one of those commands imports torch).
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence, TextIO

from negharness.contracts.errors import DEBUG_ENV, DEBUG_HINT, UserError, message_of
from negharness.contracts.options import env_flag
from negharness.engine.ranks import torchrun_env
from negharness.fetch.sources import human_size


# thread policy -------------------------------------------------------------------------------------
def prefer_passive_waiting() -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless the user chose a policy or torch is already loaded.

    Between parallel regions torch's OpenMP threads spin before sleeping, taking the CPU from the
    runner's decode thread: passive waiting returned 5-10 points of decode-in-the-loop throughput on
    2 cores with no clear change to the pure forward (perf/bench_decode_throughput.py). OpenMP reads
    the setting once, when torch loads, so it is chosen before the first ``import torch``; a value
    the user set always wins. Returns whether the setting will take effect.
    """
    if "torch" in sys.modules:
        return os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE"
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return os.environ["OMP_WAIT_POLICY"].upper() == "PASSIVE"


# torchrun ranks (read in `negharness.engine.ranks`, which the engine shares) ---------------------
def rank_label() -> str:
    """"rank N: " on torchrun ranks other than 0 (their errors would otherwise read as repeats), else ""."""
    try:
        env = torchrun_env()
    except UserError:
        return ""
    return f"rank {env[1]}: " if env and env[1] else ""


def torchrun_argv(nproc: int, argv: Sequence[str]) -> list[str]:
    """This command again under torchrun on one node, without ``--nproc``."""
    rest: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--nproc":
            skip = True
            continue
        if a.startswith("--nproc="):
            continue
        rest.append(a)
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            "-m", "negharness", *rest]


# the exit ------------------------------------------------------------------------------------------
def exit_now(code: int) -> None:
    """End a console-script process whose command is over: output flushed, then, where the run
    loaded torch, without the interpreter's teardown.

    Tearing torch, open_clip and transformers down took ~4 s after the last record was written
    (perf/bench_readme_times.py), and gloo's threads torn down at interpreter exit aborted a
    finished torchrun rank ("terminate called without an active exception"), turning a good run
    into torchrun's failure. Skipping it is safe because nothing is left to it: records and cache
    shards are written atomically and fsync'd before the command returns; ``atexit`` handlers
    (multiprocessing's worker reaping, logging's flush, temporary folders) still run first. A
    process that never loaded torch, or where another thread is still working, exits as usual. Never
    called from ``main(argv)``, which in-process callers (tests, notebooks) use.
    """
    import threading

    others = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
    if "torch" not in sys.modules or others:  # a thread still working is joined, as Python would
        return
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing left to tell
            pass
    os._exit(code)


# one-line failures ---------------------------------------------------------------------------------
_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


class PluginRunError(Exception):
    """A plugin (or negharness itself) raised something unexpected during a run. Exit 1, not 2:
    the user's input may be fine."""

    exit_code = 1


def debug_requested() -> bool:
    return env_flag(DEBUG_ENV)


def chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and its causes/contexts, outermost first (each once)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def os_error_in(exc: BaseException) -> OSError | None:
    """The first OSError in the chain, where the failure is the machine's, not the code's. A library
    that wraps the system's error in its own type (safetensors' writer does) still says "No space
    left on device" (or Rust's "StorageFull"): that counts as the OSError it was."""
    found = next((e for e in chain(exc) if isinstance(e, OSError) and not isinstance(e, UserError)), None)
    if found is None and any(s in str(e) for e in chain(exc) for s in ("No space left on device", "StorageFull")):
        found = OSError(errno.ENOSPC, "No space left on device")
    return found


def describe_os_error(err: OSError, where: str) -> str:
    """One line naming the path: 'no space left on device writing /x/y (...)'."""
    path = err.filename or ""
    if err.errno in _NO_SPACE:
        target = f"writing {path}" if path else f"writing under {where}"
        return (f"no space left on device {target}; records and cached embeddings finished before it are "
                f"kept: free space (or choose another --cache-dir/--output-dir) and rerun to resume")
    what = err.strerror or type(err).__name__
    return f"{path}: {what}" if path else f"{what} (under {where})"


def one_line(exc: BaseException, where: str) -> tuple[str, int]:
    """Every failure as (message, exit code): 2 for the user's input or machine, 1 for a plugin's bug.
    ``where`` names the folders a run writes, for a full disk that reports no path."""
    if isinstance(exc, UserError):
        return message_of(exc), exc.exit_code
    if isinstance(exc, PluginRunError):
        return str(exc), exc.exit_code
    os_err = os_error_in(exc)
    if os_err is not None:
        return describe_os_error(os_err, where), 2
    return f"unexpected {type(exc).__name__}: {message_of(exc)}; {DEBUG_HINT}", 1


# progress outside a terminal -----------------------------------------------------------------------
DEFAULT_INTERVAL = 5.0


def _interval_from_env() -> float:
    try:
        return max(0.0, float(os.environ.get("NEGHARNESS_PROGRESS_INTERVAL", DEFAULT_INTERVAL)))
    except ValueError:
        return DEFAULT_INTERVAL


@dataclass
class _Bar:
    description: str
    total: float | None
    completed: float
    started: float
    unit: str = ""  # "bytes": sizes, rate and time left (downloads)


class LogProgress:
    """Progress outside a terminal: a log line every few seconds, so a long run under CI, nohup or a
    job scheduler shows it is alive and how far it got (a live bar would print nothing, or garbage).

    Speaks the part of Rich's ``Progress`` API that the runner and trainers use (``add_task``,
    ``advance``, ``update``, context manager). A short run prints nothing: the first line comes
    once ``interval`` seconds have passed (``$NEGHARNESS_PROGRESS_INTERVAL``, default 5 s)."""

    def __init__(self, stream: TextIO, interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic, idle_lines: bool = False) -> None:
        self.stream = stream
        self.interval = _interval_from_env() if interval is None else interval
        self.clock = clock
        self._bars: dict[int, _Bar] = {}
        self._last = self._started = clock()
        # ``idle_lines``: a line even while nothing advances (a trainer building its data for minutes)
        self._idle: threading.Thread | None = None
        self._stop = threading.Event()
        if idle_lines:
            self._idle = threading.Thread(target=self._while_idle, name="negharness-progress", daemon=True)

    def __enter__(self) -> "LogProgress":
        if self._idle is not None:
            self._idle.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._idle is not None and self._idle.is_alive():
            self._idle.join(timeout=1)
        return None

    def _while_idle(self) -> None:
        """Every interval with no line said: the newest bar as it stands, or that work has not reached one."""
        while not self._stop.wait(self.interval / 4):
            now = self.clock()
            if now - self._last < self.interval:
                continue
            self._last = now
            bars = list(self._bars.values())
            if bars:
                self._log(bars[-1], now)
            else:
                self.stream.write(f"[negharness] working: {now - self._started:.0f}s, nothing counted yet "
                                  "(loading, preparing data)\n")
                self.stream.flush()

    def add_task(self, description: str, total: float | None = None, unit: str = "", **_: Any) -> int:
        task_id = len(self._bars)
        self._bars[task_id] = _Bar(description, total, 0, self.clock(), unit)
        return task_id

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def update(self, task_id: int, advance: float = 0, description: str | None = None,
               completed: float | None = None, total: float | None = None, **_: Any) -> None:
        bar = self._bars[task_id]
        bar.completed = completed if completed is not None else bar.completed + advance
        bar.description = description or bar.description
        bar.total = total if total is not None else bar.total
        now = self.clock()
        if now - self._last >= self.interval:
            self._last = now
            self._log(bar, now)

    def _log(self, bar: _Bar, now: float) -> None:
        if bar.unit == "bytes":
            self.stream.write(f"[negharness] {bar.description}: {_bytes_line(bar, now)}\n")
            self.stream.flush()
            return
        of = ""
        if bar.total:
            of = f"/{bar.total:g} ({100 * bar.completed / bar.total:.0f}%)"
        self.stream.write(f"[negharness] {bar.description}: {bar.completed:g}{of}, {now - bar.started:.0f}s\n")
        self.stream.flush()


def _bytes_line(bar: _Bar, now: float) -> str:
    """'12.3 MB of 815.6 MB (2%), 2.1 MB/s, 6 min 12 s left' (a download outside a terminal)."""
    rate = bar.completed / max(now - bar.started, 1e-9)
    text = human_size(int(bar.completed))
    if bar.total:
        text += f" of {human_size(int(bar.total))} ({100 * bar.completed / bar.total:.0f}%)"
    text += f", {human_size(int(rate))}/s"
    if bar.total and rate > 0:
        left = max(bar.total - bar.completed, 0) / rate
        text += f", {int(left // 60)} min {int(left % 60)} s left"
    return text
