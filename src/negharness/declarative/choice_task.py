"""Choice tasks declared in YAML (`ChoiceTask`): each row's true caption against its false ones, right when
the true one scores strictly highest. Rows are read once per task object and checked before a model loads: a
row with an empty true caption or with no false caption is an error naming the file and the record.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from negharness.contracts.errors import UserError
from negharness.contracts.task import TaskResult
from negharness.declarative.annotations import Record, edit_captions, short
from negharness.declarative.base_task import DeclarativeTask, resolve_generator
from negharness.declarative.media import MediaRef
from negharness.io.data_limits import check_score_layout
from negharness.records.published import collection_digest, published_notes

if TYPE_CHECKING:
    from negharness.contracts.context import EvalContext

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
IDENTICAL = ("a false option equals the true one, so no model can tell them apart: left out of the safe "
             "metrics (accuracy, tie_rate, macro_accuracy); the *_authors_rule metrics score it")


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
