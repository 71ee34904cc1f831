"""nT2VR's composer (Wang et al., 2022, section 3.1.2, Algorithm 1 and appendix A.1).

1. Subjects and verb phrases come from NLTK's RegexpParser with the paper's chunk grammar
   (NP, PP, VP, CLAUSE). A VP's subject is the noun phrase in subject position before it (the NP
   followed, past auxiliaries and adverbs, by a verb phrase); "a man is singing and dancing" gives
   (a man, sing) and (a man, dance). Copulas and bare auxiliaries are not verb phrases.
2. A query is (subject, positive VP A, negative VP B) put through one of the appendix's six
   templates, chosen with a seed: with a pronoun ("they", "he", "she") when the subject tells,
   else the "while" forms. Verbs are inflected per template (lemminflect).
3. Matched items = items with a caption whose parsed (subject, VP) pair has the subject's content
   words and a VP starting with A (phrase level, lemmas), minus items with a caption holding the
   subject's content words and any content word of B (word level, stop words excluded). Queries
   with no match are discarded. Matching the subject's content words rather than its head noun
   alone keeps "a red circle" from matching a blue one.

Every query stores its subject, positive and negative parts explicitly.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Sequence

from .negator import is_known_verb
from .nltk_resources import tag

GRAMMAR = r"""
NP: {<DT|JJ|CD|PRP\$|NN.*>*<NN.*>}
PP: {<IN|RP><NP>}
VP: {<VB.*><NP|PP|CLAUSE>*}
CLAUSE: {<NP><VP>}
"""
STOP_WORDS = frozenset("""
a an the and or but if while of at by for with about against between into through during before after above
below to from up down in out on off over under again further then once here there when where why how all any
both each few more most other some such no nor not only own same so than too very can will just don should now
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself
it its itself they them their theirs themselves what which who whom this that these those am is are was were be
been being have has had having do does did doing would could ought s t one two another its as very also
""".split())
MALE = frozenset("man boy guy gentleman father dad son husband king brother uncle actor player male boyfriend "
                 "grandfather grandpa he sir prince groom".split())
FEMALE = frozenset("woman girl lady mother mom daughter wife queen sister aunt actress female girlfriend "
                   "grandmother grandma she madam princess bride".split())
BE_LEMMAS = {"be"}
CLAUSE_BOUNDARY = {"while", "whilst", "and", "or", "but", "as", "when", "because", "then", ",", ";", "."}
AUX_VERBS = {"be", "do", "have", "will", "can", "get"}


@dataclass(frozen=True)
class VerbPhrase:
    verb: str  # lemma
    rest: tuple[str, ...]  # complement tokens, as in the caption

    def form(self, penn: str) -> str:
        """The phrase with its verb inflected: VB base, VBG -ing, VBZ third person."""
        from lemminflect import getInflection

        forms = getInflection(self.verb, tag=penn) if penn != "VB" else (self.verb,)
        return " ".join([forms[0] if forms else self.verb, *self.rest])

    @cached_property
    def lemmas(self) -> tuple[str, ...]:
        return (self.verb, *(_lemma(w) for w in self.rest))

    @cached_property
    def content(self) -> frozenset[str]:
        return frozenset(w for w in self.lemmas if w not in STOP_WORDS and w.isalpha())


@dataclass(frozen=True)
class Subject:
    text: str  # as in the caption: "a man", "two kids"
    head: str  # head noun lemma
    plural: bool

    @cached_property
    def content(self) -> frozenset[str]:
        """Content lemmas of the noun phrase ("a red circle" -> {red, circle}): what a caption must
        say for the subject to match, so "a red circle" never matches a blue one."""
        words = self.text.split()
        return frozenset([_lemma(w, "NOUN") for w in words[:-1] if w not in STOP_WORDS] + [self.head])

    @property
    def pronoun(self) -> str | None:
        if self.plural:
            return "they"
        if self.head in MALE:
            return "he"
        if self.head in FEMALE:
            return "she"
        return None


@dataclass
class ComposedQuery:
    cap_id: str
    caption: str
    video_ids: list[str]
    negation_first: int
    subject: str
    positive: str  # subject + positive VP: the part the query asks for
    negative: str  # the negative VP: the part the query excludes
    pos_occur: int  # items matching subject + positive VP, before the set difference
    neg_occur: int  # of those, items removed because a caption has the subject + a word of the negative VP
    template: int
    meta: dict = field(default_factory=dict)

    def as_record(self) -> dict:
        """The nT2VR composed-file dict (its key ``negstionfirst`` spelled as the authors' files do)."""
        return {"cap_id": self.cap_id, "caption": self.caption, "video_ids": self.video_ids,
                "negstionfirst": self.negation_first, "pos_occur": self.pos_occur, "neg_occur": self.neg_occur,
                "subject": self.subject, "positive": self.positive, "negative": self.negative,
                "template": self.template}


@lru_cache(maxsize=65536)
def _lemma(word: str, upos: str | None = None) -> str:
    from lemminflect import getLemma

    w = word.lower()
    if upos is None:
        lemmas = getLemma(w, upos="VERB") if w.endswith(("ing", "ed", "es", "s")) else (w,)
    else:
        lemmas = getLemma(w, upos=upos)
    return lemmas[0] if lemmas else w


def _token_lemma(word: str, penn: str) -> str:
    if penn.startswith("NN"):
        return _lemma(word, "NOUN")
    if penn.startswith("VB"):
        return _lemma(word, "VERB")
    return word.lower()


_PARSER = None


def _parser():
    global _PARSER
    if _PARSER is None:
        import nltk

        _PARSER = nltk.RegexpParser(GRAMMAR)
    return _PARSER


def _flatten(tree) -> list[tuple[str, list[tuple[str, str]]]]:
    """Top-level (label, tagged leaves) items, with CLAUSE chunks opened into their NP and VP, and a
    copula's VP opened too ("there is [a man] [singing]": the NP after *be* can be a subject)."""
    out = []
    for node in tree:
        if hasattr(node, "label"):
            if node.label() == "CLAUSE":
                out.extend(_flatten(node))
            elif node.label() == "VP" and _lemma(node.leaves()[0][0], "VERB") in BE_LEMMAS:
                out.append(("TOK", [node[0]]))
                out.extend(_flatten(node[1:]))
            else:
                out.append((node.label(), list(node.leaves())))
        else:
            out.append(("TOK", [node]))
    return out


def _is_aux_vp(leaves: list[tuple[str, str]]) -> bool:
    verb = _lemma(leaves[0][0], "VERB")
    return verb in BE_LEMMAS or (len(leaves) == 1 and verb in AUX_VERBS)


def head_nouns(caption: str) -> list[str]:
    """Head noun (singular lemma) of every noun phrase, in order, without repeats: the objects a
    caption mentions. NeIn's authors used spaCy noun chunks; this uses the same NLTK chunk grammar
    as the composer, so compound heads are the last noun ("dining table" -> "table")."""
    out: list[str] = []
    for np_tree in _parser().parse(tag(caption.lower())).subtrees(lambda t: t.label() == "NP"):
        word, penn = np_tree.leaves()[-1]
        head = _lemma(word, "NOUN")
        if penn.startswith("NN") and head not in out and head.isalpha():
            out.append(head)
    return out


def _skippable(item: tuple[str, list[tuple[str, str]]]) -> bool:
    """Between a subject and its verb phrase: adverbs, modals, auxiliaries, post-modifying PPs."""
    label, leaves = item
    if label == "PP":
        return True
    if label == "VP":
        return _is_aux_vp(leaves)
    word, penn = leaves[0]
    return penn in ("RB", "MD", "TO") or (penn.startswith("VB") and _lemma(word, "VERB") in AUX_VERBS)


def extract_pairs(caption: str) -> list[tuple[Subject, VerbPhrase]]:
    """(subject, verb phrase) pairs of one caption (Algorithm 1)."""
    items = _flatten(_parser().parse(tag(caption.lower())))
    pairs, subject = [], None
    for k, (label, leaves) in enumerate(items):
        if label == "NP" and leaves[-1][1].startswith("NN"):
            nxt = k + 1
            while nxt < len(items) and _skippable(items[nxt]):
                nxt += 1
            if nxt < len(items) and items[nxt][0] == "VP":
                head_word, head_tag = leaves[-1]
                subject = Subject(" ".join(w for w, _ in leaves), _lemma(head_word, "NOUN"),
                                  head_tag in ("NNS", "NNPS"))
        elif label == "VP" and subject is not None and not _is_aux_vp(leaves) and is_known_verb(leaves[0][0]):
            verb = _lemma(leaves[0][0], "VERB")
            rest = []
            for w, _ in leaves[1:]:  # the grammar lets a PP like "while his dog" run on: stop at the clause's end
                if w in CLAUSE_BOUNDARY:
                    break
                rest.append(w)
            if verb not in AUX_VERBS or rest:
                pairs.append((subject, VerbPhrase(verb, tuple(rest))))
        elif label == "TOK" and leaves[0][0] in (".", ";"):
            subject = None
    return pairs


def render(subject: Subject, a: VerbPhrase, b: VerbPhrase, template: int) -> tuple[str, int]:
    """One of appendix A.1's six templates; returns (query, 1 if the negated part comes first)."""
    s, p = subject.text, subject.pronoun
    if p is not None:
        pres_a = a.form("VB") if subject.plural else a.form("VBZ")
        dont, be = ("don't", "are") if subject.plural else ("doesn't", "is")
        be_p = "are" if p == "they" else "is"
        forms = [
            (f"{s} {pres_a} and {p} {dont} {b.form('VB')}", 0),
            (f"{s} {dont} {b.form('VB')} and {p} {pres_a}", 1),
            (f"{s} {a.form('VBG')} and not {b.form('VBG')}", 0),
            (f"{s} not {b.form('VBG')} and {p} {a.form('VBG')}", 1),
            (f"{s} {be} {a.form('VBG')} and not {b.form('VBG')}", 0),
            (f"{s} {be} not {b.form('VBG')} and {p} {be_p} {a.form('VBG')}", 1),
        ]
    else:
        forms = [
            (f"{s} {a.form('VBZ')} and doesn't {b.form('VB')}", 0),
            (f"{s} doesn't {b.form('VB')} while {a.form('VBZ')}", 1),
            (f"{s} {a.form('VBG')} and not {b.form('VBG')}", 0),
            (f"{s} not {b.form('VBG')} while {a.form('VBG')}", 1),
            (f"{s} is {a.form('VBG')} and not {b.form('VBG')}", 0),
            (f"{s} is not {b.form('VBG')} while {a.form('VBG')}", 1),
        ]
    return forms[template]


class CaptionIndex:
    """Lemmatised captions of a collection and their (subject, VP) pairs, for text retrieval."""

    def __init__(self, item_ids: Sequence[str], captions: Sequence[Sequence[str]]) -> None:
        self.item_ids = list(item_ids)
        self.captions: list[tuple[int, tuple[str, ...]]] = []  # (item position, lemmas)
        self.by_lemma: dict[str, set[int]] = defaultdict(set)  # lemma -> caption numbers
        self.pairs: list[tuple[int, Subject, VerbPhrase]] = []
        self._pairs_by_head: dict[str, list[tuple[int, Subject, VerbPhrase]]] = defaultdict(list)
        for pos, caps in enumerate(captions):
            for cap in caps:
                tagged = tag(cap.lower())
                lemmas = tuple(_token_lemma(w, t) for w, t in tagged)
                cid = len(self.captions)
                self.captions.append((pos, lemmas))
                for lem in set(lemmas):
                    self.by_lemma[lem].add(cid)
                for subj, vp in extract_pairs(cap):
                    self.pairs.append((pos, subj, vp))
                    self._pairs_by_head[subj.head].append((pos, subj, vp))

    def positive_items(self, subject: Subject, vp: VerbPhrase) -> set[int]:
        """Items with a caption that says this subject does this VP (phrase level, on the parsed pairs):
        the caption's subject has every content word of ours, its VP starts with our VP's lemmas."""
        phrase = vp.lemmas
        return {pos for pos, s, v in self._pairs_by_head.get(subject.head, ())
                if subject.content <= s.content and v.lemmas[:len(phrase)] == phrase}

    def negative_items(self, subject: Subject, vp: VerbPhrase) -> set[int]:
        """Items with a caption holding the subject's words and any content word of the VP (word
        level): possibly doing B, so not safely a match for "... and not B"."""
        with_subject = set.intersection(*(self.by_lemma.get(w, set()) for w in subject.content))
        hits = set().union(*(self.by_lemma.get(w, set()) for w in vp.content)) if vp.content else set()
        return {self.captions[cid][0] for cid in with_subject & hits}


def _complete_phrases(pairs: Sequence[tuple[int, Subject, VerbPhrase]], min_bare: float = 0.5):
    """A bare verb ("giving", "wearing") is a phrase only if the collection mostly uses that verb
    without an object: a data-driven stand-in for the authors' verb-transitivity table."""
    bare, total = defaultdict(int), defaultdict(int)
    for _, _, vp in pairs:
        total[vp.verb] += 1
        bare[vp.verb] += not vp.rest
    return lambda vp: bool(vp.rest) or bare[vp.verb] >= min_bare * total[vp.verb]


def compose(index: CaptionIndex, seed: int = 0, per_item: int = 2) -> list[ComposedQuery]:
    """Composed queries over a collection: up to ``per_item`` anchors (subject, A) per item, each
    with a negative VP B drawn (seeded) from the VPs seen with the same subject elsewhere."""
    rng = random.Random(seed)
    usable = _complete_phrases(index.pairs)
    pool: dict[str, list[VerbPhrase]] = defaultdict(list)
    for _, subj, vp in index.pairs:
        if usable(vp) and vp not in pool[subj.head]:
            pool[subj.head].append(vp)
    anchors: dict[int, list[tuple[Subject, VerbPhrase]]] = defaultdict(list)
    for pos, subj, vp in index.pairs:
        if usable(vp) and (subj, vp) not in anchors[pos]:
            anchors[pos].append((subj, vp))
    out: list[ComposedQuery] = []
    seen: set[tuple[frozenset, VerbPhrase, VerbPhrase]] = set()
    for pos in sorted(anchors):
        chosen = anchors[pos][:]
        rng.shuffle(chosen)
        for subj, a in chosen[:per_item]:
            options = [b for b in pool[subj.head] if b.verb != a.verb and not (b.content & a.content) and b.content]
            if not options:
                continue
            b = rng.choice(options)
            key = (subj.content, a, b)
            if key in seen:
                continue
            seen.add(key)
            positive = index.positive_items(subj, a)
            matched = positive - index.negative_items(subj, b)
            if not matched:
                continue
            template = rng.randrange(6)
            text, neg_first = render(subj, a, b, template)
            out.append(ComposedQuery(
                f"s{len(out)}", text, [index.item_ids[i] for i in sorted(matched)], neg_first, subj.text,
                f"{subj.text} {a.form('VBG')}", b.form("VBG"), len(positive), len(positive) - len(matched),
                template))
    return out


def compose_captions(item_ids: Sequence[str], captions: Sequence[Sequence[str]], seed: int = 0,
                     per_item: int = 2) -> list[ComposedQuery]:
    return compose(CaptionIndex(item_ids, captions), seed, per_item)
