"""torch.distributed for training: the process group torchrun describes, and what ranks share.

``torchrun --nproc-per-node N -m negharness train ...`` sets RANK / WORLD_SIZE / LOCAL_RANK /
MASTER_ADDR; `init` joins the group (NCCL on GPUs, gloo on CPUs). Multi-node is torchrun's
rendezvous (``--nnodes``, ``--rdzv-endpoint``); under Slurm, one ``srun`` task per node running
torchrun with ``--rdzv-endpoint=$(first host of $SLURM_JOB_NODELIST):29500``. ``negharness train
--nproc N`` re-launches the same command under torchrun on this machine.
"""

from __future__ import annotations

from typing import Any

import torch

from negharness.engine.ranks import Dist as Dist, from_env  # Dist: re-exported (tests, bench_training)


def init(device_type: str) -> Dist:
    """Join the process group once (NCCL for CUDA, gloo otherwise); a single process needs none."""
    d = from_env()
    if d.active and not torch.distributed.is_initialized():
        backend = "nccl" if device_type == "cuda" else "gloo"
        torch.distributed.init_process_group(backend=backend, rank=d.rank, world_size=d.world)
    return d


def device_for(d: Dist, requested: torch.device) -> torch.device:
    """Each rank on its own GPU (LOCAL_RANK); CPU ranks share the CPU."""
    if requested.type == "cuda" and d.active:
        torch.cuda.set_device(d.local_rank)
        return torch.device("cuda", d.local_rank)
    return requested


def barrier(d: Dist) -> None:
    if d.active:
        torch.distributed.barrier()


def broadcast(d: Dist, obj: Any) -> Any:
    """Rank 0's value on every rank (a validation score, a decision to stop)."""
    if not d.active:
        return obj
    box = [obj]
    torch.distributed.broadcast_object_list(box, src=0)
    return box[0]


def gather_batch(d: Dist, local: torch.Tensor) -> torch.Tensor:
    """The whole batch on every rank, in rank order, with gradient through this rank's part.

    Every rank then computes the same full-batch loss, so in-batch negatives are those of the
    global batch (as with one process); each rank's backward gives the gradient through its own
    items, and DDP's mean over ranks times ``world`` (see `loss_scale`) is the full gradient."""
    if not d.active:
        return local
    parts = [torch.empty_like(local) for _ in range(d.world)]
    torch.distributed.all_gather(parts, local.detach().contiguous())
    parts[d.rank] = local
    return torch.cat(parts)


def loss_scale(d: Dist) -> float:
    """DDP averages gradients over ranks; each rank holds only its share of the full gradient."""
    return float(d.world)


def shutdown(d: Dist) -> None:
    if d.active and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
