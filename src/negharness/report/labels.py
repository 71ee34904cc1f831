"""Row labels as the board shows them: a file by its name, never the absolute path it had on the
machine that made the record (the Markdown board, the terminal and the page alike; the record keeps
the path, and rows stay keyed by the whole label)."""

from __future__ import annotations

import re

# an absolute path inside a label (``qrels=/home/me/fire.txt``, ``arch=C:\\m\\tiny.json``): from its
# start (after "=", a space, a bracket or the label's start) to the next space, comma or bracket
_ABS_PATH = re.compile(r"(?:^|(?<=[=\s\[(]))(?:~|[A-Za-z]:)?[\\/][^\s,\])]*")


def short_label(text: str) -> str:
    """A label with every absolute path cut to its file name: the page shows what a path names,
    never where it lay on the machine that made the record (links to records stay relative)."""
    return _ABS_PATH.sub(lambda m: re.split(r"[\\/]", m.group().rstrip("\\/"))[-1] or m.group(), text)
