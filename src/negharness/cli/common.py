"""What every `negharness` command shares: KEY=VALUE pairs, consoles, progress, the plugin host.

Kept apart from the commands so `cli.commands` (run, train, list, fetch) and `cli.reports`
(leaderboard, compare, fire, diagnose, build-queries) use one copy; nothing heavy is imported here.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Sequence

from negharness.contracts.errors import UserError
from negharness.cli.process import LogProgress

if TYPE_CHECKING:  # imported where used: start-up time
    from rich.console import Console
    from rich.progress import Progress

    from negharness.discovery.manager import PluginHost


def _pairs(values: Sequence[str] | None, option: str) -> dict[str, str]:
    """KEY=VALUE options as a dict; a key given twice with two values is refused, not silently the last."""
    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"{option} {item!r}: expected KEY=VALUE")
        key, value = key.strip(), value.strip()
        if out.get(key, value) != value:
            raise UserError(f"{option} {key} given twice ({key}={out[key]} and {key}={value}): give it once")
        out[key] = value
    return out


def _console(stderr: bool = False) -> Console:
    """Every console the CLI prints through: no markup parsing, since what it prints holds names it did
    not write (task variants "t [n_items=3]", model labels, file names) whose brackets Rich would take
    for tags and swallow; styles come as `rich.text.Text` objects instead."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, markup=False)


def _progress(console: Any, training: bool = False) -> LogProgress | Progress:
    """A live bar in a terminal (with an ETA when training); elsewhere (a log file, CI, a pipe) a
    line on stderr every few seconds."""
    if not console.is_terminal:
        return LogProgress(sys.stderr, idle_lines=training)  # training may prepare for minutes before a step
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    eta = [TimeRemainingColumn()] if training else []
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), *eta,
                    console=console, transient=True)


def _host(args: argparse.Namespace) -> PluginHost:
    from negharness.discovery.manager import make_host  # lazy: start-up time

    blocked = [p[3:] for p in (args.plugin or []) if p.startswith("no:")]
    bad = [p for p in (args.plugin or []) if not p.startswith("no:")]
    if bad:
        raise UserError(f"-p {bad[0]}: only -p no:NAME (block a plugin) is supported")
    host = make_host(blocked=blocked, strict=True if args.strict_plugins else None,
                     cache_dir=getattr(args, "cache_dir", None))  # the plugin index lives under the run's cache
    includes = getattr(args, "include_path", None)
    if includes:  # users' YAML tasks; parsed now, so an error in one is this command's error (exit 2)
        from negharness.declarative.register import (
            include_plugin,  # lazy: start-up time
        )

        host.register(include_plugin(includes), "include_path")
    _check_blocked(host, blocked)
    if host.failures():
        from rich.text import Text

        err = _console(stderr=True)
        for info in host.failures():
            err.print(Text.assemble(("warning: ", "yellow"), f"plugin {info.name!r} ({info.module}) failed to load: {info.error}"),
                      soft_wrap=True)
    return host


def _check_blocked(host: Any, blocked: Sequence[str]) -> None:
    """Each ``-p no:NAME`` names a plugin there is (an entry point or ``include_path``): a typo would
    block nothing and say nothing."""
    from difflib import get_close_matches

    for name in blocked:
        if not name:
            raise UserError("-p no: names no plugin: give -p no:NAME (`negharness list` shows the plugins)")
        if name not in host.plugins:
            close = get_close_matches(name, list(host.plugins), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else "; `negharness list` shows the plugins"
            raise UserError(f"-p no:{name}: no plugin is named {name!r}{hint}")
