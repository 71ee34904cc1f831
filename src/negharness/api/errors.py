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
