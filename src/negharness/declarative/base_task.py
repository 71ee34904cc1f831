"""The common reading of a declarative task (`DeclarativeTask`): its data files under the data root, their
records and each record's medium, and the images' cache recipe; the caption generators a YAML may name.

Every path read (the YAML's data files, each row's media) must stay under the data root, symlinks followed,
by the rule Python tasks follow (`negharness.io.paths.RootGuard`): a refusal names the YAML file and key, or
the annotation file and row, before the path is opened. Media are identified by their path under the data
root (plus the crop box, where one is given), so tasks over the same images (SugarCrepe's seven splits over
COCO val2017) share cached embeddings.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.contracts.task import Task, TaskOptions
from negharness.declarative.annotations import (
    Record,
    explode,
    fill,
    filter_counts,
    join_rows,
    read_records,
    short,
)
from negharness.declarative.media import RGB_RECIPE, MediaRef, load_image
from negharness.declarative.sources import read_source
from negharness.io.image_files import image_decoder_identity
from negharness.io.paths import RootGuard

if TYPE_CHECKING:
    from negharness.contracts.context import EvalContext
    from negharness.io.media import MediaSet

# caption generators named by any plugin's `register_yaml_folder` call (ARO's aro_order_shuffles):
# --include-path YAML may name them too
KNOWN_GENERATORS: dict[str, Any] = {}


def image_recipe() -> str:
    """How a declarative task's image becomes pixels (`load_image`: read_rgb, then the crop) and which decoder
    did it (Pillow's and its codecs' versions), for a file and an embedded image alike: a decoder upgrade that
    changes pixels is another cache collection for both."""
    return f"{RGB_RECIPE}|{image_decoder_identity()}"


@dataclass(frozen=True)
class GeneratorName:
    """A generator an ``--include-path`` file names, looked up when its first row is made (the
    plugins that register generators have run their hooks by then)."""

    name: str
    source: str


def resolve_generator(target: "str | GeneratorName | Callable[..., Any]") -> Callable[..., Any]:
    """A caption generator given lazily as ``"module:function"`` (no import at listing time)."""
    if isinstance(target, GeneratorName):
        if target.name not in KNOWN_GENERATORS:
            raise UserError(f"{target.source}: key 'captions.generate': unknown generator {target.name!r} "
                            f"(known: {', '.join(sorted(KNOWN_GENERATORS)) or 'none'})")
        target = KNOWN_GENERATORS[target.name]
    if callable(target):
        return target
    module, _, attr = str(target).partition(":")  # a "module:function" string by now
    function: Callable[..., Any] = getattr(importlib.import_module(module), attr)
    return function


class DeclarativeTask(Task["EvalContext"]):
    """Common reading: the data file under the data root, its records, and each record's medium."""

    spec: dict[str, Any] = {}
    licence: str = ""

    def __init__(self, options: TaskOptions) -> None:
        super().__init__(options)
        self.root = Path(options.data_root)
        self.guard = RootGuard(self.root)

    @property
    def spec_files(self) -> list[Path]:
        """The data files the YAML names, relative to the data root and checked to stay under it
        (symlinks followed) before anything opens them (the media they point to: `required_files`)."""
        d, source = self.spec["data"], self.spec["source"]
        keys = d.get("file_keys") or [f"data.file.{i}" for i in range(len(d["files"]))]
        return [self._under_root(f, f"{source}: key {k!r}") for k, f in zip(keys, d["files"])]

    def _under_root(self, relative: str, where: str) -> Path:
        """``data root / relative`` once `RootGuard` has checked it (``..`` folded first, so what is
        opened is what was checked; the data root itself is kept as given, for `query_id`)."""
        path = self.root / os.path.normpath(relative)
        self.guard.check(path, where)
        return path

    def config(self) -> dict[str, Any]:
        revision = self.spec["data"].get("revision")  # a snapshot's commit: in the record (the YAML is hashed too)
        return {**super().config(), "data_files": self.spec["data"]["files"], **({"revision": revision} if revision else {})}

    filtered: list[dict[str, Any]] = []

    def records(self) -> list[Record]:
        """Every file's records (a dict record gains ``_file``, its file's stem, to group by), exploded,
        sliced and filtered as the specification says; `filtered` keeps what each filter dropped.
        The slice comes first: CC-Neg's evaluation split is the file's last 40,000 items."""
        d = self.spec["data"]
        cells = d.get("cells") or {}  # how each column's text cells are read (`Record.reading`)
        recs = []
        for path in self.spec_files:
            source = read_source(path, d["format"])  # parquet, imagefolder: a local HF snapshot
            for r in read_records(path, d["format"], d["records"]) if source is None else source:
                fields = {**r.fields, "_file": path.stem} if isinstance(r.fields, dict) else r.fields
                recs.append(Record(fields, r.where, cells))
        if d["explode"]:
            recs = explode(recs, d["explode"])
        if d["slice"]:
            recs = recs[slice(*d["slice"])]
        if d.get("rows_per_item", 1) > 1 and recs:
            recs = join_rows(recs, d["rows_per_item"])
        recs, self.filtered = filter_counts(recs, d["where"])
        return recs

    def query_id(self, where: str) -> str:
        """A row's id in the per-query values: where it was read, relative to the data root, so two
        runs on different machines pair row by row in `negharness compare`."""
        root = str(self.root).rstrip("/") + "/"
        return where[len(root):] if where.startswith(root) else where

    def filter_notes(self) -> dict[str, Any]:
        return {"filtered": self.filtered} if any(f["rows"] for f in self.filtered) else {}

    def media_ref(self, rec: Record) -> MediaRef:
        m = self.spec["media"]
        crop: tuple[float, float, float, float] | None = None
        if m["crop"]:
            try:
                x, y, w, h = (float(rec.get(f)) for f in m["crop"])  # four fields (`parse_spec` checks)
                crop = (x, y, w, h)
            except (TypeError, ValueError):
                raise UserError(f"{rec.where}: crop fields {m['crop']} must be numbers") from None
        suffix = "" if crop is None else "#crop=" + ",".join(f"{v:g}" for v in crop)
        if m["base64"]:
            return MediaRef(f"{rec.where}{suffix}", None, crop, rec.text(m["base64"]))
        candidates = [self._media_path(fill(t, rec, m["strip_prefix"]), rec.where) for t in m["path"]]
        path = next((p for p in candidates if p.exists()), candidates[0])
        ident = path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(path)
        return MediaRef(ident + suffix, path, crop)

    def _media_path(self, filled: str, where: str) -> Path:
        """A row's media path under the data root: ``..`` or a symlink out is refused naming the row
        (an absolute path too: a prefix the authors' machine had belongs in ``media.strip_prefix``)."""
        if os.path.isabs(filled):
            raise UserError(f"{where}: media path {short(filled)} is absolute; media are read under the data root "
                            f"{self.root} (list the prefix to remove under the YAML's media.strip_prefix)")
        return self._under_root(filled, where)

    def media_set(self, ctx: "EvalContext", refs: list[MediaRef]) -> "MediaSet":
        from negharness.io.media import MediaSet  # lazy: start-up time

        kind = self.spec["media"]["kind"]
        ids = [r.id for r in refs]
        if refs and refs[0].base64 is not None:  # keyed by the bytes the record embeds (and the crop)
            # cast: one kind per task (`media_ref`), so every ref embeds its bytes when the first does
            keys = [hash_json([hashlib.sha256(cast(str, r.base64).encode()).hexdigest(), r.crop], 32) for r in refs]
            return MediaSet(f"declarative/embedded/{image_recipe()}", "image", ids, lambda i: load_image(refs[i]),
                            content_keys=keys)
        if kind == "image":  # keyed by each file's content and the crop: a replaced image is encoded again
            return MediaSet("declarative/images", "image", ids, lambda i: load_image(refs[i]),
                            sources=[r.path for r in refs], recipe=image_recipe(),
                            parts=["" if r.crop is None else json.dumps(list(r.crop)) for r in refs])
        from negharness.contracts.sampling import FrameSampling  # lazy: start-up time
        from negharness.io.video import decode_video, video_recipe  # lazy: start-up time

        sampling = ctx.frame_sampling(FrameSampling("segments", 4))
        return MediaSet(f"declarative/videos/{sampling.key}", "video", ids,
                        lambda i: decode_video(cast(Path, refs[i].path), sampling),  # cast: a video is a file
                        sources=[r.path for r in refs],
                        recipe=video_recipe(sampling))

    def _media_paths(self) -> list[Path]:
        raise NotImplementedError

    def required_files(self) -> list[Path]:
        if not all(p.is_file() or (p.is_dir() and self.spec["data"]["format"] == "imagefolder") for p in self.spec_files):
            return self.spec_files
        return self.spec_files + sorted(set(self._media_paths()))

    def data_files(self) -> list[Path]:
        """The YAML definition itself (it says what is true, what is read, how rows are filtered),
        then the files it names and their media."""
        return [Path(self.spec["source"]), *self.required_files()]

    def group(self, rec: Record) -> str | None:
        fields = self.spec["group_by"]
        return "_".join(str(rec.get(f)) for f in fields) if fields else None

    def cluster_of(self, rec: Record, media: MediaRef | None) -> str:
        """The row's cluster id as the YAML's ``cluster`` says ("" for ``row``: its own)."""
        how = self.spec.get("cluster") or {"by": "row"}
        if how["by"] == "media":
            if media is None:
                raise UserError(f"{rec.where}: cluster 'media' but the row has no image or video")
            return media.source
        if how["by"] == "field":
            value = rec.text(how["field"])
            if not value:
                raise UserError(f"{rec.where}: cluster field {how['field']!r} is empty")
            return value
        return ""

    def clusters(self, per_row: list[str]) -> list[str] | None:
        """Cluster ids for the per-query block: None when each row is its own cluster."""
        return None if (self.spec.get("cluster") or {"by": "row"})["by"] == "row" else per_row
