"""Media collections as tasks hand them to the runner, and their batching for a DataLoader."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch


@dataclass
class MediaSet:
    """A collection of images or videos with stable ids.

    ``key`` identifies the collection *and* how its items are produced (e.g. frame sampling): two
    tasks over the same key share cached embeddings. ``load(i)`` returns the raw item: an image
    (PIL or uint8 HxWx3 array) or a video's frames (T x H x W x 3 array or list of images).
    ``cheap`` marks in-memory items, where worker processes would cost more than they save.
    ``load_batch(positions)``, where given, returns a whole batch at once as one array (equal-length
    videos), so preprocessing runs vectorised instead of item by item.
    """

    key: str
    kind: str  # "image" | "video"
    ids: list[str]
    load: Callable[[int], Any]
    cheap: bool = False
    load_batch: Callable[[list[int]], Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("image", "video"):
            raise ValueError(f"MediaSet kind must be image or video, not {self.kind!r}")

    def __len__(self) -> int:
        return len(self.ids)


class PreprocessedItems(torch.utils.data.Dataset):
    """Items of a MediaSet at given positions, through the model's preprocessing (runs in workers)."""

    def __init__(self, media: MediaSet, positions: Sequence[int], preprocess: Callable[[Any], torch.Tensor]) -> None:
        self.media, self.positions, self.preprocess = media, list(positions), preprocess

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor]:
        pos = self.positions[i]
        return pos, self.preprocess(self.media.load(pos))


def collate_images(batch: list[tuple[int, torch.Tensor]]) -> tuple[list[int], torch.Tensor]:
    return [b[0] for b in batch], torch.stack([b[1] for b in batch])


def collate_videos(batch: list[tuple[int, torch.Tensor]]) -> tuple[list[int], torch.Tensor, torch.Tensor]:
    """Pad to the longest clip; the mask keeps padding out of the pooled embedding."""
    t_max = max(b[1].shape[0] for b in batch)
    first = batch[0][1]
    frames = first.new_zeros((len(batch), t_max, *first.shape[1:]))
    mask = torch.zeros(len(batch), t_max, dtype=torch.bool)
    for j, (_, clip) in enumerate(batch):
        frames[j, : clip.shape[0]] = clip
        mask[j, : clip.shape[0]] = True
    return [b[0] for b in batch], frames, mask
