"""What a task plugin gives the host: validated metadata, a data check, and `evaluate` over a run context.

A task's metadata is one `TaskMeta` (name, family, version, modalities, main score, metrics with
direction and format, options with type and default, citation, where to get the data, the cluster
its queries belong to), read from
the class attributes below and checked when the task is loaded: a metric without a direction, a
main score that is not a metric, an unknown modality or a malformed option is an error naming the
task and its plugin, before any model loads. Options (``-T key=value``) are parsed by the one
option parser (`negharness.api`), typed, and only declared options enter the task's config.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Mapping

from typing_extensions import TypeVar

from negharness.contracts.errors import UserError
from negharness.contracts.options import OptionSpec, parse_options

MODALITIES = frozenset({"text", "image", "video", "edit"})
DEFAULT_CLUSTER = "row"  # each query its own cluster (rows independent)

# The context `Task.evaluate` receives: `Task[EvalContext]` for a retrieval or choice task,
# `Task[EditContext]` for an editing one. A bare `Task` (every third-party task written before the
# parameter) is `Task[Any]`, so its `evaluate` may keep annotating its context as it always did.
ContextT = TypeVar("ContextT", default=Any)


@dataclass
class TaskOptions:
    """What every task factory receives."""

    data_root: Path
    data_root_source: str = "--data-root"
    cache_dir: Path | None = None
    seed: int = 0
    limit: int | None = None
    extra: dict[str, str] = field(default_factory=dict)


UNITS = ("percent", "share")  # what a `MetricInfo` may declare its numbers are written in


@dataclass(frozen=True)
class MetricInfo:
    """How a task's metric reads: its direction, its printed format, and, where the task says so, its unit:
    ``"percent"`` (0-100) or ``"share"`` (of 1). A declared unit is what exporters write the number in
    (`negharness.scoring.catalog.record_scale`); without one, the catalogue's for a name it knows."""

    higher_is_better: bool = True
    fmt: str = ".3f"
    unit: str | None = None


@dataclass
class TaskResult:
    metrics: dict[str, float]
    n_items: dict[str, int]
    samples: list[dict[str, Any]] | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    # compact per-query values for bootstraps and paired tests (see negharness.scoring.perquery):
    # {"ids": [query id, ...], "values": {metric: [value or None per id]}}, mean(values[m]) == metrics[m];
    # a task that declares a cluster adds "clusters": [the cluster id of each query]
    per_query: dict[str, Any] | None = None


class TaskDefinitionError(UserError):
    """A task plugin declared its metadata wrongly; the message names the task and what to fix."""


@dataclass(frozen=True)
class TaskMeta:
    name: str
    family: str
    version: str
    description: str
    modalities: frozenset[str]
    main_score: str
    metrics: Mapping[str, MetricInfo]
    leaderboard_metrics: tuple[str, ...]
    options: Mapping[str, OptionSpec]
    citation: str = ""
    data_help: str = ""
    cluster: str = DEFAULT_CLUSTER

    def validate(self, where: str) -> "TaskMeta":
        problems = []
        if not self.name or any(c in self.name for c in "*?[] /"):
            problems.append(f"name {self.name!r} is empty or has a glob character, space or slash")
        if not self.family:
            problems.append("family is empty")
        if not isinstance(self.version, str) or not self.version:
            problems.append(f"version {self.version!r} must be a non-empty string")
        if not self.modalities or not set(self.modalities) <= MODALITIES:
            problems.append(f"modalities {sorted(self.modalities)} must be among {sorted(MODALITIES)}")
        bad = [k for k, v in self.metrics.items() if not isinstance(v, MetricInfo)]
        if bad:
            problems.append(f"metric_info[{bad[0]!r}] is not a MetricInfo (direction and format)")
        units = [k for k, v in self.metrics.items() if isinstance(v, MetricInfo) and v.unit not in (None, *UNITS)]
        if units:
            problems.append(f"metric_info[{units[0]!r}].unit {self.metrics[units[0]].unit!r} must be one of "
                            f"{', '.join(UNITS)} (or left out)")
        if self.main_score not in self.metrics:
            problems.append(f"main_score {self.main_score!r} is not in metric_info")
        missing = [m for m in self.leaderboard_metrics if m not in self.metrics]
        if missing:
            problems.append(f"leaderboard metric {missing[0]!r} is not in metric_info")
        bad = [k for k, v in self.options.items() if not isinstance(v, OptionSpec)]
        if bad:
            problems.append(f"task_options[{bad[0]!r}] is not an OptionSpec")
        problems += cluster_problems(self.cluster)
        if problems:
            raise TaskDefinitionError(f"{where}: " + "; ".join(problems))
        return self


