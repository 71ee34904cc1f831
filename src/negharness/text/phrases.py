"""Subjects and verb phrases of a caption (nT2VR's Algorithm 1), with the rules a reader needs.

The chunk grammar is the paper's (NP, PP, VP, CLAUSE, NLTK's RegexpParser). On real MSR-VTT
captions the bare grammar yields pairs no reader accepts, so each pair passes these checks:

- **subject**: the noun phrase in subject position before its VP (past auxiliaries, adverbs and
  post-modifying PPs). Not a subject: a container ("a video of a man", "a group of kids" -> the
  inner noun phrase is), a coordinated NP ("a man and a woman" are talking: neither alone; a
  second conjunct with its own singular verb is taken), a phrase that is really a noun and
  a verb ("a girl looks" tagged as nouns), a number with a singular noun ("three woman").
- **verb phrase**: a finite or -ing verb, never a participle (``VBN``: "interrogated by the police"
  is passive, "taken during a game" a reduced relative); not a copula, auxiliary or light verb
  (``NON_ACTION_VERBS``: "seem", "need", "show", "wear" ...); not cut inside a noun phrase
  ("packing cotton into some sort of purple | and white bag"): a VP followed by a coordinated noun
  phrase, or ending in a determiner, adjective or preposition, is dropped; nor cut inside a compound
  ("practicing sex | acts", "performing method | acting") or before a possessive; nor vague
  ("performing something").
- **whose subject**: a participle right after a verb's object is the object's ("playing the game |
  called legal agents", "with people | dancing", "watching other people | walking"), not the subject's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from .negator import expand_contractions, is_known_verb
from .nltk_resources import tag
from .tag_repair import repair_tags
from .vocabulary import (
    ANIMALS,
    AUX_VERBS,
    BE_LEMMAS,
    CLAUSE_BOUNDARY,
    COLLECTIVES,
    COLOURS,
    FEMALE,
    INCOMPLETE_END_TAGS,
    INDEFINITE,
    KEY_FUNCTION_WORDS,
    LEAD_VERBS,
    MALE,
    NON_ACTION_VERBS,
    NOT_AGENTS,
    NUMERALS,
    OBJECT_PRONOUNS,
    PEOPLE,
    PERCEPTION_VERBS,
    PLAIN_PEOPLE,
    PLURAL_NOUNS,
    PREDICATIVE_ADVERBS,
    PRONOUNS,
    QUANTITIES,
    RECORDING_MODIFIERS,
    STOP_WORDS,
    SUBORDINATORS,
    UNSEXED,
    VBG_COMPOUNDS,
    VEHICLES,
    lemma,
)

GRAMMAR = r"""
NP: {<DT|JJ|CD|PRP\$|NN.*>*<NN.*>}
PP: {<IN|RP|TO><NP>}
VP: {<VB.*><RP>?<NP|PP|CLAUSE>*}
CLAUSE: {<NP><VP>}
"""


@dataclass(frozen=True)
class VerbPhrase:
    verb: str  # lemma
    rest: tuple[str, ...]  # complement tokens, as in the caption
    plural_object: bool = field(default=False, compare=False)  # a plural noun in a PP ("in chairs")

    def form(self, penn: str) -> str:
        """The phrase with its verb inflected: VB base, VBG -ing, VBZ third person."""
        from lemminflect import getInflection

        forms = getInflection(self.verb, tag=penn) if penn != "VB" else (self.verb,)
        return " ".join([forms[0] if forms else self.verb, *self.rest])

    @cached_property
    def lemmas(self) -> tuple[str, ...]:
        return (self.verb, *(lemma(w) for w in self.rest))

    @cached_property
    def content(self) -> frozenset[str]:
        return frozenset(w for w in self.lemmas if w not in STOP_WORDS and w.isalpha())

    @cached_property
    def key(self) -> tuple[str, ...]:
        """Content lemmas in order ("plays the guitar" -> (play, guitar)): surface variants share it.
        Particles and companions stay ("lie down" -> (lie, down), "with others" -> (..., other))."""
        return tuple(dict.fromkeys(w for w in self.lemmas
                                   if (w not in STOP_WORDS or w in KEY_FUNCTION_WORDS) and w.isalpha()))

    def fits(self, subject: "Subject") -> bool:
        """No pronoun in the phrase that clashes with the subject ("a woman ... his own shadow")."""
        if subject.plural:
            clash = {"he", "she", "it"}
        elif subject.pronoun is not None:
            clash = {"they", "he", "she", "it"} - {subject.pronoun}
        elif subject.agent_class == "person" and subject.head not in COLLECTIVES | UNSEXED:
            clash = {"they", "it"}  # "a person ... his phone" reads fine
        else:
            clash = {"they", "he", "she"}  # "a crowd ... his foot" does not
        text = " ".join(self.rest)
        if ("each other" in text or "one another" in text or "together" in self.rest) and not subject.plural \
                and subject.head not in COLLECTIVES:
            return False  # "a man ... shooting guns at each other"
        return not any(PRONOUNS.get(w) in clash for w in self.rest)


@dataclass(frozen=True)
class Subject:
    text: str  # as in the caption: "a man", "two kids"
    head: str  # head noun lemma
    plural: bool

    @cached_property
    def number(self) -> str | None:
        """The numeral the noun phrase counts with ("two men" -> "two"), digits spelled out."""
        for w in self.text.split():
            if w in NUMERALS:
                return NUMERALS[w]
        return None

    def covers(self, other: "Subject") -> bool:
        """A caption's subject ``other`` says at least this subject: every content word, the same
        number (singular or plural) and the same numeral, if this one has one ("two men" never matches
        "a man" or "three men")."""
        return self.content <= other.content and self.plural == other.plural and \
            (self.number is None or self.number == other.number)

    @cached_property
    def content(self) -> frozenset[str]:
        """Content lemmas of the noun phrase ("a red circle" -> {red, circle}): what a caption must
        say for the subject to match, so "a red circle" never matches a blue one."""
        words = self.text.split()
        return frozenset([lemma(w, "NOUN") for w in words[:-1] if w not in STOP_WORDS] + [self.head])

    @property
    def agent_class(self) -> str:
        """What kind of doer the subject is: a person, an animal, a vehicle, or its own head."""
        for name, heads in (("person", PEOPLE), ("animal", ANIMALS), ("vehicle", VEHICLES)):
            if self.head in heads:
                return name
        return self.head

    @property
    def pronoun(self) -> str | None:
        if self.plural:
            return "they"
        if self.head in MALE:
            return "he"
        if self.head in FEMALE:
            return "she"
        return None


if TYPE_CHECKING:
    import nltk  # untyped (no stubs, no py.typed): its parser and trees read as Any

_PARSER: nltk.RegexpParser | None = None


def parser() -> nltk.RegexpParser:
    """The chunk grammar's parser, built on first use (importing nltk is slow)."""
    global _PARSER
    if _PARSER is None:
        import nltk

        _PARSER = nltk.RegexpParser(GRAMMAR)
    return _PARSER


