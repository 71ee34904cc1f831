"""nT2VR's negator (Wang et al., 2022, section 3.1.1 and Table 6): negate one verb or auxiliary.

Rules, on NLTK POS tags after contractions are expanded:

- a form of *be* (``is``/``are``/``was``/``were``) -> ``isn't`` / ``aren't`` / ``wasn't`` / ``weren't``
  (``am`` -> ``am not``), as Table 6's AUX rows
- a modal (``can``, ``will`` ...) -> ``can not`` ...; auxiliary *have* before a participle -> ``hasn't``
- VBZ -> ``does not`` + base form ("finds" -> "does not find"); VBD -> ``did not`` + base ("met" ->
  "did not meet"); VBP -> ``do not`` + base
- VBG and VBN -> ``not`` inserted before the verb ("is not running"); a second verb coordinated
  with the negated one comes under the negation ("does not sing or dance")

Never negated (the shared rubric's wrong targets): a verb inside a "to" clause (the main verb is),
the preposition ``with`` (Table 6's ``without``: a function word), a compound's participle ("a
blue screened road"). A caption that already carries a cue gets a second one on another verb
(never on the words the first governs), or none: the cue is never removed.

Every output records the word that was negated, the rule, the cue and a rule-based scope (the
words after the cue up to the end of its clause), which the boolean baseline and the trainers use.
"""

from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass

from .nltk_resources import tag, tokenize


def is_known_verb(word: str) -> bool:
    """In lemminflect's dictionary as a verb: keeps tagger slips ("beside"/VBP) from being negated."""
    from lemminflect import getAllLemmas

    return bool(getAllLemmas(word.lower(), upos="VERB"))

BE_NEG = {"is": "isn't", "are": "aren't", "was": "wasn't", "were": "weren't"}
HAVE = {"has", "have", "had"}
DO = {"do", "does", "did"}
CUE_WORDS = {"not", "no", "without", "never", "n't"}
CLAUSE_END = {",", ".", ";", ":", "and", "or", "but", "while", "as", "when", "whilst", "because", "then", "who",
              "which", "that", "where"}
_CONTRACTIONS = [
    (r"\bcan't\b", "can not"), (r"\bwon't\b", "will not"), (r"\bain't\b", "is not"), (r"\bshan't\b", "shall not"),
    (r"n't\b", " not"), (r"\b(it|that|there|he|she|what|here|who)'s\b", r"\1 is"), (r"'re\b", " are"),
    (r"\bi'm\b", "i am"), (r"'ll\b", " will"), (r"'ve\b", " have"),
    # MSR-VTT and VATEX captions lost their apostrophes: "isn t", "they re", "it s"
    (r"\bca n t\b|\bcan t\b", "can not"), (r"\bwon t\b", "will not"),
    (r"\b(is|are|was|were|do|does|did|has|have|had|could|would|should|must|need)n t\b", r"\1 not"),
    (r"\b(they|you|we) re\b", r"\1 are"),
    # "about it s conception", "with it s doors": a possessive whose apostrophe was lost, not "it is"
    (r"\b(about|with|of|in|on|for|to|at|from|by|into|over|under|around) it s\b", r"\1 its"),
    (r"\b(it|that|there|he|she|what) s\b", r"\1 is"),
]


def expand_contractions(text: str) -> str:
    """``isn't`` -> ``is not``, ``there's`` -> ``there is``; possessive ``'s`` is left alone."""
    out = text.replace("’", "'")
    for pattern, repl in _CONTRACTIONS:
        out = re.sub(pattern, repl, out, flags=re.IGNORECASE)
    return out


@dataclass(frozen=True)
class Negation:
    text: str  # the negated (or cue-removed) caption
    word: str  # the word the rule acted on
    index: int  # its token position in the normalised caption
    rule: str  # e.g. "VBZ", "AUX", "VBG"
    cue: str  # the cue inserted ("not", "n't")
    scope: str  # words after the cue to the end of their clause: the negated part
    remainder: str  # the caption without cue and scope: the part still asserted

    def as_dict(self) -> dict[str, str | int]:
        return asdict(self)


