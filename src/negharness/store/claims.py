"""Claims: which process is encoding which items of a cache collection right now.

Several runs on one cache (four identical commands, two tasks sharing a collection, torchrun ranks)
would otherwise each encode every item they lack. Before encoding, a process claims the keys that
no live claim holds, encodes only those, and waits for the others' claims to end before it reads
their items from the cache; what they did not deliver (a process killed, a broken file skipped)
it then claims itself. A claim is a file in ``<collection>/claims/`` holding its keys, locked
(``flock``) by its process for as long as it encodes: the kernel drops the lock when the process
dies, so a claim left by a ``kill -9`` is seen as stale at once and removed, and a waiter never
needs a timeout. Reading and writing claims, and merging shards, happen under the collection's
mutex (``<collection>/.lock``, held for milliseconds).

Where ``fcntl`` is missing (not POSIX), nothing is claimed: every process encodes what it lacks,
which is correct, only slower. On network filesystems ``flock`` works where the kernel maps it to
byte-range locks (Linux NFSv4); elsewhere processes on different hosts may repeat work, never mix it.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Sequence

from negharness.store.locks import locked

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]  # not POSIX: no advisory locks (callers check for None)


def folder_mutex(folder: Path) -> contextlib.AbstractContextManager[None]:
    """Exclusive, short: around reading or writing claims and around merging shards (unlocked where
    the filesystem has no locks: merges as before claims)."""
    return locked(folder / ".lock")


@dataclass
class Claim:
    """What one `Claims.take` gave: ``mine`` to encode now, ``others`` (claim file -> its keys
    among those asked for) to wait for."""

    mine: list[str]
    others: dict[Path, list[str]] = field(default_factory=dict)
    path: Path | None = None
    handle: IO[bytes] | None = None

    def holders(self) -> list[str]:
        """The other claimants, as their file names say (host and pid), for a waiting message."""
        host_pid = [p.stem.split("-", 1)[1].rsplit("-", 1) for p in self.others]
        return [f"pid {pid} on {host}" for host, pid in host_pid]


def _alive(path: Path) -> bool | None:
    """Whether the claim at ``path`` is held by a live process: None when the file is gone."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


class Claims:
    """The claims of one collection folder."""

    def __init__(self, folder: Path, host: str) -> None:
        self.folder = folder
        self.dir = folder / "claims"
        self.host = host

    def live(self) -> dict[Path, set[str]]:
        """Claim file -> keys, for every claim whose process still runs; stale ones are removed.
        Call under `folder_mutex`."""
        out: dict[Path, set[str]] = {}
        if not self.dir.is_dir():
            return out
        for path in sorted(self.dir.glob("*.claim")):
            state = _alive(path)
            if state is False:
                path.unlink(missing_ok=True)  # its process died: the kernel released its lock
            elif state:
                try:
                    out[path] = set(path.read_text(encoding="ascii").split())
                except FileNotFoundError:
                    continue  # released between the check and the read
        return out

    def take(self, keys: Sequence[str]) -> Claim:
        """Claim the ``keys`` no live claim holds; the rest are listed per claimant."""
        if fcntl is None or not keys:
            return Claim(list(keys))
        try:
            return self._take(keys)
        except OSError:  # no locks on this filesystem, or no room for a claim file: claim nothing, encode all
            return Claim(list(keys))

    def _take(self, keys: Sequence[str]) -> Claim:
        with folder_mutex(self.folder):
            held: dict[str, Path] = {}
            for path, ks in self.live().items():
                held.update(dict.fromkeys(ks, path))
            claim = Claim([k for k in keys if k not in held])
            for k in keys:
                if k in held:
                    claim.others.setdefault(held[k], []).append(k)
            if claim.mine:
                self._write(claim)
        return claim

    def _write(self, claim: Claim) -> None:
        """The claim file, locked before any other process can read it (we hold the mutex)."""
        self.dir.mkdir(exist_ok=True)
        claim.path = self.dir / f"{time.time_ns()}-{self.host}-{os.getpid()}.claim"
        fh = open(claim.path, "wb")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.write("\n".join(claim.mine).encode("ascii"))
            fh.flush()
        except OSError:
            fh.close()
            claim.path.unlink(missing_ok=True)
            raise
        claim.handle = fh

    @staticmethod
    def release(claim: Claim) -> None:
        """End the claim: its waiters wake and read what was written to the cache."""
        if claim.path is not None:
            claim.path.unlink(missing_ok=True)
        if claim.handle is not None:
            claim.handle.close()  # closing drops the lock
        claim.path = claim.handle = None

    @staticmethod
    def wait(claim: Claim) -> None:
        """Block until every other claimant of ``claim`` has released (or died)."""
        for path in claim.others:
            try:
                fh = open(path, "rb")
            except FileNotFoundError:
                continue
            with fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_SH)
                except OSError:
                    continue  # cannot wait on it: the caller reads what is there and encodes the rest