def normalise(caption: str) -> str:
    """Lower case, contractions expanded, MSR-VTT's lost possessive apostrophe restored ("woman s")."""
    text = expand_contractions(caption.lower().strip())
    return re.sub(r"\b([a-z]+) s\b", r"\1's", text)


Item = tuple[str, list[tuple[str, str]]]


def _leaves(node: nltk.Tree | tuple[str, str]) -> list[tuple[str, str]]:
    """A chunk's tagged words, or the one tagged word a tree child is."""
    return [node] if isinstance(node, tuple) else list(node.leaves())  # a Tree is a list, never a tuple


def _clause_start(vp: nltk.Tree) -> int | None:
    """Child position where a VP chunk runs into a new clause ("cooks food | while a woman ...")."""
    for i, child in enumerate(vp):
        if i and hasattr(child, "label") and child.label() == "PP" and child.leaves()[0][0] in SUBORDINATORS:
            return i
    return None


def _flatten(tree: nltk.Tree) -> list[Item]:
    """Top-level (label, tagged leaves) items, with CLAUSE chunks opened into their NP and VP, and a
    copula's VP opened too ("there is [a man] [singing]": the NP after *be* can be a subject)."""
    out: list[Item] = []
    for node in tree:
        if hasattr(node, "label"):
            if node.label() == "CLAUSE":
                out.extend(_flatten(node))
            elif node.label() == "VP" and lemma(node.leaves()[0][0], "VERB") in BE_LEMMAS:
                out.append(("TOK", [node[0]]))
                out.extend(_flatten(node[1:]))
            elif node.label() == "VP" and (cut := _clause_start(node)) is not None:
                out.append(("VP", [leaf for child in node[:cut] for leaf in _leaves(child)]))
                out.extend(_flatten(node[cut:]))
            else:
                out.append((node.label(), list(node.leaves())))
        else:
            out.append(("TOK", [node]))
    return out


