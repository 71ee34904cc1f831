"""The `Task` classes a declarative specification becomes (see `negharness.declarative.register`).

Rows are read once per task object and checked before a model loads: a choice row with an empty
true caption or with no false caption is an error naming the file and the record. Every path read
(the YAML's data files, each row's media) must stay under the data root, symlinks followed, by the
rule Python tasks follow (`negharness.io.paths.RootGuard`): a refusal names the YAML file and key,
or the annotation file and row, before the path is opened. Media are
identified by their path under the data root (plus the crop box, where one is given), so tasks over
the same images (SugarCrepe's seven splits over COCO val2017) share cached embeddings.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import random
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.contracts.task import Task, TaskOptions, TaskResult
from negharness.declarative.annotations import (
    Record,
    edit_captions,
    explode,
    fill,
    filter_counts,
    join_rows,
    read_records,
    short,
)
from negharness.declarative.media import RGB_RECIPE, MediaRef, load_image
from negharness.declarative.sources import read_source
from negharness.io.data_limits import check_score_layout
from negharness.io.image_files import image_decoder_identity
from negharness.io.paths import RootGuard
from negharness.records.published import collection_digest, published_notes

if TYPE_CHECKING:
    from negharness.contracts.context import EvalContext
    from negharness.io.media import MediaSet

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
IDENTICAL = ("a false option equals the true one, so no model can tell them apart: left out of the safe "
             "metrics (accuracy, tie_rate, macro_accuracy); the *_authors_rule metrics score it")
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


@dataclass(frozen=True)
class ChoiceRow:
    media: MediaRef
    options: tuple[str, ...]
    correct: int
    where: str
    group: str | None = None
    question: str | None = None
    identical: bool = False  # a false option equals the true one: no test of the model
    cluster: str = ""  # what the row shares with others (`cluster:` in the YAML); "" = its own


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


class ChoiceTask(DeclarativeTask):
    """Right when the true caption scores strictly highest among the row's options."""

    def generated(self, rec: Record, caption: str) -> tuple[str, list[str]]:
        """(true, false captions) from a caption generator (ARO's order shuffles), seeded per record by
        where it is read relative to the data root, so the shuffles do not depend on where the data lie."""
        rng = random.Random(f"{self.options.seed}|{self.query_id(rec.where)}")
        made: tuple[str, list[str]] = resolve_generator(self.spec["captions"]["generate"])(caption, rng)
        return made

    def _texts(self, rec: Record, source: dict[str, Any], keep_empty: bool = False, reading: str = "list") -> list[str]:
        """A caption source's texts; a text cell read as ``reading`` unless ``data.cells`` says how."""
        texts = edit_captions(rec.texts(source["field"], keep_empty, reading), source)
        return [t for t in texts if t or keep_empty]

    def _options(self, rec: Record, cap: dict[str, Any]) -> tuple[list[str], int]:
        """The options in their places and the answer's index among them. An empty option (or an
        options field holding none) is refused by row: dropping it would move every later option
        up one place, and the answer index would then name another caption."""
        options: list[str] = []
        for src in cap["options"]:  # each field one option, as NegBench's authors read caption_0..3
            texts = self._texts(rec, src, keep_empty=True, reading="text")
            for t in texts or [""]:
                if not t:
                    raise UserError(f"{rec.where}: option {len(options)} (field {src['field']!r}) is empty; options "
                                    "are matched to the answer by position, so it is refused rather than dropped"
                                    f"{self._shift(rec, cap, len(options))}")
                options.append(t)
        return options, self._answer(rec, cap, len(options))

    def row(self, rec: Record) -> ChoiceRow:
        cap = self.spec["captions"]
        if "options" in cap:
            options, correct = self._options(rec, cap)
        else:
            true = self._texts(rec, cap["true"])
            if len(true) != 1:
                raise UserError(f"{rec.where}: field {cap['true']['field']!r} must hold one non-empty true caption")
            if "generate" in cap:
                first, false = self.generated(rec, true[0])
                true = [first]
            else:
                false = [t for src in cap["false"] for t in self._texts(rec, src)]
            if not false:
                fields = ", ".join(repr(src["field"]) for src in cap.get("false", [])) or "the generator"
                raise UserError(f"{rec.where}: no false caption ({fields} empty); a choice row needs one or more")
            options, correct = true + false, 0
        group = self.group(rec)
        question = rec.text(self.spec["question"]) if self.spec["question"] else None
        identical = options[correct] in options[:correct] + options[correct + 1:]
        media = self.media_ref(rec)
        return ChoiceRow(media, tuple(options), correct, rec.where, group, question, identical,
                         self.cluster_of(rec, media))

    def _shift(self, rec: Record, cap: dict[str, Any], empty: int) -> str:
        """What dropping the empty option at ``empty`` would do to this row's answer, in words."""
        try:
            correct = self._answer(rec, cap, 0, check=False)
        except UserError:
            return ""
        if correct == empty:
            return " (it is the answer's own option)"
        if correct > empty:
            return f" (the answer, option {correct}, would name option {correct + 1}'s caption)"
        return ""

    def _answer(self, rec: Record, cap: dict[str, Any], n: int, check: bool = True) -> int:
        raw = rec.text(cap["answer"])
        base = cap["answer_base"]
        try:
            index = LETTERS.index(raw.upper()) if base == "letter" else int(raw) - int(base)
        except ValueError:
            raise UserError(f"{rec.where}: answer {short(raw)} in field {cap['answer']!r} is not "
                            f"{'a letter' if base == 'letter' else 'an index'}") from None
        if check and (not 0 <= index < n or n < 2):
            raise UserError(f"{rec.where}: answer {short(raw)} names no option of {n}; a choice row needs two or more")
        return index

    @cached_property
    def rows(self) -> list[ChoiceRow]:
        rows = [self.row(r) for r in self.records()]
        if not rows:
            raise UserError(f"{self.spec_files[0]}: no rows (after filters)")
        rows = rows[: self.options.limit] if self.options.limit else rows
        check_score_layout([len(r.options) for r in rows], "options", [r.where for r in rows])
        return rows

    def _media_paths(self) -> list[Path]:
        return [r.media.path for r in self.rows if r.media.path is not None]

    def evaluate(self, ctx: "EvalContext") -> TaskResult:
        from negharness.contracts.choices import (
            ChoiceSet,  # lazy: start-up time (torch)
        )
        from negharness.scoring.choices import (  # lazy: start-up time (torch)
            SAME_WORDS_NOTE,
            choice_scoring,
            readable_media,
            score_choices,
        )
        from negharness.scoring.perquery import per_query  # lazy: start-up time (torch)
        from negharness.scoring.unreadable import (  # lazy: start-up time (torch)
            nothing_left,
            skip_notes,
        )

        rows = self.rows
        refs = list(dict.fromkeys(r.media for r in rows))
        where = {ref: i for i, ref in enumerate(refs)}
        media = self.media_set(ctx, refs)
        media_emb, bad = readable_media(ctx, media, bool(self.spec["question"]))
        if bad.any():  # --skip-broken-media: as if the rows on unreadable media were not in the file
            rows = [r for r in rows if not bad[where[r.media]]]
            if not rows:
                raise nothing_left(media, "row")
        questions = [r.question for r in rows] if self.spec["question"] else None
        choices = ChoiceSet(media, [where[r.media] for r in rows], [r.options for r in rows],
                            [r.correct for r in rows], questions)
        scores = score_choices(ctx, choices, media_emb)
        groups = [r.group for r in rows] if self.spec["group_by"] else None
        authors = self.spec.get("authors")
        out = choice_scoring(scores, choices.correct, groups, self.spec["min_group"], [not r.identical for r in rows],
                             authors["ties"] if authors else None, choices.options)
        samples = None
        if ctx.log_samples:
            samples = [{"row": r.where, "media": r.media.id, "correct": r.correct, "chosen": int(out.chosen[i]),
                        "tie": bool(out.tie[i]), "identical": r.identical,
                        "scores": [round(float(x), 5) for x in scores[i][: len(r.options)]]} for i, r in enumerate(rows)]
        metrics = {k: v for k, v in out.metrics.items() if k in self.metric_info}
        values = {k: v for k, v in out.values.items() if k in metrics}
        notes = {**self.notes(rows, out.per_group), **skip_notes(bad, len(self.rows) - len(rows), "rows")}
        if "same_words_rate" in metrics:
            notes["same_words"] = {"rows": out.same_words, "reason": SAME_WORDS_NOTE}
        kept = [ref for ref, b in zip(refs, bad) if not b]
        counts = self.counts(rows, kept)
        if self.spec.get("published"):
            notes.update(published_notes(self.name, ctx.model, metrics, self.spec["published"], counts,
                                         self.content_digest(rows)))
        ids = [self.query_id(r.where) for r in rows]
        return TaskResult(metrics, counts, samples, notes,
                          per_query(ids, values, self.clusters([r.cluster for r in rows])))

    @staticmethod
    def content_digest(rows: list[ChoiceRow]) -> str:
        """`collection_digest` of what decides every number: per row its medium's file name (and crop box),
        options and answer, in file order; never the folder a copy of the media sits in."""
        return collection_digest([r.media.path.name if r.media.path else r.media.id,
                                  list(r.media.crop) if r.media.crop else None, list(r.options), r.correct]
                                 for r in rows)

    def counts(self, rows: list[ChoiceRow], refs: list[MediaRef]) -> dict[str, int]:
        """Rows (after filters) and media; where rows were left out, how many and which were scored."""
        identical = sum(r.identical for r in rows)
        out = {"rows": len(rows), f"{self.spec['media']['kind']}s": len(refs)}
        if identical:
            out.update(rows_identical=identical, rows_scored=len(rows) - identical)
        if any(f["rows"] for f in self.filtered):
            out["rows_filtered"] = sum(f["rows"] for f in self.filtered)
        return out

    def notes(self, rows: list[ChoiceRow], per_group: dict[str, Any]) -> dict[str, Any]:
        """How ties, identical options, filters and the authors' rule were handled, in words."""
        notes: dict[str, Any] = {"ties": "a row whose best score is shared by several options counts as wrong"}
        identical = sum(r.identical for r in rows)
        if identical:
            notes["identical"] = {"rows": identical, "reason": IDENTICAL}
        notes.update(self.filter_notes())
        authors = self.spec.get("authors")
        if authors:
            rule = ("a first-index argmax over the options in file order (the true one first: a tie with it counts "
                    "right, so a model scoring every option the same gets 100)" if authors["ties"] == "first"
                    else "a strict comparison (a tie counts wrong)")
            notes["authors_rule"] = (f"*_authors_rule: the authors' scoring, {rule}, over every row "
                                     f"(identical ones included); {authors['note']}")
        if per_group:
            notes[f"accuracy_by_{'_'.join(self.spec['group_by'])}"] = per_group
        if "macro_accuracy" in self.metric_info:
            notes["per_query"] = ("macro_accuracy per row: its 0/100 times n/(G*n_g), so the rows' mean is the "
                                  "mean over the G groups")
        return notes


