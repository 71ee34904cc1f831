"""Opening image files: the one reader every image in the package goes through (a `MediaSet`'s files,
NeIn's inputs and saved edits, YAML tasks' crops, pre-extracted video frames), so that every way a
file can fail becomes a `MediaError` naming it, which --skip-broken-media counts on every task alike.

The image is opened lazily (header only), so a model may still ask a JPEG for a reduced-scale
decode (`negharness.api.jpeg_draft`); a file whose pixels are damaged (a truncated JPEG) fails
when it is decoded, and `PreprocessedItems` turns that failure into a `MediaError` naming the file.
"""

from __future__ import annotations

import stat
from functools import lru_cache
from pathlib import Path
from typing import Any

import PIL
from PIL import features

from negharness.contracts.errors import MediaError

# what PIL raises for a damaged file, header or pixels (a broken PNG chunk is a SyntaxError in PIL)
DECODE_ERRORS = (OSError, SyntaxError)


def open_image(source: str | Path | Any, name: str | Path | None = None) -> Any:
    """A lazily opened PIL image of a file (a path, or an open binary file such as ``BytesIO``, then
    named ``name`` in errors); a missing file, a folder, an unreadable header or more than 8 bits per
    channel raise `MediaError`."""
    from PIL import Image

    if isinstance(source, str):
        source = Path(source)
    name = name if name is not None else source
    if isinstance(source, Path):
        _require_file(source, name)
    try:
        image = Image.open(source)
    except FileNotFoundError:
        raise MediaError(f"image not found: {name}") from None
    except IsADirectoryError:
        raise MediaError(f"cannot read image {name}: a folder, not a file") from None
    except (*DECODE_ERRORS, ValueError, Image.DecompressionBombError) as exc:
        raise MediaError(f"cannot read image {name}: {_reason(exc)}") from exc
    try:
        require_8bit(image, name)
    except MediaError:
        image.close()
        raise
    return image


def _require_file(path: Path, name: str | Path) -> None:
    """A `MediaError` naming ``name`` unless ``path`` is a regular file, checked before it is opened:
    opening a FIFO blocks forever."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise MediaError(f"image not found: {name}") from None
    except OSError as exc:
        raise MediaError(f"cannot read image {name}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise MediaError(f"cannot read image {name}: a folder, not a file")
    if not stat.S_ISREG(mode):
        raise MediaError(f"cannot read image {name}: not a regular file (a FIFO, socket or device)")


def read_rgb(source: str | Path | Any, name: str | Path | None = None) -> Any:
    """`open_image`, decoded whole to RGB: for loaders that keep pixels rather than a lazy image (a
    damaged file fails here, named, instead of in whoever reads the pixels)."""
    with open_image(source, name) as image:
        try:
            return image.convert("RGB")
        except DECODE_ERRORS as exc:
            raise decode_failure(image, exc, str(name if name is not None else source)) from exc


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