def _is_aux_vp(leaves: list[tuple[str, str]]) -> bool:
    verb = lemma(leaves[0][0], "VERB")
    return verb in BE_LEMMAS or (len(leaves) == 1 and verb in AUX_VERBS)


def _skippable(item: Item, pp: bool = True, relative: bool = True) -> bool:
    """Between a subject and its verb phrase: adverbs, modals, auxiliaries, post-modifying PPs, and
    (after a noun phrase, not after a verb's object) "who"/"that". Not "to": "diving into the water
    [to] catch a fish" has no subject "the water"."""
    label, leaves = item
    if label == "PP":
        return pp
    if label == "VP":
        return _is_aux_vp(leaves)
    word, penn = leaves[0]
    return penn in ("RB", "MD") or (relative and word in ("who", "that")) \
        or (penn.startswith("VB") and lemma(word, "VERB") in AUX_VERBS)


def _next_vp(items: list[Item], k: int, pp: bool = True, relative: bool = True) -> int | None:
    """Position of the VP right after ``k`` (past skippable items), or None."""
    nxt = k + 1
    while nxt < len(items):
        if _skippable(items[nxt], pp, relative):
            nxt += 1
        elif pp and nxt + 1 < len(items) and items[nxt][0] == items[nxt + 1][0] == "TOK" \
                and items[nxt][1][0][1] == "IN" and items[nxt + 1][1][0][1] == "JJ":
            nxt += 2  # "a man in red is playing": a PP whose noun was tagged as an adjective
        else:
            break
    return nxt if nxt < len(items) and items[nxt][0] == "VP" else None


def _continued_vp(items: list[Item], k: int) -> int | None:
    """The VP that shares the subject of the VP at ``k``: after a coordinator ("singing and
    dancing", "sits, then plays"), after a participle ("wearing a hat [is singing]") or after
    "start/begin/keep/go ... to". A VP anywhere later ("points a gun at another persons [face]")
    has no known subject."""
    word, penn = items[k][1][0]
    nxt = k + 1
    while nxt + 1 < len(items) and items[nxt][0] == "TOK" and items[nxt][1][0][1] in ("RB", "RP") \
            and _is_word(items[nxt + 1], {"and", "or", ",", "then"}):
        nxt += 1  # "waiting around | and planting roses"
    if nxt < len(items) and _is_word(items[nxt], {"and", "or", ",", "then", "while", "&"}):
        while nxt + 1 < len(items) and _is_word(items[nxt + 1], {"and", "or", ",", "then", "&"}):
            nxt += 1
        return _next_vp(items, nxt, pp=False)
    if nxt < len(items) and _is_word(items[nxt], {"to"}) and lemma(word, "VERB") in LEAD_VERBS:
        return _next_vp(items, nxt, pp=False)
    if len(items[k][1]) == 1 and lemma(word, "VERB") in LEAD_VERBS and nxt < len(items) and items[nxt][0] == "VP" \
            and items[nxt][1][0][1] == "VBG":
        return nxt  # "starts choking"
    if _participle_follows(items, k) and _ends_in_doer(items[k][1]):
        return None  # "laughing at [a man] | dancing": the participle is the man's
    if penn in ("VBG", "VBN") and not _runs_into_participle(items, k) and not _with_participle(items, k) \
            and not (lemma(word, "VERB") in PERCEPTION_VERBS and _participle_follows(items, k)):
        j = _next_vp(items, k, pp=False, relative=False)
        if j == k + 1 and items[j][1][0][1] in ("VBD", "VBN"):
            return None  # "playing the game | called legal agents": a reduced relative
        return j
    return None