class RetrievalTask(DeclarativeTask):
    """Text-to-media retrieval: each caption's one relevant item is its own record's medium."""

    row_clusters: dict[MediaRef, str]  # each medium's cluster id, filled with `pairs`

    @cached_property
    def pairs(self) -> list[tuple[MediaRef, list[str]]]:
        out = []
        self.row_clusters: dict[MediaRef, str] = {}
        for rec in self.records():
            caps = rec.texts(self.spec["captions"]["field"])
            if not caps:
                raise UserError(f"{rec.where}: no caption in field {self.spec['captions']['field']!r}")
            media = self.media_ref(rec)
            out.append((media, caps))
            self.row_clusters.setdefault(media, self.cluster_of(rec, media))
        if not out:
            raise UserError(f"{self.spec_files[0]}: no rows (after filters)")
        return out[: self.options.limit] if self.options.limit else out

    def _media_paths(self) -> list[Path]:
        return [m.path for m, _ in self.pairs if m.path is not None]

    def queries(self) -> list[tuple[str, str, MediaRef]]:
        """(id, text, its one relevant medium) of every caption `evaluate` ranks the media for, in file order."""
        return [(f"{m.id}#{j}", cap, m) for m, caps in self.pairs for j, cap in enumerate(caps)]

    def query_count(self) -> int | None:
        """Every caption of every row (`queries`), from the data files alone."""
        return len(self.queries())

    def evaluate(self, ctx: "EvalContext") -> TaskResult:
        from negharness.scoring.metrics import Relevance  # lazy: start-up time
        from negharness.scoring.retrieval import (
            evaluate_text_to_media,  # lazy: start-up time
        )

        refs = list(dict.fromkeys(m for m, _ in self.pairs))
        where = {ref: i for i, ref in enumerate(refs)}
        queries = self.queries()
        relevance = Relevance.from_lists([[where[m]] for _, _, m in queries], len(refs))
        per_caption = [self.row_clusters[m] for _, _, m in queries]
        result = evaluate_text_to_media(ctx, [i for i, _, _ in queries], [t for _, t, _ in queries], relevance,
                                        self.media_set(ctx, refs), clusters=self.clusters(per_caption))
        result.metrics = {k: v for k, v in result.metrics.items() if k in self.metric_info}
        result.notes = {**(result.notes or {}), **self.filter_notes()}
        if result.per_query is not None:  # the YAML's metrics only, per query too
            result.per_query["values"] = {k: v for k, v in result.per_query["values"].items() if k in result.metrics}
        return result


