"""Judged retrieval: the model under test retrieves the top K images of a pool for each query, and a
vision-language judge (``--judge``) checks each retrieved image with two yes/no questions, as
SimpleNeg's evaluation does (Sammani et al., "When Negation Is a Geometry Problem in Vision-Language
Models", arXiv 2603.20554, `steer.py` at github fawazsammani/negation-steering@10011d9). How the
judge is asked and how its answers are scored (``final``, ``verification``, ``negation`` as the
script's three lists, and ``negation_given_verified``) is `negharness.api.scoring.evaluate_judged`,
which YAML tasks of kind ``judged`` share.

A task of this kind says what its queries and pool are (`queries`, `pool`); the judge is the run's
(`ctx.judge`, a `negharness.engine.judging.JudgeSession`), its identity in the task's config (``judge``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from negharness.api import EvalContext, MissingDataError, OptionSpec, Task, TaskOptions, TaskResult
from negharness.api import media as media_api
from negharness.api import scoring
from negharness.api.scoring import JudgedQuery

__all__ = ["JudgedQuery", "JudgedRetrieval", "SimpleNeg", "read_simpleneg"]


class JudgedRetrieval(Task[EvalContext]):
    """Top-K text-to-image retrieval, each retrieved image judged (see the module docstring)."""

    needs_judge = True  # the host gives it a judge (`negharness.engine.judging.is_judged`)
    family = "judged"
    version = "2"  # 2: negation is the script's list's mean; the share among the verified, negation_given_verified
    modalities = frozenset({"text", "image"})
    main_score = "final"
    metric_info = scoring.JUDGED_METRICS
    leaderboard_metrics: tuple[str, ...] = ("final", "verification", "negation_given_verified")
    task_options = {"top_k": OptionSpec(int, 5, "retrieved images judged per query", minimum=1, maximum=100)}
    # set by the run's plan (`negharness.engine.judging.set_judge`): the judge's label (in the config) and
    # its name and options (in the record's notes)
    judge: str | None = None
    judge_identity: dict[str, Any] | None = None

    def config(self) -> dict[str, Any]:
        return {**super().config(), "judge": self.judge, "prompt": scoring.judge_prompt("{question}")}

    def queries(self) -> list[JudgedQuery]:
        """The queries, cut to ``--limit``."""
        raise NotImplementedError

    def pool(self) -> tuple[list[str], list[Path]]:
        """The pool's image ids and files, in the pool's order."""
        raise NotImplementedError

    def evaluate(self, ctx: EvalContext) -> TaskResult:
        queries, (ids, paths) = self.queries(), self.pool()
        media = media_api.image_files(f"judged/{self.name}/pool", ids, paths)
        return scoring.evaluate_judged(ctx, queries, ids, paths, media, self.opts["top_k"], self.judge_identity)


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