def _participle_follows(items: list[Item], k: int) -> bool:
    """A participle right after the VP at ``k``, past adverbs ("at a guy | horribly singing")."""
    nxt = k + 1
    while nxt < len(items) and items[nxt][0] == "TOK" and items[nxt][1][0][1] == "RB":
        nxt += 1
    return nxt < len(items) and items[nxt][0] == "VP" and items[nxt][1][0][1] in ("VBG", "VBD", "VBN")


def _runs_into_participle(items: list[Item], k: int) -> bool:
    """The VP at ``k`` is a verb and a lone bare noun, a participle right after: the noun and the
    participle are one noun ("performing [method acting]"), so neither VP stands."""
    leaves = items[k][1]
    return _participle_follows(items, k) and len(leaves) == 2 and leaves[1][1] == "NN"


def _with_participle(items: list[Item], k: int) -> bool:
    """"playing guitar with people | dancing around him", "playing guitar women | singing": the
    participle is the noun's, not the subject's, and the VP without it says something else: neither stands."""
    leaves = items[k][1]
    if not _participle_follows(items, k) or len(leaves) < 3 or not leaves[-1][1].startswith("NN"):
        return False
    return leaves[-2][0] == "with" or (lemma(leaves[-1][0], "NOUN") in PLAIN_PEOPLE
                                        and leaves[-2][1] not in ("DT", "PRP$", "CD"))


def _ends_in_doer(leaves: list[tuple[str, str]]) -> bool:
    """The phrase ends in a noun for a person or an animal, who can do what a participle after it says."""
    word, penn = leaves[-1]
    return len(leaves) > 1 and penn.startswith("NN") and lemma(word, "NOUN") in PEOPLE | ANIMALS


def _number_clash(items: list[Item], k: int, j: int, subject: Subject) -> bool:
    """An auxiliary between the VP at ``k`` and the VP at ``j`` whose number is not the subject's: a
    new clause whose subject is the end of ``k``'s phrase ("a man is singing [a group of people] are sitting")."""
    for label, leaves in items[k + 1:j]:
        word = leaves[0][0]
        if word in ("are", "were") and not subject.plural or word in ("is", "was") and subject.plural:
            return True
    return False


def _is_word(item: Item, words: set[str]) -> bool:
    return item[0] == "TOK" and item[1][0][0] in words


