"""negharness.api.media: Media a task reads: image and video files, frame sampling, decoding.

A facade over the host modules that define these names (resolved on first use, so importing it
loads no torch); plugins import them from here, never from those modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from negharness.api.exports import resolver

_EXPORTS: dict[str, str] = {
    "MediaSet": "negharness.io.media",
    "image_files": "negharness.io.media",
    "video_files": "negharness.io.media",
    "frame_folders": "negharness.io.media",
    "decode_video": "negharness.io.video",
    "load_frames": "negharness.io.video",
    "require_8bit": "negharness.io.image_files",
    "read_rgb": "negharness.io.image_files",
    "open_image": "negharness.io.image_files",
    "FrameSampling": "negharness.api.sampling",
    "jpeg_draft": "negharness.api.model",
    "array_to_tensor": "negharness.api.model",
    "PixelTransform": "negharness.io.tensor_images",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = resolver(__name__, _EXPORTS)

if TYPE_CHECKING:  # what type checkers and IDEs read; the same names as _EXPORTS
    from negharness.api.model import array_to_tensor, jpeg_draft
    from negharness.api.sampling import FrameSampling
    from negharness.io.image_files import open_image, read_rgb, require_8bit
    from negharness.io.media import MediaSet, frame_folders, image_files, video_files
    from negharness.io.tensor_images import PixelTransform
    from negharness.io.video import decode_video, load_frames
