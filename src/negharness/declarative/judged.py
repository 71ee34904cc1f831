"""Judged retrieval declared in YAML (``kind: judged``): each row of ``data`` is a query (its text in
``captions.field``) with two judge questions (``questions.negation``, ``questions.verification``); the
model under test retrieves the top ``top_k`` images of the ``pool`` (the files of ``pool.folder``
under the data root, in sorted order, the first ``pool.size``) and the run's judge (``--judge``)
checks each retrieved image. Scored as the built-in ``simpleneg`` is
(`negharness.scoring.judged.evaluate_judged`: ``final``, ``verification``, ``negation``,
``negation_given_verified``); the judge's identity enters the task's config as it does there
(`negharness.engine.judging.set_judge`), so a run judged by another judge is another record.

Rows are read and checked while the run plans (an empty question is refused naming its row), and
every pool file is checked to stay under the data root, symlinks followed, before a model loads.
"""

from __future__ import annotations

import fnmatch
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from negharness.contracts.errors import UserError
from negharness.contracts.options import OptionSpec
from negharness.contracts.task import TaskResult
from negharness.declarative.base_task import DeclarativeTask
from negharness.declarative.kind_specs import MAX_TOP_K
from negharness.scoring.judged import JudgedQuery, evaluate_judged, prompt

if TYPE_CHECKING:
    from negharness.contracts.context import EvalContext


def judged_options(spec: dict[str, Any]) -> dict[str, OptionSpec]:
    """The ``-T`` options of a judged YAML task, its file's values their defaults."""
    size = spec["pool"]["size"]
    return {"top_k": OptionSpec(int, spec["top_k"], "retrieved images judged per query", minimum=1, maximum=MAX_TOP_K),
            "pool_size": OptionSpec(int, size or 0, "the first N files of the pool folder in sorted order form the "
                                    "pool (0: every file)", minimum=0)}


class JudgedTask(DeclarativeTask):
    """A YAML judged retrieval task (see the module docstring)."""

    needs_judge = True  # the host gives it a judge (`negharness.engine.judging.is_judged`)
    judge: str | None = None  # set by the run's plan (`negharness.engine.judging.set_judge`)
    judge_identity: dict[str, Any] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each task's class (`negharness.declarative.tasks.task_class`) takes its ``-T`` options from its file."""
        super().__init_subclass__(**kwargs)
        spec = cls.__dict__.get("spec")
        if spec:
            cls.task_options = judged_options(spec)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "judge": self.judge, "prompt": prompt("{question}")}

    @cached_property
    def rows(self) -> list[tuple[JudgedQuery, str]]:
        """(query, cluster id) per row, cut to ``--limit``; a row with an empty text or question is named."""
        cap, questions = self.spec["captions"]["field"], self.spec["questions"]
        out = []
        for rec in self.records():
            texts = {"text": rec.text(cap), **{k: rec.text(f) for k, f in questions.items()}}
            fields = {"text": cap, **questions}
            empty = next((k for k, v in texts.items() if not v), None)
            if empty:
                raise UserError(f"{rec.where}: empty {'query' if empty == 'text' else empty + ' question'} "
                                f"in field {fields[empty]!r}")
            query = JudgedQuery(self.query_id(rec.where), texts["text"], texts["negation"], texts["verification"])
            out.append((query, self.cluster_of(rec, None)))
        if not out:
            raise UserError(f"{self.spec_files[0]}: no rows (after filters)")
        return out[: self.options.limit or None]

    @cached_property
    def pool(self) -> tuple[list[str], list[Path]]:
        """The pool's ids (paths under the data root) and files: ``pool.folder``'s regular files whose
        names match ``pool.pattern``, sorted by name (as steer.py's ``sorted(os.listdir(...))``), the
        first ``pool_size``."""
        where = f"{self.spec['source']}: key 'pool.folder'"
        folder = self._under_root(self.spec["pool"]["folder"], where)
        if not folder.is_dir():
            raise UserError(f"{where}: {folder} is no folder")
        pattern, size = self.spec["pool"]["pattern"], self.opts["pool_size"]
        names = sorted(p.name for p in folder.iterdir() if fnmatch.fnmatchcase(p.name, pattern) and p.is_file())
        if size:
            if len(names) < size:
                raise UserError(f"{folder}: {len(names)} files match {pattern!r}, fewer than the pool's {size} "
                                "(-T pool_size=N for a smaller pool)")
            names = names[:size]
        if not names:
            raise UserError(f"{folder}: no file matches {pattern!r}; the pool is empty")
        paths = [self._under_root(str(Path(self.spec["pool"]["folder"]) / n), where) for n in names]
        return [self.query_id(str(p)) for p in paths], paths

    def required_files(self) -> list[Path]:
        """The query files and, once they are there, every pool image, the rows read and checked now."""
        if not all(p.is_file() for p in self.spec_files):
            return self.spec_files
        self.rows  # noqa: B018 (read and checked while the run plans; evaluate reuses them)
        folder = self.root / self.spec["pool"]["folder"]
        return self.spec_files + (self.pool[1] if folder.is_dir() else [folder])

    def evaluate(self, ctx: "EvalContext") -> TaskResult:
        from negharness.io.media import image_files  # lazy: start-up time

        queries = [q for q, _ in self.rows]
        ids, paths = self.pool
        clusters = self.clusters([c for _, c in self.rows])
        result = evaluate_judged(ctx, queries, ids, paths, image_files("judged/pool", ids, paths),
                                 self.opts["top_k"], self.judge_identity, clusters)
        result.metrics = {k: v for k, v in result.metrics.items() if k in self.metric_info}
        result.notes = {**result.notes, **self.filter_notes()}
        if result.per_query is not None:
            result.per_query["values"] = {k: v for k, v in result.per_query["values"].items() if k in result.metrics}
        return result
