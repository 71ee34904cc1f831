"""nT2VR's negator (Table 6) and composer (Algorithm 1, appendix A.1), by hand-worked examples."""

import pytest

from negharness.text.composer import (
    CaptionIndex,
    Subject,
    VerbPhrase,
    compose,
    extract_pairs,
    render,
)
from negharness.text.negator import expand_contractions, negate, split_negated

pytestmark = pytest.mark.needs("nltk")  # the builders tag real captions with NLTK


def _find(caption, rule, word):
    return next(n for n in negate(caption, mode="all") if n.rule == rule and n.word == word)


@pytest.mark.parametrize("caption, rule, expected, word", [
    ("Some guys are driving a car and met an accident in a road", "VBD",
     "Some guys are driving a car and did not meet an accident in a road", "met"),
    ("A cartoon alien character finds another character", "VBZ",
     "A cartoon alien character does not find another character", "finds"),
    # issue 35: both of two coordinated verbs come under the negation
    ("A man is running around and playing a guitar", "VBG", "A man is not running around or playing a guitar", "running"),
    ("A man is running around and playing a guitar", "AUX", "A man isn't running around or playing a guitar", "is"),
    ("a man sings a song and plays the guitar", "VBZ", "a man does not sing a song or play the guitar", "sings"),
    ("A father and son are playing with their dog", "AUX", "A father and son aren't playing with their dog", "are"),
    ("kids play football in a park", "VBP", "kids do not play football in a park", "play"),
    ("a woman can sing well", "MD", "a woman can not sing well", "can"),
    ("a girl has finished her meal", "AUX-have", "a girl hasn't finished her meal", "has"),
])
def test_table6_rules(caption, rule, expected, word):
    assert _find(caption, rule, word).text == expected


@pytest.mark.parametrize("caption, expected", [
    ("a boy is running without dress", {"a boy isn't running without dress", "a boy is not running without dress"}),
    ("a man does not find his keys", set()),
    ("a man isn't running", set()),
    ("a woman doesn t cook", set()),  # MSR-VTT's lost apostrophes
    ("there is no dog in the park", set()),
    ("a woman is not smiling while a man plays a guitar",
     {"a woman is not smiling while a man does not play a guitar"}),
])
def test_existing_negation_is_kept_and_one_added_elsewhere_or_none(caption, expected):
    """Issue 35: a caption with a cue gets a second cue on another verb, or no negated variant: the
    existing cue is never removed (the rubric's NN), nor doubled ("isn't not running")."""
    assert {n.text for n in negate(caption, mode="all")} == expected


def test_no_negation_inside_a_to_clause_on_with_or_on_a_compound_participle():
    """Issue 35: the main verb is negated, never the verb of a "to" clause; "with" is never turned
    into "without" (a function word); a compound's participle ("blue screened road") is no verb."""
    assert {n.text for n in negate("a boy goes to play football", mode="all")} == {
        "a boy does not go to play football"}
    assert negate("a live concert with a woman as the lead singer", mode="all") == []
    assert {n.text for n in negate("a car drives on a blue screened road", mode="all")} == {
        "a car does not drive on a blue screened road"}
    assert negate("a cooking video of frying dried prawns and fish", mode="all") == []  # "dried", "fish": no verbs


@pytest.mark.parametrize("caption, expected", [
    # a base-form participle after a singular noun is no present verb ("a clip does not set to jazz")
    ("a music clip set to jazz", set()),
    ("this is a clip from a film set in paris", {"this isn't a clip from a film set in paris"}),
    ("they set the table", {"they do not set the table"}),  # a plural subject: a present verb
    # a participle describing a preposition's noun is no verb of the caption
    ("a crowd walking through a street lined with trees", {"a crowd not walking through a street lined with trees"}),
    # inside an embedded question or free relative: the caption's own claim is the main verb
    ("a girl explains how she will fix her bike", {"a girl does not explain how she will fix her bike"}),
    ("a man talking about what he keeps in his garage", set()),
    # "try and catch" is one action, negated once, on "try"
    ("two girls try and catch fish in a river", {"two girls do not try and catch fish in a river"}),
    # a verb that with the noun before it makes that noun's compound ("water falls", "sun sets")
    ("small water falls near a cabin", set()),
])
def test_negation_stays_on_the_main_clause_and_off_participles_and_compounds(caption, expected):
    """Issue 35 (independent grade, seed 58213): the causes the readers named, on other captions."""
    assert {n.text for n in negate(caption, mode="all")} == expected


def test_negation_goes_before_manner_adverbs_and_never_on_a_name_or_a_compound_verb():
    """Issue 35: "casually do not shoot" and "fully not dressed" are no English: the cue goes before
    the adverb; "will smith" is a name, no modal; "is test driving" a compound verb; a third-person
    "-s" verb keeps "does" ("a women who does not talk", the source's own typo left alone); an -ing
    verb read as a noun after "and" comes under the negation with the first."""
    assert {n.text for n in negate("people casually shoot basketballs", mode="all")} == {
        "people do not casually shoot basketballs"}
    assert "a man is diving not fully dressed" in {n.text for n in negate("a man is diving fully dressed", mode="all")}
    assert negate("actor will smith talks to his son", mode="all") == []
    assert {n.text for n in negate("this person is test driving this vehicle", mode="all")} == {
        "this person isn't test driving this vehicle"}
    assert "a man stands in front of a women who does not talk to him" in {
        n.text for n in negate("a man stands in front of a women who talks to him", mode="all")}
    assert {n.text for n in negate("a person playing a video game and commentating", mode="all")} == {
        "a person not playing a video game or commentating"}
    assert {n.text for n in negate("a girl knocks on a wall and texts a friend", mode="all")} == {
        "a girl does not knock on a wall or text a friend"}  # "texts/VB" with its object: a verb
    assert {n.text for n in negate("a man plays guitar and drums", mode="all")} == {
        "a man does not play guitar and drums"}  # "drums": a noun


