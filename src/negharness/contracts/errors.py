"""Errors the CLI turns into one clear line and a non-zero exit, without a traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (a file, an option, a name): message names what is wrong. Exit 2."""

    exit_code = 2


class UnknownNameError(UserError):
    """A model, task or trainer name that no plugin registered; the message lists close matches."""


class DuplicateNameError(UserError):
    """Two plugins registered one name; install order must never decide which wins."""


class PluginLoadError(UserError):
    """A plugin failed to import or register (raised only in strict mode; otherwise reported)."""


class MediaError(UserError):
    """An image or video that cannot be read; the message names the file."""


class MissingDataError(UserError):
    """A task's files are absent: the message says which, where they are expected and where to get them."""


# how a failure reads on one line (the CLI's and the engine's blame alike) ----------------------------
DEBUG_ENV = "NEGHARNESS_DEBUG"
DEBUG_HINT = f"rerun with {DEBUG_ENV}=1 for the traceback"


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