def _subject(items: list[Item], k: int) -> Subject | None:
    """The subject an NP at ``k`` stands for, or None when a reader would not take it as one."""
    leaves = items[k][1]
    head_word, head_tag = leaves[-1]
    if not head_tag.startswith("NN") or not head_word.isalpha():
        return None
    head = lemma(head_word, "NOUN")
    if head in NOT_AGENTS or head_word in STOP_WORDS:
        return None
    if k >= 2 and _is_word(items[k - 1], {"and", "or", "&"}) and items[k - 2][0] in ("NP", "PP") \
            and not _singular_verb_follows(items, k, head_tag):
        return None  # second conjunct: "a man and [a woman] are talking" (not "... to a woman and [a woman] is lying")
    if k + 2 < len(items) and _is_word(items[k + 1], {"and", "or", "&"}) and items[k + 2][0] == "NP":
        return None  # first conjunct
    if k >= 2 and _is_word(items[k - 1], {"and", "or", "&"}) and items[k - 2][0] == "VP" \
            and leaves[0][1] not in ("DT", "PRP$", "CD") and head_tag == "NN" and head not in PEOPLE | ANIMALS:
        return None  # the verb's second object: "wearing red top and [black trouser] is putting"
    if any(t == "DT" for _, t in leaves[1:]):
        return None  # two noun phrases run together: "to the ground a goat"
    plural = head_tag in ("NNS", "NNPS")
    if plural and leaves[0][0] in ("a", "an", "one", "another", "each", "every") and head_word not in PLURAL_NOUNS:
        return None  # "a women": one or several? the caption does not say
    if plural and len(leaves) >= 2 and leaves[-2][1] in ("NN", "NNP") and is_known_verb(head_word) \
            and lemma(head_word, "VERB") != head_word:
        return None  # "a girl looks": a noun and a verb tagged as one noun phrase
    if not plural and any(t == "CD" and w not in ("one", "1") for w, t in leaves):
        return None  # "three woman"
    if any(t in ("NNS", "NNPS") and w not in PLURAL_NOUNS - {"people"} for w, t in leaves[:-1]):
        return None  # "people kids": two heads run together
    if any(w in RECORDING_MODIFIERS for w, _ in leaves[:-1]):
        return None  # "a movie scene girl": the caption names the recording, not a kind of girl
    if head not in PEOPLE | ANIMALS and any(w in PEOPLE | ANIMALS for w, _ in leaves[:-1]):
        return None  # "a boy beat [boxing]": the doer is a premodifier, the head something else
    return Subject(" ".join(w for w, _ in leaves), head, plural)


def _singular_verb_follows(items: list[Item], k: int, head_tag: str) -> bool:
    """A singular noun phrase whose own verb is singular ("... talking to a woman and [a woman] is
    lying") starts a clause. Also taken: a caption's "a man and [a woman] is lying" (the number slip
    is MSR-VTT's), where the pair (a woman, lie) is still true of the video."""
    if head_tag != "NN" or k + 1 >= len(items):
        return False
    word, penn = items[k + 1][1][0]
    return penn == "VBZ" or word in ("is", "was")


def _container_inner(items: list[Item], k: int) -> list[Item] | None:
    """"a video of [a man]": the NP inside the PP after a container head, as an NP item."""
    head = lemma(items[k][1][-1][0], "NOUN")
    if head in NOT_AGENTS | QUANTITIES and k + 1 < len(items) and items[k + 1][0] == "PP" and items[k + 1][1][0][0] == "of":
        return [("NP", items[k + 1][1][1:])]
    return None


def _noun_coordination_follows(items: list[Item], k: int) -> bool:
    """The VP at ``k`` is cut inside a noun phrase: "and"/"," then a noun phrase that is no subject."""
    if k + 1 >= len(items) or not _is_word(items[k + 1], {"and", "or", ",", "&"}):
        return False
    j = k + 2
    while j < len(items) and items[j][0] == "TOK" and items[j][1][0][1] in ("JJ", "DT", "CD", "PRP$", "CC", ","):
        j += 1
    return j < len(items) and items[j][0] == "NP" and _next_vp(items, j) is None


def _garbled(rest: list[tuple[str, str]]) -> bool:
    """Two noun phrases run together ("jump over a fence a horse", "strumming a guitar someone"), or a verb
    form tagged as the noun ending a noun phrase ("holding mic speaking", "purple dress start")."""
    if any(t in ("VBZ", "VBD", "VBP", "MD") for _, t in rest[1:]) or any(
            i and t == "NN" and w.endswith("s") and rest[i - 1][1].startswith("NN") and is_known_verb(w)
            and lemma(w, "VERB") != w for i, (w, t) in enumerate(rest)):
        return True  # a clause run on: "hurrying over to the edge of a wall climbs/NN on top"
    for i, (w, t) in enumerate(rest):
        if i and rest[i - 1][1].startswith("NN"):
            if t == "DT" or w in INDEFINITE:
                return True
            if t.startswith("NN") and is_known_verb(w) and lemma(w, "VERB") != w and w.endswith("ing"):
                return True
            if t == "NN" and rest[i - 1][1] == "NNS" and rest[i - 1][0] not in PLURAL_NOUNS:
                return True  # "park cars plant with sword-like leaves"
            if t in ("NNS", "NN") and lemma(w, "NOUN") in PLAIN_PEOPLE and lemma(rest[i - 1][0], "NOUN") not in PEOPLE:
                return True  # "play guitar women": the next clause's subject run on
    return False


