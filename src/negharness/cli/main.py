"""The `negharness` command: `main` parses (`negharness.cli.parser`), runs the command
(`negharness.cli.commands`, `negharness.cli.reports`) and turns a failure into one line: a
`UserError` becomes one red line and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import os
import time
import warnings
from typing import Any, Sequence

from negharness.contracts.errors import UserError
from negharness.contracts.options import check_env_flags, env_flag
from negharness.cli.common import _console
from negharness.engine.stages import seconds_since_process_start
from negharness.cli.parser import build_parser
from negharness.cli.profiling import CommandProfile, profile_target
from negharness.cli.process import (
    debug_requested,
    exit_now,
    one_line,
    prefer_passive_waiting,
    rank_label,
)


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      file: Any = None, line: str | None = None) -> None:
    """Warnings as ``warning: <message>`` on one line: Python's default adds the file, line number
    and the source line that warned (``index = self._load()``), which tell a user nothing."""
    text = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    kind = "" if issubclass(category, UserWarning) else f"{category.__name__}: "
    try:
        (file or sys.stderr).write(f"warning: {kind}{text}\n")
    except (OSError, ValueError):  # a closed or broken stderr: nothing to tell
        pass


def _quiet_library_logging() -> None:
    """Libraries that log through the root logger (open_clip: "ERROR:root:Failed to download ...",
    "WARNING:root:No pretrained weights loaded ...") would print around our one-line error; what
    they say that matters, the command says itself. A handler on the root logger keeps Python
    from installing its printing default; NEGHARNESS_DEBUG=1 keeps their lines."""
    import logging

    root = logging.getLogger()
    if not root.handlers and not env_flag("NEGHARNESS_DEBUG"):
        root.addHandler(logging.NullHandler())


def main(argv: Sequence[str] | None = None) -> int:
    """The `negharness` command. Called from Python with ``argv``, it returns the exit code. Called
    without (the console script, ``python -m negharness``), it is the process: it ends it once the
    command is over (`exit_now`: output flushed, no interpreter teardown where torch was loaded)."""
    code = _main(argv)
    if argv is None:  # a real process (console script, python -m), not a call from Python
        exit_now(code)
    return code


def _main(argv: Sequence[str] | None) -> int:
    entered = time.perf_counter()
    prefer_passive_waiting()  # before any command imports torch
    warnings.showwarning = _one_line_warning
    try:
        check_env_flags()
    except UserError as exc:
        _console(stderr=True).print(f"error: {exc}", highlight=False, soft_wrap=True)
        return 2
    _quiet_library_logging()
    parser = build_parser()
    args = parser.parse_args(argv)
    if argv is not None and hasattr(args, "argv"):
        args.argv = list(argv)  # what --nproc re-launches
    since = None if argv is not None else seconds_since_process_start()  # a process of its own: from its start
    args.started_at = entered if since is None else time.perf_counter() - since  # records' startup_s, wall_s
    args.ready_at = time.perf_counter()  # the CLI is ready: the run's plan_s counts from here
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        target = profile_target(args.profile)
    except UserError as exc:
        _console(stderr=True).print(f"error: {exc}", highlight=False, soft_wrap=True)
        return 2
    if target is None:
        return _command(args)
    with CommandProfile() as profile:
        code = _command(args)
    try:
        profile.write(target)  # before the console script's fast exit, which no atexit profiler survives
    except OSError as exc:
        message, _ = one_line(exc, str(target.parent))
        _console(stderr=True).print(f"error: writing the profile: {message}", highlight=False, soft_wrap=True)
        return code or 2
    return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of a closed pipe raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (a test's capture): nothing to silence
        pass


def _command(args: argparse.Namespace) -> int:
    """The command, its failure as one line (exit 2 for the user's input, 1 for a plugin's bug)."""
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # the reader left (`negharness list | head`): nothing is wrong, nothing to say
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        _console(stderr=True).print("interrupted; finished records and cached embeddings are kept")
        return 130
    except Exception as exc:
        if debug_requested() and not isinstance(exc, UserError):
            raise
        where = ", ".join(f"{flag} {value}" for flag, value in (
            ("--cache-dir", getattr(args, "cache_dir", None) or "$NEGHARNESS_CACHE"),
            ("--output-dir", getattr(args, "output_dir", None))) if value)
        message, code = one_line(exc, where or "the current folder")
        from rich.text import Text

        _console(stderr=True).print(Text.assemble((f"{rank_label()}error: ", "bold red"), message), soft_wrap=True)
        return code


if __name__ == "__main__":
    sys.exit(main())
