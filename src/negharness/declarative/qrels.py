"""Retrieval with qrels: a collection (``data``: one record per item, named by ``media.id``), a queries
file (``queries``: id and text) and a qrels file (``qrels``: query id, item id, optional score > 0 for
relevant), as BEIR / MTEB / MRMR ship them. Scored by the shared text-to-media retrieval
(`negharness.scoring.retrieval.evaluate_text_to_media` with several relevant items: R@K = C@K, MIR,
mAP), the metrics FIRE and nT2VR report. With ``direction: media_to_text`` the media are the queries
and the ``texts`` file's texts are ranked (`evaluate_media_to_text`, the same metrics); ``candidates``
ranks each query against its own candidate set only (MRMR's ``split_corpus``: Hit@1 = R@1 over four).

A qrels line naming a query or an item the files do not have is refused naming the file and line
(a judgement of nothing would be dropped without a word); a duplicated id too; so is, under
``candidates``, an id the pattern does not match, a query with no candidate, or a relevant item that
is not among its query's candidates (a judgement the protocol could never count). A query no line
judges relevant to anything is left out and counted (``queries_unjudged``), as trec_eval does.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from negharness.contracts.errors import UserError
from negharness.contracts.task import TaskResult
from negharness.declarative.annotations import Record, read_records, short
from negharness.declarative.group import Item, ItemTask
from negharness.declarative.sources import read_source

if TYPE_CHECKING:
    from negharness.contracts.context import EvalContext


def _ids(recs: list[Record], field: str, what: str) -> dict[str, Record]:
    """id -> record; a repeated id is refused naming both rows."""
    out: dict[str, Record] = {}
    for rec in recs:
        key = rec.text(field)
        if not key:
            raise UserError(f"{rec.where}: empty {what} id in field {field!r}")
        if key in out:
            raise UserError(f"{rec.where}: {what} id {short(key)} repeats {out[key].where}")
        out[key] = rec
    return out


@dataclass(frozen=True)
class Judged:
    """The queries kept (--limit applied), each one's relevant items and candidates (indices into the
    ranked side), and how many queries no qrels line judges."""

    ids: list[str]
    query_recs: list[Record]
    relevant: list[list[int]]
    candidates: list[list[int]] | None
    unjudged: int


def _texts_present(recs: Iterable[Record], field: str, what: str) -> None:
    """Every record's text in ``field`` is non-empty; the first empty one is refused naming its row."""
    for rec in recs:
        if not rec.text(field):
            raise UserError(f"{rec.where}: empty {what} in field {field!r}")


def _key(pattern: str | None, value: str, where: str, what: str) -> str:
    """An id's candidate key: the pattern's first group (whole match without a group); the id itself
    without a pattern. An id the pattern does not match is refused naming its row."""
    if pattern is None:
        return value
    m = re.fullmatch(pattern, value)
    key = None if m is None else m.group(1) if m.re.groups else m.group(0)
    if key is None:  # no match, or a first group that took no part in it
        raise UserError(f"{where}: {what} id {short(value)} does not match the candidates pattern {pattern!r}")
    return key


