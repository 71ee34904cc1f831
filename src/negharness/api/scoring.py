"""negharness.api.scoring: The scorers and metrics a task calls: retrieval, choices, MCQ, per-query values.

A facade over the host modules that define these names; plugins import them from here, never from
those modules. Each name is imported on first use (importing the facade loads no torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = [
    "ChoiceSet", "JUDGED_METRICS", "JudgedQuery", "MCQ_METRICS", "NEGATED_METRICS", "QRELS_OPTION",
    "QuerySet", "RETRIEVAL_NEG_METRICS", "Relevance", "TEXT_TO_MEDIA_METRICS", "best_relevant_rank",
    "drop_unreadable", "evaluate_judged", "evaluate_mcq", "evaluate_negated", "evaluate_text_to_media",
    "judge_prompt", "pad_scores",
    "pair_scores", "per_query", "query_scores", "retrieval_metrics", "score_choices",
    "similarities", "task_qrels",
]

if TYPE_CHECKING:  # what type checkers read, as plain imports; at run time each name is imported on
    # first use (`_HOMES` below says where, kept equal to this block by a test), so a task module that imports this
    # facade at its top loads no torch until its task runs; a renamed name is an error here, not Any
    from negharness.contracts.choices import (
        ChoiceSet as ChoiceSet,
        pad_scores as pad_scores,
    )
    from negharness.scoring.catalog import (
        JUDGED_METRICS as JUDGED_METRICS,
        MCQ_METRICS as MCQ_METRICS,
        NEGATED_METRICS as NEGATED_METRICS,
        QRELS_OPTION as QRELS_OPTION,
        RETRIEVAL_NEG_METRICS as RETRIEVAL_NEG_METRICS,
        TEXT_TO_MEDIA_METRICS as TEXT_TO_MEDIA_METRICS,
    )
    from negharness.scoring.choices import score_choices as score_choices
    from negharness.scoring.judged import (
        JudgedQuery as JudgedQuery,
        evaluate_judged as evaluate_judged,
        prompt as judge_prompt,
    )
    from negharness.scoring.mcq import evaluate_mcq as evaluate_mcq
    from negharness.scoring.metrics import (
        Relevance as Relevance,
        best_relevant_rank as best_relevant_rank,
        retrieval_metrics as retrieval_metrics,
    )
    from negharness.scoring.perquery import per_query as per_query
    from negharness.scoring.retrieval import (
        QuerySet as QuerySet,
        drop_unreadable as drop_unreadable,
        evaluate_negated as evaluate_negated,
        evaluate_text_to_media as evaluate_text_to_media,
        similarities as similarities,
        task_qrels as task_qrels,
    )
    from negharness.scoring.views import (
        pair_scores as pair_scores,
        query_scores as query_scores,
    )
else:
    from negharness.api.exports import on_first_use

    # where each name lives: the table read at run time; a test keeps it equal to the imports above
    _HOMES: dict[str, tuple[str, str]] = {
    "ChoiceSet": ("negharness.contracts.choices", "ChoiceSet"),
    "JUDGED_METRICS": ("negharness.scoring.catalog", "JUDGED_METRICS"),
    "JudgedQuery": ("negharness.scoring.judged", "JudgedQuery"),
    "MCQ_METRICS": ("negharness.scoring.catalog", "MCQ_METRICS"),
    "NEGATED_METRICS": ("negharness.scoring.catalog", "NEGATED_METRICS"),
    "QRELS_OPTION": ("negharness.scoring.catalog", "QRELS_OPTION"),
    "QuerySet": ("negharness.scoring.retrieval", "QuerySet"),
    "RETRIEVAL_NEG_METRICS": ("negharness.scoring.catalog", "RETRIEVAL_NEG_METRICS"),
    "Relevance": ("negharness.scoring.metrics", "Relevance"),
    "TEXT_TO_MEDIA_METRICS": ("negharness.scoring.catalog", "TEXT_TO_MEDIA_METRICS"),
    "best_relevant_rank": ("negharness.scoring.metrics", "best_relevant_rank"),
    "drop_unreadable": ("negharness.scoring.retrieval", "drop_unreadable"),
    "evaluate_judged": ("negharness.scoring.judged", "evaluate_judged"),
    "evaluate_mcq": ("negharness.scoring.mcq", "evaluate_mcq"),
    "evaluate_negated": ("negharness.scoring.retrieval", "evaluate_negated"),
    "evaluate_text_to_media": ("negharness.scoring.retrieval", "evaluate_text_to_media"),
    "judge_prompt": ("negharness.scoring.judged", "prompt"),
    "pad_scores": ("negharness.contracts.choices", "pad_scores"),
    "pair_scores": ("negharness.scoring.views", "pair_scores"),
    "per_query": ("negharness.scoring.perquery", "per_query"),
    "query_scores": ("negharness.scoring.views", "query_scores"),
    "retrieval_metrics": ("negharness.scoring.metrics", "retrieval_metrics"),
    "score_choices": ("negharness.scoring.choices", "score_choices"),
    "similarities": ("negharness.scoring.retrieval", "similarities"),
    "task_qrels": ("negharness.scoring.retrieval", "task_qrels"),
    }
    __getattr__ = on_first_use(__name__, _HOMES)  # a renamed 0.x name (`RENAMED`) warns, naming its new spelling

    def __dir__() -> list[str]:  # the names not yet used are listed too
        return sorted(set(globals()) | set(__all__))
