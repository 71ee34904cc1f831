"""NegBench tasks (Alhamoud et al., CVPR 2025): MCQ-Neg and Retrieval-Neg over the published CSVs.

CSVs under ``<data root>/negbench/``; media mapped by the one rule of `negbench_data`. Every media
file a task needs is checked before a model loads; a missing one is reported with the count and
the first paths. Videos: 4 frames at the centres of 4 equal segments by default, as NegBench.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

# the facades' torch-bound names (media sets, scorers) are used as media_api.X, scoring.X: resolved when a
# task runs, so building a task and listing its files (the check before torch loads) imports no torch
from negharness.api import EvalContext, MissingDataError, Task, TaskOptions, TaskResult, scoring
from negharness.api import media as media_api
from negharness.api.media import FrameSampling
from negharness.api.published import collection_digest, published_notes
from negharness.api.scoring import MCQ_METRICS, RETRIEVAL_NEG_METRICS, per_query
from negharness.tasks.negbench import PUBLISHED

from .catalog import BINARY, MCQ, RETRIEVAL
from .data import McqRow, find_csv, read_mcq, read_retrieval

if TYPE_CHECKING:
    import torch

    from negharness.api.media import MediaSet

# a caption file's queries as scored: their keys, each one's rank of its positive, each one's medium (its cluster)
Scored = tuple[list[str], "torch.Tensor", list[str]]
Ranked = Union[Scored, tuple[list[str], "torch.Tensor"]]  # without the media: no clusters
CaptionRows = list[tuple[Path, list[str]]]  # (medium, its captions) per row of a caption file

DEFAULT_SAMPLING = FrameSampling("segments", 4)
CITATION = "Alhamoud et al., Vision-Language Models Do Not Understand Negation, CVPR 2025"
WHERE = ("NegBench CSVs: the Google Drive folder linked from github.com/m1k2zoo/negbench (datasets.md), into "
         "{root}/negbench/. Media: COCO val2017 -> {root}/coco/val2017/, VOC2007 JPEGImages -> "
         "{root}/voc2007/JPEGImages/, MSR-VTT videos -> {root}/msrvtt/videos/, HardNeg-Syn -> {root}/hardneg_syn/, "
         "CheXpert (train|valid) -> {root}/chexpert/.")


def media_ids(root: Path, paths: list[Path]) -> list[str]:
    """Each medium's id: its path under the data root, so tasks over the same files share the cache."""
    return [p.relative_to(root).as_posix() if p.is_relative_to(root) else str(p) for p in paths]


def media_set(ctx: EvalContext, root: Path, paths: list[Path], kind: str) -> MediaSet:
    """Media identified by their path under the data root (`media_ids`)."""
    ids = media_ids(root, paths)
    if kind == "image":
        return media_api.image_files("negbench/images", ids, paths)
    sampling = ctx.frame_sampling(DEFAULT_SAMPLING)
    return media_api.video_files(f"negbench/videos/{sampling.key}", ids, paths, sampling)


class _NegBenchTask(Task[EvalContext]):
    family = "negbench"
    version = "1"
    citation = CITATION

    def __init__(self, options: TaskOptions) -> None:
        super().__init__(options)
        self.root = options.data_root

    @property
    def data_help(self) -> str:  # type: ignore[override]
        return WHERE.format(root=self.root)

    def _media_paths(self) -> list[Path]:
        raise NotImplementedError

    def _csvs(self) -> list[Path]:
        raise NotImplementedError

    def required_files(self) -> list[Path]:
        csvs = self._csvs()
        if not all(p.is_file() for p in csvs):
            return csvs
        return csvs + sorted(set(self._media_paths()))


