"""negharness.api.scoring: The scorers and metrics a task calls: retrieval, choices, MCQ, per-query values.

A facade over the host modules that define these names (resolved on first use, so importing it
loads no torch); plugins import them from here, never from those modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from negharness.api.exports import resolver

_EXPORTS: dict[str, str] = {
    "ChoiceSet": "negharness.api.choices",
    "pad_scores": "negharness.api.choices",
    "score_choices": "negharness.scoring.choices",
    "evaluate_mcq": "negharness.scoring.mcq",
    "MCQ_METRICS": "negharness.scoring.catalog",
    "evaluate_text_to_media": "negharness.scoring.retrieval",
    "evaluate_negated": "negharness.scoring.retrieval",
    "QuerySet": "negharness.scoring.retrieval",
    "similarities": "negharness.scoring.retrieval",
    "query_scores": "negharness.scoring.views",
    "pair_scores": "negharness.scoring.views",
    "drop_unreadable": "negharness.scoring.retrieval",
    "task_qrels": "negharness.scoring.retrieval",
    "TEXT_TO_MEDIA_METRICS": "negharness.scoring.catalog",
    "RETRIEVAL_NEG_METRICS": "negharness.scoring.catalog",
    "NEGATED_METRICS": "negharness.scoring.catalog",
    "QRELS_OPTION": "negharness.scoring.catalog",
    "Relevance": "negharness.scoring.metrics",
    "best_relevant_rank": "negharness.scoring.metrics",
    "retrieval_metrics": "negharness.scoring.metrics",
    "per_query": "negharness.scoring.perquery",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = resolver(__name__, _EXPORTS)

if TYPE_CHECKING:  # what type checkers and IDEs read; the same names as _EXPORTS
    from negharness.api.choices import ChoiceSet, pad_scores
    from negharness.scoring.choices import score_choices
    from negharness.scoring.catalog import (
        MCQ_METRICS,
        NEGATED_METRICS,
        QRELS_OPTION,
        RETRIEVAL_NEG_METRICS,
        TEXT_TO_MEDIA_METRICS,
    )
    from negharness.scoring.mcq import evaluate_mcq
    from negharness.scoring.metrics import Relevance, best_relevant_rank, retrieval_metrics
    from negharness.scoring.perquery import per_query
    from negharness.scoring.retrieval import (
        QuerySet,
        drop_unreadable,
        evaluate_negated,
        evaluate_text_to_media,
        similarities,
        task_qrels,
    )
    from negharness.scoring.views import pair_scores, query_scores
