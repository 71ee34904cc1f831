"""Turning any failure into one line for the CLI: what went wrong, where, and what was kept.

A `UserError` already says it; here are the rest. An exception from a DataLoader worker arrives
re-raised with the worker's traceback pasted into its message: only the original message is kept.
An `OSError` (a full disk, a folder where a file should be) names its path. Anything else is a bug
in a plugin or in negharness: the message names the model or task and the plugin that raised, and
the full traceback is one environment variable away (``NEGHARNESS_DEBUG=1``).
"""

from __future__ import annotations

import errno
from types import TracebackType
from typing import Any, Iterator

from negharness.api.editing import Editor
from negharness.api.errors import UserError
from negharness.api.model import EmbeddingModel
from negharness.api.options import env_flag
from negharness.api.task import Task

DEBUG_ENV = "NEGHARNESS_DEBUG"
DEBUG_HINT = f"rerun with {DEBUG_ENV}=1 for the traceback"
_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


class PluginRunError(Exception):
    """A plugin (or negharness itself) raised something unexpected during a run. Exit 1, not 2:
    the user's input may be fine."""

    exit_code = 1


def debug_requested() -> bool:
    return env_flag(DEBUG_ENV)


def message_of(exc: BaseException) -> str:
    """The exception's own message; for one re-raised from a DataLoader worker ("Caught X in
    DataLoader worker process 0. Original Traceback ...: X: message"), the original message only."""
    text = str(exc)
    if "Original Traceback" not in text:
        return text
    cls = type(exc)
    for prefix in (f"{cls.__module__}.{cls.__qualname__}: ", f"{cls.__qualname__}: "):
        at = text.rfind("\n" + prefix)
        if at >= 0:
            return text[at + 1 + len(prefix):].strip()
    return text.strip().splitlines()[-1]


def chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and its causes/contexts, outermost first (each once)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]


def os_error_in(exc: BaseException) -> OSError | None:
    """The first OSError in the chain, where the failure is the machine's, not the code's. A library
    that wraps the system's error in its own type (safetensors' writer does) still says "No space
    left on device" (or Rust's "StorageFull"): that counts as the OSError it was."""
    found = next((e for e in chain(exc) if isinstance(e, OSError) and not isinstance(e, UserError)), None)
    if found is None and any(s in str(e) for e in chain(exc) for s in ("No space left on device", "StorageFull")):
        found = OSError(errno.ENOSPC, "No space left on device")
    return found


def describe_os_error(err: OSError, where: str) -> str:
    """One line naming the path: 'no space left on device writing /x/y (...)'."""
    path = err.filename or ""
    if err.errno in _NO_SPACE:
        target = f"writing {path}" if path else f"writing under {where}"
        return (f"no space left on device {target}; records and cached embeddings finished before it are "
                f"kept: free space (or choose another --cache-dir/--output-dir) and rerun to resume")
    what = err.strerror or type(err).__name__
    return f"{path}: {what}" if path else f"{what} (under {where})"


def plugin_frames(tb: TracebackType | None, kinds: dict[str, Any]) -> list[tuple[str, Any]]:
    """(label, object) for each traceback frame, outermost first, whose ``self`` is a plugin object
    of the run; ``kinds`` maps a label ("task", "model") to the base class that marks it."""
    found = []
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        for label, base in kinds.items():
            if base is not None and isinstance(owner, base) and (not found or found[-1][1] is not owner):
                found.append((label, owner))
        tb = tb.tb_next
    return found


def blame_run(exc: BaseException, host: Any, model_name: str, output_dir: str) -> str:
    """"model 'm' (plugin 'p') failed on task 't' (plugin 'q'): Error: message; ... kept; hint":
    the culprit is the innermost plugin object on the traceback (the model, or the task itself)."""

    frames = plugin_frames(exc.__traceback__, {"task": Task, "model": (EmbeddingModel, Editor)})
    tasks = [obj for label, obj in frames if label == "task"]
    model = f"model {model_name!r}" + _plugin_of(host, ("model", "editor"), model_name)
    task = f"task {tasks[-1].name!r}" + _plugin_of(host, ("task",), tasks[-1].name) if tasks else ""
    if frames and frames[-1][0] == "task":
        head = f"{task} failed (run with {model})"
    else:
        head = f"{model} failed" + (f" on {task}" if task else "")
    return (f"{head}: {type(exc).__name__}: {message_of(exc)}; records of tasks finished before it are kept "
            f"in {output_dir}; {DEBUG_HINT}")


def _plugin_of(host: Any, kinds: tuple[str, ...], name: str) -> str:
    entry = next((e for kind in kinds for e in host.registry.entries(kind) if e.name == name), None)
    return f" (plugin {entry.plugin!r})" if entry else ""


def one_line(exc: BaseException, where: str) -> tuple[str, int]:
    """Every failure as (message, exit code): 2 for the user's input or machine, 1 for a plugin's bug.
    ``where`` names the folders a run writes, for a full disk that reports no path."""
    if isinstance(exc, UserError):
        return message_of(exc), exc.exit_code
    if isinstance(exc, PluginRunError):
        return str(exc), exc.exit_code
    os_err = os_error_in(exc)
    if os_err is not None:
        return describe_os_error(os_err, where), 2
    return f"unexpected {type(exc).__name__}: {message_of(exc)}; {DEBUG_HINT}", 1