class NegBenchMCQ(_NegBenchTask):
    main_score = "accuracy"
    metric_info = MCQ_METRICS
    leaderboard_metrics = ("accuracy", "accuracy_authors_rule", "acc_positive", "acc_negative", "acc_hybrid")
    csv_name, kind, layout, binary = "", "image", None, False

    def _csvs(self) -> list[Path]:
        return [find_csv(self.root, self.csv_name)]

    @cached_property
    def _parsed(self) -> list[McqRow]:
        rows = read_mcq(self._csvs()[0], self.root, self.layout, self.binary)
        return rows[: self.options.limit] if self.options.limit else rows

    def _rows(self) -> list[McqRow]:
        return self._parsed

    def _media_paths(self) -> list[Path]:
        return [r.media for r in self._rows()]

    def required_files(self) -> list[Path]:
        """As for every NegBench task, but a missing image is named with the CSV row that asks for it."""
        needed = super().required_files()
        if not all(p.is_file() for p in self._csvs()):
            return needed
        lacking = [r for r in self._rows() if not r.media.exists()]  # a FIFO exists: refused by name later
        if lacking:
            raise MissingDataError(f"{lacking[0].where}: {self.kind} {lacking[0].media} not found"
                                   + (f" ({len(lacking)} rows of {len(self._rows())} lack their {self.kind})"
                                      if len(lacking) > 1 else "") + f"\n{self.data_help}")
        return needed

    def evaluate(self, ctx: EvalContext) -> TaskResult:
        rows = self._rows()
        paths = list(dict.fromkeys(r.media for r in rows))
        where = {p: i for i, p in enumerate(paths)}
        result = scoring.evaluate_mcq(ctx, media_set(ctx, self.root, paths, self.kind), [where[r.media] for r in rows],
                              [r.options for r in rows], [r.correct for r in rows], [r.template for r in rows],
                              [r.option_templates for r in rows])
        if self.binary:
            result.notes["templates"] = ("the binary files carry no template column (the authors' loader reads "
                                         "caption_0, caption_1, correct_answer): acc_* use templates from the words")
        result.notes.update(published_notes(self.name, ctx.model, result.metrics, PUBLISHED, result.n_items,
                                            mcq_digest(rows)))
        return result