def _plural_in_pp(rest: list[tuple[str, str]]) -> bool:
    """A plural noun inside a prepositional phrase ("sits in chairs", "at tables"): said of one
    subject only when the collection said it so."""
    after_prep = False
    for _, t in rest:
        after_prep = after_prep or t in ("IN", "TO")
        if after_prep and t in ("NNS", "NNPS"):
            return True
    return False


def _vague(rest: list[tuple[str, str]]) -> bool:
    """A complement that names nothing ("performing something") or has lost its article ("with lot of")."""
    words = [w for w, _ in rest]
    if words and all(w in STOP_WORDS or w in INDEFINITE for w in words) and set(words) & INDEFINITE:
        return True
    return any(w == "lot" and (i == 0 or words[i - 1] not in ("a", "the", "whole")) for i, w in enumerate(words))




def _predicative(items: list[Item], k: int) -> tuple[str, str] | None:
    """The adjective right after a bare verb that completes it ("falling asleep", "getting ready",
    "looks happy"), when it ends the clause or a PP follows; else None."""
    if k + 1 >= len(items) or items[k + 1][0] != "TOK":
        return None
    word, penn = items[k + 1][1][0]
    if not (penn == "JJ" or penn == "RB" and word in PREDICATIVE_ADVERBS) or not word.isalpha():
        return None
    after = items[k + 2] if k + 2 < len(items) else None
    if after is None or after[0] == "PP" or (after[0] == "TOK" and after[1][0][0] in CLAUSE_BOUNDARY):
        return (word, penn)
    return None


def _cut_before_next(items: list[Item], k: int) -> bool:
    """The VP at ``k`` is cut before what completes it: a bare verb followed straight by a word
    tagged as a verb that is none ("falling | asleeping", a misspelt complement); a phrase followed
    by an adjective or noun its chunk left out ("dancing in times | square"); or a phrase followed by "to" and a word the tagger
    read as a verb that ends the clause ("giving volume | to radio", a PP whose noun was read as a verb)."""
    if k + 1 >= len(items):
        return False
    nxt_label, nxt_leaves = items[k + 1]
    if len(items[k][1]) > 1 and nxt_label == "TOK" and nxt_leaves[0][1] in ("JJ", "NN", "NNS", "NNP") \
            and nxt_leaves[0][0] not in CLAUSE_BOUNDARY:
        return True  # "dancing in times | square": the chunk stopped inside a name or compound
    if len(items[k][1]) == 1 and nxt_label == "VP" and not is_known_verb(nxt_leaves[0][0]):
        return True
    if nxt_label == "TOK" and nxt_leaves[0][1] == "TO" and len(items[k][1]) > 1:
        return True  # "giving volume | to radio": what completes it is left out
    if nxt_label == "TOK" and nxt_leaves[0][1] == "TO" and k + 2 < len(items):
        label, leaves = items[k + 2]
        ends = k + 3 >= len(items) or (items[k + 3][0] == "TOK" and items[k + 3][1][0][0] in CLAUSE_BOUNDARY)
        if label == "VP" and len(leaves) == 1 and ends and _is_noun(leaves[0][0]):
            return True
    return False


def _is_noun(word: str) -> bool:
    from lemminflect import getAllLemmas

    return bool(getAllLemmas(word, upos="NOUN"))


