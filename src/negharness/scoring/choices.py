"""Scoring a `ChoiceSet`: every option against its row's medium, then accuracy with ties counted.

An embedding model is scored through the run's cached embeddings and its own `combine` (so the
boolean baseline scores s(positive) - s(negative) here too); a model that scores choices itself
(``scores_choices_itself``: a generative VLM, a text-only LM) is asked directly and no medium is
embedded. The true caption is scored against the rest and, as NegBench MCQ here, a tie at the top
counts as wrong (`mcq_choices`); where a benchmark's authors count it right, their number is kept
beside the safe one (`choice_scoring`'s ``authors_ties``).

Beside the tie rate, a property of the file: the rows whose true caption and a false one are made of
the same words (`same_words`: SugarCrepe's swap splits, 572 of its 7,511 pairs). A model blind to word
order (a bag of words) scores such a pair the same, a tie, so ``order_blind_ceiling`` = 100 -
``same_words_rate`` is the most accuracy it can reach; only reading the order can win those rows.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence, cast

import numpy as np
import torch

from negharness.contracts.choices import ChoiceSet, pad_scores
from negharness.contracts.context import EvalContext
from negharness.contracts.errors import UserError
from negharness.io.media import MediaSet
from negharness.scoring.unreadable import unreadable_items
from negharness.scoring.views import pair_scores, rows_of

if TYPE_CHECKING:
    from negharness.contracts.model import ChoiceScorer


def scores_itself(ctx: EvalContext) -> bool:
    """Whether the model scores choices itself; a sharded pass-1 context (``embeddings_only``) never asks it."""
    return bool(getattr(ctx.model, "scores_choices_itself", False)) and not getattr(ctx, "embeddings_only", False)


def _refuse_questions(ctx: EvalContext, questions: bool) -> None:
    """A model that scores captions against the medium alone cannot answer questions."""
    if questions and not scores_itself(ctx):
        raise UserError(f"model {ctx.model.name} scores captions against the medium and would ignore this task's "
                        "questions (e.g. NegVQA): use a generative model (--model hf_vlm) or a text model (text_only)")


def readable_media(ctx: EvalContext, media: MediaSet, questions: bool = False) -> tuple[torch.Tensor | None, np.ndarray]:
    """(the media's embeddings, mask of unreadable ones) before any row is scored: a row on an
    unreadable medium must leave the scoring (`negharness.scoring.unreadable`), else its NaN scores
    pick option 0, the true caption in most files. A model that scores choices itself reads the
    media itself: nothing is embedded (None) and nothing is marked. Rows with ``questions`` are
    refused for any other model before anything is embedded."""
    _refuse_questions(ctx, questions)
    if scores_itself(ctx):
        return None, np.zeros(len(media), dtype=bool)
    media_emb = ctx.embed_media(media)
    return media_emb, unreadable_items(ctx, media, media_emb)


def score_choices(ctx: EvalContext, choices: ChoiceSet, media_emb: torch.Tensor | None = None) -> torch.Tensor:
    """(rows, widest row) scores, higher = more likely true; every distinct caption and medium encoded once
    (``media_emb``: the media's embeddings where the caller already has them, to find unreadable ones)."""
    if scores_itself(ctx):
        # cast: the flag decided it (`scores_itself`); the model is a `ChoiceScorer`, or an older
        # `EmbeddingModel` flagged ``scores_choices_itself`` with its own `score_choices`: no common base
        return cast("ChoiceScorer", ctx.model).score_choices(choices, ctx.batch_size, ctx.precision)
    _refuse_questions(ctx, choices.questions is not None)
    if media_emb is None:
        media_emb = ctx.embed_media(choices.media)
    flat = [o for row in choices.options for o in row]
    return pad_scores(pair_scores(ctx, flat, media_emb[rows_of(choices.media_index, choices.options)]), choices.options)


def mcq_choices(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen option, tie) per row: a tie is a row whose top score is shared by two or more options."""
    best = scores.max(1, keepdim=True).values
    tie = (scores == best).sum(1) > 1
    return scores.argmax(1), tie


AUTHORS_TIES = ("first", "wrong")
# a word: letters or digits, with an apostrophe between two such runs kept inside it ("woman's")
WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")

SAME_WORDS_NOTE = ("same_words_rate: rows where a false option is the true one's words in another order "
                   "(lowercased, words of letters and digits, punctuation dropped): a model blind to word order ties "
                   "there, so order_blind_ceiling = 100 - same_words_rate is the most accuracy it can reach")


def words(text: str) -> Counter[str]:
    """A caption's multiset of words: lowercased, each word a run of letters or digits (any script),
    an apostrophe between two runs kept inside the word ("woman's" is one word, distinct from "woman");
    every other character (spaces, punctuation, hyphens, underscores, a trailing or leading quote)
    separates words and is dropped. The typographic apostrophe (U+2019) reads as "'"."""
    return Counter(WORD.findall(text.lower().replace("\u2019", "'")))


def same_words(options: Sequence[str], correct: int) -> bool:
    """Whether some false option is made of exactly the true one's words, counted with repeats (the
    same multiset, in another order or the same): a model blind to word order ties on this row."""
    true = words(options[correct])
    return any(words(o) == true for i, o in enumerate(options) if i != correct)


def same_words_metrics(options: Sequence[Sequence[str]], correct: Sequence[int], covered: np.ndarray
                       ) -> tuple[dict[str, float], dict[str, list[float | None]]]:
    """``same_words_rate`` (percent of covered rows where `same_words` holds) and
    ``order_blind_ceiling`` (100 minus it: the best accuracy a word-order-blind model can reach,
    a tie counting wrong), with their per-row values (None on a row not covered)."""
    same = np.array([same_words(o, c) for o, c in zip(options, correct)], dtype=bool)
    values = {"same_words_rate": [100.0 * s if c else None for s, c in zip(same, covered)],
              "order_blind_ceiling": [100.0 * (not s) if c else None for s, c in zip(same, covered)]}
    rate = float(same[covered].mean() * 100)
    return {"same_words_rate": rate, "order_blind_ceiling": 100.0 - rate}, values


@dataclass
class ChoiceOutcome:
    """What a choice task records: metrics, per-group accuracies, per-row pick and tie, and the
    per-query values whose (covered) means are the metrics (`negharness.scoring.perquery`)."""

    metrics: dict[str, float]
    per_group: dict[str, Any]
    chosen: torch.Tensor
    tie: torch.Tensor
    values: dict[str, list[float | None]] = field(default_factory=dict)
    same_words: int = 0  # scored rows whose true and a false caption are the same words (`same_words`)


def _macro(right: np.ndarray, covered: np.ndarray, groups: Sequence[str | None], min_group: int
           ) -> tuple[float | None, dict[str, Any], list[float | None]]:
    """Macro mean over groups of at least ``min_group`` covered rows, and per row its 0/100 weighted
    by n / (G * n_g) (n covered rows in kept groups, G kept groups), so that the mean of the
    per-row values is the macro mean and a paired comparison or bootstrap sees every row."""
    rows: dict[str, list[int]] = defaultdict(list)
    for r, g in enumerate(groups):
        if covered[r]:
            rows[str(g)].append(r)
    kept = {g: rs for g, rs in sorted(rows.items()) if len(rs) >= min_group}
    values: list[float | None] = [None] * len(right)
    if not kept:
        return None, {}, values
    n = sum(len(rs) for rs in kept.values())
    per_group = {g: {"accuracy": round(float(right[rs].mean() * 100), 3), "rows": len(rs)} for g, rs in kept.items()}
    for rs in kept.values():
        weight = n / (len(kept) * len(rs))
        for r in rs:
            values[r] = float(right[r]) * 100.0 * weight
    macro = float(np.mean([right[rs].mean() * 100 for rs in kept.values()]))
    return macro, per_group, values


def choice_scoring(scores: torch.Tensor, correct: Sequence[int], groups: Sequence[str | None] | None = None,
                   min_group: int = 1, scored: Sequence[bool] | None = None,
                   authors_ties: str | None = None, options: Sequence[Sequence[str]] | None = None) -> ChoiceOutcome:
    """Accuracy (percent; a tie at the top is wrong), tie rate, and with ``groups`` the macro mean of
    per-group accuracies over groups of at least ``min_group`` rows (ARO's VG-Attribution keeps
    attribute pairs with 25 or more), over the rows marked ``scored`` (a row whose false option
    equals its true one tests nothing and is left out). With ``authors_ties`` the same metrics as
    the benchmark's authors compute them, named ``<metric>_authors_rule``, over every row:
    ``first``: a first-index argmax over the options in file order (ARO's Order tasks, CC-Neg, CREPE,
    NegBench: the true caption first, so a tie with it counts right and a constant model scores
    100); ``wrong``: a strict comparison (SugarCrepe, VALSE, ARO's VG tasks). With the rows'
    ``options`` (texts), ``same_words_rate`` and ``order_blind_ceiling`` over the scored rows."""
    if authors_ties not in (None, *AUTHORS_TIES):
        raise ValueError(f"authors_ties {authors_ties!r}: expected one of {AUTHORS_TIES}")
    chosen, tie = mcq_choices(scores)
    hit = (chosen == torch.as_tensor(np.asarray(correct))).numpy()
    ties = tie.numpy()
    right = hit & ~ties
    covered = np.ones(len(right), dtype=bool) if scored is None else np.asarray(scored, dtype=bool)
    if not covered.any():
        raise UserError("no row left to score: every row's false option equals its true one")
    metrics = {"accuracy": float(right[covered].mean() * 100), "tie_rate": float(ties[covered].mean() * 100)}
    values: dict[str, list[float | None]] = {
        "accuracy": [float(x) * 100.0 if c else None for x, c in zip(right, covered)],
        "tie_rate": [float(x) * 100.0 if c else None for x, c in zip(ties, covered)]}
    same = 0
    if options is not None:
        extra, extra_values = same_words_metrics(options, correct, covered)
        metrics.update(extra)
        values.update(extra_values)
        same = int(sum(v == 100.0 for v in extra_values["same_words_rate"]))
    per_group: dict[str, Any] = {}
    authors = None if authors_ties is None else (hit if authors_ties == "first" else right)
    if authors is not None:
        metrics["accuracy_authors_rule"] = float(authors.mean() * 100)
        values["accuracy_authors_rule"] = [float(x) * 100.0 for x in authors]
    if groups is not None:
        macro, per_group, values["macro_accuracy"] = _macro(right, covered, groups, min_group)
        if macro is not None:
            metrics["macro_accuracy"] = macro
        else:
            del values["macro_accuracy"]
        if authors is not None:
            macro, _, authors_values = _macro(authors, np.ones(len(right), dtype=bool), groups, min_group)
            if macro is not None:
                metrics["macro_accuracy_authors_rule"] = macro
                values["macro_accuracy_authors_rule"] = authors_values
    return ChoiceOutcome(metrics, per_group, chosen, tie, values, same)

