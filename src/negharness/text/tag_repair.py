"""The tagger's commonest slips on captions, repaired before chunking (`phrases.extract_pairs`, and
the composer's own tagging): verbs read as nouns and nouns read as verbs or adjectives."""

from __future__ import annotations

from .negator import is_known_verb
from .vocabulary import AUX_VERBS, ING_NOUNS, NEVER_VERBS, PARTICLES, PLURAL_NOUNS, lemma


def _after_preposition_or_verb(tagged: list[tuple[str, str]], i: int) -> bool:
    """The noun phrase ending at ``i`` is a verb's object or in a PP ("in designer clothing")."""
    while i >= 0 and tagged[i][1] in ("NN", "NNS", "JJ", "DT", "PRP$", "CD"):
        i -= 1
    return i >= 0 and (tagged[i][1].startswith("VB") or tagged[i][1] in ("IN", "TO"))


def _object_of_verb(tagged: list[tuple[str, str]], i: int) -> bool:
    """The bare noun at ``i`` directly follows a verb ("practicing [sex] acts"), so a plural noun
    after it is a compound's head ("sex acts", "video games"), not the verb."""
    return i >= 1 and tagged[i - 1][1].startswith("VB")


def repair_tags(tagged: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The tagger's commonest slips on captions: a singular noun's verb read as a plural noun
    ("a character jumps/NNS and"): retag it VBZ when no verb follows and the noun is no verb's
    object; a noun read as an adjective between a determiner and a verb ("a girl/JJ looks"); a
    participle read as a noun after a noun ("an audience jumping/NN"); a participle read as a verb
    before a noun ("animated/VBN characters"); a plural noun read as a verb before a verb ("dresses/VBZ walk")."""
    out = list(tagged)
    for i in range(len(out)):
        word, penn = out[i]
        nxt = out[i + 1][1] if i + 1 < len(out) else "."
        prev = out[i - 1][1] if i else "."
        if word in PARTICLES and i and (prev.startswith("VB") or prev == "RP" and out[i - 2][1].startswith("VB")) \
                and penn in ("RB", "RP", "IN") and nxt not in ("DT", "NN", "NNS", "JJ", "PRP$", "CD", "PRP"):
            out[i] = (word, "RP")  # "lying down/RB on the bed", "dancing together/RB with her friends"
        elif word in ("other", "others") and i and out[i - 1][0] in ("each", "one", "the") and not nxt.startswith("NN"):
            out[i] = (word, "NNS" if word == "others" else "NN")  # "dancing with each other/JJ"
        elif penn.startswith("VB") and word in NEVER_VERBS:
            out[i] = (word, "NNS" if word.endswith("s") else "NN")  # "the sims video/VBP game"
        elif penn == "VBN" and prev in (".", "DT", "JJ", "CD", "PRP$") and nxt in ("NN", "NNS"):
            out[i] = (word, "JJ")  # "animated/VBN characters are swearing"
        elif penn == "VBZ" and prev in ("NN", "JJ") and nxt in ("VBP", "VBZ", "VBD"):
            out[i] = (word, "NNS")  # "women in long pink dresses/VBZ walk"
        elif not i:
            continue
        elif penn == "NNS" and out[i - 1][1] == "NN" and not nxt.startswith(("VB", "NN", "MD")) \
                and word not in PLURAL_NOUNS | NEVER_VERBS and not _object_of_verb(out, i - 1) \
                and is_known_verb(word) and lemma(word, "VERB") != word:
            out[i] = (word, "VBZ")
        elif penn == "JJ" and out[i - 1][1] == "DT" and nxt in ("VBZ", "VBD", "VBP"):
            out[i] = (word, "NN")  # "a girl/JJ looks"
        elif penn == "NN" and word.endswith("ing") and out[i - 1][1] in ("NN", "NNS") and not nxt.startswith("NN") \
                and word not in ING_NOUNS and not _after_preposition_or_verb(out, i - 1) \
                and is_known_verb(word) and lemma(word, "VERB") != word:
            out[i] = (word, "VBG")  # "a big audience jumping/NN and waving"
        elif _coordinated_verb(out, i):
            out[i] = (word, "VBG" if word.endswith("ing") else "VBZ")  # "playing a guitar and singing/NN"
    return out


def _coordinated_verb(tagged: list[tuple[str, str]], i: int) -> bool:
    """A verb after "and" read as a noun, when the caption has a verb of its form before: "is playing
    a guitar and singing/NN", "plays a guitar and sings/NNS". An -s word only when it is no noun
    ("and drums" stays a noun)."""
    from lemminflect import getAllLemmas

    word, penn = tagged[i]
    if tagged[i - 1][0] not in ("and", "or") or word in ING_NOUNS | NEVER_VERBS | PLURAL_NOUNS:
        return False
    if not is_known_verb(word) or lemma(word, "VERB") == word:
        return False
    if penn == "NN" and word.endswith("ing"):
        return any(t == "VBG" for _, t in tagged[:i - 1])
    if penn == "NNS" and not getAllLemmas(word, upos="NOUN"):
        return any(t == "VBZ" and lemma(w, "VERB") not in AUX_VERBS for w, t in tagged[:i - 1])
    return False