class NegBenchRetrieval(_NegBenchTask):
    """Text-to-media R@1/5/10 on the original and on the negated captions, side by side with the drop.
    Each caption's one positive is its own row's media, matched by path, not by loader order."""

    main_score = "R-Neg@5"  # the paper's R-Neg@5 (nT2VR's neg_R@K is another metric, lower is better)
    metric_info = RETRIEVAL_NEG_METRICS
    leaderboard_metrics = ("R@5", "R-Neg@5", "drop_R@5")
    original_csv, negated_csv, kind = "", "", "image"

    def _csvs(self) -> list[Path]:
        return [find_csv(self.root, self.original_csv), find_csv(self.root, self.negated_csv)]

    @cached_property
    def _parsed(self) -> tuple[list[CaptionRows], list[str]]:
        """(the original and the negated caption file's rows, the empty captions skipped)."""
        skipped: list[str] = []
        sets = [read_retrieval(p, self.root, skipped) for p in self._csvs()]
        return ([s[: self.options.limit] for s in sets] if self.options.limit else sets), skipped

    def _sets(self) -> list[CaptionRows]:
        return self._parsed[0]

    def _media_paths(self) -> list[Path]:
        return [m for s in self._sets() for m, _ in s]

    def query_count(self) -> int | None:
        """The queries of the per-query values (`query_ids`: a caption and its negated rewrite are one when
        the files pair them, else each file's captions are listed), from the CSVs alone."""
        original, negated = (caption_keys(self.root, rows) for rows in self._sets())
        return len(query_ids(original, negated)[0])

    def _score(self, ctx: EvalContext, rows: CaptionRows, embedded: dict[tuple[Path, ...], torch.Tensor]
               ) -> tuple[dict[str, float], int, int, dict[str, Any], Scored]:
        """R@K of one caption file, the number of captions and media, notes, and per caption (its key,
        its rank). An unreadable image leaves the candidates and its captions the scoring
        (`negharness.scoring.unreadable`), so a NaN similarity never counts as a hit; scores come from the
        model (`similarity`), as in every retrieval task. ``embedded``: media embeddings by path list,
        shared by the two caption files of one media set (with --no-cache they were encoded twice)."""
        paths = list(dict.fromkeys(m for m, _ in rows))
        where = {p: i for i, p in enumerate(paths)}
        media = media_set(ctx, self.root, paths, self.kind)
        if tuple(paths) not in embedded:
            embedded[tuple(paths)] = ctx.embed_media(media)
        texts = [c for _, caps in rows for c in caps]
        keys = caption_keys(self.root, rows)
        relevance = scoring.Relevance.from_lists([[where[m]] for m, caps in rows for _ in caps], len(paths))
        cluster_of = dict(zip(keys, (media.ids[where[m]] for m, caps in rows for _ in caps)))  # its medium
        queries = scoring.QuerySet(keys, texts, relevance)
        media, media_emb, queries, notes, _ = scoring.drop_unreadable(ctx, media, embedded[tuple(paths)], queries)
        ranks = scoring.best_relevant_rank(scoring.similarities(ctx, queries, media_emb), queries.relevance)
        m = scoring.retrieval_metrics(ranks)
        return {k: m[k] for k in ("R@1", "R@5", "R@10")}, len(queries.texts), len(media), notes, \
            (queries.ids, ranks, [cluster_of[k] for k in queries.ids])

    def evaluate(self, ctx: EvalContext) -> TaskResult:
        (original, negated), skipped = self._parsed
        embedded: dict[tuple[Path, ...], torch.Tensor] = {}
        orig, n_orig, m_orig, orig_notes, orig_q = self._score(ctx, original, embedded)
        neg, n_neg, m_neg, neg_notes, neg_q = self._score(ctx, negated, embedded)
        metrics = {**orig, **{negated_name(k): v for k, v in neg.items()},
                   **{f"drop_{k}": orig[k] - neg[k] for k in orig}}
        notes: dict[str, Any] = {"empty_captions_skipped": skipped} if skipped else {}
        notes.update({f"{k}_original": v for k, v in orig_notes.items()})
        notes.update({f"{k}_negated": v for k, v in neg_notes.items()})
        counts = {"original_captions": n_orig, "negated_captions": n_neg,
                  f"{self.kind}s_original": m_orig, f"{self.kind}s_negated": m_neg}
        notes.update(published_notes(self.name, ctx.model, metrics, PUBLISHED, counts, retrieval_digest(original, negated)))
        per_query, how = retrieval_neg_values(orig_q, neg_q)
        notes["per_query"] = how
        return TaskResult(metrics, counts, None, notes, per_query)


def mcq_digest(rows: list[Any]) -> str:
    """What decides an MCQ number, row by row: options, answer, template and the media's file name
    (not its folder: copies of the authors' files moved the media, not the questions)."""
    return collection_digest([r.media.name, list(r.options), r.correct, r.template] for r in rows)


def retrieval_digest(original: list[tuple[Path, list[str]]], negated: list[tuple[Path, list[str]]]) -> str:
    """What decides a Retrieval-Neg number: each file's captions per medium (by file name), in order."""
    return collection_digest([which, media.name, caps] for which, rows in (("original", original), ("negated", negated))
                             for media, caps in rows)


def caption_keys(root: Path, rows: CaptionRows) -> list[str]:
    """Each caption's key, in file order: its medium's id (`media_ids`) and its place on the row."""
    paths = list(dict.fromkeys(m for m, _ in rows))
    ids = dict(zip(paths, media_ids(root, paths)))
    return _unique([f"{ids[m]}#{k}" for m, caps in rows for k in range(len(caps))])


