"""The `Task` classes a declarative specification becomes (see `negharness.declarative.register`):
`task_class` makes one from a checked specification, on a choice (`negharness.declarative.choice_task`),
retrieval or suite base; the common reading is `negharness.declarative.base_task`.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from negharness.contracts.errors import UserError
from negharness.contracts.task import Task, TaskOptions, TaskResult
from negharness.declarative.base_task import DeclarativeTask
from negharness.declarative.choice_task import ChoiceTask
from negharness.declarative.media import MediaRef

if TYPE_CHECKING:
    from negharness.contracts.context import EvalContext


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
