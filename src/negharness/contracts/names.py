"""The one rule for names a user types and a board shows (models, tasks, every registered kind).

A name is ASCII letters, digits, ``_``, ``.`` and ``-``, starting with a letter or digit, at most 128
characters: a Greek omicron in ``negbench_mcq_cοco`` would otherwise register (or enter a record) as a
second task with the same look, and a leading ``-``/``.`` would read as an option or a folder. Every
built-in name passes. `lookalikes` names the characters of free text (a model label) that mimic ASCII.
"""

from __future__ import annotations

import re
import unicodedata

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
RULE = "letters A-Z a-z, digits, '_', '.' and '-' (ASCII), starting with a letter or digit, at most 128"
# scripts whose letters include twins of Latin ones (omicron, Cyrillic a/e/o/p/c/x, ...)
_TWIN_SCRIPTS = ("GREEK", "CYRILLIC", "ARMENIAN", "CHEROKEE", "COPTIC")


def _char(c: str) -> str:
    return f"{c!r} (U+{ord(c):04X} {unicodedata.name(c, 'unnamed')})"


def lookalikes(text: str) -> list[str]:
    """The characters of ``text`` that pass for others: invisible format characters, letters that NFKC
    folds to ASCII (fullwidth, ligatures), and letters of a script with Latin twins inside a word that
    also holds ASCII letters (``clіp`` with a Cyrillic i, ``ViT-Β-32`` with a Greek Beta; a word wholly
    in Cyrillic or Greek, such as a folder name in a checkpoint path, is no disguise)."""
    found = []
    for word in re.split(r"[\s=,;:()\[\]{}/\\]+", text):  # an option value or path part is one word
        mixed = any(c.isascii() and c.isalpha() for c in word) and not word.isascii()
        for c in word:
            if c.isascii():
                continue
            folded = unicodedata.normalize("NFKC", c)
            if unicodedata.category(c) == "Cf" or folded.isascii() \
                    or (mixed and unicodedata.name(c, "").startswith(_TWIN_SCRIPTS)):
                found.append(_char(c))
    return list(dict.fromkeys(found))


def name_problem(name: object) -> str | None:
    """Why ``name`` is not a name (None when it is); a look-alike character is named with its code point."""
    if not isinstance(name, str):
        return f"a name is text, not {type(name).__name__}"
    if NAME.fullmatch(name):
        return None
    odd = [_char(c) for c in dict.fromkeys(name) if not c.isascii()]
    if odd:
        return f"non-ASCII character {', '.join(odd[:3])} (a look-alike of an ASCII one?); names are {RULE}"
    return f"names are {RULE}"