class SuiteTask(Task["EvalContext"]):
    """Each member choice task's accuracy and their unweighted (macro) mean, as SugarCrepe reports."""

    spec: dict[str, Any]  # set on each suite's class (`task_class`)
    members: dict[str, type[Task[EvalContext]]] = {}

    def __init__(self, options: TaskOptions) -> None:
        super().__init__(options)
        self.parts = {metric: cls(options) for metric, cls in self.members.items()}

    def required_files(self) -> list[Path]:
        return [p for part in self.parts.values() for p in part.required_files()]

    def data_files(self) -> list[Path]:
        """The suite's YAML, then each member's data files (its YAML first)."""
        return [Path(self.spec["source"]), *(p for part in self.parts.values() for p in part.data_files())]

    def config(self) -> dict[str, Any]:
        return {**super().config(), "members": {m: p.config() for m, p in self.parts.items()}}

    def evaluate(self, ctx: "EvalContext") -> TaskResult:
        """Per query: each member's rows under ``member/row`` ids; a member's metric covers its own
        rows, and ``mean`` every row weighted by n/(M*n_m), so the rows' mean is the members' mean."""
        from negharness.scoring.perquery import per_query  # lazy: start-up time

        metrics, n_items, notes, parts = {}, {}, {}, {}
        for metric, part in self.parts.items():
            result = part.evaluate(ctx)
            metrics[metric] = result.metrics["accuracy"]
            n_items[f"{metric}_rows"] = result.n_items["rows"]
            if result.notes.get("identical") or result.notes.get("filtered"):
                notes[metric] = {k: result.notes[k] for k in ("identical", "filtered") if k in result.notes}
            assert result.per_query is not None  # a ChoiceTask always returns its per-query values
            parts[metric] = result.per_query
        metrics["mean"] = sum(metrics.values()) / len(self.parts)
        ids: list[str] = []
        clusters: list[str] = []
        values: dict[str, list[float | None]] = {m: [] for m in [*self.parts, "mean"]}
        n = sum(sum(1 for v in pq["values"]["accuracy"] if v is not None) for pq in parts.values())
        for metric, pq in parts.items():
            acc = pq["values"]["accuracy"]
            n_m = sum(v is not None for v in acc)
            ids += [f"{metric}/{i}" for i in pq["ids"]]
            clusters += pq.get("clusters") or [f"{metric}/{i}" for i in pq["ids"]]  # one image across members: one cluster
            for other in self.parts:
                values[other] += acc if other == metric else [None] * len(acc)
            values["mean"] += [None if v is None else v * n / (len(parts) * n_m) for v in acc]
        return TaskResult(metrics, n_items, None, {"mean": "unweighted mean of the members' accuracies", **notes},
                          per_query(ids, values, None if self.cluster == "row" else clusters))


