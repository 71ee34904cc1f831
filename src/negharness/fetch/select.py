"""Which sources a `negharness fetch` pattern means: a task name or glob (the sources those tasks
read), a benchmark name (its tasks), a source's own name (``coco/train2014.zip``), or a model with
released weights (``negclip``: its file, a source of the model cache)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from fnmatch import fnmatchcase

from negharness.contracts.errors import UserError
from negharness.fetch.sources import BENCHMARKS, SOURCES, Source, human_size


def sources_of_task(task: str, sources: Iterable[Source]) -> list[Source]:
    return [s for s in sources if any(fnmatchcase(task, g) for g in s.tasks)]


def select(patterns: list[str], task_names: list[str], sources: tuple[Source, ...],
           elsewhere: Callable[[str], bool] = lambda _: False, also: Iterable[str] = ()) -> list[Source]:
    """The sources the patterns name, each once, in table order; a pattern that names nothing is an
    error with the closest names (``also``: more names to suggest), unless ``elsewhere`` takes it (a
    model's weights)."""
    chosen: set[str] = set()
    for pattern in patterns:
        globs = BENCHMARKS.get(pattern, (pattern,))
        tasks = [t for t in task_names if any(fnmatchcase(t, g) for g in globs)]
        hits = [s for s in sources if fnmatchcase(s.name, pattern)]
        hits += [s for t in tasks for s in sources_of_task(t, sources)]
        if not hits and elsewhere(pattern):
            continue
        if not hits:
            known = sorted(set(task_names) | set(BENCHMARKS) | {s.name for s in sources} | set(also))
            close = difflib.get_close_matches(pattern, known, n=3)
            why = "names no task, benchmark or source" if not tasks else "reads no file that can be fetched"
            raise UserError(f"negharness fetch {pattern!r}: {why}" + (f" (did you mean {', '.join(close)}?)"
                                                                       if close else "; `negharness fetch --list` "
                                                                       "shows every source"))
        chosen.update(s.name for s in hits)
    return [s for s in sources if s.name in chosen]


def plan(patterns: list[str], task_names: list[str], sources: tuple[Source, ...]) -> tuple[list[Source], list[Source]]:
    """What `negharness fetch PATTERN...` brings: (sources of the data root, released weights for the
    model cache); no pattern means every one of both (``--list``)."""
    from negharness.fetch.weights import WEIGHTS, weight_sources  # lazy: only fetch itself needs the session

    if not patterns:
        return list(sources), weight_sources(["*"])
    data = select(patterns, task_names, sources, lambda p: bool(weight_sources([p])), {m for m, _ in WEIGHTS})
    return data, weight_sources(patterns)


def download_size(sources: Iterable[Source]) -> str:
    """The download a set of sources costs, for messages: '1.3 GB', 'at least 1.3 GB', plus the
    sources that only a person can fetch."""
    items = list(sources)
    fetched = [s for s in items if s.kind != "manual"]
    known = sum(s.size or 0 for s in fetched)
    unknown = any(s.size is None for s in fetched)
    text = "" if not fetched else "size unknown" if unknown and not known else (
        ("at least " if unknown else "") + human_size(known))
    by_hand = [s.name for s in items if s.kind == "manual"]
    if by_hand:
        text += ("; " if text else "") + "by hand: " + ", ".join(by_hand)
    return text


def fetch_hint(task: str, sources: tuple[Source, ...]) -> str:
    """One line for `negharness list` and the missing-data error: the command and what it downloads."""
    needed = sources_of_task(task, sources)
    if not needed:
        return ""
    by_hand = [s for s in needed if s.kind == "manual"]
    if len(by_hand) == len(needed):  # nothing a program may download: the command only says where they go
        return f"no program may download them: `negharness fetch {task}` prints the steps and where to put them"
    if by_hand:
        fetched = [s for s in needed if s.kind != "manual"]
        return (f"`negharness fetch {task}` downloads {download_size(fetched)} and prints the steps for the rest "
                f"({', '.join(s.name for s in by_hand)}, by hand)")
    return f"`negharness fetch {task}` downloads them ({download_size(needed)})"


def benchmark_sizes(task_names: list[str], sources: tuple[Source, ...] = SOURCES) -> str:
    """The line under `negharness list`'s tasks: the fetch command and each benchmark's download."""
    parts = []
    for bench, globs in BENCHMARKS.items():
        needed = {s.name: s for t in task_names if any(fnmatchcase(t, g) for g in globs)
                  for s in sources_of_task(t, sources)}
        if needed:
            parts.append(f"{bench} {download_size(needed.values())}")
    return ("data: `negharness fetch TASK|GLOB|BENCHMARK` downloads what tasks read into the data root: "
            + " | ".join(parts))
