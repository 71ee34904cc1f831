"""The item kinds' tasks: a record names several media (or none) and several captions, and is scored
from the small matrix of its media x captions scores (`negharness.declarative.kind_specs` has the keys).

- `GroupTask` (``group``): Winoground's scores. Text score: for every image, its own caption scores
  strictly above every other caption; image score: for every caption, its own image scores strictly
  above every other image; group score: both.
- `MultiChoiceTask` (``multi_choice``): every positive strictly above every negative against the
  medium (SugarCrepe++ ITT), or with ``text_only`` the positives' cosine strictly above each
  positive's cosine with a negative (SugarCrepe++ TOT).
- `ImageChoiceTask` (``image_choice``): one caption, the true image or region strictly highest among
  the record's (NegRefCOCOg); with ``authors: ties: first`` the authors' np.argmax too.

Ties count wrong in every safe metric. Rows are built (and every image, box and caption checked)
before a model loads; a record with a missing image names the file and row. Scores of all items
come from one pass over the unique media and texts, arranged as (items, media, captions), so 10,000
items score in well under a second once their embeddings are cached (perf/bench_item_kinds.py).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from negharness.contracts.errors import UserError
from negharness.contracts.task import TaskResult
from negharness.declarative.annotations import Record, edit_captions, fill, short
from negharness.declarative.base_task import DeclarativeTask
from negharness.declarative.media import MediaRef, box_of, check_inside, cropped
from negharness.declarative.sources import embedded_image
from negharness.fetch.manifest import file_sha256
from negharness.io.data_limits import check_item_width
from negharness.records.published import collection_digest, published_notes

if TYPE_CHECKING:
    import torch

    from negharness.contracts.context import EvalContext

TOT_RULE = ("text_only: the two positives' cosine must beat each positive's cosine with the negative "
            "(SugarCrepe++'s text-only task, evaluate_ulms.py: p1_p2 > p1_ref and p1_p2 > p2_ref)")


@dataclass(frozen=True)
class Item:
    """One record: its media (in order), its captions, the true medium or caption, where it was read."""

    media: tuple[MediaRef, ...]
    texts: tuple[str, ...]
    where: str
    correct: int = 0  # image_choice: the true region; multi_choice: how many texts are positives
    identical: bool = False  # image_choice: a region equals the true one (nothing to choose)
    group: str | None = None  # its ``group_by`` value (MMVP's visual pattern), reported apart
    cluster: str = ""  # what it shares with other rows (`cluster:` in the YAML: its image); "" = its own


class ItemTask(DeclarativeTask):
    """Reading shared by the item kinds: each record's media (files, embedded images, boxes)."""

    def record_media(self, rec: Record) -> list[MediaRef]:
        """The record's media in order: members, embedded images or the one medium, then its box(es)."""
        m = self.spec["media"]
        if m["embedded"]:
            refs = [self._embedded(rec, f) for f in m["embedded"]]
        elif m["members"]:
            refs = [self._file(fill(t, rec, m["strip_prefix"]), rec, k) for k, t in enumerate(m["members"])]
        elif m["path"] and len(m["path"]) == 1 and not m["crop"]:
            refs = [self._file(fill(m["path"][0], rec, m["strip_prefix"]), rec, 0)]
        else:  # candidate paths, base64 text or crop fields: as the choice kind reads them
            refs = [self.media_ref(rec)]
            if refs[0].path is not None and not refs[0].path.is_file():
                raise UserError(f"{rec.where}: image {refs[0].id} not found under the data root {self.root}")
        if m["box"]:
            refs = [self._crop(r, rec, m["box"], rec.get(m["box"])) for r in refs]
        if m["boxes"]:
            boxes = rec.get(m["boxes"])
            if not isinstance(boxes, (list, tuple)) or not boxes:
                raise UserError(f"{rec.where}: field {m['boxes']!r} = {short(boxes)} is not a list of boxes")
            refs = [self._crop(refs[0], rec, f"{m['boxes']}.{k}", b) for k, b in enumerate(boxes)]
        return refs

    def _file(self, filled: str, rec: Record, k: int) -> MediaRef:
        """Image ``k`` of a record, which must exist: a group with a missing image names the row. Each
        distinct path is checked once (items share images: SugarCrepe++'s 788 replace_att rows use 524)."""
        known: dict[str, MediaRef] = self.__dict__.setdefault("_files", {})
        if filled not in known:
            path = self._media_path(filled, rec.where)
            if not path.is_file():
                raise UserError(f"{rec.where}: image {k} ({short(filled)}) not found under the data root {self.root}")
            known[filled] = MediaRef(path.relative_to(self.root).as_posix() if path.is_relative_to(self.root)
                                     else str(path), path)
        return known[filled]

    def _embedded(self, rec: Record, field: str) -> MediaRef:
        """An image cell (bytes, or a path read beside the data file)."""
        data, path = embedded_image(rec, field)
        if data is not None:
            return MediaRef(f"{self.query_id(rec.where)}:{field}", None, None, data)
        assert path is not None  # `embedded_image`: a cell without bytes has a path (neither is its error)
        for prefix in self.spec["media"]["strip_prefix"]:  # a snapshot may keep its maker's absolute paths
            path = path.removeprefix(prefix)
        file = self.spec_files[0]  # an imagefolder's paths are inside it; a file's beside it
        folder = (file if file.is_dir() else file.parent).relative_to(self.root).as_posix()
        return self._file(f"{folder}/{path}", rec, 0)

    def _crop(self, ref: MediaRef, rec: Record, field: str, value: Any) -> MediaRef:
        box = box_of(rec, field, value, self.spec["media"]["box_format"])
        check_inside(ref, box, f"{rec.where}: field {field!r}", self.__dict__.setdefault("_sizes", {}))
        return cropped(ref, box)

    def captions(self, rec: Record, sources: list[dict[str, Any]]) -> list[str]:
        """The captions of ``sources`` (each field one caption or a list of them), none empty."""
        out = []
        for src in sources:
            texts = edit_captions(rec.texts(src["field"], keep_empty=True), src)
            if not texts or not all(texts):
                raise UserError(f"{rec.where}: field {src['field']!r} holds an empty caption")
            out += texts
        return out

    @cached_property
    def items(self) -> list[Item]:
        records = self.records()
        items = [_bounded(self.item(r)) for r in records]
        if self.spec.get("group_by"):
            items = [replace(it, group=self.group(r)) for it, r in zip(items, records)]
        if (self.spec.get("cluster") or {"by": "row"})["by"] != "row":  # a crop's image: the item's first medium's
            items = [replace(it, cluster=self.cluster_of(r, it.media[0] if it.media else None))
                     for it, r in zip(items, records)]
        if not items:
            raise UserError(f"{self.spec_files[0]}: no rows (after filters)")
        return items[: self.options.limit] if self.options.limit else items

    def item(self, rec: Record) -> Item:
        raise NotImplementedError

    def _media_paths(self) -> list[Path]:
        return [m.path for it in self.items for m in it.media if m.path is not None]

    def scored(self, ctx: "EvalContext") -> tuple[list[Item], "torch.Tensor", dict[str, Any], int]:
        """(items kept, their (items, media, captions) scores (`_matrices`), skip notes, media count). An item with an
        unreadable medium leaves the scoring under --skip-broken-media, as if its row were not there."""
        from negharness.scoring.choices import readable_media  # lazy: start-up time (torch)
        from negharness.scoring.unreadable import (  # lazy: start-up time (torch)
            nothing_left,
            skip_notes,
        )

        items = self.items
        refs = list(dict.fromkeys(m for it in items for m in it.media))
        if len({r.base64 is None for r in refs}) > 1:
            raise UserError(f"{self.spec['source']}: some images are embedded in the data and some are files; "
                            "declare one kind per task")
        index = {r: i for i, r in enumerate(refs)}
        media = self.media_set(ctx, refs)
        media_emb, bad = readable_media(ctx, media)
        if bad.any():
            items = [it for it in items if not any(bad[index[m]] for m in it.media)]
            if not items:
                raise nothing_left(media, "row")
        notes = skip_notes(bad, len(self.items) - len(items), "rows")
        # None only for a model that scores choices itself: item tasks score by embeddings alone, so it stops here
        assert media_emb is not None
        return items, self._matrices(ctx, items, index, media_emb), notes, int((~bad).sum())

    def _matrices(self, ctx: "EvalContext", items: list[Item], index: dict[MediaRef, int],
                  media_emb: "torch.Tensor") -> "torch.Tensor":
        """(items, widest media, widest captions) scores by the model's own scoring, -inf where an item
        has fewer; every (medium, caption) pair of an item in one pass, laid out per shape by numpy."""
        import torch  # lazy: start-up time

        from negharness.scoring.views import pair_scores  # lazy: start-up time (torch)

        shapes: dict[tuple[int, int], list[int]] = defaultdict(list)
        for i, it in enumerate(items):
            shapes[(len(it.media), len(it.texts))].append(i)
        width = max(m for m, _ in shapes), max(c for _, c in shapes)
        out = torch.full((len(items), *width), float("-inf"))
        for (m, c), idx in shapes.items():
            rows = np.array([[index[r] for r in items[i].media] for i in idx]).reshape(len(idx), m)
            texts = np.array([t for i in idx for t in items[i].texts], dtype=object).reshape(len(idx), 1, c)
            media = torch.as_tensor(np.repeat(rows[:, :, None], c, axis=2).reshape(-1), dtype=torch.long)
            flat = pair_scores(ctx, np.broadcast_to(texts, (len(idx), m, c)).reshape(-1).tolist(), media_emb[media])
            out[torch.as_tensor(idx), :m, :c] = flat.float().view(len(idx), m, c)
        return out

    def counts(self, items: list[Item], n_media: int) -> dict[str, int]:
        out = {"rows": len(items), f"{self.spec['media']['kind']}s": n_media}
        if any(f["rows"] for f in self.filtered):
            out["rows_filtered"] = sum(f["rows"] for f in self.filtered)
        return out

    def result(self, ctx: "EvalContext", items: list[Item], values: dict[str, Any], notes: dict[str, Any],
               n_media: int, samples: list[dict[str, Any]] | None) -> TaskResult:
        """Metrics as the means of the per-item values (0/100; None: a row the metric leaves out) the
        YAML declares: the record's numbers and their per-query values are one computation."""
        from negharness.scoring.perquery import covered_mean, per_query  # lazy: start-up time (torch)

        per_item = {k: [None if v is None else float(v) for v in vs] for k, vs in values.items() if k in self.metric_info}
        metrics = {k: covered_mean(vs) for k, vs in per_item.items()}
        notes = {**notes, **self.filter_notes(), **_by_group(items, per_item, self.spec.get("group_by"))}
        counts = self.counts(items, n_media)
        if self.spec.get("published"):
            notes.update(published_notes(self.name, ctx.model, metrics, self.spec["published"], counts,
                                         self.content_digest()))
        return TaskResult(metrics, counts, samples, notes,
                          per_query([self.query_id(it.where) for it in items], per_item,
                                    self.clusters([it.cluster for it in items])))

    def content_digest(self) -> str | None:
        """The SHA-256 of the data file as it lies on disk (several: `collection_digest` of theirs):
        the item kinds read the authors' own files (NegRefCOCOg.json, SugarCrepe++'s JSON), so the
        ``content_sha256`` line of ``collections.csv`` is what ``sha256sum`` prints for the paper's file.
        An imagefolder has no one file to hash: None, so a paper's numbers are never shown on it."""
        if any(p.is_dir() for p in self.spec_files):
            return None
        digests = [file_sha256(p) for p in self.spec_files]
        return digests[0] if len(digests) == 1 else collection_digest(digests)


