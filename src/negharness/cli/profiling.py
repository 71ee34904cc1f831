"""A cProfile of one command, every thread: ``--profile FILE`` or ``$NEGHARNESS_PROFILE=FILE``.

The console script ends a run that loaded torch with ``os._exit`` (`negharness.cli.process.exit_now`),
so a profiler wrapped around the process (``python -m cProfile``) never writes its file; this one
is stopped and written by ``main`` itself, before that exit. cProfile alone sees only the thread that
enabled it; threads started while the command runs (the decode pool) get a profiler each, and the
file holds all of them, summed (`pstats` reads it: ``python -m pstats FILE``).
"""

from __future__ import annotations

import cProfile
import marshal
import os
import pstats
import sys
import threading
from pathlib import Path
from typing import Any

from negharness.contracts.errors import UserError
from negharness.io.atomic_files import atomic_write_bytes

PROFILE_ENV = "NEGHARNESS_PROFILE"


def profile_target(flag: str | None) -> Path | None:
    """Where the profile goes: ``--profile FILE``, else ``$NEGHARNESS_PROFILE``; its folder must exist
    (said now, not after a long run)."""
    raw = flag or os.environ.get(PROFILE_ENV)
    if not raw:
        return None
    option = "--profile" if flag else f"${PROFILE_ENV}"
    path = Path(raw).expanduser()
    if path.is_dir():
        raise UserError(f"{option} {raw}: is a folder; name the file to write (e.g. {path / 'run.prof'})")
    if not path.parent.is_dir():
        raise UserError(f"{option} {raw}: folder {path.parent} does not exist")
    return path


class CommandProfile:
    """cProfile of the calling thread and of every thread started while it is enabled."""

    def __init__(self) -> None:
        self.main = cProfile.Profile()
        self.threads: list[tuple[str, cProfile.Profile]] = []
        self._lock = threading.Lock()

    def _on_thread_start(self, _frame: Any, _event: str, _arg: Any) -> None:
        """The first profile event of a new thread: from then on it has its own profiler."""
        sys.setprofile(None)
        prof = cProfile.Profile()
        with self._lock:
            self.threads.append((threading.current_thread().name, prof))
        prof.enable()

    def __enter__(self) -> "CommandProfile":
        threading.setprofile(self._on_thread_start)
        self.main.enable()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.main.disable()
        threading.setprofile(None)

    def groups(self) -> dict[str, pstats.Stats]:
        """"main", then the started threads by name prefix (``negharness-decode``; "other")."""
        out = {"main": pstats.Stats(self.main)}
        with self._lock:
            threads = list(self.threads)
        for name, prof in threads:
            prof.create_stats()
            group = name.rsplit("_", 1)[0] if name.startswith("negharness-") else "other"
            if group in out:
                out[group].add(prof)
            else:
                out[group] = pstats.Stats(prof)
        return out

    def write(self, path: Path) -> Path:
        """Every thread's calls summed, in pstats' file format, written atomically."""
        merged: pstats.Stats | None = None
        for stats in self.groups().values():
            if merged is None:
                merged = stats
            else:
                merged.add(stats)
        assert merged is not None
        return atomic_write_bytes(path, marshal.dumps(merged.stats))  # type: ignore[attr-defined]
