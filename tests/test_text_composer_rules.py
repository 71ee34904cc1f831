"""The composer's and negator's systematic defects of issue 22 (items 1 and 7), on small hand-made
caption sets whose right queries and targets are worked out by hand.

Composer: companions ("with others") and particles ("lying down") kept in A, numerals in subjects
respected, a video dropped from the targets when ANY of its captions states B, one query per distinct
(subject, A, B), and the authors' filters as an option. Negator: nouns the tagger reads as verbs, a
naming participle, compound adjectives, bare infinitives, "i" agreement.
"""

from __future__ import annotations

import pytest

from negharness.text.composer import AUTHORS_RULE, CaptionIndex, compose, extract_pairs
from negharness.text.negator import negate
from negharness.text.phrases import Subject, VerbPhrase

pytestmark = pytest.mark.needs("nltk")  # the builders tag captions with NLTK


def _subject(index: CaptionIndex, text: str) -> Subject:
    return next(s for _, s, _ in index.pairs if s.text == text)


def _vp(index: CaptionIndex, subject: str, vbg: str) -> VerbPhrase:
    return next(v for _, s, v in index.pairs if s.text == subject and v.form("VBG") == vbg)


def _queries(items: list[str], captions: list[list[str]], **kwargs) -> dict[tuple[str, str, str], list[str]]:
    """(subject, positive, negative) -> target videos, for every composed query."""
    index = CaptionIndex(items, captions)
    kwargs = {"subjects": None, **kwargs}
    return {(q.subject, q.positive, q.negative): q.video_ids for q in compose(index, seed=0, **kwargs)}


# --- composer: phrases -----------------------------------------------------------------------------


def test_particles_and_companions_stay_in_the_phrase():
    """"lying down" never becomes "lie"; "with others" / "with each other" / "together" stay in the key."""
    [(s, v)] = extract_pairs("a man is lying down on the bed")
    assert v.form("VBG") == "lying down on the bed" and v.key == ("lie", "down", "bed")
    [(_, v)] = extract_pairs("a dog is lying down")
    assert v.form("VBG") == "lying down" and v.key == ("lie", "down")
    [(_, v)] = extract_pairs("kids dancing with others")
    assert v.key == ("dance", "other")
    [(s, v)] = extract_pairs("two women are dancing with each other")
    assert v.key == ("dance", "other") and s.number == "two"
    [(_, up), (_, away)] = extract_pairs("a man stands up and walks away")
    assert (up.form("VBG"), away.form("VBG")) == ("standing up", "walking away")


def test_dancing_with_others_does_not_match_dancing_alone():
    items = ["v0", "v1"]
    captions = [["kids are dancing with others", "kids are laughing"],
                ["kids are dancing", "kids are laughing"]]
    index = CaptionIndex(items, captions)
    kids = _subject(index, "kids")
    assert index.positive_items(kids, _vp(index, "kids", "dancing with others")) == {0}
    assert index.positive_items(kids, _vp(index, "kids", "dancing")) == {0, 1}  # dancing with others is dancing


def test_lying_down_does_not_match_lying_on_a_sofa():
    index = CaptionIndex(["v0", "v1"], [["a dog is lying down"], ["a dog is lying on a sofa"]])
    dog = _subject(index, "a dog")
    assert index.positive_items(dog, _vp(index, "a dog", "lying down")) == {0}


def test_numerals_in_subjects_are_respected():
    """"two men" matches only two men; "a man" never matches "two men"; "men" matches any number."""
    items = ["v0", "v1", "v2", "v3"]
    captions = [["two men are fighting"], ["a man is fighting"], ["three men are fighting"], ["2 men are fighting"]]
    index = CaptionIndex(items, captions)
    fight = _vp(index, "a man", "fighting")
    assert index.positive_items(_subject(index, "two men"), fight) == {0, 3}
    assert index.positive_items(_subject(index, "a man"), fight) == {1}
    assert index.positive_items(Subject("men", "man", True), fight) == {0, 2, 3}


