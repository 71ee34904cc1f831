"""Judged negation precision@K on nT2VR's composed queries ("A and not B") over its collections
(``mscoco_composed_judged``, ``flickr30k_composed_judged``; ``msrvtt3k_composed_judged``,
``msrvtt1k_composed_judged``, ``vatex_composed_judged`` over videos): the model retrieves the top K items of
the collection for each composed query and the judge checks each as SimpleNeg does (`JudgedRetrieval`):

- verification: "Does the image show {positive}?" (the builder's subject and positive verb phrase);
- negation: "Does the image show {subject} {negative}?" (the excluded verb phrase), to be answered "no".

A video is asked about as "the video" and shown to the judge as the frames the model under test saw
(the model's ``-M frames``, else nT2VR's sampling): the judge must take frames (``takes_frames``).

``final`` is then the judged precision@K of the negation: the share of retrieved images that show
what the query asks for and not what it excludes. The composed file must carry the builder's parts
(``subject``, ``positive``, ``negative``), as `negharness build-queries` (or ``-T build=true``) writes
them; the authors' own files lack them and are refused naming the command that builds them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from negharness.api import EvalContext, TaskResult, UserError, scoring
from negharness.tasks.nt2vr.collections import COLLECTIONS
from negharness.tasks.nt2vr.tasks import NT2VRComposed
from negharness.text.nt2vr_files import read_composed_file

from .retrieval import JudgedQuery, JudgedRetrieval

PARTS = ("subject", "positive", "negative")


def questions(record: dict[str, Any], kind: str = "image") -> tuple[str, str]:
    """(negation question, verification question) of a composed query's stored parts, about an image or a video."""
    return (f"Does the {kind} show {record['subject']} {record['negative']}?",
            f"Does the {kind} show {record['positive']}?")


class NT2VRJudgedComposed(JudgedRetrieval, NT2VRComposed):
    """An nT2VR image collection's composed queries, judged (see the module docstring)."""

    family = "judged"
    task_options = {**NT2VRComposed.task_options, **JudgedRetrieval.task_options}
    cluster = "row"

    def queries(self) -> list[JudgedQuery]:
        built = self._ensure_queries()
        path = self._text("composed")
        records = [q.as_record() for q in built.composed] if built is not None else read_composed_file(path)
        lacking = [n for n, r in enumerate(records, 1) if not all(isinstance(r.get(k), str) for k in PARTS)]
        if lacking:
            raise UserError(f"{path}:{lacking[0]}: composed query lacks its parts ({', '.join(PARTS)}) the judge's "
                            "questions are made of; build the file with negharness build-queries (or -T build=true)")
        out = []
        for r in records:
            negation, verification = questions(r, self.kind)
            out.append(JudgedQuery(str(r["cap_id"]), str(r["caption"]), negation, verification))
        return out[: self.options.limit or None]

    def pool(self) -> tuple[list[str], list[Path]]:
        ids = self._ids()
        if self.kind == "video":  # shown as the model samples them (`evaluate`); the files are checked as for nT2VR
            return ids, []
        paths, missing = self._media_files(ids)
        if missing:
            raise UserError(f"task {self.name}: {len(missing)} images missing, e.g. {missing[0]}")
        return ids, paths


    def evaluate(self, ctx: EvalContext) -> TaskResult:
        if self.kind != "video":
            return super().evaluate(ctx)
        queries, (ids, _) = self.queries(), self.pool()
        media = self.media(ctx, ids)  # the collection as its other nT2VR tasks read it: one cache, the model's frames
        return scoring.evaluate_judged(ctx, queries, ids, [], media, self.opts["top_k"], self.judge_identity)


def _make(prefix: str) -> type:
    _, kind, what = COLLECTIONS[prefix]
    return type(f"{prefix}_composed_judged", (NT2VRJudgedComposed,), {
        "name": f"{prefix}_composed_judged", "prefix": prefix, "query_set": "composed",
        "modalities": frozenset({"text", kind}),
        "description": f"nT2VR composed queries on {what}, top-K judged by a VLM (needs --judge)"})


TASKS = {f"{p}_composed_judged": _make(p) for p in ("mscoco", "flickr30k", "msrvtt3k", "msrvtt1k", "vatex")}
globals().update(TASKS)  # registry targets: negharness.tasks.judged.nt2vr:<task name>
