"""`negharness run` under torchrun: the ranks share the encoding, rank 0 alone scores and writes.

Each task runs in two passes. Pass 1, on every rank: the task runs with a `ShardEvalContext`,
whose ``embed_media`` / ``embed_texts`` encode only this rank's share (item ``i`` of a collection
when ``i % world == rank``, distinct texts likewise) into the shared embedding cache and hand the
task a finite placeholder for the rest; the task's result is thrown away. Then all ranks meet.
Pass 2, on rank 0: the task runs with an ordinary `CachedEvalContext` over a fresh view of the cache, so
it finds everything encoded and computes the very numbers a single process would, because it *is*
the single-process code path. Pass 1 is only a cache warm-up: a task whose later steps depend on
earlier scores, or anything that stops pass 1 early, costs speed (rank 0 encodes the rest) and
never correctness. A judged task's pass 1 ends where it would ask the judge: only rank 0 builds the
judge and asks it, once per retrieved image and question, as a single process would.

Multi-node runs need nothing more than torchrun's rendezvous; the cache and output folders must
be on a filesystem every rank sees, which `ShardSession` checks before any model loads.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch

from negharness.contracts.errors import UserError
from negharness.engine.ranks import torchrun_env
from negharness.engine.runner import CachedEvalContext
from negharness.io.media import MediaSet
from negharness.store.cache import EmbeddingCache

ENCODED = ("media_encoded", "texts_encoded")
CACHED = {"media_encoded": "media_cached", "texts_encoded": "texts_cached"}


class _Subset:
    """``load`` / ``load_batch`` of a MediaSet restricted to some positions (picklable for workers)."""

    def __init__(self, fn: Any, positions: list[int], batched: bool) -> None:
        self.fn, self.positions, self.batched = fn, positions, batched

    def __call__(self, arg: Any) -> Any:
        if self.batched:
            return self.fn([self.positions[p] for p in arg])
        return self.fn(self.positions[arg])


def media_subset(media: MediaSet, positions: list[int]) -> MediaSet:
    """The items at ``positions``, same key and kind, so their cache entries are the full set's.
    The per-item fields besides ids (``sources`` and ``content_keys``, by which the cache keys items) are cut too."""
    changes: dict[str, Any] = {"ids": [media.ids[p] for p in positions],
                               "load": _Subset(media.load, positions, False)}
    if media.load_batch is not None:
        changes["load_batch"] = _Subset(media.load_batch, positions, True)
    names = {f.name for f in dataclasses.fields(media)}
    for name in ("sources", "content_keys"):
        if name in names and getattr(media, name, None) is not None:
            changes[name] = [getattr(media, name)[p] for p in positions]
    return dataclasses.replace(media, **changes)


class WarmPassDone(BaseException):
    """Pass 1 reached a judged task's judge: its encoding is done, and judging is rank 0's (pass 2). A
    BaseException, as GeneratorExit is: a task's own ``except Exception`` around its judging lets it by."""


class _EndsWarmPass:
    """Pass 1's judge: asking it ends the pass quietly, so no rank but 0 builds or asks a judge."""

    def ask(self, items: Any) -> Any:
        raise WarmPassDone


