"""One exclusive lock on a file, held for a ``with`` block: the cache's collection mutex and the
fetchers' one-download-at-a-time share it. ``flock`` locks belong to the open file, so the kernel
drops a killed process's lock at once and a waiter needs no timeout. The lock file is kept, never
removed: removing a file another process waits on would let a third one in. Where ``flock`` is
missing (not POSIX) or refused (a filesystem without locks, ENOLCK), nothing waits: callers are
correct unlocked, only slower or repeating work.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]  # not POSIX: no advisory locks (callers check for None)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created if missing) for the block."""
    if fcntl is None:
        yield
        return
    with open(path, "ab") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX)
        except OSError:  # ENOLCK: unlocked, as without flock
            yield
            return
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
