"""Progress outside a terminal: a log line every few seconds, so a long run under CI, nohup or a
job scheduler shows it is alive and how far it got (a live bar would print nothing, or garbage).

`LogProgress` speaks the part of Rich's ``Progress`` API that the runner and trainers use
(``add_task``, ``advance``, ``update``, context manager). A short run prints nothing: the first line
comes once ``interval`` seconds have passed (``$NEGHARNESS_PROGRESS_INTERVAL``, default 5 s).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, TextIO

from negharness.fetch.sources import human_size

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
    def __init__(self, stream: TextIO, interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.interval = _interval_from_env() if interval is None else interval
        self.clock = clock
        self._bars: dict[int, _Bar] = {}
        self._last = clock()

    def __enter__(self) -> "LogProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

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
