"""HTTP downloads that resume, verify and never leave a partial file under its final name.

Bytes go to ``<file>.part``; an interrupted transfer (a dropped connection, a killed process)
resumes from the part's size with a ``Range`` request; the whole file is then hashed and renamed
into place only when it matches what is known of it (a pinned SHA-256, a published MD5, a git blob
id, or the hash of the first download recorded in the manifest). A file that does not match is
moved to ``<file>.rejected`` and refused: kept for inspection, never read. `exclusive` lets one
process at a time fetch a file (torchrun ranks, two runs on one cache would otherwise write one part).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from negharness.contracts.errors import UserError
from negharness.contracts.options import env_flag
from negharness.fetch import hub
from negharness.fetch.sources import human_size
from negharness.store.locks import locked
from negharness.version import __version__

CHUNK = 1 << 16
RETRIES = 5
TIMEOUT_S = 60.0


@contextlib.contextmanager
def exclusive(dest: Path) -> Iterator[None]:
    """Held while this process checks and fetches ``dest``: another process (a torchrun rank, a second
    run on the cache) waits on ``<dest>.lock``, then finds the file in place instead of writing the same
    ``.part`` beside it. The kernel drops the lock of a killed process. Without ``flock`` (not POSIX, a
    filesystem without locks) nothing waits, as before."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with locked(dest.with_name(dest.name + ".lock")):
        yield


class OfflineError(UserError):
    """No network (or ``HF_HUB_OFFLINE=1``): the message names the file, its URL and its size."""


@dataclass(frozen=True)
class Transfer:
    """One file to download: from ``url`` to ``dest``, held to what is known of its content."""

    label: str  # the source's name, for messages
    url: str
    dest: Path
    sha256: str | None = None
    md5: str | None = None
    git_blob: str | None = None
    size: int | None = None  # expected bytes (display and offline message only)
    sha1: str | None = None
    lands: Path | None = None  # where the files end up, when not ``dest`` (an archive's unpacked folder)
    note: str = ""  # said with the offline message (a gated dataset: what to do first)


@dataclass(frozen=True)
class Fetched:
    """A file in place: its SHA-256 and the response headers that matter (the hub's commit)."""

    path: Path
    sha256: str
    size: int
    commit: str | None = None


class Meter:
    """One progress bar for every transfer at once (thread-safe): ``progress`` speaks Rich's
    ``Progress`` API (`negharness.cli.process.LogProgress` outside a terminal)."""

    def __init__(self, progress: Any = None, total: int | None = None) -> None:
        self.progress = progress
        self._lock = threading.Lock()
        self._total = total or 0
        self._task = progress.add_task("fetch", total=total or None, unit="bytes") if progress is not None else None

    def advance(self, n: int) -> None:
        if self.progress is not None:
            with self._lock:
                self.progress.advance(self._task, n)

    def correct_total(self, expected: int | None, actual: int) -> None:
        """The server's Content-Length replaces the table's estimate in the bar's total."""
        if self.progress is not None and actual != (expected or 0):
            with self._lock:
                self._total += actual - (expected or 0)
                self.progress.update(self._task, total=self._total)


def offline() -> bool:
    """``HF_HUB_OFFLINE=1``: the user said there is no network; nothing is tried."""
    return env_flag("HF_HUB_OFFLINE")


def offline_error(t: Transfer, why: str = "HF_HUB_OFFLINE=1") -> OfflineError:
    """One line: the file, its URL and size, and the path it goes to (``t.lands``, else ``t.dest``),
    so it can be fetched elsewhere and copied there."""
    return OfflineError(f"offline ({why}): cannot download {_goes(t)}; run `negharness fetch {t.label}` where there "
                        f"is a network and copy {t.lands or t.dest} here (or put the file there yourself)")


def offline_errors(ts: list[Transfer], why: str = "HF_HUB_OFFLINE=1") -> OfflineError:
    """`offline_error` for several files: one line each, saying where each goes."""
    if len(ts) == 1:
        return offline_error(ts[0], why)
    lines = "\n".join(f"  {_goes(t)}" for t in ts)
    return OfflineError(f"offline ({why}): cannot download {len(ts)} files; run the same `negharness fetch` where "
                        f"there is a network and copy each to its place (or put it there yourself):\n{lines}")


def _goes(t: Transfer) -> str:
    """"NAME from URL (SIZE) into PATH", and the note (a gated dataset's first step)."""
    return (f"{t.label} from {t.url} ({human_size(t.size)}) into {t.lands or t.dest}"
            + (f" ({t.note})" if t.note else ""))