def test_a_video_is_no_target_when_any_caption_states_b():
    """"a band is playing and singing" (one caption) or "the singer sings" (another subject, same
    video) removes the video from "a band ... not singing"; a video that never mentions singing stays."""
    items = ["v0", "v1", "v2"]
    captions = [["a band is playing on a stage", "a band is playing and singing"],
                ["a band is playing on a stage", "the singer sings loudly"],
                ["a band is playing on a stage", "a band is playing music"]]
    index = CaptionIndex(items, captions)
    band = _subject(index, "a band")
    sing = VerbPhrase("sing", ())
    assert index.negative_items(band, sing) == {0, 1}
    play = _vp(index, "a band", "playing on a stage")
    assert index.positive_items(band, play) - index.negative_items(band, sing) == {2}


def test_composed_targets_end_to_end():
    """Worked by hand: A = "playing a guitar", B = "singing" for "a man"; v0 sings (another caption),
    v1 has a woman singing (excluded: precision first), v2 never mentions singing, v3 has two men."""
    items = ["v0", "v1", "v2", "v3"]
    captions = [["a man is playing a guitar", "a man plays a guitar and sings"],
                ["a man is playing a guitar", "a woman is singing"],
                ["a man is playing a guitar", "a man is playing a guitar on a stage"],
                ["two men are playing a guitar", "two men are playing a guitar"]]
    got = _queries(items, captions, min_bare_count=1)  # bare "singing" said once here (default: 3 times)
    assert got[("a man", "a man playing a guitar", "singing")] == ["v2"]
    assert not any(s == "a man" and "v3" in vids for (s, _, _), vids in got.items())  # two men are no "a man"


def test_one_query_per_distinct_triple():
    """Two wordings of A and B ("plays a guitar" / "plays the guitar") give one query by default and
    the authors' 2 x 2 near-duplicates with forms=2."""
    items = ["v0", "v1", "v2"]
    captions = [["a man plays a guitar and sings a song", "a man plays the guitar and sings the song"],
                ["a man plays a guitar", "a man plays the guitar"],
                ["a man sings a song", "a man sings the song", "a man is walking"]]
    index = CaptionIndex(items, captions)
    default = compose(index, seed=0, subjects=None)
    triples = [(q.subject, q.meta["a_key"], q.meta["b_key"]) for q in default]
    assert len(triples) == len(set(triples)) and ("a man", "play guitar", "sing song") in triples
    doubled = compose(index, seed=0, subjects=None, forms=2)
    assert sum((q.meta["a_key"], q.meta["b_key"]) == ("play guitar", "sing song") for q in doubled) == 4


def test_authors_rule_filters():
    """Worked by hand. Default: bare negatives ("singing") too, every subject. Authors' rule:
    negatives of two or more words only, the subject list stops at a person/someone/guy subject, no
    "watch" negative, 2 x 2 wordings (one each here)."""
    items = ["v0", "v1", "v2"]
    captions = [["a person is cooking food and singing", "a man is cooking food", "a man is singing",
                 "a man cooks food in a kitchen", "a person cooks food"],  # second witnesses of the cooking
                ["a person is cooking food", "a man is cooking food"],
                ["a man is cooking food and watching tv", "a man is cooking food and washing dishes",
                 "a woman is singing"]]
    default = _queries(items, captions)
    assert {(s, neg): vids for (s, _, neg), vids in default.items()} == {
        ("a man", "singing"): ["v1"], ("a person", "singing"): ["v1"],  # v2: "a woman is singing"
        ("a man", "watching tv"): ["v0", "v1"], ("a person", "watching tv"): ["v0", "v1"],
        ("a man", "washing dishes"): ["v0", "v1"], ("a person", "washing dishes"): ["v0", "v1"]}
    assert _queries(items, captions, **AUTHORS_RULE) == {("a man", "a man cooking food", "washing dishes"): ["v0", "v1"]}


def test_recording_words_are_no_subject_premodifiers():
    assert extract_pairs("a movie scene girl falling down") == []
    assert [s.text for s, _ in extract_pairs("a girl is falling down")] == ["a girl"]


# --- negator ---------------------------------------------------------------------------------------


def _all(caption: str) -> set[str]:
    return {n.text for n in negate(caption, mode="all")}


def test_negator_nouns_read_as_verbs_are_left_alone():
    assert not any("do not vine" in t or "do not king" in t for t in _all("a compilation of sports vine clips"))
    assert "one of which did not become king" in " ".join(_all("two generals one of which became king"))
    assert not any("do not king" in t for t in _all("two generals one of which became king"))
    assert not any("do not live" in t for t in _all("tom jones performing live on a television show"))
    assert not any("do not photograph" in t for t in _all("city limits photograph taken from a high point"))


