"""`negharness build-queries`: negated and composed query sets for any caption collection.

From ``<cap_id> <caption>`` lines (or a CSV / JSON of item ids and captions) it writes, in nT2VR's
formats, ``<c>.caption.txt`` (when the input was not one already), ``<c>.negated.txt``,
``<c>.negated_neginfo.txt`` (cue, rule, scope per negated query, for the boolean baseline) and
``<c>.composed.txt``, then summarises the counts as the paper's Table 1 does.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from statistics import mean, median
from typing import TypedDict

from negharness.api import QueryBuild, QueryBuildOptions, installed_version

from .built_marker import write_marker
from .composer import SUBJECTS, ComposedQuery, compose_captions
from .negator import Negation, negate
from .nt2vr_files import (
    caption_rows,
    read_caption_table,
    write_caption_file,
    write_dict_lines,
)


# the builders' rules' version: bump it when the composer's, phrases' or negator's rules change,
# so cached query sets built by older rules are rebuilt (the world's file names carry it)
# 3: A needs a second caption's support, B's entailed actions exclude targets, the negator adds a
# negation (never removes one), never "without", negates the main verb and both of two coordinated verbs
# 4: no negation inside an embedded question ("why it will...") or on the second verb of "try and get",
# none on a participle after a singular noun or a preposition's noun, none on a split compound ("water falls")
BUILDER_VERSION = "4"
BUILDER_LIBRARIES = ("lemminflect", "nltk")  # whose code and dictionaries the rules read (`builder_identity`)


@lru_cache(maxsize=1)
def builder_identity() -> str:
    """What decides the builders' output beside the captions and settings, as one string for build marks,
    memo files and records: the rules (`BUILDER_VERSION`) and the versions of the libraries they read
    (lemminflect's lemma dictionaries, NLTK's tokenizer and tagger code), so an upgrade of either rebuilds
    what an older one made. Read from the installed packages' metadata: nothing is imported. NLTK's tagger
    *data*, downloaded apart from its code, is not in it: data downloaded again in another version is not seen."""
    return "+".join([BUILDER_VERSION, *(f"{name}{installed_version(name) or '-absent'}" for name in BUILDER_LIBRARIES)])


class BuildSettings(TypedDict):
    """What besides the captions and the rules decides what `build` makes (kept in the build mark)."""
    seed: int
    mode: str
    per_item: int | None
    subjects: int | None


@dataclass
class BuiltQueries:
    captions: list[tuple[str, str]]  # (cap_id, caption)
    negated: list[tuple[str, Negation]]  # (negated cap_id, negation)
    composed: list[ComposedQuery]
    n_items: int
    settings: BuildSettings  # what else made them


def build_settings(seed: int = 0, mode: str = "one", per_item: int | None = None,
                   subjects: int | None = SUBJECTS) -> BuildSettings:
    """Everything besides the captions and the rules that decides what `build` makes."""
    return {"seed": seed, "mode": mode, "per_item": per_item, "subjects": subjects}


def build(items: list[tuple[str, list[str]]], mode: str = "one", seed: int = 0,
          per_item: int | None = None, subjects: int | None = SUBJECTS) -> BuiltQueries:
    """Negated and composed queries. ``subjects``: subjects per phrase pairing (the composer's
    ``SUBJECTS``; the authors' generator took 5; None takes every subject, for a small closed world)."""
    rows = caption_rows(items)
    negated = []
    for cap_id, caption in rows:
        for j, neg in enumerate(negate(caption, mode, seed)):
            negated.append((f"{cap_id}#{j}", neg))
    composed = compose_captions([i for i, _ in items], [c for _, c in items], seed, per_item, subjects)
    return BuiltQueries(rows, negated, composed, len(items), build_settings(seed, mode, per_item, subjects))


def write(built: BuiltQueries, out_dir: Path, name: str, write_captions: bool) -> list[Path]:
    """The query files, between two build marks (`built_marker`): a reader knows which rules made them."""
    out_dir = Path(out_dir)
    mark = (out_dir, name, builder_identity(), built.settings, built.captions)
    paths = [write_marker(*mark, complete=False)]
    if write_captions:
        paths.append(write_caption_file(out_dir / f"{name}.caption.txt", built.captions))
    paths.append(write_caption_file(out_dir / f"{name}.negated.txt", [(i, n.text) for i, n in built.negated]))
    paths.append(write_dict_lines(out_dir / f"{name}.negated_neginfo.txt", [
        {"cap_id": i, "caption": n.text, "cue": n.cue, "rule": n.rule, "word": n.word,
         "negcap": n.scope, "poscap": n.remainder} for i, n in built.negated]))
    paths.append(write_dict_lines(out_dir / f"{name}.composed.txt", [q.as_record() for q in built.composed]))
    write_marker(*mark, complete=True)
    return paths


def summary(built: BuiltQueries) -> dict[str, float]:
    matched = [len(q.video_ids) for q in built.composed] or [0]
    sources = {i.rsplit("#", 1)[0] for i, _ in built.negated}
    return {
        "items": built.n_items, "original": len(built.captions), "negated": len(built.negated),
        "captions_with_negated_variant": len(sources), "composed": len(built.composed),
        "matched_per_composed_mean": round(mean(matched), 2), "matched_per_composed_median": median(matched),
        "composed_with_one_match": sum(1 for m in matched if m == 1),
    }


def input_name(path: Path, name: str | None) -> tuple[str, bool]:
    """Collection name, and whether the input still needs a ``.caption.txt`` written beside the others."""
    if name:
        return name, not path.name.endswith(".caption.txt")
    if path.name.endswith(".caption.txt"):
        return path.name[: -len(".caption.txt")], False
    return path.stem, True


def build_from_file(path: Path, out_dir: Path, name: str | None = None, id_column: str | None = None,
                    caption_column: str | None = None, mode: str = "one", seed: int = 0,
                    per_item: int | None = None) -> tuple[BuiltQueries, list[Path]]:
    items = read_caption_table(path, id_column, caption_column)
    built = build(items, mode, seed, per_item)
    collection, need_captions = input_name(Path(path), name)
    return built, write(built, out_dir, collection, need_captions)


def nt2vr_builder(options: QueryBuildOptions) -> QueryBuild:
    """The built-in query builder (kind ``query_builder``, name ``nt2vr``): nT2VR's negator and composer."""
    built, paths = build_from_file(options.captions, options.out, options.name, options.id_column,
                                   options.caption_column, options.mode, options.seed, options.per_item)
    examples = {"negated": [(i, n.text) for i, n in built.negated],
                "composed": [(f"{q.cap_id} [{len(q.video_ids)} videos]", q.caption) for q in built.composed]}
    return QueryBuild(summary(built), examples, paths)