def cluster_problems(cluster: Any) -> list[str]:
    """What is wrong with a declared cluster name (a short word or two: "image", "COCO image")."""
    if not isinstance(cluster, str) or not cluster.strip() or len(cluster) > 40 \
            or any(not c.isprintable() for c in cluster):
        return [f"cluster {cluster!r} must be a short printable name of what queries share "
                f"(image, video, source item) or {DEFAULT_CLUSTER!r}"]
    return []


class Task(ABC, Generic[ContextT]):
    """Subclasses set the class attributes and implement `evaluate`.

    ``modalities`` lists what the model must encode (the host checks before loading anything);
    ``metric_info`` gives every metric the task returns its direction and format;
    ``leaderboard_metrics`` are the columns this task contributes to its family's table;
    ``task_options`` declares the ``-T`` options it takes (read them from ``self.opts``);
    ``cluster`` names what several queries may share (the image, video or source item they are
    about; its id per query goes in ``per_query["clusters"]``), so intervals resample those; the
    default ``"row"`` says each query is its own cluster, and the record says so.
    The parameter names the context `evaluate` receives (`ContextT`).
    """

    name: str = "task"
    family: str = "misc"
    version: str = "1"
    description: str = ""
    modalities: frozenset[str] = frozenset({"text"})
    main_score: str = ""
    metric_info: dict[str, MetricInfo] = {}
    leaderboard_metrics: tuple[str, ...] = ()
    task_options: dict[str, OptionSpec] = {}
    citation: str = ""
    data_help: str = ""
    cluster: str = DEFAULT_CLUSTER

    def __init__(self, options: TaskOptions) -> None:
        self.options = options
        bad = [k for k, v in self.task_options.items() if not isinstance(v, OptionSpec)]
        if bad:
            raise TaskDefinitionError(f"task {self.name!r}: task_options[{bad[0]!r}] is not an OptionSpec")
        # -T keys of other tasks in the same run are theirs; the run checks each key has an owner
        self.opts: dict[str, Any] = parse_options(options.extra, self.task_options, "-T", f"task {self.name!r}",
                                                  ignore_unknown=True)

    @property
    def meta(self) -> TaskMeta:
        help_text = self.data_help if isinstance(self.data_help, str) else ""
        return TaskMeta(self.name, self.family, str(self.version), self.description, frozenset(self.modalities),
                        self.main_score, dict(self.metric_info), tuple(self.leaderboard_metrics),
                        dict(self.task_options), self.citation, help_text, self.cluster)

    def required_files(self) -> list[Path]:
        """Files that must exist under the data root before any model runs; [] for generated data."""
        return []

    def data_files(self) -> list[Path]:
        """Every file whose content the task's numbers depend on (its data files and the media they
        name); their content hashes go into the record, and a record is reused only while they
        match. Defaults to `required_files`; override when a task reads more than it requires."""
        return self.required_files()

    def query_count(self) -> int | None:
        """At most how many queries `evaluate` scores, where the task can tell without a model (from its
        files or generated data, not its media); None where it cannot. `negharness fire` refuses a
        ``--sizes`` N above it before torch loads (an N above what the run scored is refused after it)."""
        return None

    def config(self) -> dict[str, Any]:
        """Task settings that change its numbers (recorded and hashed into the result's config)."""
        return {"name": self.name, "version": self.version, "seed": self.options.seed,
                "limit": self.options.limit,
                **{k: v for k, v in self.opts.items() if self.task_options[k].changes_numbers}}

    @abstractmethod
    def evaluate(self, ctx: ContextT) -> TaskResult:
        """Embed or edit through ``ctx`` (which caches) and score."""


def check_result(task: Task, result: TaskResult, plugin: str) -> None:
    """A metric the task did not declare would have no direction on the leaderboard, and a record
    whose main score is missing or not a number would show nothing where its number belongs:
    refuse both before any record is written."""
    undeclared = sorted(set(result.metrics) - set(task.metric_info))
    if undeclared:
        raise TaskDefinitionError(f"task {task.name!r} from plugin {plugin!r} returned metric {undeclared[0]!r}, "
                                  "which its metric_info does not declare (direction and format)")
    main = result.metrics.get(task.main_score)
    if isinstance(main, bool) or not isinstance(main, (int, float)) or not math.isfinite(main):
        got = "no such metric" if task.main_score not in result.metrics else f"{main!r}"
        raise TaskDefinitionError(f"task {task.name!r} from plugin {plugin!r}: its main score {task.main_score!r} "
                                  f"is not a finite number in the result ({got}; returned: "
                                  f"{', '.join(sorted(result.metrics)) or 'no metrics'})")
