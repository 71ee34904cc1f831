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
    # first use (`on_first_use` reads this block: the one list), so a task module that imports this
    # facade at its top loads no torch until its task runs
    from negharness.contracts.model import (
        array_to_tensor as array_to_tensor,
        jpeg_draft as jpeg_draft,
    )
    from negharness.contracts.sampling import FrameSampling as FrameSampling
    from negharness.io.image_files import (
        open_image as open_image,
        read_rgb as read_rgb,
        require_8bit as require_8bit,
    )
    from negharness.io.media import (
        MediaSet as MediaSet,
        frame_folders as frame_folders,
        image_files as image_files,
        video_files as video_files,
    )
    from negharness.io.tensor_images import PixelTransform as PixelTransform
    from negharness.io.video import (
        decode_video as decode_video,
        load_frames as load_frames,
    )
else:
    from negharness.api.exports import on_first_use

    __getattr__ = on_first_use(__name__)

    def __dir__() -> list[str]:  # the names not yet used are listed too
        return sorted(set(globals()) | set(__all__))