class ShardEvalContext(CachedEvalContext):
    """Pass 1: encode this rank's share into the cache; rows of other ranks get a placeholder (a
    constant unit vector: finite, so never mistaken for broken media, and harmless to normalise).

    Choice scoring goes through the cached embeddings (``embeddings_only``), so a model that scores
    choices itself (a generative VLM) does not run its whole forward on every rank; one that has no
    embeddings ends pass 1 with a UserError, and rank 0 does the work."""

    embeddings_only = True

    def __init__(self, *args: Any, rank: int, world: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rank, self.world = rank, world
        self.judge = _EndsWarmPass()
        self._dim = 0

    def _placeholder(self, n: int) -> torch.Tensor:
        if self._dim == 0:
            return torch.empty(n, 0)
        return torch.full((n, self._dim), self._dim ** -0.5)

    def _spread(self, n: int, mine: Sequence[int], emb: torch.Tensor) -> torch.Tensor:
        if emb.numel():
            self._dim = emb.shape[1]
        out = self._placeholder(n)
        if len(mine) and self._dim:
            out[torch.as_tensor(list(mine), dtype=torch.long)] = emb
        return out

    def embed_media(self, media: MediaSet) -> torch.Tensor:
        mine = list(range(self.rank, len(media), self.world))
        emb = super().embed_media(media_subset(media, mine)) if mine else torch.empty(0, 0)
        return self._spread(len(media), mine, emb)

    def embed_texts(self, texts: Sequence[str]) -> torch.Tensor:
        unique = list(dict.fromkeys(texts))
        mine = list(range(self.rank, len(unique), self.world))
        emb = super().embed_texts([unique[i] for i in mine]) if mine else torch.empty(0, 0)
        table = self._spread(len(unique), mine, emb)
        where = {t: i for i, t in enumerate(unique)}
        return table[torch.tensor([where[t] for t in texts], dtype=torch.long)] if texts else torch.empty(0, 0)


class ShardSession:
    """One torchrun rank's view of the run: its process group, the shared cache, the two passes."""

    def __init__(self, world: int, rank: int, local_rank: int, cache_root: Path, device: str = "auto") -> None:
        self.world, self.rank, self.local_rank = world, rank, local_rank
        self.cache_root = cache_root
        self.device = device  # this rank's device: cuda:LOCAL_RANK on CUDA, else the one asked
        self._group: Any = None

    @property
    def writes(self) -> bool:
        """Only rank 0 scores, prints and writes records."""
        return self.rank == 0

    # collectives ----------------------------------------------------------------------------------
    def _gather(self, label: str, payload: Any = None) -> list[Any]:
        """Every sync point gathers (label, payload): ranks that reach different points (e.g. one
        sees a finished record the others do not) fail with a clear error instead of hanging."""
        import torch.distributed as dist

        got: list[Any] = [None] * self.world
        dist.all_gather_object(got, (label, payload), group=self._group)
        labels = {lab for lab, _ in got}
        if len(labels) > 1:
            seen = ", ".join(f"rank {r}: {lab}" for r, (lab, _) in enumerate(got))
            raise UserError(f"torchrun ranks are out of step ({seen}): each rank must see the same tasks and "
                            "records, so put --output-dir and --cache-dir on a filesystem all ranks share")
        return [p for _, p in got]

    def start(self, backend: str) -> None:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group(backend)
        # object collectives on CPU whatever the backend (NCCL would need them on the GPU)
        self._group = dist.new_group(backend="gloo") if dist.get_backend() != "gloo" else None
        self._check_shared_cache()

    def stop(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()

    def _check_shared_cache(self) -> None:
        """Rank 0 leaves a file in the cache root; a rank that cannot see it has another filesystem."""
        self.cache_root.mkdir(parents=True, exist_ok=True)
        token = self._gather("cache probe", os.urandom(8).hex() if self.rank == 0 else None)[0]
        probe = self.cache_root / f".negharness-shard-probe-{token}"
        if self.rank == 0:
            probe.write_text(token)
        self._gather("cache probe written")
        seen = self._gather("cache probe read", (probe.is_file(), socket.gethostname()))
        self._gather("cache probe checked")
        if self.rank == 0:
            probe.unlink(missing_ok=True)
        blind = [f"rank {r} on {host}" for r, (ok, host) in enumerate(seen) if not ok]
        if blind:
            raise UserError(f"--cache-dir {self.cache_root}: {', '.join(blind)} cannot see rank 0's files there; "
                            "torchrun ranks share the embedding cache, so point --cache-dir (or $NEGHARNESS_CACHE) "
                            "at a filesystem every node mounts")

    # the two passes -------------------------------------------------------------------------------
    def prefill(self, task: Any, ctx: Any) -> bool:
        """Pass 1 for ``task`` on every rank, then the meeting point. Returns whether this rank goes
        on to pass 2 (rank 0 only); rank 0's ``ctx`` then reads a fresh view of the cache and starts
        its counters from what all ranks encoded, so the record counts as a single process would."""
        self._gather(f"task {task.name}")
        if not isinstance(ctx, CachedEvalContext):  # editing tasks: rank 0 alone, the others wait
            self._gather(f"task {task.name} done")
            return self.writes
        warm = ShardEvalContext(ctx.model, ctx.settings, self._fresh_cache(),
                                ctx.progress if self.writes else None, False, ctx._plugins, ctx.seed,
                                origin=ctx.origin, rank=self.rank, world=self.world)
        try:
            task.evaluate(warm)
        except WarmPassDone:  # a judged task, encoded: rank 0 judges
            pass
        except Exception as exc:  # a warm-up only: rank 0's real pass raises it or redoes the work
            if self.writes and not isinstance(exc, UserError):
                warnings.warn(f"task {task.name}: the sharded pass stopped early ({exc}); rank 0 encodes the rest",
                              stacklevel=2)
        finally:
            if warm.cache is not None:
                warm.cache.flush()
        counts = self._gather(f"task {task.name} done", {k: warm.counters[k] for k in (*ENCODED, "encode_seconds")})
        if self.writes:
            self._carry_counts(ctx, counts)
        return self.writes

    def _fresh_cache(self) -> Any:

        return EmbeddingCache(self.cache_root)

    def _carry_counts(self, ctx: CachedEvalContext, counts: list[dict[str, Any]]) -> None:
        """What pass 1 encoded counts as encoded, and its pass-2 cache hits are then not hits."""
        ctx.cache = self._fresh_cache()
        for key in ENCODED:
            total = sum(c[key] for c in counts)
            ctx.counters[key] += total
            ctx.counters[CACHED[key]] -= total
        ctx.counters["encode_seconds"] += max(c["encode_seconds"] for c in counts)
        # not a tally: set as an attribute, as the runner sets ``batch_size_fitted`` (`Counters.__setattr__`)
        ctx.counters.sharded = {"ranks": self.world, **{k: [c[k] for c in counts] for k in ENCODED}}


def _backend_and_device(requested: str, local_rank: int) -> tuple[str, str]:
    """NCCL with one GPU per rank (cuda:LOCAL_RANK) when the run is on CUDA, else gloo on the CPU."""
    wants_cuda = requested.startswith("cuda") or (requested == "auto" and torch.cuda.is_available())
    if not wants_cuda:
        return "gloo", requested
    if requested not in ("auto", "cuda"):
        raise UserError(f"--device {requested}: under torchrun each rank takes cuda:LOCAL_RANK; pass --device cuda")
    count = torch.cuda.device_count()
    if local_rank >= count:
        raise UserError(f"LOCAL_RANK={local_rank} but this node has {count} GPU(s): "
                        f"start at most {count} processes per node (--nproc-per-node)")
    torch.cuda.set_device(local_rank)
    return "nccl", f"cuda:{local_rank}"


@contextmanager
def shard_session(plan: Any) -> Iterator[ShardSession | None]:
    """None outside torchrun. Under torchrun: checks the plan (`negharness.engine.plan.RunPlan`), says
    this rank's device (``session.device``), joins the process group (left on the way out, error or not)."""
    env = torchrun_env()
    if env is None or env[0] == 1:
        yield None
        return
    world, rank, local_rank = env
    if not plan.use_cache:
        raise UserError("--no-cache: under torchrun the ranks hand their embeddings to rank 0 through the "
                        "embedding cache; drop --no-cache (use --cache-dir DIR for a fresh cache)")

    backend, device = _backend_and_device(plan.device, local_rank)
    session = ShardSession(world, rank, local_rank, Path(plan.cache_root), device)
    session.start(backend)
    try:
        yield session
        session._gather("end of run")  # a rank with a task the others lack fails here, not silently
    finally:
        session.stop()


def quiet_stderr_for_followers(session: ShardSession | None) -> None:
    """Python warnings from ranks other than 0 would repeat rank 0's; keep them off the terminal."""
    if session is not None and not session.writes and not sys.warnoptions:
        warnings.simplefilter("ignore")