def _unique(keys: list[str]) -> list[str]:
    """A media file listed on two rows gives its second row's keys a ``~2`` suffix."""
    seen: dict[str, int] = {}
    out = []
    for key in keys:
        seen[key] = seen.get(key, 0) + 1
        out.append(key if seen[key] == 1 else f"{key}~{seen[key]}")
    return out


def negated_name(metric: str) -> str:
    """The name of ``metric`` (R@K) on the negated captions: the paper's R-Neg@K."""
    return metric.replace("R@", "R-Neg@", 1)


def query_ids(original: list[str], negated: list[str]) -> tuple[list[str], bool]:
    """Retrieval-Neg's per-query ids from the two files' caption keys, and whether they pair: the same keys
    (the negated file rewrites the original captions one for one) are one query each; otherwise the two
    files' captions are listed side by side (``original/<key>``, ``negated/<key>``)."""
    if sorted(original) == sorted(negated):
        return list(original), True
    return [f"original/{k}" for k in original] + [f"negated/{k}" for k in negated], False


def retrieval_neg_values(orig: Ranked, neg: Ranked) -> tuple[dict[str, Any], str]:
    """Per-query values of Retrieval-Neg. When the negated file rewrites the original captions one
    for one (same media, same number of captions: MSR-VTT, COCO's templated file), caption k of a media
    file is one query with its original and negated hit, and drop_R@K is a per-query difference.
    Otherwise the two sets are listed side by side, each metric covering its own captions, and drop_R@K
    has no per-query value: HardNeg-Syn (v2 is v1's 5,000 captions and 5,000 more), and COCO's LLM file,
    whose one empty caption (row 914, skipped) leaves 25,013 rewrites of 25,014 captions, so that no
    per-query mean of a paired part could equal the whole drop_R@K its interval is for. A third element of ``orig`` and ``neg``, each
    caption's medium, is its cluster (the task's ``cluster`` is the medium's kind)."""
    (okeys, oranks, *oc), (nkeys, nranks, *nc) = orig, neg
    o = {f"R@{k}": (oranks.numpy() <= k) * 100.0 for k in (1, 5, 10)}
    n = {f"R@{k}": (nranks.numpy() <= k) * 100.0 for k in (1, 5, 10)}
    ids, paired = query_ids(okeys, nkeys)
    if paired:
        at = {key: i for i, key in enumerate(nkeys)}
        order = [at[key] for key in okeys]
        values = {**o, **{negated_name(k): v[order] for k, v in n.items()},
                  **{f"drop_{k}": o[k] - n[k][order] for k in o}}
        return per_query(ids, values, oc[0] if oc else None), \
            "paired: each caption with its negated rewrite (media, position)"
    none_o, none_n = [None] * len(okeys), [None] * len(nkeys)
    side_by_side = {**{k: list(v) + none_n for k, v in o.items()},
                    **{negated_name(k): none_o + list(v) for k, v in n.items()}}
    clusters = list(oc[0]) + list(nc[0]) if oc and nc else None
    return per_query(ids, side_by_side, clusters), "unpaired: original and negated captions listed side by side"


def _make_mcq(name: str) -> type:
    csv_name, kind, layout, description = MCQ[name]
    return type(name, (NegBenchMCQ,), {"name": name, "csv_name": csv_name, "kind": kind, "layout": layout,
                                       "binary": name in BINARY, "description": description, "cluster": kind,
                                       "modalities": frozenset({"text", kind})})


def _make_retrieval(name: str) -> type:
    original, negated, kind, description = RETRIEVAL[name]
    return type(name, (NegBenchRetrieval,), {"name": name, "original_csv": original, "negated_csv": negated,
                                             "kind": kind, "description": description, "cluster": kind,
                                             "modalities": frozenset({"text", kind})})


globals().update({n: _make_mcq(n) for n in MCQ})  # registry targets: negharness.tasks.negbench.tasks:<task name>
globals().update({n: _make_retrieval(n) for n in RETRIEVAL})
