"""NLTK data the query builders need: found where NLTK looks, fetched once when missing.

Offline, a missing resource is one clear error that names it and the two ways to provide it,
instead of NLTK's long LookupError from deep inside a tagger.
"""

from __future__ import annotations

from functools import lru_cache

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
        try:
            if nltk.download(name, quiet=True, raise_on_error=True):
                missing.remove(name)
        except Exception:  # offline: ValueError / URLError / OSError from the downloader
            pass
    if missing:
        names = " ".join(missing)
        raise UserError(
            f"NLTK data missing and could not be downloaded (offline?): {names}. On a connected machine run "
            f"`python -m nltk.downloader {names}`, or point NLTK_DATA at a folder that has them.")


def tag(text: str) -> list[tuple[str, str]]:
    """Penn Treebank tokens and POS tags."""
    import nltk

    ensure_nltk()
    return nltk.pos_tag(nltk.word_tokenize(text))
