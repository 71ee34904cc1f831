"""negharness.api.task: the public face of `negharness.contracts.task` (what a task plugin gives the host:
validated metadata, a data check, and `evaluate` over a run context).

Plugins import these names from here; the host imports the contract module itself."""

from __future__ import annotations

from negharness.contracts.task import (
    DEFAULT_CLUSTER as DEFAULT_CLUSTER,
    MODALITIES as MODALITIES,
    MetricInfo as MetricInfo,
    Task as Task,
    TaskDefinitionError as TaskDefinitionError,
    TaskMeta as TaskMeta,
    TaskOptions as TaskOptions,
    TaskResult as TaskResult,
    check_result as check_result,
    cluster_problems as cluster_problems,
)

__all__ = [
    "DEFAULT_CLUSTER", "MODALITIES", "MetricInfo", "Task", "TaskDefinitionError", "TaskMeta",
    "TaskOptions", "TaskResult", "check_result", "cluster_problems",
]
