"""A model's eval preprocessing as tensor ops (`PixelTransform`), which a model may ask the host to run
(`EmbeddingModel.pixel_transform`, open_clip's ``-M decode=tensor``).

A type of the ground floor, since the model contract names it; `negharness.io.tensor_images` decodes
image files in batches on the run's device, applies it there and re-exports it. torch is imported
where the pixels are computed, so that importing the contracts loads none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import torch

RESIZE_MODES = ("shortest", "squash")
INTERPOLATIONS = ("bicubic", "bilinear")


@dataclass(frozen=True)
class PixelTransform:
    """A model's eval preprocessing as tensor ops: resize (``shortest``: the shorter side to the size,
    then a centre crop, as torchvision's ``Resize(int)`` + ``CenterCrop``; ``squash``: straight to the
    size), then ``(x / 255 - mean) / std``. ``size`` is (height, width)."""

    size: tuple[int, int]
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    interpolation: str = "bicubic"
    resize_mode: str = "shortest"

    def __post_init__(self) -> None:
        if self.resize_mode not in RESIZE_MODES:
            raise ValueError(f"resize mode {self.resize_mode!r} (tensor decoding does {', '.join(RESIZE_MODES)})")
        if self.resize_mode == "shortest" and self.size[0] != self.size[1]:
            raise ValueError(f"shortest-side resize to a non-square size {self.size}")
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(f"interpolation {self.interpolation!r} (tensor decoding does {', '.join(INTERPOLATIONS)})")

    def identity(self) -> str:
        """What the pixels depend on besides the decoder and the device: part of the model's fingerprint."""
        import torch

        return (f"{self.resize_mode}-{self.interpolation}-antialias|torch-{torch.__version__.split('+')[0]}|"
                f"{self.size[0]}x{self.size[1]}|mean{list(self.mean)}|std{list(self.std)}")

    @staticmethod
    def uint8_resize(device: torch.device) -> bool:
        """Whether the resize runs on uint8 pixels (torch's CPU kernel, Pillow-SIMD's fixed-point
        arithmetic: within a level of Pillow's and 30x faster than in float32 here) or in float32,
        rounded to uint8 afterwards (CUDA, whose antialiased kernels take floats only)."""
        return device.type == "cpu"

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """torchvision's ``_compute_resized_output_size`` for one int (shorter side) or the squash size."""
        if self.resize_mode == "squash":
            return self.size
        target = self.size[0]
        if width <= height:
            return int(target * height / width), target
        return target, int(target * width / height)

    def __call__(self, images: Sequence[torch.Tensor], uint8: bool | None = None) -> torch.Tensor:
        """uint8 (3, H, W) images of any sizes, on one device -> float32 (N, 3, h, w) there. Images of
        one size are resized in one call, so a batch of equal-sized photos costs a handful of kernels.
        ``uint8``: resize in uint8 (else float32); None: as `uint8_resize` says for the device."""
        import torch

        if not images:
            return torch.empty(0, 3, *self.size)
        device = images[0].device
        uint8 = self.uint8_resize(device) if uint8 is None else uint8
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, image in enumerate(images):
            groups.setdefault(tuple(image.shape), []).append(i)
        parts = {shape: self._geometry(torch.stack([images[i] for i in idx]), shape[1], shape[2], uint8)
                 for shape, idx in groups.items()}
        if len(parts) == 1:  # one size (a resized dataset): no scatter
            out = next(iter(parts.values())).contiguous()
        else:
            out = torch.empty(len(images), 3, *self.size, device=device)
            for shape, idx in groups.items():
                out[torch.tensor(idx, device=device)] = parts[shape]
        mean = torch.tensor(self.mean, device=device).view(1, 3, 1, 1)
        std = torch.tensor(self.std, device=device).view(1, 3, 1, 1)
        return out.div_(255.0).sub_(mean).div_(std)

    def _geometry(self, stack: torch.Tensor, height: int, width: int, uint8: bool) -> torch.Tensor:
        """(n, 3, H, W) uint8 -> (n, 3, h, w) float holding integers 0..255: resized as Pillow does
        (antialiased, to uint8; see `uint8_resize`), then centre-cropped as torchvision's ``CenterCrop``."""
        import torch

        new_h, new_w = self.resized_size(height, width)
        if (new_h, new_w) == (height, width):  # torchvision's resize returns such an image as it is
            pixels = stack.float()
        elif uint8:
            pixels = torch.nn.functional.interpolate(stack.contiguous(memory_format=torch.channels_last),
                                                     size=(new_h, new_w), mode=self.interpolation, antialias=True,
                                                     align_corners=False).float()
        else:
            pixels = torch.nn.functional.interpolate(stack.float(), size=(new_h, new_w), mode=self.interpolation,
                                                     antialias=True, align_corners=False)
            pixels = pixels.round_().clamp_(0, 255)
        crop_h, crop_w = self.size
        top, left = int(round((new_h - crop_h) / 2.0)), int(round((new_w - crop_w) / 2.0))
        return pixels[:, :, top:top + crop_h, left:left + crop_w]
