"""NLTK data the query builders need: found where NLTK looks, fetched once when missing.

Offline, a missing resource is one clear error that names it and the two ways to provide it,
instead of NLTK's long LookupError from deep inside a tagger.
"""

from __future__ import annotations

import io
import re
from functools import lru_cache
from typing import Callable

from negharness.api import UserError

# resource name -> path NLTK looks it up by
RESOURCES = {
    "punkt_tab": "tokenizers/punkt_tab/english/",
    "averaged_perceptron_tagger_eng": "taggers/averaged_perceptron_tagger_eng/",
}


@lru_cache(maxsize=1)
def ensure_nltk() -> None:
    import nltk

    missing = []
    for name, path in RESOURCES.items():
        try:
            nltk.data.find(path)
        except LookupError:
            missing.append(name)
    for name in list(missing):
        try:  # the downloader prints "[nltk_data] Error loading ..." even when quiet: keep it off the terminal
            if nltk.download(name, quiet=True, raise_on_error=True, print_error_to=io.StringIO()):
                missing.remove(name)
        except Exception:  # offline: ValueError / URLError / OSError from the downloader
            pass
    if missing:
        names = " ".join(missing)
        raise UserError(
            f"NLTK data missing and could not be downloaded (offline?): {names}. On a connected machine run "
            f"`python -m nltk.downloader {names}`, or point NLTK_DATA at a folder that has them.")


SIMPLE_TEXT = re.compile(r"[a-z]+(?:,? [a-z]+)*")  # lowercase words, single spaces, commas after words
_CLOSED_TAGGERS: list[Callable[[list[str]], "list[str] | None"]] = []


def tokenize(text: str) -> list[str]:
    """NLTK's word tokens. Lowercase words separated by spaces and commas split the same way without
    NLTK's data (no sentence break, contraction or quote for its tokenizer to find)."""
    if SIMPLE_TEXT.fullmatch(text):
        return text.replace(",", " ,").split()
    import nltk

    ensure_nltk()
    tokens: list[str] = nltk.word_tokenize(text)  # nltk is untyped: its functions return Any
    return tokens


def add_closed_tagger(tagger: Callable[[list[str]], "list[str] | None"]) -> None:
    """Register a tagger for a closed language (the embedded world's): it returns NLTK's tags for a
    text of its language and None for any other text, so `tag` is exact either way."""
    if tagger not in _CLOSED_TAGGERS:
        _CLOSED_TAGGERS.append(tagger)


def tag(text: str) -> list[tuple[str, str]]:
    """Penn Treebank tokens and POS tags: from a closed language's tagger where it knows the text,
    else from NLTK's perceptron tagger."""
    tokens = tokenize(text)
    for tagger in _CLOSED_TAGGERS:
        tags = tagger(tokens)
        if tags is not None:
            return list(zip(tokens, tags))
    import nltk

    ensure_nltk()
    tagged: list[tuple[str, str]] = nltk.pos_tag(tokens)  # nltk is untyped: its functions return Any
    return tagged
