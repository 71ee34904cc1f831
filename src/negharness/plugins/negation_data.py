"""Training samples as DataLoader workers produce them: decoded and preprocessed by the model's own
transform, with the caption, soft negative, true negation and MCQ chosen for this epoch.

A *sample* is one (item, caption) pair, as the nT2VR authors iterate captions (``unit=caption``), or
one item with a caption drawn per epoch (``unit=item``). Every random choice is a pure function of
(seed, epoch, sample), so a resumed run and a run on another number of ranks see the same batches.
`EpochBatches` cuts an epoch's permutation into global batches and gives each rank its contiguous
share, so the ranks' shares concatenated in rank order are the one-process batch.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import torch

from negharness.api import TrainStream
from negharness.api.devices import lower_priority


def sample_list(stream: TrainStream, unit: str) -> np.ndarray:
    """(item, caption index) pairs; caption index -1 means "draw one per epoch"."""
    if unit == "item":
        return np.stack([np.arange(len(stream)), -np.ones(len(stream), dtype=np.int64)], 1)
    pairs = [(i, k) for i, caps in enumerate(stream.captions) for k in range(len(caps))]
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 2)


def stream_groups(stream: TrainStream) -> list[str]:
    """Each item's group: as the stream gives them, else each item its own (what `TrainStream` sets when built)."""
    return stream.groups if stream.groups is not None else list(stream.ids)


class SampleData(torch.utils.data.Dataset[dict[str, Any]]):
    """Sample j of a stream -> pixels through ``preprocess`` (in a worker) and the texts of this epoch."""

    def __init__(self, stream: TrainStream, samples: np.ndarray, preprocess: Callable[[Any], torch.Tensor],
                 seed: int, stream_index: int) -> None:
        self.s, self.samples, self.preprocess = stream, samples, preprocess
        self.seed, self.stream_index, self.epoch = seed, stream_index, 0
        self.group_ids = {g: n for n, g in enumerate(dict.fromkeys(stream_groups(stream)))}

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, j: int) -> dict[str, Any]:
        s = self.s
        item, k = (int(v) for v in self.samples[j])
        rng = np.random.default_rng([self.seed, self.epoch, self.stream_index, j])
        if k < 0:
            k = int(rng.integers(len(s.captions[item])))
        neg = s.negated[item][k] if s.negated is not None else None
        if neg:  # several candidates (the authors' file) are tab-joined: one per epoch
            cands = neg.split("\t")
            neg = cands[int(rng.integers(len(cands)))]
        tn = s.true_negations[item] if s.true_negations is not None else []
        mcq = s.mcq[item] if s.mcq is not None else None
        return {"pixels": self.preprocess(s.load(item)), "caption": s.captions[item][k], "negated": neg or "",
                "has_negated": bool(neg), "true_negation": tn[int(rng.integers(len(tn)))] if tn else "",
                "options": list(mcq[0]) if mcq else [], "correct": mcq[1] if mcq else -1,
                "group": self.group_ids[stream_groups(s)[item]], "sample": j}


def collate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Stack pixels; videos of unequal length are padded, with a (B, T) mask of real frames."""
    pix = [r["pixels"] for r in rows]
    out: dict[str, Any] = {k: [r[k] for r in rows] for k in rows[0] if k != "pixels"}
    if pix[0].dim() == 4:
        t = max(p.shape[0] for p in pix)
        mask = torch.zeros(len(pix), t)
        padded = torch.zeros(len(pix), t, *pix[0].shape[1:], dtype=pix[0].dtype)
        for n, p in enumerate(pix):
            padded[n, :p.shape[0]] = p
            mask[n, :p.shape[0]] = 1
        out["pixels"], out["mask"] = padded, mask
    else:
        out["pixels"], out["mask"] = torch.stack(pix), None
    out["group"] = torch.tensor(out["group"])
    out["correct"] = torch.tensor(out["correct"])
    return out


class EpochBatches(torch.utils.data.Sampler[list[int]]):
    """This rank's share of each global batch of an epoch, from ``start`` (a batch index) on.

    The permutation depends on (seed, epoch, stream) only; the last incomplete batch is dropped (as
    the authors' loaders do in training), so every global batch has ``batch`` samples."""

    def __init__(self, n: int, batch: int, seed: int, stream_index: int, rank: int = 0, world: int = 1) -> None:
        if batch % world:
            raise ValueError(f"batch {batch} does not split over {world} ranks")
        self.n, self.batch, self.seed, self.stream_index, self.rank, self.world = n, batch, seed, stream_index, rank, world
        self.epoch, self.start = 0, 0

    @property
    def per_epoch(self) -> int:
        return max(1, self.n // self.batch)

    def set_position(self, epoch: int, start: int) -> None:
        self.epoch, self.start = epoch, start

    def global_batch(self, epoch: int, b: int) -> np.ndarray:
        perm = np.random.default_rng([self.seed, epoch, self.stream_index, 7]).permutation(self.n)
        if self.n < self.batch:  # a tiny set: the whole set is one batch
            return perm
        return perm[b * self.batch:(b + 1) * self.batch]

    def __iter__(self) -> Iterator[list[int]]:
        for b in range(self.start, self.per_epoch):
            g = self.global_batch(self.epoch, b)
            share = len(g) // self.world
            yield g[self.rank * share:(self.rank + 1) * share].tolist()

    def __len__(self) -> int:
        return self.per_epoch - self.start


def loader(data: SampleData, batches: EpochBatches, workers: int) -> torch.utils.data.DataLoader[dict[str, Any]]:
    """Decoding and preprocessing in ``workers`` processes (0: in this process), batches prefetched."""
    kw: dict[str, Any] = {"num_workers": workers, "collate_fn": collate, "batch_sampler": batches}
    if workers > 0:

        kw.update(prefetch_factor=4, worker_init_fn=lower_priority)
    return torch.utils.data.DataLoader(data, **kw)


class ItemData(torch.utils.data.Dataset[dict[str, Any]]):
    """Items (not captions) of a validation stream, preprocessed in workers."""

    def __init__(self, stream: TrainStream, preprocess: Callable[[Any], torch.Tensor]) -> None:
        self.s, self.preprocess = stream, preprocess

    def __len__(self) -> int:
        return len(self.s)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"pixels": self.preprocess(self.s.load(i)), "group": 0, "correct": -1}
