"""Judged retrieval: the model under test retrieves the top K images of a pool for each query, and a
vision-language judge (``--judge``) checks each retrieved image with two yes/no questions, as
SimpleNeg's evaluation does (Sammani et al., "When Negation Is a Geometry Problem in Vision-Language
Models", arXiv 2603.20554, `steer.py` at github fawazsammani/negation-steering@10011d9):

- the verification question ("is there a desk in the image?") first: the image scores 0 unless the
  judge answers "yes";
- then the negation question ("is there a lamp on the desk?"): the image scores 1 when the judge
  answers "no".

Each prompt is the question plus "\\nAnswer the question with a yes or no."; a reply counts as read by
`yes_no` (lower case, full stops dropped, stripped; anything else than
"yes"/"no" is neither). Reported, in percent over every (query, retrieved image): ``final`` (the
script's ``final`` list), ``verification`` (its ``verification`` list) and ``negation``, the share of
verified images whose negation answer is "no". The script's own ``negation`` list equals its ``final``
list element by element (0 where not verified), so its mean would repeat ``final``; the conditional
rate is the number that says something of its own (``final = verification x negation / 100``).

A task of this kind says what its queries and pool are (`queries`, `pool`); the judge is the run's
(`ctx.judge`, a `negharness.engine.judging.JudgeSession`), its identity in the task's config (``judge``).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from negharness.api import EvalContext, MetricInfo, MissingDataError, OptionSpec, Task, TaskOptions, TaskResult
from negharness.api import media as media_api
from negharness.api import scoring

PROMPT_SUFFIX = "\nAnswer the question with a yes or no."  # steer.py's `vqa`
JUDGED_METRICS = {"final": MetricInfo(True, ".1f"), "verification": MetricInfo(True, ".1f"),
                  "negation": MetricInfo(True, ".1f")}


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


def judge_images(judge: Any, items: Sequence[tuple[Path, JudgedQuery]]) -> list[tuple[str, str | None]]:
    """(verification answer, negation answer or None where not verified) per (image, query), read by
    `yes_no`: the verification questions in one batch, then the negation questions of the verified."""
    verified = [yes_no(a) for a in judge.ask([(path, prompt(q.verification)) for path, q in items])]
    asked = [i for i, a in enumerate(verified) if a == "yes"]
    negated = [yes_no(a) for a in judge.ask([(items[i][0], prompt(items[i][1].negation)) for i in asked])]
    answers: list[str | None] = [None] * len(items)
    for i, a in zip(asked, negated):
        answers[i] = a
    return list(zip(verified, answers))


def scores(answers: Sequence[tuple[str, str | None]]) -> tuple[list[int], list[int]]:
    """(final, verification) per image, each 0 or 1, as steer.py's `evaluate_retrieved_images`."""
    verification = [int(v == "yes") for v, _ in answers]
    final = [int(v == "yes" and n == "no") for v, n in answers]
    return final, verification


def answer_counts(answers: Sequence[tuple[str, str | None]]) -> dict[str, dict[str, int]]:
    """How often the judge said yes, no or something else, per question: the record's notes."""
    def tally(values: list[str]) -> dict[str, int]:
        c = Counter(v if v in ("yes", "no") else "other" for v in values)
        return {k: c.get(k, 0) for k in ("yes", "no", "other")}
    return {"verification": tally([v for v, _ in answers]), "negation": tally([n for _, n in answers if n is not None])}


