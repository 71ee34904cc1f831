"""The one catalogue of metric names the harness computes: for each, its direction, its display
format, how its per-query values give it, and the scoring protocols that produce it.

Every place that spells a metric reads it here: the YAML checker (which names a YAML task may
declare), the scorers' declared ``metric_info`` (`MCQ_METRICS`, `TEXT_TO_MEDIA_METRICS`, ...), the
per-query contract (`negharness.scoring.perquery`: a metric that is not a mean, e.g. ``MedR``, is
recomputed from another's values) and ``leaderboard --check``. A name written two ways once let a
YAML task declare ``MdR`` while scoring wrote ``MedR``: the record's main score was null. Old
spellings survive only as `ALIASES`, resolved to the one name before anything else sees them. One
name, one meaning, one direction: where two benchmarks mean different things they get different
names (nT2VR's ``neg_R@K``, NegBench's ``R-Neg@K``), and records written under an old name are read
under today's (`RENAMED`).

Protocols: ``choice`` (`choice_scoring`: YAML choice tasks), ``group`` (YAML group tasks), ``mcq`` (`evaluate_mcq`: NegBench),
``retrieval`` (`retrieval_metrics`: every text-to-media run), ``several`` (queries with several
relevant items), ``fire`` (FIRE's judged positives), ``deltas`` and ``negated`` (`evaluate_negated`:
nT2VR's deltas, and plain retrieval of the negated queries), ``retrieval_neg`` (NegBench's Retrieval-Neg),
``edit`` (NeIn's image-editing scores, which `negharness.tasks.nein` declares itself: listed here for their scale).

Scales: each metric says the unit its numbers are written in (records, the board, the papers' rows) as a
`Scale`; `negharness export` reads it, as each record declares it (`record_scale`: a third-party task's
``accuracy`` may be a share of 1), to write each tool's own unit (MTEB and lm-eval keep shares of 1, so a
percent is divided by 100; Every Eval Ever keeps the number and declares its unit and bounds).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from negharness.contracts.options import OptionSpec
from negharness.contracts.task import MetricInfo

MEAN = "mean"  # the metric is the mean of its per-query values over the ids they cover


@dataclass(frozen=True)
class Scale:
    """The unit a metric's numbers are written in: ``unit`` as Every Eval Ever names it, the bounds a
    value can take, and ``percent``: written per hundred (a percent, or a difference of two in points),
    so a tool that keeps shares of 1 (MTEB, lm-eval) holds it divided by 100. Any other scale (a share
    of 1 already, a rank, a distance, a cosine) is the same number in every tool."""

    unit: str
    low: float
    high: float
    percent: bool = False

    def per_one(self, value: float) -> float:
        """``value`` as a tool that keeps shares of 1 holds it (a percent / 100; anything else unchanged),
        to 15 significant digits: 14.1630007622 / 100 is 0.141630007622, not 0.14163000762199998."""
        return float(f"{value / 100.0:.15g}") if self.percent else value


PERCENT = Scale("percent", 0.0, 100.0, percent=True)
POINTS = Scale("percentage_points", -100.0, 100.0, percent=True)  # a difference of two percents
PROPORTION = Scale("proportion", 0.0, 1.0)  # a mean of values in [0, 1]: MIR (1/rank), mAP
PROPORTION_DIFF = Scale("proportion_difference", -1.0, 1.0)  # a difference of two proportions: ΔMIR
RANK = Scale("rank", 1.0, math.inf)  # a (mean or median) rank: 1 is the top
RGB_ERROR = Scale("rgb_error", 0.0, 1.0)  # a mean (squared) error of RGB values scaled to [0, 1]
COSINE = Scale("cosine_similarity", -1.0, 1.0)


@dataclass(frozen=True)
class Metric:
    """One metric: ``derived_from`` names the metric whose per-query values give this one through
    ``rule`` (a name in `RULES`), for a metric that is no mean of its own values."""

    name: str
    higher_is_better: bool
    fmt: str
    scale: Scale
    protocols: frozenset[str]
    derived_from: str | None = None
    rule: str = MEAN
    beside: str | None = None  # reported wherever this metric is (a YAML task declaring it gets this one too)

    @property
    def info(self) -> MetricInfo:
        return MetricInfo(self.higher_is_better, self.fmt)


def lower_median(values: Sequence[float | None]) -> float:
    """The median as `torch.median` takes it (what ``MedR`` is): for an even count the lower of the
    two middle values, not their mean."""
    kept = sorted(float(x) for x in values if x is not None and x == x)
    return kept[(len(kept) - 1) // 2] if kept else float("nan")


RULES: dict[str, Callable[[Sequence[float | None]], float]] = {"lower_median": lower_median}


def _m(name: str, up: bool, fmt: str, scale: Scale, *protocols: str, derived_from: str | None = None,
       rule: str = MEAN, beside: str | None = None) -> Metric:
    return Metric(name, up, fmt, scale, frozenset(protocols), derived_from, rule, beside)


TEMPLATES = ("positive", "negative", "hybrid")  # NegBench's template types of an MCQ answer
KS = (1, 5, 10)
_ALL: list[Metric] = [
    _m("accuracy", True, ".1f", PERCENT, "choice", "mcq"), _m("tie_rate", False, ".2f", PERCENT, "choice", "mcq"),
    # properties of the file beside tie_rate (`negharness.scoring.choices.same_words`): the rows whose true
    # caption and a false one are the same words in another order, and the accuracy left to an order-blind model
    _m("same_words_rate", False, ".2f", PERCENT, "choice", "mcq", beside="tie_rate"),
    _m("order_blind_ceiling", True, ".1f", PERCENT, "choice", "mcq", beside="tie_rate"),
    _m("macro_accuracy", True, ".1f", PERCENT, "choice"),
    # Winoground's scores of an N images x N captions group (`negharness.declarative.group`)
    *[_m(f"{s}_score", True, ".1f", PERCENT, "group") for s in ("text", "image", "group")],
    _m("accuracy_authors_rule", True, ".1f", PERCENT, "choice", "mcq"),
    _m("macro_accuracy_authors_rule", True, ".1f", PERCENT, "choice"),
    *[_m(f"acc_{t}", True, ".1f", PERCENT, "mcq") for t in TEMPLATES],
    *[_m(f"acc_{t}_authors_rule", True, ".1f", PERCENT, "mcq") for t in TEMPLATES],
    *[_m(f"chose_{t}", True, ".1f", PERCENT, "mcq") for t in TEMPLATES],
    *[_m(f"R@{k}", True, ".1f", PERCENT, "retrieval", "retrieval_neg") for k in KS],
    _m("MIR", True, ".3f", PROPORTION, "retrieval"),
    _m("MedR", False, ".1f", RANK, "retrieval", derived_from="MeanR", rule="lower_median"),
    _m("MeanR", False, ".1f", RANK, "retrieval"),
    *[_m(f"C@{k}", True, ".1f", PERCENT, "several") for k in KS], _m("mAP", True, ".3f", PROPORTION, "several"),
    *[_m(f"ΔR@{k}", True, ".1f", POINTS, "deltas") for k in KS], _m("ΔMIR", True, ".3f", PROPORTION_DIFF, "deltas"),
    # the source video's mean rank: context, not a target (see `negation_deltas`)
    _m("SrcMeanR_orig", False, ".1f", RANK, "deltas"), _m("SrcMeanR_neg", True, ".1f", RANK, "deltas"),
    *[_m(f"fire_C@{k}", True, ".1f", PERCENT, "fire") for k in KS], _m("fire_MIR", True, ".3f", PROPORTION, "fire"),
    _m("fire_mAP", True, ".3f", PROPORTION, "fire"),
    # nT2VR: plain retrieval of the negated queries ("A not B") against the video written for "A B": that
    # video ranking low is what negation asks, so lower is better (NegBench's R-Neg@K is another metric)
    _m("neg_R@1", False, ".1f", PERCENT, "negated"), _m("neg_R@10", False, ".1f", PERCENT, "negated"),
    _m("neg_MIR", False, ".3f", PROPORTION, "negated"),
    # NegBench's Retrieval-Neg: R@K of the negated captions ("a dog, no cat") against their own image, which
    # they still describe (the paper's R-Neg@K: higher is better), and the drop R@K - R-Neg@K (lower is better)
    *[_m(f"R-Neg@{k}", True, ".1f", PERCENT, "retrieval_neg") for k in KS],
    *[_m(f"drop_R@{k}", False, ".1f", POINTS, "retrieval_neg") for k in KS],
    # NeIn (`negharness.tasks.nein`, which declares them itself): removal, AUC-removal and retention in percent,
    # the pixel distances to the ground truth, the CLIP and DINO image similarities
    *[_m(n, True, ".1f", PERCENT, "edit") for n in ("Removal", "AUC-Removal", "Retention")],
    _m("L1", False, ".4f", RGB_ERROR, "edit"), _m("L2", False, ".4f", RGB_ERROR, "edit"),
    _m("CLIP-I", True, ".4f", COSINE, "edit"), _m("DINO", True, ".4f", COSINE, "edit"),
    # judged retrieval (`negharness.tasks.judged`, SimpleNeg's script): of the top-K retrieved images, the share
    # a VLM judge finds right (final), verifies as showing the query's subject (verification), and, of those,
    # finds without the negated object (negation)
    *[_m(n, True, ".1f", PERCENT, "judged") for n in ("final", "verification", "negation")],
]
METRICS: dict[str, Metric] = {m.name: m for m in _ALL}
# old spellings a YAML task may still write (the README listed them): resolved to the one name
ALIASES: dict[str, str] = {"MdR": "MedR", "MnR": "MeanR"}


# names one benchmark's records once wrote with another benchmark's meaning, by the task-name prefix that
# wrote them: NegBench's Retrieval-Neg called R-Neg@K "neg_R@K", nT2VR's lower-is-better name. A record
# read from disk gets today's names (`renamed_record`); nothing else maps old names.
RENAMED: dict[str, dict[str, str]] = {"negbench_retrieval_": {f"neg_R@{k}": f"R-Neg@{k}" for k in KS}}
RECORD_METRIC_MAPS = ("metrics", "metric_info", "intervals", "intervals_rows", "standard_errors", "standard_errors_rows")


def renames(task: str) -> dict[str, str]:
    """Old metric name -> today's, for the records of ``task`` (empty for a task whose names never changed)."""
    return next((m for prefix, m in RENAMED.items() if task.startswith(prefix)), {})