def test_lost_possessive_apostrophe_and_participles_inside_the_subject():
    """"about it s conception" is "its", never "it is"/"it isn't"; "a man playing a shooter dodges":
    the participle is inside the subject, the main verb is negated."""
    assert {n.text for n in negate("a voice talking about it s conception", mode="all")} == {
        "a voice not talking about its conception"}
    assert {n.text for n in negate("a man playing a first person shooter dodges an attack", mode="all")} == {
        "a man playing a first person shooter does not dodge an attack"}


def test_contractions_seed_and_scope():
    assert expand_contractions("it's there and they're not, can't") == "it is there and they are not, can not"
    caption = "A man is running around and playing a guitar"
    assert negate(caption, seed=3) == negate(caption, seed=3)
    assert {n.text for n in negate(caption, mode="all")} >= {negate(caption, seed=s)[0].text for s in range(20)}
    vbg = _find(caption, "VBG", "running")
    assert vbg.scope == "running around" and vbg.cue == "not"  # scope stops at the clause's "and"
    assert split_negated("a man is not running around and playing a guitar") == (
        "a man is and playing a guitar", "running around")
    assert negate("the red car") == []  # nothing to negate


def test_subject_and_verb_phrase_extraction():
    pairs = extract_pairs("a man with a hat is playing guitar while his dog watches tv")
    assert [(s.text, v.verb, v.rest) for s, v in pairs][0] == ("a man", "play", ("guitar",))
    (s, v), = extract_pairs("there is a man singing on stage")
    assert (s.text, s.pronoun, v.verb, v.rest) == ("a man", "he", "sing", ("on", "stage"))
    (s, _), = extract_pairs("two kids are playing basketball")
    assert s.plural and s.pronoun == "they" and s.head == "kid"
    assert Subject("a red circle", "circle", False).content == {"red", "circle"}


A, B = VerbPhrase("take", ("selfie",)), VerbPhrase("drive", ("down", "a", "road"))


@pytest.mark.parametrize("subject, expected", [
    (Subject("kids", "kid", True), [
        ("kids take selfie and they don't drive down a road", 0),
        ("kids don't drive down a road and they take selfie", 1),
        ("kids taking selfie and not driving down a road", 0),
        ("kids not driving down a road and they are taking selfie", 1),
        ("kids are taking selfie and not driving down a road", 0),
        ("kids are not driving down a road and they are taking selfie", 1)]),
    (Subject("a man", "man", False), [
        ("a man takes selfie and he doesn't drive down a road", 0),
        ("a man doesn't drive down a road and he takes selfie", 1),
        ("a man taking selfie and not driving down a road", 0),
        ("a man not driving down a road and he is taking selfie", 1),
        ("a man is taking selfie and not driving down a road", 0),
        ("a man is not driving down a road and he is taking selfie", 1)]),
    (Subject("a kid", "kid", False), [
        ("a kid takes selfie and doesn't drive down a road", 0),
        ("a kid doesn't drive down a road while taking selfie", 1),
        ("a kid taking selfie and not driving down a road", 0),
        ("a kid not driving down a road while taking selfie", 1),
        ("a kid is taking selfie and not driving down a road", 0),
        ("a kid is not driving down a road while taking selfie", 1)]),
])
def test_appendix_a1_templates(subject, expected):
    """Appendix A.1's six templates per pronoun case, as printed except where the print drops a verb:
    "they doing A" / "while does A" read as defects to a blind grader (issue 22), so the pronoun
    clause keeps its auxiliary ("they are doing A") and "while" takes the participle."""
    assert [render(subject, A, B, t) for t in range(6)] == expected


def test_matching_is_phrase_minus_word_level_and_empty_queries_are_dropped():
    items = ["v0", "v1", "v2", "v3"]
    captions = [
        ["a man is playing a guitar", "a man sings a song"],   # guitar yes, singing yes
        ["a man is playing a guitar on a stage"],              # guitar, no singing
        ["a man sings a song in a car", "a woman plays a guitar"],  # singing; the guitar player is a woman
        ["a man is cooking food", "a man is cooking food and a woman is playing a guitar"],  # A, B said together
    ]
    index = CaptionIndex(items, captions)
    man = next(s for _, s, _ in index.pairs if s.head == "man")
    guitar, song = VerbPhrase("play", ("a", "guitar")), VerbPhrase("sing", ("a", "song"))
    assert index.positive_items(man, guitar) == {0, 1}
    assert index.negative_items(man, song) == {0, 2}
    queries = compose(index, seed=0, per_item=4)
    assert queries, "some composed query must survive"
    for q in queries:
        assert q.video_ids and q.positive.startswith(q.subject) and q.negative
        pos_items = {items[i] for i in index.positive_items(
            next(s for _, s, _ in index.pairs if s.text == q.subject), next(
                v for _, s, v in index.pairs if s.text == q.subject and q.positive.endswith(v.form("VBG")))) }
        assert set(q.video_ids) <= pos_items
    assert compose(index, seed=0, per_item=4) == queries  # deterministic under a seed
