"""Opening image files for a `MediaSet`: every way a file can fail becomes a `MediaError` naming it.

The image is opened lazily (header only), so a model may still ask a JPEG for a reduced-scale
decode (`negharness.contracts.model.jpeg_draft`); a file whose pixels are damaged (a truncated JPEG) fails
when it is decoded, and `PreprocessedItems` turns that failure into a `MediaError` naming the file.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import PIL
from PIL import features

from negharness.contracts.errors import MediaError

# what PIL raises for a damaged file, header or pixels (a broken PNG chunk is a SyntaxError in PIL)
DECODE_ERRORS = (OSError, SyntaxError)


def open_image(path: str | Path) -> Any:
    """A lazily opened PIL image; a missing file, a folder, or an unreadable header raise `MediaError`."""
    from PIL import Image

    path = Path(path)
    try:
        image = Image.open(path)
    except FileNotFoundError:
        raise MediaError(f"image not found: {path}") from None
    except IsADirectoryError:
        raise MediaError(f"cannot read image {path}: a folder, not a file") from None
    except (*DECODE_ERRORS, Image.DecompressionBombError) as exc:
        raise MediaError(f"cannot read image {path}: {_reason(exc)}") from exc
    try:
        require_8bit(image, path)
    except MediaError:
        image.close()
        raise
    return image


def read_rgb(source: str | Path | Any, name: str | Path | None = None) -> Any:
    """An image file (a path, or an open binary file such as ``BytesIO``) decoded whole to RGB, for
    loaders that keep pixels rather than a lazy image: fails as `open_image` does, naming ``name``
    (default: the path), and refuses 16-bit and float images rather than clipping them."""
    from PIL import Image

    name = name if name is not None else source
    if isinstance(source, (str, Path)):
        with open_image(source) as image:
            return _decoded_rgb(image, name)
    try:
        image = Image.open(source)
    except (*DECODE_ERRORS, ValueError, Image.DecompressionBombError) as exc:
        raise MediaError(f"cannot read image {name}: {_reason(exc)}") from exc
    with image:
        require_8bit(image, name)
        return _decoded_rgb(image, name)


def _decoded_rgb(image: Any, name: str | Path) -> Any:
    try:
        return image.convert("RGB")
    except DECODE_ERRORS as exc:
        raise decode_failure(image, exc, str(name)) from exc


def wide_mode(mode: str) -> str | None:
    """What a Pillow mode with more than 8 bits per channel is ("16-bit"), or None for an 8-bit one.
    ``convert("RGB")`` clips such pixels to 0..255 (a 0..65535 gradient comes out almost all white),
    so they are refused rather than converted."""
    if mode.startswith("I;16"):
        return "16-bit"
    return {"I": "32-bit integer", "F": "32-bit float"}.get(mode)


def require_8bit(image: Any, path: str | Path) -> None:
    """A `MediaError` naming ``path`` when ``image`` (opened, header read) is not 8 bits per channel."""
    wide = wide_mode(getattr(image, "mode", ""))
    if wide:
        raise MediaError(f"cannot read image {path}: {wide} image (mode {image.mode}), expected 8 bits per channel")


def _reason(exc: BaseException) -> str:
    text = str(exc)
    return "empty or not an image file" if text.startswith("cannot identify image file") else text or type(exc).__name__


def decode_failure(item: Any, exc: BaseException, fallback: str) -> MediaError:
    """The `MediaError` for an item whose decoding failed: named by its file where it has one."""
    name = getattr(item, "filename", None) or fallback
    return MediaError(f"cannot decode image {name}: {_reason(exc)}")


@lru_cache(maxsize=None)
def image_decoder_identity() -> str:
    """Pillow and its JPEG library's versions: part of the cache key of every file-backed image."""
    return f"pillow-{PIL.__version__}+jpeg-{features.version('jpg')}"