def _detok(tokens: list[str]) -> str:
    text = " ".join(tokens)
    text = re.sub(r" ([,.;:!?])", r"\1", text)
    text = re.sub(r" (n't|'s|')\b", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


def _lemma(word: str) -> str:
    from lemminflect import getLemma

    lemmas = getLemma(word.lower(), upos="VERB")
    return lemmas[0] if lemmas else word.lower()


def _inflect(lemma: str, penn: str) -> str:
    from lemminflect import getInflection

    forms = getInflection(lemma, tag=penn)
    return forms[0] if forms else lemma


def _scope(tokens: list[str], start: int) -> tuple[list[int], list[int]]:
    """Token positions of the negated clause from ``start`` to its end, and of everything else."""
    end = start
    while end < len(tokens) and (end == start or tokens[end].lower() not in CLAUSE_END):
        end += 1
    inside = list(range(start, end))
    return inside, [i for i in range(len(tokens)) if i not in inside]


def _is_aux_have(tagged: list[tuple[str, str]], i: int) -> bool:
    return any(t == "VBN" for _, t in tagged[i + 1:i + 3])


NOT_BEFORE_FINITE_VERB = {"DT", "PRP$", "POS", "JJ", "IN", "CD"}  # "each others hair/VBP" is a tagger slip


PREMODIFIER_BEFORE = {"", "DT", "JJ", "CD", "PRP$", "POS", "IN"}
# nouns the tagger reads as finite verbs in captions ("sports vine/VBP clips", "became king/VBP"):
# never negated as verbs
NOUNS_READ_AS_VERBS = frozenset("vine vines king".split())
# verbs of naming after a noun are a reduced relative ("the website called/VBD eharmony"), not the
# clause's verb: "the website did not call eharmony" says something else
NAMING_VERBS = frozenset("called named titled entitled labeled labelled dubbed".split())
# second halves of compound adjectives ("multi colored horses", "a computer generated figure",
# "a foul mouthed chef"): no verb at all
COMPOUND_PARTICIPLES = frozenset("""colored coloured haired eyed mouthed shaped themed sized generated skinned
legged sleeved based animated""".split())


def _noun_read_as_verb(tagged: list[tuple[str, str]], i: int) -> bool:
    """A finite "verb" that is no verb of the clause: a listed noun; a base form right after another
    verb ("performing live/VBP", "became king/VBP"); a noun-or-verb base form between a noun and a
    participle ("city limits photograph/VBP taken from ...": a noun compound with its reduced
    relative); a naming verb after a noun; a compound adjective's participle before a noun."""
    from lemminflect import getAllLemmas

    word, penn = tagged[i][0].lower(), tagged[i][1]
    if word in NOUNS_READ_AS_VERBS:
        return True
    prev = tagged[i - 1][1] if i else ""
    nxt = tagged[i + 1][1] if i + 1 < len(tagged) else ""
    if penn in ("VBP", "VB") and prev.startswith("VB"):
        return True
    if penn == "VBD" and prev in ("VBZ", "VBP") and tagged[i - 1][0].lower() not in ("is", "are", "has", "have", "does", "do"):
        return True  # "screams shut/VBD up": a quote or an object, not a second finite verb
    if penn in ("VBP", "VB") and prev.startswith("NN") and nxt == "VBN" and getAllLemmas(word, upos="NOUN"):
        return True
    if penn == "VB" and _after_causative(tagged, i):
        return True
    if penn in ("VBP", "VB") and i > 1 and tagged[i - 1][0].lower() in ("and", "or") \
            and tagged[i - 2][1] == "NNS" and getAllLemmas(word, upos="NOUN") \
            and (i + 1 == len(tagged) or nxt in ("IN", ".", ",", "CC")):
        return True  # "frying dried prawns and fish/VBP": a noun coordinated with a noun
    if word in NAMING_VERBS and prev.startswith("NN"):
        return True
    return word in COMPOUND_PARTICIPLES and prev in ("NN", "JJ", "RB", "CD") and nxt.startswith(("NN", "JJ"))


CAUSATIVE_VERBS = frozenset("let make help watch see hear feel notice have bid".split())


def _after_causative(tagged: list[tuple[str, str]], i: int) -> bool:
    """A base form that is a bare infinitive: "help people [find]", "watch him [fall]" (a causative or
    perception verb earlier in the clause), not a finite verb ("people find")."""
    for j in range(i - 1, max(-1, i - 5), -1):
        w, t = tagged[j][0].lower(), tagged[j][1]
        if w in CLAUSE_END:
            return False
        if t.startswith("VB") and _lemma(w) in CAUSATIVE_VERBS:
            return True
    return False


def _singular_subject(tagged: list[tuple[str, str]], i: int) -> bool:
    """The subject before the verb at ``i`` is singular ("a girl sing/VBP"): the nearest noun or
    pronoun before it in its clause."""
    for j in range(i - 1, -1, -1):
        w, t = tagged[j][0].lower(), tagged[j][1]
        if w in CLAUSE_END:
            return False
        if t == "PRP" or w in ("i", "you", "we", "they"):  # lower-case "i" is tagged NN
            return w in ("he", "she", "it")
        if t.startswith("NN"):
            k = j
            while k > 0 and tagged[k - 1][1] in ("DT", "JJ", "CD", "PRP$", "NN", "NNS", "NNP", "NNPS", "POS"):
                k -= 1
            if k > 0 and tagged[k - 1][1] in ("IN", "TO"):
                continue  # a noun inside a PP ("cabins on a sandy beach have"): not the subject
            return t in ("NN", "NNP") and w not in ("people", "police", "crowd", "audience", "team", "group", "family")
    return False


def _participle_blocked(tagged: list[tuple[str, str]], i: int) -> bool:
    """Where "not" before an -ing or -ed form is no English: after "being"/"been" ("is being not
    played") or a form of "get" ("gets not knocked"), whose own rule negates them, and as a noun's
    premodifier ("not animated pirates sing")."""
    prev_word = tagged[i - 1][0].lower() if i else ""
    prev_tag = tagged[i - 1][1] if i else ""
    if prev_word == "been" or _lemma(prev_word) == "get" or (tagged[i][1] == "VBN" and prev_word in ("being", "be")):
        return True
    nxt = tagged[i + 1][1] if i + 1 < len(tagged) else ""
    if tagged[i][1] == "VBN" and (prev_tag in ("NN", "JJ", "RB") or prev_tag.startswith("VB")) and nxt in ("NN", "NNS"):
        return True  # "a blue screened road", "frying dried prawns": a participle used as an adjective
    return prev_tag in PREMODIFIER_BEFORE and (nxt.startswith("NN") or nxt == "JJ") and \
        not (prev_tag == "IN" and tagged[i - 1][0].lower() in ("while", "after", "before", "by", "without"))


# words that make a caption negative without a cue to remove ("nobody is dancing"): left alone
NEGATIVE_WORDS = frozenset("nobody nothing none noone neither nor nowhere".split())
# prepositions after which an -ing form is a gerund, a noun ("styles of dressing", "tips for cooking")
GERUND_PREPOSITIONS = frozenset("of for about at in on from into to than like".split())
AUX_WORDS = frozenset("is are was were be been being am has have had do does did get gets got getting".split())


def _in_title(tagged: list[tuple[str, str]], i: int) -> bool:
    """A verb whose subject is an existential "there" right after a noun or preposition: a name, not
    a clause of the caption ("the movie there will be blood")."""
    j = i - 1
    while j >= 0 and tagged[j][1] in ("MD", "RB"):
        j -= 1
    return j >= 1 and tagged[j][1] == "EX" and (tagged[j - 1][1].startswith("NN") or tagged[j - 1][1] == "IN")


def _finite_verb_follows(tagged: list[tuple[str, str]], i: int) -> bool:
    """Another finite verb later in the clause of ``i``: the word at ``i`` is inside the subject ("a
    tv shows review program hosts discuss", "the weight lifting photo is illustrated")."""
    for w, t in tagged[i + 1:]:
        if w.lower() in CLAUSE_END:
            return False
        if t in ("VBZ", "VBP", "VBD", "MD") and is_known_verb(w):
            return True
    return False


def _compound_noun_part(tagged: list[tuple[str, str]], i: int) -> bool:
    """A word between nouns that a later finite verb shows is part of the subject's noun phrase:
    "a tv [shows] review program hosts discuss" (a plural noun read as a verb), "the weight
    [lifting] photo is illustrated" (a compound's -ing noun)."""
    from lemminflect import getAllLemmas

    word, penn = tagged[i][0].lower(), tagged[i][1]
    prev = tagged[i - 1][1] if i else ""
    nxt = tagged[i + 1][1] if i + 1 < len(tagged) else ""
    if not prev.startswith("NN") or not nxt.startswith(("NN", "VB")):
        return False
    noun_too = penn == "VBG" or (penn == "VBZ" and bool(getAllLemmas(word, upos="NOUN")))
    return noun_too and _finite_verb_follows(tagged, i)


def _candidates(tagged: list[tuple[str, str]]) -> list[tuple[int, str]]:
    """(token index, rule) for every place a negation cue can go."""
    from lemminflect import getAllLemmas

    out = []
    for i, (word, penn) in enumerate(tagged):
        w = word.lower()
        prev_tag = tagged[i - 1][1] if i else ""
        prev_word = tagged[i - 1][0].lower() if i else ""
        if _in_title(tagged, i) or _compound_noun_part(tagged, i):
            continue
        if penn == "VBG" and (prev_word in GERUND_PREPOSITIONS and prev_tag in ("IN", "TO")
                              or prev_tag.startswith("VB") and _lemma(prev_word) not in ("be", "get", "have")
                              and prev_word not in AUX_WORDS):
            continue  # a gerund: "styles of dressing", "enjoy boating", "keeps running" (negate the verb before)
        if penn == "VBN" and w == _lemma(w) and prev_word not in AUX_WORDS and is_known_verb(w) \
                and (prev_tag.startswith(("NN", "PRP")) or prev_tag == "VBZ" and prev_word.endswith("s")):
            if not _noun_read_as_verb(tagged, i) and _plural_subject(prev_word, prev_tag):
                out.append((i, "VBP"))  # "two boys come/VBN": a present verb whose participle is its base
            continue
        if w in BE_NEG or w == "am":
            out.append((i, "AUX"))
        elif penn == "MD":
            if _verb_after_modal(tagged, i):  # not "actor will smith talks": a name, no modal
                out.append((i, "MD"))
        elif w in HAVE and _is_aux_have(tagged, i):
            out.append((i, "AUX-have"))
        elif penn in ("VBZ", "VBD", "VBP") and w not in DO | {"be"}:
            if prev_tag not in NOT_BEFORE_FINITE_VERB and is_known_verb(w) and not _noun_read_as_verb(tagged, i):
                out.append((i, penn))
        elif (penn == "VB" and prev_tag not in ("MD", "TO") or penn == "VBG" and _lemma(w) == w) \
                and is_known_verb(w):  # "young men discuss and demonstrate", "pirates sing/VBG": finite
            if prev_tag not in NOT_BEFORE_FINITE_VERB and not _noun_read_as_verb(tagged, i):
                out.append((i, "VBP"))
        elif penn in ("VBG", "VBN") and is_known_verb(w) and prev_tag.startswith("NN") and i > 1 \
                and tagged[i - 2][1] in ("DT", "JJ", "NN") and _finite_verb_follows(tagged, i):
            continue  # "a man [playing] a shooter dodges an attack": a participle inside the subject
        elif penn == "VBN" and prev_tag.startswith("NN") and _noun_in_phrase(tagged, i):
            continue  # "around a mall [filled] with stores": the participle describes a preposition's noun
        elif penn in ("VBG", "VBN") and is_known_verb(w):
            if i > 1 and tagged[i - 2][0].lower() in AUX_WORDS and (prev_tag in ("NN", "NNS") or prev_tag == "RB"
                                                                    and getAllLemmas(prev_word, upos="NOUN")):
                continue  # "is test driving": a compound verb, not the noun's participle
            if not _participle_blocked(tagged, i) and not _noun_read_as_verb(tagged, i):
                out.append((i, penn))  # "is not running"; after a modal the MD rule covers it
    # never a verb inside a "to" clause ("goes to not play": the main verb is negated), nor "with"
    # -> "without" (a function word, which a reader does not take as the caption's negation)
    return [(i, rule) for i, rule in out if not _subordinate(tagged, i) and not _split_compound(tagged, i)]


# words opening an embedded question or free relative: a verb after them is not the caption's claim
WH_OPENERS = frozenset("why what how whether whatever wherever whenever".split())
# "try and get", "go and see": the second verb belongs to the first, which carries the negation
VERB_AND_VERB = frozenset("try go come".split())


def _plural_subject(word: str, penn: str) -> bool:
    """A base form read as a present verb needs a subject it agrees with: "boys come", "they set",
    never a singular noun ("a video set to music", "a cartoon set in rome": a participle)."""
    if penn in ("NN", "NNP"):
        return word in ("people", "police")
    return penn != "PRP" or word in ("i", "you", "we", "they")


def _noun_in_phrase(tagged: list[tuple[str, str]], i: int) -> bool:
    """The noun before ``i`` heads a preposition's object ("around a mall [filled]")."""
    k = i - 1
    while k > 0 and tagged[k - 1][1] in ("DT", "JJ", "CD", "PRP$", "NN", "NNS", "NNP", "NNPS", "POS"):
        k -= 1
    return k > 0 and tagged[k - 1][1] in ("IN", "TO")


def _subordinate(tagged: list[tuple[str, str]], i: int) -> bool:
    """A verb inside an embedded question ("why it will strengthen", "what she puts") or the second
    verb of "try and get": negating it leaves the caption's own claim standing."""
    if any(w.lower() in WH_OPENERS for w, _ in tagged[:i]):
        return True
    return i > 1 and tagged[i - 1][0].lower() == "and" and _lemma(tagged[i - 2][0]) in VERB_AND_VERB


def _split_compound(tagged: list[tuple[str, str]], i: int) -> bool:
    """A verb that, written together with the noun before it, is that noun's compound: "water falls"
    (waterfalls), "sun sets" (sunsets). Either reading is possible; a wrong one is no English, so skip."""
    from lemminflect import getAllLemmas

    if not i or not tagged[i - 1][1].startswith("NN") or tagged[i][1] not in ("VBZ", "VBP"):
        return False
    return bool(getAllLemmas(tagged[i - 1][0].lower() + tagged[i][0].lower(), upos="NOUN"))


def _verb_after_modal(tagged: list[tuple[str, str]], i: int) -> bool:
    j = i + 1
    while j < len(tagged) and tagged[j][1] == "RB":
        j += 1
    return j < len(tagged) and tagged[j][1] in ("VB", "VBP") and is_known_verb(tagged[j][0])


def _adverb_start(tokens: list[str], tagged: list[tuple[str, str]], i: int) -> int:
    """Where the cue goes before the verb at ``i``: before the manner adverbs that modify it ("do
    not casually shoot", "not fully dressed"), never between them and the verb."""
    at = i
    while at > 0 and tagged[at - 1][1] == "RB" and (tokens[at - 1].lower().endswith("ly")
                                                    or tokens[at - 1].lower() == "well"):
        at -= 1
    return at


def _apply(tokens: list[str], tagged: list[tuple[str, str]], i: int, rule: str) -> tuple[list[str], int, str]:
    """Negated tokens, the cue's position, and the cue."""
    w = tokens[i]
    low = w.lower()
    at = _adverb_start(tokens, tagged, i)
    if rule == "AUX":
        if low == "am":
            return tokens[:i + 1] + ["not"] + tokens[i + 1:], i + 1, "not"
        return tokens[:i] + [BE_NEG[low]] + tokens[i + 1:], i, "n't"
    if rule == "AUX-have":
        return tokens[:i] + [low + "n't"] + tokens[i + 1:], i, "n't"
    if rule == "MD":
        return tokens[:i + 1] + ["not"] + tokens[i + 1:], i + 1, "not"
    if rule in ("VBZ", "VBD", "VBP"):
        do = {"VBZ": "does", "VBD": "did", "VBP": "do"}[rule]
        if rule == "VBP" and _singular_subject(tagged, i):
            do = "does"  # "a girl sing/VBP" -> "a girl does not sing", never "a girl do not sing"
        elif rule in ("VBD", "VBP") and low != _lemma(low) and low == _inflect(_lemma(low), "VBZ") \
                and low != _inflect(_lemma(low), "VBD"):
            do = "does"  # "shoots/VBD", "a women who talks/VBP" are third person present: "does not"
        return tokens[:at] + [do, "not"] + tokens[at:i] + [_lemma(w)] + tokens[i + 1:], i + 1, "not"
    if rule in ("VBG", "VBN", "VB"):
        return tokens[:at] + ["not"] + tokens[at:], i, "not"
    raise ValueError(rule)


def _negated_already(tagged: list[tuple[str, str]]) -> set[int]:
    """Positions a new cue must not touch: an existing cue's auxiliary ("is [not]", "does [not]") and
    the words it governs (to its clause's end; for "without" and "no", to the next verb)."""
    out: set[int] = set()
    for c, (word, _) in enumerate(tagged):
        w = word.lower()
        if w not in CUE_WORDS:
            continue
        out |= {c} if w == "without" else {c - 1, c}  # "is [not] running", "there is [no] dog"
        j = c + 1
        while j < len(tagged) and tagged[j][0].lower() not in CLAUSE_END \
                and not (w in ("without", "no") and tagged[j][1].startswith(("VB", "MD"))):
            out.add(j)
            j += 1
    return out


VERB_OF_RULE = {"VBZ": ("VBZ", "VBD", "VBP"), "VBD": ("VBZ", "VBD", "VBP"), "VBP": ("VBZ", "VBD", "VBP", "VB"),
                "VBG": ("VBG",), "AUX": ("VBG", "VBN"), "AUX-have": ("VBN",), "MD": ("VB",), "VBN": ("VBN",)}


def _coordinate(tokens: list[str], tagged: list[tuple[str, str]], i: int, rule: str) -> list[str]:
    """The tokens with a second verb coordinated with the negated one brought under the negation:
    "sings and dances" -> "does not sing or dance", "is singing and dancing" -> "isn't singing or
    dancing" (negating the first only, "does not sing and dances", says something else)."""
    from lemminflect import getAllLemmas

    if _lemma(tokens[i]) in VERB_AND_VERB:
        return tokens  # "do not try and get": one action, negated once
    j = i + 1
    if rule in ("AUX", "AUX-have", "MD"):  # the auxiliary's own verb first
        while j < len(tagged) and not tagged[j][1].startswith("VB") and tagged[j][0].lower() not in CLAUSE_END:
            j += 1
        j += 1
    while j < len(tagged) and tagged[j][0].lower() not in CLAUSE_END:
        j += 1
    if j + 1 >= len(tagged) or tagged[j][0].lower() != "and":
        return tokens
    word, penn = tagged[j + 1]
    takes_object = j + 2 < len(tagged) and tagged[j + 2][1] in ("DT", "PRP$", "PRP", "CD")
    finite_s = penn == "NNS" and rule == "VBZ" and _lemma(word) != word.lower() and (
        takes_object or not getAllLemmas(word.lower(), upos="NOUN"))  # "and sings/NNS", not "and drums"
    ing = penn == "NN" and word.lower().endswith("ing") and "VBG" in VERB_OF_RULE[rule] \
        and _lemma(word) != word.lower()  # "playing a video game and commentating/NN"
    low, base = word.lower(), _lemma(word)
    same_form = rule in ("VBZ", "VBD", "VBP") and penn.startswith("VB") and low != base and \
        low == _inflect(base, rule if rule != "VBP" else "VBZ")  # "knocks on a wall and texts/VB a friend"
    if not (penn in VERB_OF_RULE[rule] and is_known_verb(word) or finite_s and is_known_verb(word) or ing
            and is_known_verb(word) or same_form and takes_object):
        return tokens
    second = _lemma(tokens[j + 1]) if rule in ("VBZ", "VBD", "VBP") else tokens[j + 1]
    return tokens[:j] + ["or", second] + tokens[j + 2:]


def _result(new: list[str], tokens: list[str], idx: int, rule: str, cue: str) -> Negation:
    """Scope and remainder come from the original tokens: the negated clause starts at the verb
    (after the auxiliary or ``with`` whose form changed) and runs to the end of its clause."""
    start = idx + 1 if rule in ("AUX", "AUX-have", "MD") else idx
    inside, outside = _scope(tokens, start)
    outside = [i for i in outside if i != idx]
    return Negation(_detok(new), tokens[idx], idx, rule, cue, _detok([tokens[i] for i in inside]),
                    _detok([tokens[i] for i in outside]))


def negate(caption: str, mode: str = "one", seed: int | str = 0) -> list[Negation]:
    """Negated variants of ``caption``: one chosen with ``seed`` (the paper), or every candidate
    (``mode="all"``, what the authors' code wrote). Returns [] when no rule applies."""
    if mode not in ("one", "all"):
        raise ValueError("mode must be 'one' or 'all'")
    text = expand_contractions(caption.strip())
    tagged = tag(text)
    tokens = [w for w, _ in tagged]
    if any(w.lower() in NEGATIVE_WORDS for w in tokens):
        return []  # "nobody is dancing": negating it again would make a double negative
    taken = _negated_already(tagged)  # a caption with a cue gets another one added elsewhere, or none
    cands = [(i, rule) for i, rule in _candidates(tagged) if i not in taken]
    if not cands:
        return []
    if mode == "one":
        cands = [random.Random(f"{seed}|{caption}").choice(cands)]
    out = []
    for i, rule in cands:
        new, _, cue = _apply(_coordinate(tokens, tagged, i, rule), tagged, i, rule)
        out.append(_result(new, tokens, i, rule, cue))
    return out


def split_negated(text: str) -> tuple[str, str]:
    """(positive part, negative part) of any negated query, by the same rule-based scope: the
    negative part runs from after the first cue to the end of its clause. No cue: (text, "")."""
    tokens = tokenize(expand_contractions(text))
    for i, w in enumerate(tokens):
        if w.lower() in CUE_WORDS:
            inside, outside = _scope(tokens, i + 1)
            return _detok([tokens[j] for j in outside if j != i]), _detok([tokens[j] for j in inside])
    return text, ""
