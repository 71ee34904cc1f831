"""The host's side of each computed batch, one batch behind the device.

After a batch's forward the host copies its embeddings to the CPU, checks them against the model
contract (`EmbeddingContract`), keeps them and adds them to the cache. Done in the encoding loop,
that work (5 ms a batch of 256 with the cache on, measured by perf/gpu_sim.py) stood between one
forward and the next, and the copy back waited for the device. Here a `BatchKeeper` takes each batch
as its forward returns, starts the copy (on CUDA into pinned memory, without waiting: an event marks
its end) and does the rest in a thread of its own while the loop starts the next batch's forward.
The loop waits for batch k-1's bookkeeping only once batch k is handed over: never more than one batch
behind, so what a crash or Ctrl-C loses is still the batch in flight. A batch that breaks the contract
is never cached; the loop stops at the next batch with its `UserError`, and nothing after it is kept.

`Rows` keeps embeddings by position in the blocks they came in (a batch, a cache lookup): no tensor
object per row (a dict of row views and a stack of them cost 3.6 us a row).
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, Callable, Sequence

import numpy as np
import torch

from negharness.engine.embedding_contract import EmbeddingContract


class Rows:
    """Embeddings by position (0..n-1 of a table being assembled), kept as the blocks they came in."""

    def __init__(self) -> None:
        self._blocks: list[tuple[list[int], torch.Tensor]] = []
        self._have: set[int] = set()
        self._aliases: list[tuple[int, int]] = []  # (position, the position whose row it shares)

    def add(self, positions: Sequence[int], table: torch.Tensor) -> None:
        """Rows of ``table`` for ``positions``, in order (a later block wins a position given twice)."""
        if len(positions):
            self._blocks.append((list(positions), table))
            self._have.update(positions)

    def share(self, position: int, source: int) -> None:
        """``position`` gets the row of ``source`` (an item of equal content), which must be present."""
        self._aliases.append((position, source))
        self._have.add(position)

    def __contains__(self, position: int) -> bool:
        return position in self._have

    def __len__(self) -> int:
        return len(self._have)

    def missing(self, n: int) -> list[int]:
        """The positions below ``n`` that have no row, ascending."""
        return [i for i in range(n) if i not in self._have]

    def table(self, n: int) -> torch.Tensor:
        """(n, D) float32: row i is position i's, NaN where it has none (D is 1 when no row is known).
        Assembled in numpy: torch's indexed copies woke its OpenMP threads for each block (300 ms for
        4,096 rows of 512 on two loaded cores, against 2 ms)."""
        dim = self._blocks[0][1].shape[1] if self._blocks else 1
        out = np.empty((n, dim), np.float32) if len(self._have) == n else np.full((n, dim), np.nan, np.float32)
        for positions, block in self._blocks:
            out[np.asarray(positions, dtype=np.int64)] = block.numpy()
        if self._aliases:
            to, source = zip(*self._aliases)
            out[np.asarray(to, dtype=np.int64)] = out[np.asarray(source, dtype=np.int64)]
        return torch.from_numpy(out)


def staged(raw: Any) -> tuple[Any, Any]:
    """``raw`` on its way to the host: a CUDA tensor's copy into pinned memory is queued on the current
    stream and not waited for (the event returned marks its end); anything else as it is (None)."""
    if isinstance(raw, torch.Tensor) and raw.device.type == "cuda":
        host = torch.empty(raw.shape, dtype=raw.dtype, pin_memory=True)
        host.copy_(raw.detach(), non_blocking=True)  # queued on the source device's current stream
        done = torch.cuda.Event()
        done.record(torch.cuda.current_stream(raw.device))
        return host, done
    return raw, None


def landed(host: Any, done: Any) -> Any:
    """A `staged` value once its copy has ended, out of pinned memory (which is kept for transfers)."""
    if done is None:
        return host
    done.synchronize()  # releases the GIL while the device finishes
    return torch.empty(host.shape, dtype=host.dtype).copy_(host)


Keep = Callable[[torch.Tensor], None]  # what is done with a batch's checked (n, D) float32 rows


class BatchKeeper:
    """One batch behind the forward pass: `keep` hands over a computed batch and returns as soon as the
    previous one is done with (its error, if any, raised then); a context manager, whose exit waits
    for the last batch (keeping it also when the loop ends by an error: what was computed is kept).
    ``waited`` is called with the seconds the loop stood waiting for the bookkeeping."""

    def __init__(self, contract: EmbeddingContract, waited: Callable[[float], None]) -> None:
        self.contract, self.waited = contract, waited
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="negharness-keep")
        self._pending: Future[None] | None = None
        self._failed = False
        self._last = time.perf_counter()

    def keep(self, ids: Sequence[str], what: str, parts: list[tuple[slice, Any]],
             done: Callable[[torch.Tensor, float], None]) -> None:
        """Batch ``ids``'s raw outputs (`staged` per slice of ``ids``): checked, then ``done(rows, seconds)``
        in the keeper's thread, ``seconds`` the loop's time per batch (what the batch cost to make)."""
        now = time.perf_counter()
        seconds, self._last = now - self._last, now
        work = self._pool.submit(self._check, list(ids), what, parts, done, seconds)
        self._wait()
        self._pending = work

    def _check(self, ids: list[str], what: str, parts: list[tuple[slice, Any]],
               done: Callable[[torch.Tensor, float], None], seconds: float) -> None:
        if self._failed:  # a batch before this one broke the contract: nothing after it is kept
            return
        try:
            rows = [self.contract.checked(landed(*part), ids[where], what) for where, part in parts]
            done(rows[0] if len(rows) == 1 else torch.cat(rows), seconds)
        except BaseException:
            self._failed = True
            raise

    def _wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            start = time.perf_counter()
            try:
                pending.result()
            finally:
                self.waited(time.perf_counter() - start)

    def __enter__(self) -> "BatchKeeper":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if exc is None:
                self._wait()
            else:  # the loop's own error goes on; the last batch is still kept if it can be
                try:
                    self._wait()
                except Exception:  # noqa: BLE001 - the loop's error is the one to report
                    pass
        finally:
            self._pool.shutdown(wait=True)
