"""Which torchrun rank this process is, read from the environment torch-free: the engine's sharded
evaluation and training, and the CLI's rank label and exit, all read it here, so they agree on what
a bad value means (`negharness.engine.distributed` joins the process group; it needs torch)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from negharness.contracts.errors import UserError


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world > 1


TORCHRUN_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK")


def from_env(environ: Mapping[str, str] | None = None) -> Dist:
    """What torchrun (or srun with the same variables) told this process; a plain run is rank 0 of 1.
    Training and sharded evaluation both read it here, so they agree on what a bad value means."""
    env = os.environ if environ is None else environ
    if "WORLD_SIZE" not in env:
        return Dist()  # a stray RANK alone (some clusters export it) is no distributed run
    try:
        world, rank = int(env["WORLD_SIZE"]), int(env.get("RANK", 0))
        local = int(env.get("LOCAL_RANK", 0))  # one process per node (srun without LOCAL_RANK): cuda:0
    except ValueError as exc:
        raise UserError(f"torchrun variables {', '.join(TORCHRUN_VARIABLES)} must be integers ({exc})") from None
    if not 0 <= rank < world:
        raise UserError(f"RANK={rank} is outside WORLD_SIZE={world}")
    return Dist(rank, world, local)


def torchrun_env(environ: dict[str, str] | None = None) -> tuple[int, int, int] | None:
    """(world, rank, local_rank) when started by torchrun (or srun with those variables), else None."""
    env = os.environ if environ is None else environ
    if "WORLD_SIZE" not in env:
        return None
    d = from_env(env)
    return d.world, d.rank, d.local_rank

