"""Retrieval with qrels: a collection (``data``: one record per item, named by ``media.id``), a queries
file (``queries``: id and text) and a qrels file (``qrels``: query id, item id, optional score > 0 for
relevant), as BEIR / MTEB / MRMR ship them. Scored by the shared text-to-media retrieval
(`negharness.scoring.retrieval.evaluate_text_to_media` with several relevant items: R@K = C@K, MIR,
mAP), the metrics FIRE and nT2VR report.

A qrels line naming a query or an item the files do not have is refused naming the file and line
(a judgement of nothing would be dropped without a word); a duplicated id too. A query no line
judges relevant to anything is left out and counted (``queries_unjudged``), as trec_eval does.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from negharness.api.errors import UserError
from negharness.api.task import TaskResult
from negharness.declarative.annotations import Record, read_records, short
from negharness.declarative.group import Item, ItemTask
from negharness.declarative.sources import read_source

if TYPE_CHECKING:
    from negharness.api.context import EvalContext


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


class QrelsRetrievalTask(ItemTask):
    """Text-to-media retrieval where a qrels file says which items each query finds relevant."""

    @property
    def side_files(self) -> list[Path]:
        return [self._under_root(self.spec[k]["file"], f"{self.spec['source']}: key '{k}.file'")
                for k in ("queries", "qrels")]

    def required_files(self) -> list[Path]:
        if not all(p.is_file() for p in self.side_files):
            return self.spec_files + self.side_files
        return self.side_files + super().required_files()

    def _read(self, key: str) -> list[Record]:
        path, fmt = self.side_files[("queries", "qrels").index(key)], self.spec[key]["format"]
        source = read_source(path, fmt)
        return read_records(path, fmt) if source is None else source

    def item(self, rec: Record) -> Item:
        return Item(tuple(self.record_media(rec)), (), rec.where)

    @cached_property
    def judged(self) -> tuple[list[str], list[str], list[list[int]], int]:
        """(query ids, texts, relevant item indices per query, queries left unjudged), --limit applied."""
        q, j = self.spec["queries"], self.spec["qrels"]
        items = {key: i for i, key in enumerate(_ids(list(self.records()), self.spec["media"]["id"], "item"))}
        queries = _ids(self._read("queries"), q["id"], "query")
        relevant: dict[str, list[int]] = {}
        for rec in self._read("qrels"):
            qid, item = rec.text(j["query"]), rec.text(j["item"])
            if qid not in queries:
                raise UserError(f"{rec.where}: query id {short(qid)} is not in {self.side_files[0]}")
            if item not in items:
                raise UserError(f"{rec.where}: item id {short(item)} is not in {self.spec_files[0]}")
            score = rec.get(j["score"]) if j["score"] else 1
            try:
                positive = float(score) > 0
            except (TypeError, ValueError):
                raise UserError(f"{rec.where}: score {short(score)} in field {j['score']!r} is not a number") from None
            if positive and items[item] not in relevant.setdefault(qid, []):
                relevant[qid].append(items[item])
        kept = [k for k in queries if relevant.get(k)]
        if self.options.limit:
            kept = kept[: self.options.limit]
        texts = [queries[k].text(q["text"]) for k in kept]
        for k, t in zip(kept, texts):
            if not t:
                raise UserError(f"{queries[k].where}: empty query text in field {q['text']!r}")
        if not kept:
            raise UserError(f"{self.side_files[1]}: no query is judged relevant to any item")
        return kept, texts, [sorted(relevant[k]) for k in kept], sum(1 for k in queries if not relevant.get(k))

    @cached_property
    def items(self) -> list[Item]:
        """Every item of the collection (--limit cuts the queries, never the candidates)."""
        items = [self.item(r) for r in self.records()]
        if not items:
            raise UserError(f"{self.spec_files[0]}: no rows (after filters)")
        return items

    def evaluate(self, ctx: "EvalContext") -> TaskResult:
        from negharness.scoring.metrics import Relevance  # lazy: start-up time (torch)
        from negharness.scoring.retrieval import evaluate_text_to_media  # lazy: start-up time (torch)

        ids, texts, relevant, unjudged = self.judged
        refs = [it.media[0] for it in self.items]
        relevance = Relevance.from_lists(relevant, len(refs))
        result = evaluate_text_to_media(ctx, ids, texts, relevance, self.media_set(ctx, refs), several=True)
        result.metrics = {k: v for k, v in result.metrics.items() if k in self.metric_info}
        notes: dict[str, Any] = {**(result.notes or {}), **self.filter_notes()}
        if unjudged:
            notes["queries_unjudged"] = unjudged
        result.notes = notes
        if result.per_query is not None:
            result.per_query["values"] = {k: v for k, v in result.per_query["values"].items() if k in result.metrics}
        return result
