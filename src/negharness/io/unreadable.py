"""The one rule for media that cannot be read (``--skip-broken-media``), for every decoder and both
protocols' contexts.

Without the flag an unreadable file stops the run with the `MediaError` that names it; with it the
item is left out, counted (``media_skipped``) and named in the record (``skipped_media``). The rule
was written four times (Pillow items, tensor files, batched tensor decoding, NeIn's edits) and the
bookkeeping twice (the embedding runner, the editing context); a copy that forgot it stopped a
``--skip-broken-media`` run on the batched (CUDA) path where the CPU path skipped the same file.
Now every decoder asks `UnreadableMedia.attempt` (or `message`) and every context counts and names
through `UnreadableMedia.leave_out`.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, MutableMapping, TypeVar

from negharness.contracts.errors import MediaError

T = TypeVar("T")


class UnreadableMedia:
    """Skip or fail, and what was skipped: per collection key, the ids left out, in order.

    Decoders get the object itself (`attempt`, `message`), in threads or worker processes alike; a
    copy in a worker process only decides, and the context's own object, in the main process, keeps
    the count (``counters["media_skipped"]``, the context's counters) and the names."""

    def __init__(self, skip: bool = False, counters: MutableMapping[str, Any] | None = None) -> None:
        self.skip = bool(skip)
        self.counters: MutableMapping[str, Any] = counters if counters is not None else {}
        self.skipped: dict[str, list[str]] = {}  # collection key -> ids left out (the record's skipped_media)

    @classmethod
    def of(cls, policy: "UnreadableMedia | bool") -> "UnreadableMedia":
        """``policy`` itself, or a policy that skips when given True (decoders' older ``skip_broken``)."""
        return policy if isinstance(policy, UnreadableMedia) else cls(bool(policy))

    def __getstate__(self) -> dict[str, Any]:
        """What a worker process needs: the decision only (the count and names stay in the main process)."""
        return {"skip": self.skip}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.skip, self.counters, self.skipped = bool(state["skip"]), {}, {}

    def message(self, error: MediaError) -> str:
        """The decision: ``error`` is raised (the run stops naming the file) unless media are skipped;
        then its one-line message, which the context's `leave_out` records."""
        if not self.skip:
            raise error
        return str(error)

    def attempt(self, position: int, read: Callable[[], T]) -> tuple[int, T | str]:
        """``(position, read())``, or, when ``read`` raises a `MediaError` and media are skipped,
        ``(position, message)``: how every decoder hands an item, or its failure, to the runner."""
        try:
            return position, read()
        except MediaError as exc:
            return position, self.message(exc)

    def leave_out(self, key: str, name: str, message: str | None) -> None:
        """Count and name an item left out of collection ``key`` (its id or file ``name``), with a
        warning quoting why (none for a copy of an item already reported): the one bookkeeping of
        both contexts."""
        self.skipped.setdefault(key, []).append(name)
        self.counters["media_skipped"] = self.counters.get("media_skipped", 0) + 1
        if message is not None:
            warnings.warn(f"skipped unreadable media: {message}", stacklevel=3)

    def unreadable(self, key: str, name: str, error: MediaError) -> None:
        """An item whose file could not be read, seen by the caller itself (NeIn's inputs): the run
        stops with ``error``, or the item is left out, counted and named (`leave_out`)."""
        self.leave_out(key, name, self.message(error))

    @property
    def count(self) -> int:
        """How many items were left out, over every collection."""
        return sum(len(v) for v in self.skipped.values())