def suite_cluster(members: dict[str, type[Task[EvalContext]]]) -> str:
    """A suite's cluster: its members' when they agree (SugarCrepe's splits: COCO images), else a list."""
    names = sorted({getattr(cls, "cluster", "row") for cls in members.values()}) or ["row"]
    joined = " / ".join(names)
    return joined if len(joined) <= 40 else "mixed"


BASES = {"choice": ChoiceTask, "retrieval": RetrievalTask, "suite": SuiteTask}


def task_class(spec: dict[str, Any], members: dict[str, type[Task[EvalContext]]] | None = None,
               base: type[Task[EvalContext]] | None = None) -> type[Task[EvalContext]]:
    """A `Task` subclass with today's class attributes, from a checked specification."""
    if spec["kind"] == "suite":
        kinds = {k for cls in (members or {}).values() for k in cls.modalities}
        modalities = frozenset(kinds or {"text", "image"})
    else:
        modalities = frozenset({"text", spec["media"]["kind"]} if spec.get("media") else {"text"})
    attrs = {"name": spec["name"], "family": spec["family"], "version": spec["version"],
             "description": spec["description"], "modalities": modalities, "main_score": spec["main_score"],
             "metric_info": dict(spec["metric_info"]), "leaderboard_metrics": tuple(spec["leaderboard_metrics"]),
             "citation": spec["citation"], "data_help": spec["data_help"], "licence": spec["licence"], "spec": spec,
             "cluster": (spec.get("cluster") or {"name": "row"})["name"], "__module__": __name__}
    if members is not None:
        attrs["members"] = dict(members)
        attrs["cluster"] = suite_cluster(members)
    return type(spec["name"], (base or BASES[spec["kind"]],), attrs)