def test_negator_naming_participles_and_compound_adjectives():
    out = _all("a commercial for the website called eharmony")
    assert not any("did not call" in t or "not called" in t for t in out)
    assert not any("did not color" in t for t in _all("multi colored horses in a barn"))
    out = _all("a foul mouthed chef demonstrates a recipe")
    assert "a foul mouthed chef does not demonstrate a recipe" in out and not any("not mouthed" in t for t in out)
    assert "a man does not get shot in the face" in _all("a man gets shot in the face")  # a real verb stays


def test_negator_bare_infinitive_and_agreement():
    assert not any("do not find" in t for t in _all("a service which will help people find a vehicle"))
    assert "a service which will not help people find a vehicle" in _all("a service which will help people find a vehicle")
    out = _all("i see a prince and i see peter pan")
    assert not any("i does" in t for t in out) and "i do not see a prince and i see peter pan" in out
    assert "a girl does not sing on stage" in _all("a girl sing on stage")


# --- issue 22, second round: the causes of the blind grading (hand-made inputs) --------------------


def test_every_template_clause_has_its_verb():
    """Appendix A.1 writes "Kids not doing B and they doing A" and "A kid doesn't do B while does A";
    rendered with the auxiliary ("and he is eating") and the -ing form ("while eating")."""
    from negharness.text.composer import render

    a, b = VerbPhrase("eat", ("ice", "cream")), VerbPhrase("sing", ())
    he = [render(Subject("a man", "man", False), a, b, t)[0] for t in range(6)]
    assert he[3] == "a man not singing and he is eating ice cream"
    assert he[5] == "a man is not singing and he is eating ice cream"
    they = [render(Subject("two kids", "kid", True), a, b, t)[0] for t in range(6)]
    assert they[3] == "two kids not singing and they are eating ice cream"
    kid = [render(Subject("a kid", "kid", False), a, b, t)[0] for t in range(6)]
    assert kid[1] == "a kid doesn't sing while eating ice cream"
    for text in he + they + kid:
        assert not any(f" {p} eating" in text for p in ("he", "she", "they")), text
        assert "while eats" not in text


def test_phrases_are_not_cut():
    """"to" + a noun phrase is a PP; a predicative adjective completes a bare verb; a misspelt
    complement, a "to" whose noun was read as a verb, and a name the chunk stopped inside drop the phrase."""
    assert [v.form("VBG") for _, v in extract_pairs("a man walks up to a group of women")] == [
        "walking up to a group of women"]
    assert [v.form("VBG") for _, v in extract_pairs("a cartoon is falling asleep")] == ["falling asleep"]
    assert extract_pairs("a cartoon is falling asleeping") == []
    assert extract_pairs("a man is giving volume to radio") == []
    assert extract_pairs("people dancing in times square") == []
    assert [v.form("VBG") for _, v in extract_pairs("a man is dancing in the street")] == ["dancing in the street"]


def test_particle_alone_of_a_transitive_verb_is_no_phrase():
    """"cutting up [and preparing] food": a verb the collection mostly uses with an object is no
    phrase with its particle alone; "standing up" (no object) stays."""
    captions = [["a person is cutting up and preparing food", "a man is cutting up an onion", "a man is cooking"],
                ["a man cuts up a carrot", "a man stands up"], ["a man is cooking", "a man stands up and walks"]]
    texts = [q.caption for q in compose(CaptionIndex(["v0", "v1", "v2"], captions), seed=0, subjects=None,
                                        min_bare_count=1)]  # bare verbs said once here (default: 3 times)
    assert texts and not any(t.endswith("cutting up") or "cut up and" in t or "cutting up while" in t for t in texts)
    assert any("standing up" in t or "stands up" in t for t in texts)


