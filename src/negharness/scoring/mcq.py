"""Multiple-choice scoring shared by NegBench's MCQ-Neg and the embedded world's MCQ.

Scores come from the model (`EmbeddingModel.score_choices`): for embedding models, media and
options are L2-normalised (NegBench's first release forgot this and its numbers halved),
scored by cosine, and the best option picked. Ties count as wrong: most files put the correct
answer first, so a first-index argmax would reward a model that scores every option the same.
That argmax is NegBench's own scoring: its number is kept beside as ``accuracy_authors_rule``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence, TypeVar

import numpy as np
import torch

from negharness.contracts.choices import ChoiceSet
from negharness.contracts.context import EvalContext
from negharness.contracts.task import TaskResult
from negharness.io.media import MediaSet
from negharness.scoring import perquery
from negharness.scoring.catalog import MCQ_METRICS, TEMPLATES  # noqa: F401 (MCQ_METRICS: defined without torch)
from negharness.scoring.choices import (
    SAME_WORDS_NOTE,
    mcq_choices,
    readable_media,
    same_words_metrics,
    score_choices,
)
from negharness.scoring.unreadable import nothing_left, skip_notes

T = TypeVar("T")

AUTHORS_NOTE = ("accuracy_authors_rule: NegBench's scoring, a first-index argmax over the options in file order, "
                "so a tie goes to the first option (most often the correct one: a model scoring every option the "
                "same gets near 100); accuracy counts a tie wrong and is the main score")


def mcq_metrics(chosen: torch.Tensor, tie: torch.Tensor, correct: Sequence[int], templates: Sequence[str],
                option_templates: Sequence[Sequence[str]]) -> dict[str, float]:
    """Accuracy overall and per template of the correct answer (percent), how often each template
    type was chosen (NegBench appendix B.1), and the tie rate. Ties are wrong and choose nothing.
    ``accuracy_authors_rule``: NegBench's first-index argmax, a tie going to the first option."""
    correct_t = torch.as_tensor(np.asarray(correct))
    hit = chosen == correct_t
    right = hit & ~tie
    out = {"accuracy": float(right.double().mean() * 100), "tie_rate": float(tie.double().mean() * 100),
           "accuracy_authors_rule": float(hit.double().mean() * 100)}
    tmpl = np.asarray(templates)
    for t in TEMPLATES:
        mask = torch.from_numpy(tmpl == t)
        out[f"acc_{t}"] = float(right[mask].double().mean() * 100) if mask.any() else float("nan")
        out[f"acc_{t}_authors_rule"] = float(hit[mask].double().mean() * 100) if mask.any() else float("nan")
    picked = Counter(option_templates[i][int(c)] for i, (c, t) in enumerate(zip(chosen, tie)) if not t)
    for t in TEMPLATES:
        out[f"chose_{t}"] = picked.get(t, 0) / len(chosen) * 100
    return {k: v for k, v in out.items() if v == v}  # drop NaN (a template absent from the file)


def mcq_values(chosen: torch.Tensor, tie: torch.Tensor, correct: Sequence[int], templates: Sequence[str],
               option_templates: Sequence[Sequence[str]]) -> dict[str, list[Any]]:
    """Per question, the terms `mcq_metrics` averages: 0/100 per question; acc_<t> covers only the
    questions whose correct answer has template t (None elsewhere)."""
    hit = (chosen == torch.as_tensor(np.asarray(correct))).numpy()
    right = (hit & ~tie.numpy()) * 100.0
    ties = tie.numpy()
    out: dict[str, list[Any]] = {"accuracy": right.tolist(), "tie_rate": (ties * 100.0).tolist(),
                            "accuracy_authors_rule": (hit * 100.0).tolist()}
    for t in TEMPLATES:
        if t in templates:
            out[f"acc_{t}"] = [float(r) if q == t else None for r, q in zip(right, templates)]
            out[f"acc_{t}_authors_rule"] = [100.0 * h if q == t else None for h, q in zip(hit, templates)]
        out[f"chose_{t}"] = [0.0 if bool(x) else 100.0 * (option_templates[i][int(c)] == t)
                             for i, (c, x) in enumerate(zip(chosen, ties))]
    return out


def _rows(xs: Sequence[T], rows: list[int]) -> list[T]:
    return [xs[r] for r in rows]


def evaluate_mcq(ctx: EvalContext, media: MediaSet, media_index: Sequence[int], options: Sequence[Sequence[str]],
                 correct: Sequence[int], templates: Sequence[str],
                 option_templates: Sequence[Sequence[str]]) -> TaskResult:
    """``media_index[r]`` is row r's position in ``media``; every distinct caption is encoded once.
    Questions cluster by their medium (the task declares ``cluster = "image"`` or ``"video"``).
    A question whose media could not be decoded is left out (`negharness.scoring.unreadable`)."""
    media_emb, bad = readable_media(ctx, media)
    asked = [r for r, m in enumerate(media_index) if not bad[m]]
    dropped = len(media_index) - len(asked)
    if not asked:
        raise nothing_left(media, "question")
    if dropped:
        media_index, options, correct = _rows(media_index, asked), _rows(options, asked), _rows(correct, asked)
        templates, option_templates = _rows(templates, asked), _rows(option_templates, asked)
    flat = [o for row in options for o in row]
    scores = score_choices(ctx, ChoiceSet(media, media_index, options, correct), media_emb)
    chosen, tie = mcq_choices(scores)
    metrics = mcq_metrics(chosen, tie, correct, templates, option_templates)
    values = mcq_values(chosen, tie, correct, templates, option_templates)
    same_metrics, same_values = same_words_metrics(options, correct, np.ones(len(options), dtype=bool))
    metrics.update(same_metrics)
    values.update(same_values)
    samples = None
    if ctx.log_samples:  # "row": the question's position in the task's order, skipped ones included
        samples = [{"row": asked[r], "media": media.ids[media_index[r]], "correct": int(correct[r]), "chosen": int(chosen[r]),
                    "tie": bool(tie[r]), "scores": [round(float(x), 5) for x in scores[r]]} for r in range(len(options))]
    return TaskResult(metrics, {"questions": len(options), f"{media.kind}s": len(media) - int(bad.sum()),
                                "distinct_captions": len(set(flat))}, samples,
                      {"ties": "a row whose best score is shared by several options counts as wrong",
                       "same_words": {"rows": int(sum(v == 100.0 for v in same_values["same_words_rate"])),
                                      "reason": SAME_WORDS_NOTE},
                       "authors_rule": AUTHORS_NOTE, **skip_notes(bad, dropped, "questions")},
                      perquery.per_query([f"{r}:{media.ids[media_index[r]]}" for r in range(len(options))], values,
                                         [media.ids[m] for m in media_index]))