def _request(url: str, have: int) -> urllib.request.Request:
    headers = {"User-Agent": f"negharness/{__version__}"}
    if hub.is_hub_url(url) and (key := hub.token()):  # a gated dataset; never sent to another host
        headers["Authorization"] = f"Bearer {key}"
    if have:
        headers["Range"] = f"bytes={have}-"
    return urllib.request.Request(url, headers=headers)


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects as urllib does, but keeps the hub's ``X-Repo-Commit`` from the first answer
    (a large hub file is a redirect to a CDN, whose answer has no such header) and drops the token
    when the redirect leaves the host it was meant for."""

    def __init__(self) -> None:
        super().__init__()
        self.commit: str | None = None

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        self.commit = self.commit or headers.get("X-Repo-Commit")
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc:
            new.remove_header("Authorization")
        return new


def _is_unreachable(exc: BaseException) -> bool:
    """A name that does not resolve or a host that refuses: no network, rather than a bad transfer."""
    reason = getattr(exc, "reason", exc)
    return isinstance(reason, (socket.gaierror, ConnectionRefusedError, OSError)) and not isinstance(
        reason, (socket.timeout, ConnectionResetError))


def _receive(resp: Any, part: Path, have: int, meter: Meter, t: Transfer) -> int | None:
    """Append the response body to ``part``; the full size when the server said it, else None."""
    if resp.headers.get_content_type() == "text/html" and not t.dest.name.endswith((".html", ".htm")):
        raise UserError(f"{t.label}: {t.url} answered a web page, not the file (a sign-in, quota or virus-scan "
                        "page?); nothing was kept: open the URL in a browser, or put the file in place by hand")
    length = resp.headers.get("Content-Length")
    resumed = have and resp.status == 206
    if have and not resumed:  # the server ignored the range: start over
        meter.advance(-have)
        have = 0
    total = have + int(length) if length is not None else None
    if not resumed:
        meter.correct_total(t.size, total or 0)
    part.parent.mkdir(parents=True, exist_ok=True)  # only once there are bytes: offline leaves no folder
    with open(part, "ab" if resumed else "wb") as fh:
        while chunk := resp.read(CHUNK):
            fh.write(chunk)
            meter.advance(len(chunk))
    return total


def _transfer(t: Transfer, part: Path, meter: Meter, sleep: Callable[[float], None]) -> str | None:
    """Bring ``part`` to the whole file, resuming across dropped connections; the hub's commit header."""
    last: BaseException | None = None
    for attempt in range(RETRIES + 1):
        have = part.stat().st_size if part.exists() else 0
        try:
            redirects = _Redirects()
            with urllib.request.build_opener(redirects).open(_request(t.url, have), timeout=TIMEOUT_S) as resp:
                total = _receive(resp, part, have, meter, t)
                commit = resp.headers.get("X-Repo-Commit") or redirects.commit
            if total is None or part.stat().st_size >= total:
                return commit
            last = ConnectionError(f"connection closed at {part.stat().st_size} of {total} bytes")
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and have:  # nothing left to send: the part is whole
                return None
            if exc.code < 500:
                raise UserError(f"{t.label}: {t.url} answered HTTP {exc.code} ({exc.reason})"
                                + (hub.refused_help(t.url, exc.code) or "; the source may have moved: check the URL "
                                   "in the sources table (`negharness fetch --list`)")
                                + f"; the file goes to {t.lands or t.dest}") from exc
            last = exc
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            if attempt == 0 and have == 0 and not part.exists() and _is_unreachable(exc):
                raise offline_error(t, f"{getattr(exc, 'reason', exc)}") from exc
            last = exc
        sleep(min(2.0 ** attempt, 30.0) * 0.1)
    raise UserError(f"{t.label}: download from {t.url} failed after {RETRIES + 1} tries ({last}); run the same "
                    f"command again to resume from {part}")


def _git_blob_id(path: Path, size: int) -> str:
    digest = hashlib.sha1(f"blob {size}\0".encode())
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _digests(path: Path) -> tuple[str, str, str]:
    """SHA-256, MD5 and SHA-1 in one read (an archive of gigabytes is read once)."""
    digests = hashlib.sha256(), hashlib.md5(), hashlib.sha1()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            for d in digests:
                d.update(block)
    return digests[0].hexdigest(), digests[1].hexdigest(), digests[2].hexdigest()


def verify_part(t: Transfer, part: Path) -> str:
    """The part's SHA-256 when it matches every known checksum; else it is moved to ``.rejected``
    and refused, naming both hashes."""
    size = part.stat().st_size
    sha, md5, sha1 = _digests(part)
    wrong = next(((kind, want, got) for kind, want, got in (
        ("SHA-256", t.sha256, sha), ("MD5", t.md5, md5), ("SHA-1", t.sha1, sha1),
        ("git blob id", t.git_blob, _git_blob_id(part, size) if t.git_blob else None)) if want and want != got), None)
    if wrong:
        rejected = t.dest.with_name(t.dest.name + ".rejected")
        os.replace(part, rejected)
        kind, want, got = wrong
        raise UserError(f"{t.label}: the file downloaded from {t.url} has {kind} {got}, not the expected {want}; "
                        f"refused and kept aside as {rejected} (the source changed or the transfer was corrupted)")
    return sha


def download(t: Transfer, meter: Meter | None = None, sleep: Callable[[float], None] = time.sleep) -> Fetched:
    """``t.url`` into ``t.dest``, resumed from a ``.part`` file, verified, renamed into place."""
    if offline():
        raise offline_error(t)
    meter = meter or Meter()
    part = t.dest.with_name(t.dest.name + ".part")
    if t.dest.exists() and not part.exists():  # a whole archive left by an unpack that failed: check, not refetch
        os.replace(t.dest, part)
    if part.exists():
        meter.advance(part.stat().st_size)
    commit = _transfer(t, part, meter, sleep)
    sha = verify_part(t, part)
    size = part.stat().st_size
    os.replace(part, t.dest)
    return Fetched(t.dest, sha, size, commit)