def renamed_keys(mapping: dict[str, Any], task: str) -> dict[str, Any]:
    """``mapping`` (metric -> anything) with ``task``'s old metric names replaced, order kept."""
    old = renames(task)
    return {old.get(k, k): v for k, v in mapping.items()} if old.keys() & mapping.keys() else mapping


def renamed_record(rec: dict[str, Any]) -> dict[str, Any]:
    """A record read from disk, its metric names today's: every metric-keyed field, the main score and
    the leaderboard columns (an old NegBench record's ``neg_R@5`` becomes ``R-Neg@5``; its numbers
    are unchanged). Anything not shaped as a record is returned as it is, for the checks to name."""
    task = rec.get("task") if isinstance(rec, dict) else None
    old = renames(task.get("name", "")) if isinstance(task, dict) and isinstance(task.get("name"), str) else {}
    if not old or not isinstance(task, dict):  # renames exist only for a task mapping with a name
        return rec
    out = dict(rec)
    for field in RECORD_METRIC_MAPS:
        if isinstance(out.get(field), dict):
            out[field] = renamed_keys(out[field], task["name"])
    if isinstance(out.get("main_score"), dict) and out["main_score"].get("name") in old:
        out["main_score"] = {**out["main_score"], "name": old[out["main_score"]["name"]]}
    if isinstance(task.get("leaderboard_metrics"), list):
        out["task"] = {**task, "leaderboard_metrics": [old.get(m, m) for m in task["leaderboard_metrics"]]}
    return out


