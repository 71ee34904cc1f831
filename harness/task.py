"""What a task plugin gives the host: metadata, a data check, and `evaluate` over an `EvalContext`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runner import EvalContext


@dataclass
class TaskOptions:
    """What every task factory receives."""

    data_root: Path
    data_root_source: str = "--data-root"
    cache_dir: Path | None = None
    seed: int = 0
    limit: int | None = None
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MetricInfo:
    higher_is_better: bool = True
    fmt: str = ".3f"


@dataclass
class TaskResult:
    metrics: dict[str, float]
    n_items: dict[str, int]
    samples: list[dict[str, Any]] | None = None
    notes: dict[str, Any] = field(default_factory=dict)


class Task(ABC):
    """Subclasses set the class attributes and implement `evaluate`.

    ``modalities`` lists what the model must encode (the host checks before loading anything);
    ``leaderboard_metrics`` are the columns this task contributes to its family's table.
    """

    name: str = "task"
    family: str = "misc"
    version: str = "1"
    description: str = ""
    modalities: frozenset[str] = frozenset({"text"})
    main_score: str = ""
    metric_info: dict[str, MetricInfo] = {}
    leaderboard_metrics: tuple[str, ...] = ()
    citation: str = ""
    data_help: str = ""

    def __init__(self, options: TaskOptions) -> None:
        self.options = options

    def required_files(self) -> list[Path]:
        """Files that must exist under the data root before any model runs; [] for generated data."""
        return []

    def config(self) -> dict[str, Any]:
        """Task settings that change its numbers (recorded and hashed into the result's config)."""
        return {"name": self.name, "version": self.version, "seed": self.options.seed,
                "limit": self.options.limit, **self.options.extra}

    @abstractmethod
    def evaluate(self, ctx: "EvalContext") -> TaskResult:
        """Embed through ``ctx`` (which caches) and score."""