def test_participle_and_run_on_clause_belong_to_their_own_subject():
    """"laughing at a man dancing": the man dances; "a man is singing a group of people are
    sitting": the people sit (the run-on's "object" is the next subject, so neither pair stands)."""
    got = [(s.text, v.form("VBG")) for s, v in extract_pairs("a woman is laughing at a man dancing")]
    assert got == [("a woman", "laughing at a man")]
    assert extract_pairs("a man is singing a group of people are sitting on bikes") == []
    assert [(s.text, v.verb) for s, v in extract_pairs("a man wearing a hat is singing")] == [("a man", "sing")]


def test_b_stated_by_a_near_synonym_noun_or_misspelling_is_no_target():
    """B "singing": a video saying "performs" (even misspelt "preforms"), "the singer" or "a singing
    contest" may state it; B "talking": "explains" may. Only the silent video is a target."""
    items = ["v0", "v1", "v2", "v3", "v4"]
    captions = [["a man is playing a guitar", "a man preforms a song"],
                ["a man is playing a guitar", "the singer is on a stage"],
                ["a man is playing a guitar", "a man is on a singing contest"],
                ["a man is playing a guitar", "a man explains the chords"],
                ["a man is playing a guitar", "a man is sitting on a chair"]]
    index = CaptionIndex(items, captions)
    man = _subject(index, "a man")
    assert index.negative_items(man, VerbPhrase("sing", ())) == {0, 1, 2}
    assert index.negative_items(man, VerbPhrase("talk", ())) == {3}


def test_no_b_that_follows_from_a_or_that_the_subject_does_not_do():
    """"sings and doesn't perform" is no query (near-synonyms); a vehicle "not singing" because one
    cartoon car sang is none either (a non-person B must be said of its kind in two items)."""
    items = ["v0", "v1", "v2"]
    captions = [["a man sings a song and performs on stage", "a car is driving and singing"],
                ["a man sings a song", "a car is driving"], ["a man is walking", "a car is driving"]]
    got = _queries(items, captions)
    assert not any(neg.startswith("perform") and "sing" in pos for (_, pos, neg) in got)
    assert not any(s == "a car" and neg == "singing" for (s, _, neg) in got)


def test_rare_misspellings_are_not_copied():
    """"playing guitor" said once is no wording; "playing guitar" is."""
    items = ["v0", "v1"]
    captions = [["a man is playing guitor and singing", "a man is playing guitar and singing"],
                ["a man is playing guitar", "a man is walking"]]
    texts = [q.caption for q in compose(CaptionIndex(items, captions), seed=0, subjects=None, min_bare_count=1)]
    assert texts and not any("guitor" in t for t in texts)


def test_negator_gerunds_titles_nouns_and_agreement():
    """A gerund after a preposition or a verb is no verb ("styles of dressing", "enjoy boating"); a
    plural noun or -ing noun inside the subject is none ("a tv shows review program hosts
    discuss"); a title's "there will be" is none; present "-s" read as past keeps "does"; a base-form
    "participle" after the subject gets do-support; a negative subject is left alone; a verb's own
    "with" is not made "without"."""
    out = _all("women walking on the stage with different styles of dressing")
    assert not any("not dressing" in t for t in out) and "women not walking on the stage with different styles of dressing" in out
    assert _all("many people enjoy boating") == {"many people do not enjoy boating"}
    assert not any("does not show" in t for t in _all("a tv shows review program hosts discuss the show"))
    assert not any("not lifting" in t for t in _all("the weight lifting photo is shown"))
    assert _all("clips of the movie there will be blood") == set()
    assert "the girl does not shoot her bow" in _all("the girl shoots her bow")
    assert "two boys do not come to the stage" in _all("two boys come to the stage")
    assert _all("music is playing but nobody is dancing") == set()
    assert not any("without" in t for t in _all("the queen meeting with the people"))
    assert not any("without" in t for t in _all("a car and what comes with it"))
    assert "a man not riding a horse with a dog" in _all("a man riding a horse with a dog")


def test_reciprocal_phrases_need_a_plural_subject():
    assert not VerbPhrase("shoot", ("guns", "at", "each", "other")).fits(Subject("a man", "man", False))
    assert VerbPhrase("shoot", ("guns", "at", "each", "other")).fits(Subject("two men", "man", True))
    assert not any("does not shut" in t for t in _all("a man screams shut up a bunch of times"))


# --- issue 35: support of A, subject fit, cut phrases, entailed B --------------------------------