class QrelsRetrievalTask(ItemTask):
    """Retrieval where a qrels file says which items each query finds relevant: texts rank the media,
    or (``direction: media_to_text``) the media rank the texts."""

    @property
    def media_queries(self) -> bool:
        return self.spec.get("direction") == "media_to_text"

    @property
    def side_files(self) -> list[Path]:
        return [self._under_root(self.spec[k]["file"], f"{self.spec['source']}: key '{self.spec[k]['file_key']}'")
                for k in ("queries", "qrels")]

    def required_files(self) -> list[Path]:
        """The files, and with them all present, the qrels read against both sides: a bad line is refused
        while the run plans, before any model loads."""
        if not all(p.is_file() for p in self.side_files):
            return self.spec_files + self.side_files
        files = self.side_files + super().required_files()
        if all(p.is_file() for p in self.spec_files):
            self.judged  # noqa: B018 (read and checked now; evaluate reuses it)
        return files

    def _read(self, key: str) -> list[Record]:
        path, fmt = self.side_files[("queries", "qrels").index(key)], self.spec[key]["format"]
        source = read_source(path, fmt)
        return read_records(path, fmt) if source is None else source

    def item(self, rec: Record) -> Item:
        return Item(tuple(self.record_media(rec)), (), rec.where)

    @cached_property
    def _sides(self) -> tuple[dict[str, Record], dict[str, Record]]:
        """(query side, ranked side) by id: the texts and the media, in the task's direction."""
        media = _ids(list(self.records()), self.spec["media"]["id"], "item")
        texts = _ids(self._read("queries"), self.spec["queries"]["id"], "text" if self.media_queries else "query")
        if self.media_queries:  # the ranked texts, checked while the run plans (queries: once kept, below)
            _texts_present(texts.values(), self.spec["queries"]["text"], "text")
        return (media, texts) if self.media_queries else (texts, media)

    @cached_property
    def judged(self) -> Judged:
        """The qrels read against both sides; --limit cuts the queries, never the candidates."""
        j = self.spec["qrels"]
        queries, ranked = self._sides
        judged_at: dict[tuple[str, int], str] = {}  # (query, item) -> the qrels row judging it relevant
        index = {key: i for i, key in enumerate(ranked)}
        query_file, ranked_file = ((self.spec_files[0], self.side_files[0]) if self.media_queries
                                   else (self.side_files[0], self.spec_files[0]))
        relevant: dict[str, list[int]] = {}
        for rec in self._read("qrels"):
            qid, item = rec.text(j["query"]), rec.text(j["item"])
            if qid not in queries:
                raise UserError(f"{rec.where}: query id {short(qid)} is not in {query_file}")
            if item not in index:
                raise UserError(f"{rec.where}: item id {short(item)} is not in {ranked_file}")
            score = rec.get(j["score"]) if j["score"] else 1
            try:
                value = float(score)
            except (TypeError, ValueError):
                value = math.nan
            if not math.isfinite(value):
                raise UserError(f"{rec.where}: score {short(score)} in field {j['score']!r} is not a finite number")
            if value > 0 and index[item] not in relevant.setdefault(qid, []):
                relevant[qid].append(index[item])
                judged_at[(qid, index[item])] = rec.where
        kept = [k for k in queries if relevant.get(k)]
        if self.options.limit:
            kept = kept[: self.options.limit]
        if not kept:
            raise UserError(f"{self.side_files[1]}: no query is judged relevant to any item")
        recs = [queries[k] for k in kept]
        if not self.media_queries:
            _texts_present(recs, self.spec["queries"]["text"], "query text")
        rel = [sorted(relevant[k]) for k in kept]
        return Judged(kept, recs, rel, self._candidates(kept, recs, rel, judged_at),
                      sum(1 for k in queries if not relevant.get(k)))

    def _candidates(self, kept: list[str], recs: list[Record], relevant: list[list[int]],
                    judged_at: dict[tuple[str, int], str]) -> list[list[int]] | None:
        """Each kept query's candidate items under ``candidates`` (None: the whole collection)."""
        rule = self.spec.get("candidates")
        if not rule:
            return None
        by_key: dict[str, list[int]] = {}
        for i, (key, rec) in enumerate(self._sides[1].items()):
            by_key.setdefault(_key(rule["item"], key, rec.where, "item"), []).append(i)
        out = []
        for qid, rec, rel in zip(kept, recs, relevant):
            cands = by_key.get(_key(rule["query"], qid, rec.where, "query"), [])
            if not cands:
                raise UserError(f"{rec.where}: query {short(qid)} has no candidate (no item's key equals its own)")
            outside = sorted(set(rel) - set(cands))
            if outside:
                name = list(self._sides[1])[outside[0]]
                raise UserError(f"{judged_at[(qid, outside[0])]}: item {short(name)}, judged relevant to query "
                                f"{short(qid)}, is not among its candidates")
            out.append(cands)
        return out

    def query_count(self) -> int | None:
        """The queries some qrels line judges relevant to an item (`judged`; --limit applied), from the files alone."""
        return len(self.judged.ids)

    @cached_property
    def items(self) -> list[Item]:
        """Every item of the collection (--limit cuts the queries, never the candidates)."""
        items = [self.item(r) for r in self.records()]
        if not items:
            raise UserError(f"{self.spec_files[0]}: no rows (after filters)")
        return items

    def evaluate(self, ctx: "EvalContext") -> TaskResult:
        from negharness.scoring.metrics import Relevance  # lazy: start-up time (torch)
        from negharness.scoring.retrieval import evaluate_media_to_text, evaluate_text_to_media  # lazy (torch)

        judged = self.judged
        ranked = self._sides[1]
        relevance = Relevance.from_lists(judged.relevant, len(ranked))
        candidates = None if judged.candidates is None else Relevance.from_lists(judged.candidates, len(ranked))
        if self.media_queries:
            field = self.spec["queries"]["text"]
            texts = [rec.text(field) for rec in ranked.values()]
            refs = [self.item(rec).media[0] for rec in judged.query_recs]
            result = evaluate_media_to_text(ctx, judged.ids, self.media_set(ctx, refs), list(ranked), texts,
                                            relevance, candidates=candidates)
        else:
            texts = [rec.text(self.spec["queries"]["text"]) for rec in judged.query_recs]
            refs = [it.media[0] for it in self.items]
            result = evaluate_text_to_media(ctx, judged.ids, texts, relevance, self.media_set(ctx, refs),
                                            several=True, candidates=candidates)
        result.metrics = {k: v for k, v in result.metrics.items() if k in self.metric_info}
        notes: dict[str, Any] = {**(result.notes or {}), **self.filter_notes()}
        if judged.unjudged:
            notes["queries_unjudged"] = judged.unjudged
        result.notes = notes
        if result.per_query is not None:
            result.per_query["values"] = {k: v for k, v in result.per_query["values"].items() if k in result.metrics}
        return result