def _verb_phrase(items: list[Item], k: int) -> VerbPhrase | None:
    """The VP at ``k`` as a phrase a query can use, or None."""
    leaves = items[k][1]
    word, penn = leaves[0]
    if _is_aux_vp(leaves) or penn == "VBN" or not is_known_verb(word):
        return None  # copula / auxiliary; participle (passive or reduced relative)
    verb = lemma(word, "VERB")
    if verb in NON_ACTION_VERBS:
        return None
    if penn == "VBD" and len(leaves) > 1 and leaves[1][0] == "by":
        return None  # "filmed by", tagged as past tense
    rest: list[tuple[str, str]] = []
    for w, t in leaves[1:]:  # the grammar lets a PP like "while his dog" run on: stop at the clause's end
        if w in CLAUSE_BOUNDARY:
            break
        rest.append((w, t))
    if len(rest) == len(leaves) - 1 and _noun_coordination_follows(items, k):
        return None
    whole = len(rest) == len(leaves) - 1  # nothing of the chunk left out: what follows may belong to it
    if whole and not rest and (adj := _predicative(items, k)) is not None:
        rest.append(adj)  # "falling asleep", "getting ready": the adjective completes the verb
    elif whole and _cut_before_next(items, k):
        return None
    if rest and (rest[-1][1] in INCOMPLETE_END_TAGS or rest[-1][0] in COLOURS):
        return None  # "packing cotton into some sort of purple", "a pyramid of yellow"
    if any(not w.replace("-", "").isalnum() for w, _ in rest):
        return None  # punctuation or a stray apostrophe inside
    if rest and penn == "VBG" and f"{word} {rest[0][0]}" in VBG_COMPOUNDS:
        return None
    if _garbled(rest) or _vague(rest) or _runs_into_participle(items, k) or _with_participle(items, k):
        return None
    if len(rest) == len(leaves) - 1 and k + 1 < len(items) and items[k + 1][1][0][1] == "POS":
        return None  # cut at a possessive: "modeling a fashion designer | 's line"
    if len(rest) == len(leaves) - 1 and k + 1 < len(items) and items[k + 1][0] == "TOK" \
            and items[k + 1][1][0][1] == "PRP" and items[k + 1][1][0][0] in OBJECT_PRONOUNS:
        return None  # object pronoun left out of the chunk: "a boat circles | them" is no bare "circle"
    return VerbPhrase(verb, tuple(w for w, _ in rest), _plural_in_pp(rest))


def extract_pairs(caption: str) -> list[tuple[Subject, VerbPhrase]]:
    """(subject, verb phrase) pairs of one caption (Algorithm 1 with the checks above)."""
    items = _flatten(parser().parse(repair_tags(tag(normalise(caption)))))
    pairs: list[tuple[Subject, VerbPhrase]] = []
    owner: dict[int, Subject | None] = {}  # VP position -> its subject
    for k, (label, _) in enumerate(items):
        if label == "PP" and items[k][1][0][0] in SUBORDINATORS and k not in owner:
            j = _next_vp(items, k)  # "while [a woman] watches": the PP is a clause with its subject
            if j is not None and items[k][1][-1][1].startswith("NN"):
                owner[j] = _subject([("NP", items[k][1][1:])], 0)
        elif label == "NP" and k not in owner:
            j = _next_vp(items, k)
            if j is not None:
                inner = _container_inner(items, k)
                owner[j] = _subject(inner, 0) if inner else _subject(items, k)
        elif label == "VP" and (subject := owner.get(k)) is not None:
            vp = _verb_phrase(items, k)
            j = _continued_vp(items, k)
            if j is not None and _number_clash(items, k, j, subject):
                continue  # run-on clauses: the VP's "object" is the next clause's subject, neither pair stands
            if vp is not None and (vp.rest or vp.verb not in AUX_VERBS):
                pairs.append((subject, vp))
            if j is not None:
                owner.setdefault(j, subject)
    return pairs


def head_nouns(caption: str) -> list[str]:
    """Head noun (singular lemma) of every noun phrase, in order, without repeats: the objects a
    caption mentions. NeIn's authors used spaCy noun chunks; this uses the same NLTK chunk grammar
    as the composer, so compound heads are the last noun ("dining table" -> "table")."""
    out: list[str] = []
    for np_tree in parser().parse(tag(caption.lower())).subtrees(lambda t: t.label() == "NP"):
        word, penn = np_tree.leaves()[-1]
        head = lemma(word, "NOUN")
        if penn.startswith("NN") and head not in out and head.isalpha():
            out.append(head)
    return out