class JudgedRetrieval(Task[EvalContext]):
    """Top-K text-to-image retrieval, each retrieved image judged (see the module docstring)."""

    needs_judge = True  # the host gives it a judge (`negharness.engine.judging.is_judged`)
    family = "judged"
    version = "1"
    modalities = frozenset({"text", "image"})
    main_score = "final"
    metric_info = JUDGED_METRICS
    leaderboard_metrics: tuple[str, ...] = ("final", "verification", "negation")
    task_options = {"top_k": OptionSpec(int, 5, "retrieved images judged per query", minimum=1, maximum=100)}
    # set by the run's plan (`negharness.engine.judging.set_judge`): the judge's label (in the config) and
    # its name and options (in the record's notes)
    judge: str | None = None
    judge_identity: dict[str, Any] | None = None

    def config(self) -> dict[str, Any]:
        return {**super().config(), "judge": self.judge, "prompt": prompt("{question}")}

    def queries(self) -> list[JudgedQuery]:
        """The queries, cut to ``--limit``."""
        raise NotImplementedError

    def pool(self) -> tuple[list[str], list[Path]]:
        """The pool's image ids and files, in the pool's order."""
        raise NotImplementedError

    def evaluate(self, ctx: EvalContext) -> TaskResult:
        import torch

        queries, (ids, paths) = self.queries(), self.pool()
        k = min(self.opts["top_k"], len(ids))
        sim = ctx.embed_texts([q.text for q in queries]) @ ctx.embed_media(
            media_api.image_files(f"judged/{self.name}/pool", ids, paths)).t()
        top = torch.topk(torch.nan_to_num(sim.float(), nan=float("-inf")), k, dim=1).indices.tolist()
        items = [(paths[j], q) for q, row in zip(queries, top) for j in row]
        answers = judge_images(getattr(ctx, "judge"), items)
        final, verification = scores(answers)
        per_final = [100.0 * sum(final[r * k:(r + 1) * k]) / k for r in range(len(queries))]
        per_verif = [100.0 * sum(verification[r * k:(r + 1) * k]) / k for r in range(len(queries))]
        metrics = {"final": 100.0 * sum(final) / len(final), "verification": 100.0 * sum(verification) / len(final),
                   "negation": 100.0 * sum(final) / sum(verification) if sum(verification) else 0.0}
        samples = [{"id": q.id, "query": q.text, "retrieved": [ids[j] for j in row],
                    "answers": [list(a) for a in answers[r * k:(r + 1) * k]]}
                   for r, (q, row) in enumerate(zip(queries, top))]
        return TaskResult(metrics, {"queries": len(queries), "pool": len(ids), "judged_images": len(items)},
                          samples, notes={"judge": self.judge_identity, "answers": answer_counts(answers), "top_k": k},
                          per_query=scoring.per_query([q.id for q in queries], {"final": per_final,
                                                                        "verification": per_verif}))


def read_simpleneg(path: Path) -> list[JudgedQuery]:
    """SimpleNeg's JSON: a list of [negated query, negation question, verification question]; a bad
    row is named by its index."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MissingDataError(f"{path}: not SimpleNeg's JSON ({exc})") from exc
    if not isinstance(rows, list) or not rows:
        raise MissingDataError(f"{path}: expected a non-empty list of [query, negation question, verification question]")
    out = []
    for i, row in enumerate(rows):
        if not (isinstance(row, list) and len(row) == 3 and all(isinstance(s, str) and s.strip() for s in row)):
            raise MissingDataError(f"{path}: row {i}: expected [query, negation question, verification question] "
                                   f"(three non-empty strings), got {json.dumps(row)[:80]}")
        out.append(JudgedQuery(str(i), row[0], row[1], row[2]))
    return out


class SimpleNeg(JudgedRetrieval):
    """SimpleNeg (900 negated queries) over the first 25,000 COCO val2014 files in sorted order."""

    name = "simpleneg"
    description = "SimpleNeg: top-5 COCO val2014 retrieval of negated queries, judged by a VLM (--judge)"
    citation = ("Sammani, Chamiti, Gavrikov, Deligiannis. When Negation Is a Geometry Problem in Vision-Language "
                "Models. CVPR 2026 workshops, arXiv 2603.20554")
    data_help = "negharness fetch simpleneg  (data/simpleneg.json at negation-steering@10011d9, and COCO val2014)"
    task_options = {**JudgedRetrieval.task_options,
                    "pool_size": OptionSpec(int, 25_000, "the first N val2014 files in sorted order form the pool "
                                            "(steer.py's --img_database_size)", minimum=1)}

    def __init__(self, options: TaskOptions) -> None:
        super().__init__(options)
        self.json_path = options.data_root / "simpleneg" / "simpleneg.json"
        self.image_dir = options.data_root / "coco" / "val2014"

    def required_files(self) -> list[Path]:
        if not self.json_path.is_file() or not self.image_dir.is_dir():
            return [self.json_path, self.image_dir]
        return [self.json_path, *self.pool()[1]]

    def queries(self) -> list[JudgedQuery]:
        return read_simpleneg(self.json_path)[: self.options.limit or None]

    def pool(self) -> tuple[list[str], list[Path]]:
        """``sorted(os.listdir(val2014))[:pool_size]``, as steer.py builds its database (regular files only)."""
        names = sorted(p.name for p in self.image_dir.iterdir() if p.is_file())[: self.opts["pool_size"]]
        if len(names) < self.opts["pool_size"]:
            raise MissingDataError(f"{self.image_dir}: {len(names)} images, fewer than the pool's "
                                   f"{self.opts['pool_size']} (-T pool_size=N for a smaller pool)")
        return names, [self.image_dir / n for n in names]
