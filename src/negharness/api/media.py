"""negharness.api.media: Media a task reads: image and video files, frame sampling, decoding.

A facade over the host modules that define these names; plugins import them from here, never from
those modules. Each name is imported on first use (importing the facade loads no torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = [
    "FrameSampling", "MediaSet", "PixelTransform", "array_to_tensor", "decode_video",
    "frame_folders", "image_files", "jpeg_draft", "load_frames", "open_image", "read_rgb",
    "require_8bit", "video_files",
]

if TYPE_CHECKING:  # what type checkers read, as plain imports; at run time each name is imported on
    # first use (`_HOMES` below says where, kept equal to this block by a test), so a task module that imports this
    # facade at its top loads no torch until its task runs
    from negharness.contracts.media_set import MediaSet as MediaSet
    from negharness.contracts.model import (
        array_to_tensor as array_to_tensor,
        jpeg_draft as jpeg_draft,
    )
    from negharness.contracts.pixel_transform import PixelTransform as PixelTransform
    from negharness.contracts.sampling import FrameSampling as FrameSampling
    from negharness.io.image_files import (
        open_image as open_image,
        read_rgb as read_rgb,
        require_8bit as require_8bit,
    )
    from negharness.io.media import (
        frame_folders as frame_folders,
        image_files as image_files,
        video_files as video_files,
    )
    from negharness.io.video import (
        decode_video as decode_video,
        load_frames as load_frames,
    )
else:
    from negharness.api.exports import on_first_use

    # where each name lives: the table read at run time; a test keeps it equal to the imports above
    _HOMES: dict[str, tuple[str, str]] = {
    "FrameSampling": ("negharness.contracts.sampling", "FrameSampling"),
    "MediaSet": ("negharness.contracts.media_set", "MediaSet"),
    "PixelTransform": ("negharness.contracts.pixel_transform", "PixelTransform"),
    "array_to_tensor": ("negharness.contracts.model", "array_to_tensor"),
    "decode_video": ("negharness.io.video", "decode_video"),
    "frame_folders": ("negharness.io.media", "frame_folders"),
    "image_files": ("negharness.io.media", "image_files"),
    "jpeg_draft": ("negharness.contracts.model", "jpeg_draft"),
    "load_frames": ("negharness.io.video", "load_frames"),
    "open_image": ("negharness.io.image_files", "open_image"),
    "read_rgb": ("negharness.io.image_files", "read_rgb"),
    "require_8bit": ("negharness.io.image_files", "require_8bit"),
    "video_files": ("negharness.io.media", "video_files"),
    }
    __getattr__ = on_first_use(__name__, _HOMES)  # a renamed 0.x name (`RENAMED`) warns, naming its new spelling

    def __dir__() -> list[str]:  # the names not yet used are listed too
        return sorted(set(globals()) | set(__all__))
