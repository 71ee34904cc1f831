"""The media of a declarative record: a file under the data root or an image embedded in the data
(base64 text, or bytes in a parquet cell), whole or cropped to a box.

A box is declared by its fields: ``crop`` (four fields x, y, width, height: ARO, CREPE), ``box`` (one
field holding four numbers) or ``boxes`` (one field holding a list of them: one region each,
NegRefCOCOg), in ``box_format`` ``xywh`` (COCO's) or ``xyxy``. A box that is not four finite numbers,
is empty, or reaches outside its image (by more than `BOX_SLACK` pixels: COCO's float boxes end at
640.0000001) is refused naming the file and row before anything is scored; Pillow would otherwise
pad it with black and the model would be scored on pixels the benchmark never showed.
"""

from __future__ import annotations

import hashlib

import base64
import binascii
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negharness.contracts.errors import MediaError, UserError
from negharness.declarative.annotations import Record, short
from negharness.io.image_files import open_image, read_rgb

BOX_FORMATS = ("xywh", "xyxy")
BOX_SLACK = 1.0  # pixels a box may pass the image's edge by (float rounding in the authors' files)
Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class MediaRef:
    id: str
    path: Path | None = None
    crop: Box | None = None  # x, y, width, height (ARO, CREPE, NegRefCOCOg)
    base64: str | None = None  # VLMEvalKit TSVs embed the image; parquet bytes are kept this way too

    @property
    def source(self) -> str:
        """The image or video itself, for `cluster: media`: its path under the data root (a crop is of
        its image), or for an embedded image a hash of its bytes (two rows may embed one image)."""
        if self.base64 is not None:
            return "sha256:" + hashlib.sha256(self.base64.encode()).hexdigest()[:32]
        return self.id.split("#crop=", 1)[0]


RGB_RECIPE = "declarative-rgb-v1"  # how `load_image` makes pixels: read_rgb, then the crop


def _decoded(ref: MediaRef) -> bytes:
    try:
        return base64.b64decode(ref.base64 or "")
    except (binascii.Error, ValueError) as exc:
        raise MediaError(f"cannot read image {ref.id}: not base64 ({exc})") from exc


def load_image(ref: MediaRef) -> Any:
    """The record's image decoded to RGB (cropped where it says so); 16-bit and float images are
    refused, naming the file or record, rather than clipped by the conversion."""
    if ref.base64 is not None:
        image = read_rgb(io.BytesIO(_decoded(ref)), ref.id)
    else:
        image = read_rgb(ref.path)
    if ref.crop is not None:
        x, y, w, h = ref.crop
        image = image.crop((x, y, x + w, y + h))
    return image


def box_of(rec: Record, field: str, value: Any, fmt: str) -> Box:
    """Four finite numbers in ``fmt`` -> (x, y, width, height); anything else names the row and field."""
    where = f"{rec.where}: field {field!r}"
    if not isinstance(value, (list, tuple)) or len(value) != 4:
        raise UserError(f"{where} = {short(value)} is not a box (four numbers, {fmt})")
    try:
        a, b, c, d = (float(v) for v in value)
    except (TypeError, ValueError):
        raise UserError(f"{where} = {short(value)}: a box holds four numbers ({fmt})") from None
    if isinstance(value[0], bool) or not all(math.isfinite(v) for v in (a, b, c, d)):
        raise UserError(f"{where} = {short(value)}: a box holds four finite numbers ({fmt})")
    box = (a, b, c - a, d - b) if fmt == "xyxy" else (a, b, c, d)
    if box[2] <= 0 or box[3] <= 0:
        raise UserError(f"{where} = {short(value)} is an empty box ({fmt}: width and height must be positive)")
    return box


def image_size(ref: MediaRef) -> tuple[int, int] | None:
    """(width, height) from the image's header; None when it cannot be read (an unreadable image is
    the embedding's business: --skip-broken-media, or an error naming it)."""
    try:
        source = io.BytesIO(_decoded(ref)) if ref.base64 is not None else ref.path
        with open_image(source, ref.id) as image:
            size: tuple[int, int] = image.size
            return size
    except Exception:  # noqa: BLE001 (any unreadable image is reported when it is embedded)
        return None


def check_inside(ref: MediaRef, box: Box, where: str, sizes: dict[str, tuple[int, int] | None]) -> None:
    """A box that reaches outside its image is refused naming the row (the image's size read once)."""
    key = ref.id.split("#crop=")[0]
    if key not in sizes:
        sizes[key] = image_size(ref)
    size = sizes[key]
    if size is None:
        return
    x, y, w, h = box
    width, height = size
    if x < -BOX_SLACK or y < -BOX_SLACK or x + w > width + BOX_SLACK or y + h > height + BOX_SLACK:
        raise UserError(f"{where}: box (x={x:g}, y={y:g}, w={w:g}, h={h:g}) lies outside its image "
                        f"{key} ({width}x{height})")


def cropped(ref: MediaRef, box: Box) -> MediaRef:
    """The same image cut to ``box``: its own id (the box in it), so crops share nothing in the cache."""
    return MediaRef(f"{ref.id}#crop=" + ",".join(f"{v:g}" for v in box), ref.path, box, ref.base64)
