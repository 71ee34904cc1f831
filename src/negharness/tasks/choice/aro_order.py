"""ARO's COCO-Order and Flickr-Order false captions: four word-order shuffles of each true caption.

These are made by code, not read from a file, which is why the two tasks name a generator in their
YAML (``captions.generate: aro_order_shuffles``). The four perturbations follow ARO's
``dataset_zoo/perturbations.py``: shuffle the nouns among themselves and the adjectives among
themselves; shuffle every other word; shuffle words within each trigram; shuffle the trigrams.
Two departures, stated: Penn tags come from NLTK's perceptron tagger instead of spaCy's
``en_core_web_sm`` (the same tag set), and the randomness is a per-record seeded generator, so a
run is reproducible (ARO draws from the global NumPy/Python state). Every option then goes through
ARO's ``pre_caption`` (lower case, punctuation to spaces, 30 words at most).
"""

from __future__ import annotations

import random
import re

from negharness.text.nltk_resources import tag

NOUNS = {"NN", "NNS", "NNP", "NNPS"}
ADJECTIVES = {"JJ", "JJR", "JJS"}


def pre_caption(caption: str, max_words: int = 30) -> str:
    """ARO's (BLIP's) caption normalisation."""
    text = re.sub(r"([.!\"()*#:;~])", " ", caption.lower())
    text = re.sub(r"\s{2,}", " ", text).rstrip("\n").strip(" ")
    return " ".join(text.split(" ")[:max_words])


def _shuffle_positions(tokens: list[str], positions: list[int], rng: random.Random) -> None:
    values = [tokens[i] for i in positions]
    rng.shuffle(values)
    for i, v in zip(positions, values):
        tokens[i] = v


def _trigrams(tokens: list[str]) -> list[list[str]]:
    return [tokens[i:i + 3] for i in range(0, len(tokens), 3)]


def perturbations(caption: str, rng: random.Random) -> list[str]:
    """The four shuffled versions of ``caption``, in ARO's order."""
    tagged = tag(caption)
    words = [w for w, _ in tagged]
    nouns = [i for i, (_, t) in enumerate(tagged) if t in NOUNS]
    adjectives = [i for i, (_, t) in enumerate(tagged) if t in ADJECTIVES]
    others = [i for i, (_, t) in enumerate(tagged) if t not in NOUNS | ADJECTIVES]
    a = list(words)
    _shuffle_positions(a, nouns, rng)
    _shuffle_positions(a, adjectives, rng)
    b = list(words)
    _shuffle_positions(b, others, rng)
    c = [list(t) for t in _trigrams(words)]
    for t in c:
        rng.shuffle(t)
    d = [list(t) for t in _trigrams(words)]
    rng.shuffle(d)
    return [" ".join(a), " ".join(b), " ".join(w for t in c for w in t), " ".join(w for t in d for w in t)]


def order_shuffles(caption: str, rng: random.Random) -> tuple[str, list[str]]:
    """(true caption, four false ones), all normalised by `pre_caption` as ARO scores them."""
    return pre_caption(caption), [pre_caption(p) for p in perturbations(caption, rng)]