def test_a_resting_on_one_caption_among_many_is_no_target():
    """A generic line ("a group is dancing") on a video whose other captions show something else
    makes no target; a second caption saying it, or another caption naming the subject with the
    action ("the group dances"), does (``supported``, the one rule wherever a target is decided)."""
    from negharness.text.composer import supported

    # a near-synonym is no second witness ("a girl performs" does not back "a girl is singing")
    index = CaptionIndex(["v0"], [["a girl is singing on a balloon", "a girl performs a competition",
                                   "a girl is talking", "a girl wears a wig"]])
    assert index.positive_items(_subject(index, "a girl"), VerbPhrase("sing", ())) == set()
    noise = ["a group is dancing", "a man cooks pasta", "a chef stirs a pot", "a man is in a kitchen"]
    two = ["a group is dancing", "a group is dancing on a stage", "a man cooks pasta", "a man is in a kitchen"]
    witness = ["a group is dancing", "the group dances to music", "a man cooks pasta", "a man is in a kitchen"]
    index = CaptionIndex(["v0", "v1", "v2"], [noise, two, witness])
    group = _subject(index, "a group")
    assert index.positive_items(group, VerbPhrase("dance", ())) == {1, 2}
    assert not supported(1, 0, 20) and supported(2, 0, 20) and supported(1, 1, 20) and supported(1, 0, 1)


def test_subject_number_must_agree_with_the_videos_captions():
    """"a women" (one or several?) is no subject; a video that says "a woman" in most captions is no
    target of "women ...", though one caption says "women"."""
    assert extract_pairs("a women is dancing on a stage") == []
    index = CaptionIndex(["v0", "v1"], [
        ["women are dancing", "women are dancing on a stage", "a woman is dancing", "a woman is dancing alone",
         "a woman dances", "a woman is on a stage"],
        ["women are dancing", "women are dancing together", "two women are on a stage"]])
    women = _subject(index, "women")
    assert index.positive_items(women, VerbPhrase("dance", ())) == {1}


def test_collective_subjects_take_no_his_or_her_and_singulars_no_together():
    """"a choir ... her hair", "a cartoon ... her boyfriend", "a man ... eating together" do not fit
    their subject."""
    assert not VerbPhrase("confront", ("her", "boyfriend")).fits(Subject("a cartoon", "cartoon", False))
    choir = Subject("a choir", "choir", False)
    assert not VerbPhrase("toss", ("her", "hair")).fits(choir)
    assert VerbPhrase("sing", ("together",)).fits(choir)
    assert not VerbPhrase("eat", ("together", "in", "the", "restaurant")).fits(Subject("a man", "man", False))
    assert VerbPhrase("eat", ("together",)).fits(Subject("people", "people", True))


def test_phrases_cut_before_to_or_run_into_a_clause_are_dropped():
    """"giving volume | to radio" (B "doesn't give volume") and "hurrying over to the edge of a wall
    climbs on top" (a second clause run in) are no phrases."""
    assert not any(v.verb == "give" for _, v in extract_pairs("a man is giving volume to play music"))
    assert not any("climbs" in v.rest for _, v in extract_pairs(
        "a man is hurrying over to the edge of a wall climbs on top"))


def test_b_entailed_through_its_object_excludes_the_target():
    """B "using the phone": a video where the subject is texting shows it (phone and text are one
    action group), so it is no target; and "texting and not using the phone" is no query."""
    items = ["v0", "v1"]
    captions = [["a girl is sitting on a bed", "a girl is sitting and texting"],
                ["a girl is sitting on a bed", "a girl is sitting and using the phone"]]
    index = CaptionIndex(items, captions)
    girl = _subject(index, "a girl")
    assert index.negative_items(girl, VerbPhrase("use", ("the", "phone"))) == {0, 1}
    got = _queries(["v0", "v1", "v2"], captions + [["a girl is texting", "a girl is texting on a sofa"]])
    assert not any(pos.endswith("texting") and "phone" in neg for (_, pos, neg) in got)
    # B "providing a voiceover description": a video where the man narrates shows it
    index = CaptionIndex(["v0"], [["a man is playing a video game", "a man narrates a video game"]])
    man = _subject(index, "a man")
    assert index.negative_items(man, VerbPhrase("provide", ("a", "voiceover", "description"))) == {0}