def _by_group(items: list[Item], per_item: dict[str, list[float | None]], fields: list[str] | None) -> dict[str, Any]:
    """``group_by``: each group's metrics (the mean over its items) and size, as the authors' per-pattern
    or per-category tables report them; {} without it."""
    if not fields:
        return {}
    from negharness.scoring.perquery import covered_mean  # lazy: start-up time (torch)

    rows: dict[str, list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        rows[str(it.group)].append(i)
    groups = {g: {"items": len(idx), **{k: covered_mean([vs[i] for i in idx]) for k, vs in per_item.items()}}
              for g, idx in rows.items()}
    return {"by_group": {"fields": list(fields), "groups": groups}}


def _strictly_best(scores: "torch.Tensor", dim: int) -> "torch.Tensor":
    """(..., N) whether each diagonal entry of (..., N, N) strictly beats every other entry along ``dim``."""
    import torch  # lazy: start-up time

    n = scores.shape[-1]
    others = torch.where(torch.eye(n, dtype=torch.bool), float("-inf"), scores)
    return scores.diagonal(dim1=-2, dim2=-1) > others.max(dim=dim).values


def _bounded(item: Item) -> Item:
    """``item``, or a `UserError` naming its row when it holds more media or captions than one item may."""
    check_item_width(len(item.media), "media", item.where)
    check_item_width(len(item.texts), "captions", item.where)
    return item


class GroupTask(ItemTask):
    """N images x N captions; caption k belongs to image k (Winoground: N = 2)."""

    def item(self, rec: Record) -> Item:
        refs = self.record_media(rec)
        texts = self.captions(rec, self.spec["captions"]["members"])
        if len(refs) != len(texts) or len(refs) < 2:
            raise UserError(f"{rec.where}: a group needs N images and N captions (N >= 2); found {len(refs)} "
                            f"images and {len(texts)} captions")
        return Item(tuple(refs), tuple(texts), rec.where)

    def evaluate(self, ctx: "EvalContext") -> TaskResult:
        import torch  # lazy: start-up time

        items, mats, notes, n_media = self.scored(ctx)
        by_size: dict[int, list[int]] = defaultdict(list)
        for i, it in enumerate(items):
            by_size[len(it.texts)].append(i)
        text = np.zeros(len(items), dtype=bool)
        image = np.zeros(len(items), dtype=bool)
        for n, idx in by_size.items():  # S[i, m, c]: image m against caption c
            s = mats[torch.as_tensor(idx), :n, :n]
            text[idx] = _strictly_best(s, dim=2).all(1).numpy()  # each image: its caption above the others
            image[idx] = _strictly_best(s, dim=1).all(1).numpy()  # each caption: its image above the others
        values = {"text_score": text * 100.0, "image_score": image * 100.0, "group_score": (text & image) * 100.0}
        values = {k: v.tolist() for k, v in values.items()}
        samples = None
        if ctx.log_samples:
            samples = [{"row": it.where, "media": [m.id for m in it.media], "text": bool(text[i]),
                        "image": bool(image[i]), "scores": [[round(float(x), 5) for x in r[: len(it.texts)]]
                                                     for r in mats[i, : len(it.media)].tolist()]}
                       for i, it in enumerate(items)]
        notes = {**notes, "scores": "Winoground's: text score = every image's own caption strictly above the "
                                    "others; image score = every caption's own image strictly above the others; "
                                    "group = both (a tie counts wrong)"}
        return self.result(ctx, items, values, notes, n_media, samples)


class MultiChoiceTask(ItemTask):
    """Several true captions and one or more false ones per record; every positive must win."""

    def item(self, rec: Record) -> Item:
        cap = self.spec["captions"]
        positives, negatives = self.captions(rec, cap["positives"]), self.captions(rec, cap["false"])
        if self.spec["text_only"] and len(positives) != 2:
            raise UserError(f"{rec.where}: text_only compares two positives with the negatives; found {len(positives)}")
        refs = () if self.spec["text_only"] else tuple(self.record_media(rec))
        return Item(refs, tuple(positives + negatives), rec.where, len(positives))

    def _media_paths(self) -> list[Path]:
        return [] if self.spec["text_only"] and self.items else super()._media_paths()  # rows checked either way

    def evaluate(self, ctx: "EvalContext") -> TaskResult:
        if self.spec["text_only"]:
            items, margins, notes, n_media = self.items, self._text_margins(ctx), {"rule": TOT_RULE}, 0
        else:
            items, mats, notes, n_media = self.scored(ctx)
            margins = self._margins(mats[:, 0], [it.correct for it in items], [len(it.texts) for it in items])
            notes["rule"] = "every positive caption must score strictly above every negative one (a tie counts wrong)"
        margin = np.asarray(margins, dtype=np.float64)
        values = {"accuracy": ((margin > 0) * 100.0).tolist(), "tie_rate": ((margin == 0) * 100.0).tolist()}
        samples = None
        if ctx.log_samples:
            samples = [{"row": it.where, "margin": round(float(g), 6), "right": bool(g > 0)} for it, g in zip(items, margin)]
        return self.result(ctx, items, values, notes, n_media, samples)

    @staticmethod
    def _margins(scores: "torch.Tensor", n_pos: list[int], n_all: list[int]) -> np.ndarray:
        """Per row the weakest positive's score minus the strongest negative's: > 0 is right, 0 a tie."""
        import torch  # lazy: start-up time

        col = torch.arange(scores.shape[1])
        pos = col[None, :] < torch.as_tensor(n_pos)[:, None]
        neg = ~pos & (col[None, :] < torch.as_tensor(n_all)[:, None])
        weakest = torch.where(pos, scores, float("inf")).min(1).values
        strongest = torch.where(neg, scores, float("-inf")).max(1).values
        return (weakest.double() - strongest.double()).numpy()

    def _text_margins(self, ctx: "EvalContext") -> np.ndarray:
        """Per item min(p1.p2 - p1.n, p1.p2 - p2.n) over the negatives n, cosines of the text embeddings
        (items with as many captions scored together)."""
        import torch  # lazy: start-up time

        texts = list(dict.fromkeys(t for it in self.items for t in it.texts))
        where = {t: i for i, t in enumerate(texts)}
        emb = torch.nn.functional.normalize(ctx.embed_texts(texts).float(), dim=-1)
        by_size: dict[int, list[int]] = defaultdict(list)
        for i, it in enumerate(self.items):
            by_size[len(it.texts)].append(i)
        out = np.empty(len(self.items))
        for idx in by_size.values():
            e = emb[torch.as_tensor([[where[t] for t in self.items[i].texts] for i in idx])]  # (items, texts, dim)
            p1p2 = (e[:, 0] * e[:, 1]).sum(-1, keepdim=True)
            p1n, p2n = (e[:, :1] * e[:, 2:]).sum(-1), (e[:, 1:2] * e[:, 2:]).sum(-1)
            out[idx] = torch.minimum(p1p2 - p1n, p1p2 - p2n).min(1).values.double().numpy()
        return out

    def counts(self, items: list[Item], n_media: int) -> dict[str, int]:
        return {"rows": len(items)} if self.spec["text_only"] else super().counts(items, n_media)


class ImageChoiceTask(ItemTask):
    """One caption; the true image or region (``media.true_box``, else the first) must score highest."""

    def item(self, rec: Record) -> Item:
        refs = self.record_media(rec)
        text = self.captions(rec, [self.spec["captions"]["text"]])
        if len(text) != 1 or len(refs) < 2:
            raise UserError(f"{rec.where}: an image choice needs one caption and two or more images; found "
                            f"{len(text)} and {len(refs)}")
        correct = 0
        true_box = self.spec["media"]["true_box"]
        if true_box:
            m = self.spec["media"]
            box = box_of(rec, true_box, rec.get(true_box), m["box_format"])
            boxes = [r.crop for r in refs]
            if box not in boxes:
                raise UserError(f"{rec.where}: field {true_box!r} = {short(rec.get(true_box))} is none of the "
                                f"boxes in {m['boxes']!r}")
            correct = boxes.index(box)
        identical = [r.id for r in refs].count(refs[correct].id) > 1
        return Item(tuple(refs), tuple(text), rec.where, correct, identical)

    def evaluate(self, ctx: "EvalContext") -> TaskResult:
        from negharness.scoring.choices import choice_scoring  # lazy: start-up time (torch)

        items, mats, notes, n_media = self.scored(ctx)
        scores = mats[:, :, 0]  # -inf where an item has fewer regions
        authors = self.spec.get("authors")
        covered = np.array([not it.identical for it in items])
        out = choice_scoring(scores, [it.correct for it in items], None, 1, covered.tolist(),
                             authors["ties"] if authors else None)
        notes["ties"] = "a row whose best score is shared by several images counts as wrong"
        if covered.sum() < len(items):
            notes["identical"] = {"rows": int((~covered).sum()), "reason": "a region equals the true one"}
        if authors:
            notes["authors_rule"] = (f"accuracy_authors_rule: the authors' np.argmax over the regions in file order "
                                     f"(a tie picks the first); {authors['note']}")
        samples = None
        if ctx.log_samples:
            samples = [{"row": it.where, "correct": it.correct, "chosen": int(out.chosen[i]), "tie": bool(out.tie[i]),
                        "scores": [round(float(x), 5) for x in mats[i, : len(it.media), 0]]} for i, it in enumerate(items)]
        return self.result(ctx, items, out.values, notes, n_media, samples)
