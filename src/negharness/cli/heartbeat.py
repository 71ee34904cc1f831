"""A line on stderr every couple of seconds while a long stage of a run lasts (importing torch, building
the model, hashing a task's files), so a run is never silent for longer than that: a user at a terminal
or reading a log sees what it is waiting for. Stages shorter than the interval say nothing."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Iterator

INTERVAL_S = 2.0
# what each run-wide stage is, for a person waiting on it
SAID = {
    "data": "planning the run: building the tasks, hashing their files",
    "torch_import": "importing torch and open_clip",
    "model_import": "importing the model's plugin",
    "model_build": "building the model and loading its weights",
}


class Heartbeat:
    """Watches a `negharness.engine.stages.StageClock`: while one of `SAID`'s stages runs, a plain line
    every `INTERVAL_S` seconds, from a daemon thread (the main thread is busy: that is the point)."""

    def __init__(self, write: Any, interval: float = INTERVAL_S) -> None:
        self.write, self.interval = write, interval
        self._current: tuple[str, float] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="negharness-heartbeat", daemon=True)

    def __call__(self, stage: str, started: bool) -> None:
        if stage not in SAID:
            return
        with self._lock:
            self._current = (stage, time.monotonic()) if started else None

    def _beat(self) -> None:
        said, seen = 0.0, None
        while not self._stop.wait(self.interval / 4):
            with self._lock:
                current = self._current
            if current is None:
                continue
            if current != seen:  # another stage (or the same one again): its own count
                said, seen = 0.0, current
            waited = time.monotonic() - current[1]
            if waited >= said + self.interval:  # the next line an interval after this one, whenever this one came
                said = waited
                self.write(f"... {SAID[current[0]]} ({int(waited)} s)")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1)


@contextlib.contextmanager
def heartbeat(clock: Any, write: Any, interval: float = INTERVAL_S) -> Iterator[Heartbeat]:
    """``clock``'s long stages said every ``interval`` seconds through ``write`` while the block runs."""
    beat = Heartbeat(write, interval)
    clock.watch(beat)
    beat.start()
    try:
        yield beat
    finally:
        beat.stop()
