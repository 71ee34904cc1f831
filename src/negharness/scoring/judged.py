"""Judged retrieval scored as SimpleNeg's evaluation scores it (Sammani et al., "When Negation Is a
Geometry Problem in Vision-Language Models", arXiv 2603.20554, `steer.py` at github
fawazsammani/negation-steering@10011d9): the model under test retrieves the top K images of a pool
for each query, and a vision-language judge checks each retrieved image with two yes/no questions:

- the verification question ("is there a desk in the image?") first: the image scores 0 unless the
  judge answers "yes";
- then, only for a verified image, the negation question ("is there a lamp on the desk?"): the image
  scores 1 when the judge answers "no".

Each prompt is the question plus "\\nAnswer the question with a yes or no."; a reply is read as the
script reads it (`yes_no`: lower case, full stops dropped, stripped; anything else than "yes" or
"no" is neither). The script keeps three 0/1 lists per query, one entry per retrieved image
(`evaluate_retrieved_images`): ``final``, ``verification`` and ``negation``, the last 1 when verified
and answered "no", 0 otherwise (0 where not verified). Reported, in percent over every (query,
retrieved image), the mean of each list under its name: ``final``, ``verification`` and
``negation``. The script's ``negation`` list equals its ``final`` list element by element, so
``negation`` always equals ``final``; it is kept so that a number named like the script's is the
script's. ``negation_given_verified`` is the share of verified images whose negation answer is
"no" (``final = verification x negation_given_verified / 100``): the rate that says something of
its own, absent when no retrieved image was verified. ``final``, ``verification`` and ``negation``
have per-query values (a query's mean over its K images), hence intervals; the ratio has none.

Used by the built-in judged tasks (`negharness.tasks.judged`, through `negharness.api.scoring`) and by
YAML tasks of kind ``judged`` (`negharness.declarative.judged`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from negharness.contracts.task import TaskResult

PROMPT_SUFFIX = "\nAnswer the question with a yes or no."  # steer.py's `vqa`
LISTS = ("final", "verification", "negation")  # steer.py's three lists, each averaged under its name
CONDITIONAL = "negation_given_verified"


@dataclass(frozen=True)
class MediaItem:
    """One item of a pool's `MediaSet` shown to the judge as the model under test saw it: a video as its
    sampled frames (the model's ``-M frames``, else the task's sampling), in time order."""

    media: Any  # negharness.api.media.MediaSet
    position: int


@dataclass(frozen=True)
class JudgedQuery:
    """A query with its two judge questions."""

    id: str
    text: str
    negation: str  # answered "no" by an image that respects the negation
    verification: str  # answered "yes" by an image that shows what the query is about


def prompt(question: str) -> str:
    """What the judge is asked (SimpleNeg's wording)."""
    return question + PROMPT_SUFFIX


def yes_no(reply: str) -> str:
    """A reply as steer.py reads it: lower case, full stops dropped, stripped (``"Yes."`` is ``"yes"``,
    ``"Yes, there is"`` is neither yes nor no)."""
    return reply.lower().replace(".", "").strip()


def judge_images(judge: Any, items: Sequence[tuple[Path | MediaItem, JudgedQuery]]) -> list[tuple[str, str | None]]:
    """(verification answer, negation answer or None where not verified) per (image file or video, query),
    read by `yes_no`: the verification questions in one batch, then the negation questions of the verified."""
    verified = [yes_no(a) for a in judge.ask([(path, prompt(q.verification)) for path, q in items])]
    asked = [i for i, a in enumerate(verified) if a == "yes"]
    negated = [yes_no(a) for a in judge.ask([(items[i][0], prompt(items[i][1].negation)) for i in asked])]
    answers: list[str | None] = [None] * len(items)
    for i, a in zip(asked, negated):
        answers[i] = a
    return list(zip(verified, answers))


def score_lists(answers: Sequence[tuple[str, str | None]]) -> dict[str, list[int]]:
    """steer.py's three 0/1 lists (``final``, ``verification``, ``negation``), one entry per image, as
    its `evaluate_retrieved_images` fills them."""
    verification = [int(v == "yes") for v, _ in answers]
    negation = [int(v == "yes" and n == "no") for v, n in answers]  # 0 where not verified
    return {"final": list(negation), "verification": verification, "negation": negation}


def rates(lists: dict[str, list[int]]) -> dict[str, float]:
    """The reported rates in percent: each list's mean, and the negation rate among verified images
    (left out when no image was verified: a share of nothing)."""
    n = len(lists["final"])
    out = {k: 100.0 * sum(lists[k]) / n for k in LISTS}
    verified = sum(lists["verification"])
    if verified:
        out[CONDITIONAL] = 100.0 * sum(lists["final"]) / verified
    return out


def answer_counts(answers: Sequence[tuple[str, str | None]]) -> dict[str, dict[str, int]]:
    """How often the judge said yes, no or something else, per question: the record's notes."""
    def tally(values: list[str]) -> dict[str, int]:
        c = Counter(v if v in ("yes", "no") else "other" for v in values)
        return {k: c.get(k, 0) for k in ("yes", "no", "other")}
    return {"verification": tally([v for v, _ in answers]), "negation": tally([n for _, n in answers if n is not None])}


def evaluate_judged(ctx: Any, queries: Sequence[JudgedQuery], pool_ids: Sequence[str], pool_paths: Sequence[Path],
                    media: Any, top_k: int, judge_identity: Any = None,
                    clusters: Sequence[str] | None = None) -> TaskResult:
    """Retrieve each query's top ``top_k`` of the pool (``media``, the pool's `MediaSet`, in the order of
    ``pool_ids`` / ``pool_paths``) with the model under test, have ``ctx.judge`` check every retrieved
    image, and score as the module docstring says. An image that could not be decoded
    (``--skip-broken-media``) leaves the pool, counted in the notes (``media_skipped``); ``top_k`` is
    then at most the readable images. ``clusters``: each query's cluster id, where the task declares one."""
    import torch  # lazy: start-up time

    from negharness.scoring.perquery import per_query  # lazy: start-up time (numpy)
    from negharness.scoring.unreadable import nothing_left, unreadable_items  # lazy: start-up time (torch)

    if not queries:
        raise ValueError("judged retrieval of no query")
    media_emb = ctx.embed_media(media)
    bad = torch.from_numpy(unreadable_items(ctx, media, media_emb))  # --skip-broken-media: never retrieved
    if bool(bad.all()):
        raise nothing_left(media, "image of the pool")
    k = min(top_k, int((~bad).sum()))
    sim = torch.nan_to_num((ctx.embed_texts([q.text for q in queries]) @ media_emb.t()).float(), nan=float("-inf"))
    sim[:, bad] = float("-inf")  # so never judged: the judge would be handed bytes nothing can decode
    top = torch.topk(sim, k, dim=1).indices.tolist()
    shown = (lambda j: MediaItem(media, j)) if media.kind == "video" else (lambda j: Path(pool_paths[j]))
    items = [(shown(j), q) for q, row in zip(queries, top) for j in row]
    answers = judge_images(getattr(ctx, "judge"), items)
    lists = score_lists(answers)
    per_q = {m: [100.0 * sum(lists[m][r * k:(r + 1) * k]) / k for r in range(len(queries))] for m in LISTS}
    samples = [{"id": q.id, "query": q.text, "retrieved": [pool_ids[j] for j in row],
                "answers": [list(a) for a in answers[r * k:(r + 1) * k]]}
               for r, (q, row) in enumerate(zip(queries, top))]
    notes: dict[str, Any] = {"judge": judge_identity, "answers": answer_counts(answers), "top_k": k,
                             **({"media_skipped": int(bad.sum())} if bool(bad.any()) else {})}
    return TaskResult(rates(lists), {"queries": len(queries), "pool": len(pool_ids), "judged_images": len(items)},
                      samples, notes=notes, per_query=per_query([q.id for q in queries], per_q, clusters))
