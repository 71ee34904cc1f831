"""Rows no word-order-blind model can win: the true caption and a false one made of the same words
(`negharness.scoring.choices.same_words`), counted beside the tie rate with the ceiling they imply,
by hand on small examples and on SugarCrepe's published files (572 of 7,511 pairs)."""

from __future__ import annotations

import json
import re
from collections import Counter

import numpy as np
import pytest
import torch
from conftest import SHARED

from negharness.declarative.spec import parse_spec
from negharness.scoring import catalog
from negharness.scoring.choices import choice_scoring, same_words, words
from negharness.scoring.mcq import MCQ_METRICS, mcq_metrics

SUGARCREPE = SHARED / "data" / "sugarcrepe"
SPLITS = ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")


@pytest.mark.parametrize("true, false, same", [
    ("a red car and a blue house", "a blue car and a red house", True),  # swapped attributes
    ("A Dog, and a cat.", "a cat and a dog", True),  # case and punctuation do not count
    ("a well-known man", "a known well man", True),  # a hyphen separates words
    ("a dog and a cat", "a dog and cat", False),  # a multiset: "a" twice is not "a" once
    ("A boy holding an umbrella over a woman's head.", "A woman holding an umbrella over a boy's head.", False),
    ("the woman\u2019s hat", "the woman's hat", True),  # the typographic apostrophe reads as '
    ("a cat on a mat", "a cat under a mat", False),
])
def test_same_words_by_hand(true, false, same):
    assert same_words([true, false], 0) is same
    assert same_words([false, true], 1) is same


def test_words_keep_an_apostrophe_inside_a_word_and_drop_other_punctuation():
    assert words("A boy's \"red\" car, (new)!") == Counter({"a": 1, "boy's": 1, "red": 1, "car": 1, "new": 1})
    assert words("rock 'n' roll_x") == Counter({"rock": 1, "n": 1, "roll": 1, "x": 1})


def test_any_false_option_with_the_true_words_counts_and_only_against_the_true_one():
    assert same_words(["x y", "z", "y x"], 0)
    assert not same_words(["x y", "z", "y x"], 1)  # the two others share words, but not with the answer


def test_choice_scoring_reports_the_rate_and_the_ceiling_over_scored_rows():
    options = [["red car blue house", "blue car red house"],  # same words
               ["a dog", "a cat"],
               ["a dog", "a dog"],  # identical: not scored (left out of every safe metric)
               ["x y z", "z y x"]]  # same words
    scores = torch.tensor([[0.5, 0.4], [0.3, 0.6], [0.2, 0.2], [0.1, 0.1]])
    out = choice_scoring(scores, [0, 0, 0, 0], scored=[True, True, False, True], options=options)
    assert out.metrics["same_words_rate"] == pytest.approx(200 / 3)
    assert out.metrics["order_blind_ceiling"] == pytest.approx(100 / 3)
    assert out.same_words == 2
    assert out.values["same_words_rate"] == [100.0, 0.0, None, 100.0]
    assert out.values["order_blind_ceiling"] == [0.0, 100.0, None, 0.0]
    assert "same_words_rate" not in choice_scoring(scores, [0, 0, 0, 0]).metrics  # no texts, no count


def test_the_catalogue_names_them_beside_tie_rate_for_both_choice_protocols():
    assert catalog.with_companions(["accuracy", "tie_rate"]) == ["accuracy", "tie_rate", "same_words_rate",
                                                                  "order_blind_ceiling"]
    assert catalog.with_companions(["accuracy"]) == ["accuracy"]
    assert {"same_words_rate", "order_blind_ceiling"} <= set(MCQ_METRICS)
    spec = {"name": "t", "kind": "choice", "family": "f", "description": "d", "citation": "c", "data_help": "h",
            "data": {"file": "t.json"}, "media": {"path": "{filename}"},
            "captions": {"true": "caption", "false": "negative"}, "metrics": ["accuracy", "tie_rate"],
            "main_score": "accuracy"}
    assert list(parse_spec(spec, "t.yaml")["metric_info"]) == ["accuracy", "tie_rate", "same_words_rate",
                                                                "order_blind_ceiling"]
    assert list(parse_spec({**spec, "metrics": ["accuracy"]}, "t.yaml")["metric_info"]) == ["accuracy"]


def test_mcq_metrics_stay_the_scorers_own():
    """mcq_metrics itself is unchanged: the same-words pair comes from evaluate_mcq, which has the texts."""
    m = mcq_metrics(torch.tensor([0]), torch.tensor([False]), [0], ["positive"], [["positive", "negative"]])
    assert "same_words_rate" not in m


def _independent_count(caption: str, negative: str) -> bool:
    """The rule re-implemented without the harness's regex: lowercase, cut at every character that is
    neither a letter, a digit nor an apostrophe, then split an apostrophe that is not between two word
    characters off as a separator."""
    def bag(text: str) -> Counter:
        out: Counter = Counter()
        for chunk in re.split(r"[^0-9a-z']+", text.lower()):
            for w in re.split(r"(?<![0-9a-z])'|'(?![0-9a-z])", chunk):
                if w:
                    out[w] += 1
        return out
    return bag(caption) == bag(negative)


@pytest.mark.needs("data/sugarcrepe/swap_obj.json")
def test_sugarcrepe_has_572_same_word_pairs_of_7511():
    per_split, total = {}, 0
    for split in SPLITS:
        data = json.loads((SUGARCREPE / f"{split}.json").read_text(encoding="utf-8"))
        total += len(data)
        mine = [same_words([d["caption"], d["negative_caption"]], 0) for d in data.values()]
        assert mine == [_independent_count(d["caption"], d["negative_caption"]) for d in data.values()], split
        per_split[split] = int(np.sum(mine))
    assert total == 7511
    assert per_split == {"add_att": 0, "add_obj": 0, "replace_att": 0, "replace_obj": 0, "replace_rel": 0,
                         "swap_att": 408, "swap_obj": 164}
    assert sum(per_split.values()) == 572
