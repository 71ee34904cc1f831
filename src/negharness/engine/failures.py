"""Blaming a run's failure on the plugin that raised it: the model or task on the traceback, named
with its plugin. Needs the plugin base classes (so torch); the rest of the one-line failure, which
every command shares, is torch-free in `negharness.cli.process` (its text in `negharness.contracts.errors`).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from negharness.contracts.editing import Editor
from negharness.contracts.errors import DEBUG_HINT, message_of
from negharness.contracts.model import EmbeddingModel
from negharness.contracts.task import Task


def plugin_frames(tb: TracebackType | None, kinds: dict[str, Any]) -> list[tuple[str, Any]]:
    """(label, object) for each traceback frame, outermost first, whose ``self`` is a plugin object
    of the run; ``kinds`` maps a label ("task", "model") to the base class that marks it."""
    found: list[tuple[str, Any]] = []
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        for label, base in kinds.items():
            if base is not None and isinstance(owner, base) and (not found or found[-1][1] is not owner):
                found.append((label, owner))
        tb = tb.tb_next
    return found


def blame_run(exc: BaseException, host: Any, model_name: str, output_dir: str) -> str:
    """"model 'm' (plugin 'p') failed on task 't' (plugin 'q'): Error: message; ... kept; hint":
    the culprit is the innermost plugin object on the traceback (the model, or the task itself), else
    the task whose factory raised (`negharness.engine.precheck.made_task` marks it), else the model."""

    frames = plugin_frames(exc.__traceback__, {"task": Task, "model": (EmbeddingModel, Editor)})
    tasks = [obj for label, obj in frames if label == "task"]
    model = f"model {model_name!r}" + _plugin_of(host, ("model", "editor"), model_name)
    task = f"task {tasks[-1].name!r}" + _plugin_of(host, ("task",), tasks[-1].name) if tasks else ""
    factory = getattr(exc, "negharness_entry", None)  # set where a task's factory raised (no task object yet)
    if not frames and factory is not None:
        head = f"{factory.kind} {factory.name!r} (plugin {factory.plugin!r}) failed (run with {model})"
    elif frames and frames[-1][0] == "task":
        head = f"{task} failed (run with {model})"
    else:
        head = f"{model} failed" + (f" on {task}" if task else "")
    return (f"{head}: {type(exc).__name__}: {message_of(exc)}; records of tasks finished before it are kept "
            f"in {output_dir}; {DEBUG_HINT}")


def _plugin_of(host: Any, kinds: tuple[str, ...], name: str) -> str:
    entry = next((e for kind in kinds for e in host.registry.entries(kind) if e.name == name), None)
    return f" (plugin {entry.plugin!r})" if entry else ""