def canonical(name: str) -> str:
    """The catalogue's name for ``name`` (an alias resolved; anything else unchanged)."""
    return ALIASES.get(name, name)


def _known(metric: str, members: Iterable[str]) -> Metric | None:
    """The catalogue's entry for a record's metric; a suite's columns, its ``members`` and their ``mean``,
    are its member tasks' accuracy (`negharness.declarative.tasks.SuiteTask`)."""
    members = set(members)
    if members and (metric in members or metric == "mean"):  # the suite's column, not the rule `MEAN`
        metric = "accuracy"
    return METRICS.get(canonical(metric))


def scale_of(metric: str, members: Iterable[str] = ()) -> Scale | None:
    """The unit ``metric``'s numbers are written in; None for a name the catalogue does not know (a
    third-party task's), whose unit nothing here can vouch for."""
    found = _known(metric, members)
    return found.scale if found else None


# a percent scale and the same quantity written as a share of 1 (`record_scale`)
SHARES = {PERCENT: PROPORTION, POINTS: PROPORTION_DIFF}


def declares_share(fmt: Any) -> bool:
    """Whether a record's declared format (its ``metric_info`` ``fmt``) says its number is a share of 1,
    the one rule for it (a record has no unit field; its format is what it declares): a ``%`` format
    (``.2%`` prints 0.667 as 66.70%), or three or more decimals (``.3f``: `MetricInfo`'s default, the
    lm-eval and scikit-learn convention; nobody prints a percent 66.667). One or two decimals (``.1f``,
    ``.2f``: the catalogue's own percents) say nothing against the catalogue."""
    match = re.fullmatch(r"\.(\d+)([f%])", fmt) if isinstance(fmt, str) else None
    return match is not None and (match[2] == "%" or int(match[1]) >= 3)


