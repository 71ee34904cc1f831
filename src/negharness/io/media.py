"""Media collections as tasks hand them to the runner (`MediaSet`, whose home is the ground floor), built
from files, and their batching for a DataLoader."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from negharness.contracts.errors import MediaError, UserError
from negharness.contracts.media_set import MediaSet as MediaSet  # its home: the run context's contract names it
from negharness.io.image_files import (
    DECODE_ERRORS,
    decode_failure,
    image_decoder_identity,
)
from negharness.io.image_files import open_image as open_file
from negharness.io.paths import require_regular
from negharness.io.unreadable import UnreadableMedia
from negharness.io.video import (
    decode_video,
    frames_recipe,
    load_frame_images,
    sampled_frame_paths,
    video_recipe,
)


def regular_media(path: Path) -> Path:
    """``path`` when it is a regular file; else a `MediaError` naming it (skippable with
    --skip-broken-media), raised before anything opens it: opening a FIFO blocks forever."""

    try:
        require_regular(path)
    except UserError as exc:
        raise MediaError(f"cannot read media: {exc}") from None
    return path


def open_image(path: Path) -> Any:
    """A lazily opened PIL image of a regular file; any failure is a `MediaError` naming it."""

    return open_file(regular_media(path))


def image_files(key: str, ids: list[str], paths: Sequence[Path], load: Callable[[int], Any] | None = None) -> MediaSet:
    """Images read from files with Pillow, keyed in the cache by their content."""
    paths = list(paths)
    return MediaSet(key, "image", ids, load or (lambda i: open_image(paths[i])), sources=paths,
                    recipe=f"image-file|{image_decoder_identity()}", plain_files=load is None)


def video_files(key: str, ids: list[str], paths: Sequence[Path], sampling: Any) -> MediaSet:
    """MP4 (or any container) videos decoded by the first installed decoder, keyed by content."""

    paths = list(paths)
    return MediaSet(key, "video", ids, lambda i: decode_video(regular_media(paths[i]), sampling), sources=paths,
                    recipe=video_recipe(sampling))


def frame_folders(key: str, ids: list[str], frames: Sequence[Sequence[Path]], sampling: Any) -> MediaSet:
    """Videos given as pre-extracted JPEG frames: keyed by the sampled frames' content, in order."""

    frames = list(frames)
    return MediaSet(key, "video", ids, lambda i: load_frame_images([regular_media(f) for f in frames[i]], sampling),
                    sources=[sampled_frame_paths(f, sampling) for f in frames], recipe=frames_recipe(sampling))


class PreprocessedItems(torch.utils.data.Dataset[Any]):
    """Items of a MediaSet at given positions, through the model's preprocessing (runs in workers).

    An item whose file cannot be read comes back as (position, error message) when ``unreadable``
    (the run's `UnreadableMedia`, or a bool: skip or not) skips it, so the runner can count it;
    otherwise the `MediaError` naming the file propagates.
    """

    def __init__(self, media: MediaSet, positions: Sequence[int], preprocess: Callable[[Any], torch.Tensor],
                 unreadable: UnreadableMedia | bool = False) -> None:
        self.media, self.positions, self.preprocess = media, list(positions), preprocess
        self.unreadable = UnreadableMedia.of(unreadable)

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor | str]:
        return self.unreadable.attempt(self.positions[i], lambda: self._preprocessed(self.positions[i]))

    def _preprocessed(self, pos: int) -> torch.Tensor:
        """Item ``pos`` loaded and preprocessed; damaged pixels of a lazily opened image (a truncated
        JPEG) fail in the preprocessing and become the `MediaError` naming the file."""
        item = self.media.load(pos)
        try:
            return self.preprocess(item)
        except DECODE_ERRORS as exc:
            raise decode_failure(item, exc, f"{self.media.ids[pos]!r} of {self.media.key}") from exc


def split_broken(batch: list[tuple[int, Any]]) -> tuple[list[tuple[int, torch.Tensor]], list[tuple[int, str]]]:
    return [b for b in batch if not isinstance(b[1], str)], [b for b in batch if isinstance(b[1], str)]


def collate_images(batch: list[tuple[int, Any]]) -> tuple[Any, ...]:
    good, broken = split_broken(batch)
    if not good:
        return [], None, None, broken
    return [b[0] for b in good], torch.stack([b[1] for b in good]), None, broken


def collate_videos(batch: list[tuple[int, Any]]) -> tuple[Any, ...]:
    """Pad to the longest clip; the mask keeps padding out of the pooled embedding."""
    batch, broken = split_broken(batch)
    if not batch:
        return [], None, None, broken
    t_max = max(b[1].shape[0] for b in batch)
    first = batch[0][1]
    frames = first.new_zeros((len(batch), t_max, *first.shape[1:]))
    mask = torch.zeros(len(batch), t_max, dtype=torch.bool)
    for j, (_, clip) in enumerate(batch):
        frames[j, : clip.shape[0]] = clip
        mask[j, : clip.shape[0]] = True
    return [b[0] for b in batch], frames, mask, broken
