"""The composer's and negator's defect classes (issue 15, items 1 and 2), on real MSR-VTT captions.

Each test takes captions of the MSR-VTT 1k-A test videos from ../shared (NegBench's CSV, 20 captions
per video), checks the defect a careful reader found is gone and that a correct neighbouring case
still comes out.
"""

from __future__ import annotations

import ast
import csv
import re
from functools import lru_cache
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared"
MSRVTT = SHARED / "data" / "negbench" / "negbench_eval_csvs" / "videos" / "msr_vtt_retrieval.csv"


def _nltk_ready() -> bool:
    import nltk

    if (SHARED / "nltk_data").is_dir() and str(SHARED / "nltk_data") not in nltk.data.path:
        nltk.data.path.append(str(SHARED / "nltk_data"))
    try:
        nltk.data.find("taggers/averaged_perceptron_tagger_eng/")
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        return False
    return True


pytestmark = [
    pytest.mark.skipif(not MSRVTT.is_file(), reason=f"real MSR-VTT captions absent ({MSRVTT})"),
    pytest.mark.skipif(not _nltk_ready(), reason="NLTK tagger data absent (set NLTK_DATA)"),
]


@lru_cache(maxsize=1)
def _videos() -> dict[str, list[str]]:
    with open(MSRVTT, newline="", encoding="utf-8") as f:
        return {row["image_id"]: ast.literal_eval(row["all_captions"]) for row in csv.DictReader(f)}


def real(video: str, caption: str) -> str:
    """A caption as the data has it (fails loudly if the data changed, so no test runs on made-up text)."""
    assert caption in _videos()[video], f"{caption!r} is not a caption of {video}"
    return caption


def pairs(video: str, caption: str) -> list[tuple[str, str]]:
    from negharness.text.composer import extract_pairs

    return [(s.text, v.form("VB")) for s, v in extract_pairs(real(video, caption))]


def negations(video: str, caption: str) -> set[str]:
    from negharness.text.negator import negate

    return {n.text for n in negate(real(video, caption), mode="all")}


# --- composer -------------------------------------------------------------------------------------


def test_composer_noun_phrase_not_cut():
    """"wearing purple dress start", "make of bound magazines", "packing cotton into some sort of purple"."""
    assert pairs("video8789", "a girl wearing purple dress start reading the news in the news channel") == [
        ("a girl", "read the news in the news channel")]
    got = pairs("video7349", "two men are sitting on chairs made of bound magazines talking with each other")
    assert ("two men", "sit on chairs") in got and not any("magazines" in vp for _, vp in got)
    assert pairs("video8774", "hands pack cotton into some sort of purple and yellow toy and put an orange piece "
                              "and red piece on top to hold in the cotton") == []
    assert pairs("video8774", "a man stuffing cotton into a toy") == [("a man", "stuff cotton into a toy")]


def test_composer_subject_is_the_agent():
    """"a video scores in a soccer game", "a type doesn't show": the recording or a kind is no subject."""
    assert pairs("video8308", "a clip taken during a baseball game") == []
    got = pairs("video9657", "a type of small mammal with a long tail is crawling around the top of a cage "
                             "and takes a treat from someone")
    assert {s for s, _ in got} == {"small mammal"}  # the inner noun phrase acts
    assert ("small mammal", "crawl around the top of a cage") in got


def test_composer_passive_is_not_read_as_active():
    """"not interrogating by a police officer", "they don't take during a baseball game"."""
    assert pairs("video8808", "a man is being interrogated by a police officer") == []
    assert pairs("video8308", "a clip taken during a baseball game") == []
    assert pairs("video8808", "police interrogating a person in jail") == [("police", "interrogate a person in jail")]


def test_composer_verb_keeps_its_complement():
    """"they don't need", "doesn't seem": light verbs give no phrase; a bare intransitive verb does."""
    assert pairs("video7233", "two men seem to be alone in this building together") == []
    assert pairs("video9969", "the two women seemed to be gossipping about celebrities") == []
    assert pairs("video9838", "cartoon characters are dancing") == [("cartoon characters", "dance")]


def test_composed_queries_on_real_videos_have_none_of_the_defects():
    from negharness.text.composer import compose_captions
    from negharness.text.phrases import NOT_AGENTS

    videos = dict(list(_videos().items())[:120])
    queries = compose_captions(list(videos), list(videos.values()), seed=0)
    assert len(queries) > 50
    bad = re.compile(r"\b(seems?|seeming|needs?|needing)\b( and| while|$)|\b(not|n't) \w+ing by\b|\bbeing not\b")
    for q in queries:
        assert not bad.search(q.caption), q.caption
        assert q.subject.split()[-1] not in NOT_AGENTS, q.caption
        assert q.video_ids and set(q.video_ids) <= set(videos)
    assert compose_captions(list(videos), list(videos.values()), seed=0) == queries  # seeded


# --- negator --------------------------------------------------------------------------------------


def test_negator_no_not_after_being():
    out = negations("video7376", "broth is being added to a soup pot and stirred with a rubber spatula")
    assert not any("being not" in t for t in out)
    assert "broth isn't being added to a soup pot and stirred with a rubber spatula" in out


def test_negator_no_not_after_get():
    out = negations("video7436", "a man gets shot in the face")
    assert out == {"a man does not get shot in the face"}


def test_negator_leaves_premodifiers_alone():
    out = negations("video9324", "animated video showing a bottle rolling across an empty hallway")
    assert not any(t.startswith("not animated") for t in out)
    assert "animated video not showing a bottle rolling across an empty hallway" in out
    assert negations("video9030", "animated pirates sing on a ship") == {"animated pirates do not sing on a ship"}


def test_negator_finite_base_form_gets_do_support():
    out = negations("video7207", "young men discuss and demonstrate a video game")
    assert "young men discuss and do not demonstrate a video game" in out
    assert not any("and not demonstrate" in t for t in out)
    # an infinitive after "to" still takes a bare "not"
    assert "there is a guy filling a toy with cotton to not play with it" in negations(
        "video8774", "there is a guy filling a toy with cotton to play with it")