def record_scale(metric: str, declared: Any, members: Iterable[str] = ()) -> Scale | None:
    """The unit of a record's metric, as the record declares it (its ``metric_info`` entry): its ``unit``
    where it has one (``"percent"`` or ``"share"``, `MetricInfo.unit`), for a name the catalogue knows or
    not; else the catalogue's (`scale_of`), read as a share of 1 where the record's format says so
    (`declares_share`: a third-party task's ``accuracy`` of 0.667, formatted ``.3f`` or ``.2%``), so no
    tool reads it 100 times off. None where nothing vouches for a unit: a name the catalogue does not know
    and the record gives no unit for, a catalogue name declared in the other direction (another quantity),
    or a declared unit the catalogue's quantity cannot be written in (a rank as a percent)."""
    found = _known(metric, members)
    unit = declared.get("unit") if isinstance(declared, dict) else None
    if found is None:
        return {"percent": PERCENT, "share": PROPORTION}.get(unit) if isinstance(unit, str) else None
    if not isinstance(declared, dict):
        return found.scale
    higher = declared.get("higher_is_better")
    if higher is not None and higher != found.info.higher_is_better:
        return None
    if unit in ("percent", "share"):
        return _written_in(found.scale, unit)
    return SHARES.get(found.scale, found.scale) if declares_share(declared.get("fmt")) else found.scale


def _written_in(scale: Scale, unit: str) -> Scale | None:
    """The catalogue's quantity ``scale`` written in the declared ``unit``; None where it cannot be (a rank,
    a cosine, an error are neither percents nor shares)."""
    percents = {share: percent for percent, share in SHARES.items()}
    if unit == "percent":
        return scale if scale.percent else percents.get(scale)
    return scale if scale in percents else SHARES.get(scale)


def infos(names: Iterable[str]) -> dict[str, MetricInfo]:
    """name -> `MetricInfo` for catalogue names, in the order given (KeyError for an unknown one)."""
    return {n: METRICS[n].info for n in names}


def with_companions(names: Iterable[str]) -> list[str]:
    """``names`` and, after them, every metric reported beside one of them (``same_words_rate`` and
    ``order_blind_ceiling`` beside ``tie_rate``), in catalogue order, each once."""
    names = list(dict.fromkeys(names))
    return names + [m.name for m in _ALL if m.beside in names and m.name not in names]


def of_protocols(*protocols: str) -> dict[str, MetricInfo]:
    """Every metric one of ``protocols`` produces, in catalogue order: a task's ``metric_info``."""
    return infos(m.name for m in _ALL if m.protocols & set(protocols))


# the scorers' declared ``metric_info``, here beside the catalogue (not in the torch-importing
# scorers), so a task class that declares one loads no torch: its data can be checked first
TEXT_TO_MEDIA_METRICS = of_protocols("retrieval", "several", "deltas", "fire")
NEGATED_METRICS = of_protocols("retrieval", "several", "deltas", "fire", "negated")
# NegBench's Retrieval-Neg: R@K on the original captions, R-Neg@K on the negated ones, and the drop
RETRIEVAL_NEG_METRICS = of_protocols("retrieval_neg")
MCQ_METRICS = of_protocols("mcq")
# the option that brings the ``fire`` metrics: FIRE's extra judgements, hashed with the task's data
QRELS_OPTION = {"qrels": OptionSpec(str, None, "extra relevance judgements (FIRE): lines 'query_id item_id relevance'",
                                    data_file=True)}


def derivation(metric: str, kept: Iterable[str]) -> tuple[str, Callable[[Sequence[float | None]], float]] | None:
    """(source metric, function) recomputing ``metric`` from another metric's per-query values,
    when ``kept`` holds them; a prefixed name (``neg_MedR``, ``fire_MedR``) uses the prefixed source."""
    kept = set(kept)
    for m in _ALL:
        if m.derived_from and metric.endswith(m.name):
            source = metric[: len(metric) - len(m.name)] + m.derived_from
            if source in kept:
                return source, RULES[m.rule]
    return None
