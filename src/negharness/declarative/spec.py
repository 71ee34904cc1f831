"""The checked specification of a task declared in YAML (a choice task: a medium, one true caption, one
or more false ones; a text-to-media retrieval task over a captions file; a judged retrieval task, a judge
checking what each query retrieves; the item kinds; a suite that averages choice tasks): `parse_spec`.

A file read by `negharness.declarative.yaml_reader.read_yaml` (safe YAML with limits: a size cap, no anchors
or aliases, no duplicate keys, bounded nesting) is checked key by key before any model loads; every error
names the file and the key, and quotes a value only in shortened form. Keys a task of its kind does not read
are errors, at every level. Paths are checked against the data root here (as written) and again by the task
(symlinks followed), with the data root's one rule (`negharness.io.paths.RootGuard`). The keys are listed in
docs/guides/yaml-tasks.md; `negharness.declarative.register` makes the checked spec a task and registers it.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

from negharness.contracts.names import name_problem
from negharness.contracts.task import MetricInfo, cluster_problems
from negharness.declarative.annotations import CELL_READINGS, FILTER_KEYS, short
from negharness.declarative.base_task import KNOWN_GENERATORS, GeneratorName
from negharness.declarative.kind_specs import (
    DEFAULT_ITEM_METRICS,
    ITEM_KINDS,
    ITEM_MEDIA_KEYS,
    data_format,
    item_captions,
    item_media,
    judged_spec,
    qrels_spec,
)
from negharness.declarative.yaml_reader import Checker
from negharness.records.published import table_rows
from negharness.scoring import catalog

KINDS = ("choice", "retrieval", "suite", "judged", *ITEM_KINDS)
AUTHORS_SUFFIX = "_authors_rule"  # the authors' twin of a metric, added with `authors:`, never declared
# the metrics a YAML task may declare: what its scorer writes, as the one catalogue names them
CHOICE_METRICS = {m: i for m, i in catalog.of_protocols("choice").items() if not m.endswith(AUTHORS_SUFFIX)}
YAML_RETRIEVAL_METRICS = catalog.of_protocols("retrieval")  # what a YAML retrieval task may declare
QRELS_METRICS = catalog.of_protocols("retrieval", "several")  # many relevant items: C@K and mAP too
GROUP_METRICS = catalog.of_protocols("group")
DEFAULT_METRICS = {"choice": ["accuracy", "tie_rate"], "retrieval": ["R@1", "R@5", "R@10", "MIR"],
                   "judged": list(catalog.JUDGED_METRICS), **DEFAULT_ITEM_METRICS}
TOP_KEYS = {"name", "kind", "family", "version", "description", "citation", "data_help", "licence", "data", "media",
            "captions", "question", "group_by", "min_group", "metrics", "main_score", "leaderboard_metrics", "members",
            "authors", "published", "cluster", "text_only", "queries", "qrels", "texts", "direction",
            "candidates", "questions", "pool", "top_k"}
DATA_KEYS = {"file", "format", "records", "explode", "where", "slice", "revision", "rows_per_item", "cells"}
MEDIA_KEYS = {"kind", "path", "strip_prefix", "crop", "base64"} | ITEM_MEDIA_KEYS
CAPTION_KEYS = {"true", "false", "generate", "options", "answer", "answer_base"}
AUTHORS_KEYS = {"ties", "note"}
AUTHORS_TIES = ("first", "wrong")  # as `negharness.scoring.choices.choice_scoring` reads them
COMMON_KEYS = {"name", "kind", "family", "version", "description", "citation", "data_help", "licence", "main_score",
               "leaderboard_metrics"}
# the top-level keys each kind reads (TOP_KEYS is their union): any other is an error, not ignored
KIND_KEYS = {"suite": COMMON_KEYS | {"members"},
             "retrieval": COMMON_KEYS | {"data", "media", "captions", "metrics", "cluster", "queries", "qrels", "texts",
                                        "direction", "candidates"},
             "judged": COMMON_KEYS | {"data", "captions", "questions", "pool", "top_k", "metrics", "cluster"},
             "group": COMMON_KEYS | {"data", "media", "captions", "metrics", "published", "group_by"},
             "multi_choice": COMMON_KEYS | {"data", "media", "captions", "metrics", "text_only", "published", "group_by",
                                            "cluster"},
             "image_choice": COMMON_KEYS | {"data", "media", "captions", "metrics", "authors", "published", "group_by",
                                            "cluster"},
             "choice": COMMON_KEYS | {"data", "media", "captions", "metrics", "question", "group_by", "min_group",
                                      "authors", "published", "cluster"}}
CLUSTER_WORDS = ("row", "media")  # `cluster:` each row its own (default); the row's image or video
CLUSTERED_KINDS = ("choice", "retrieval", "multi_choice", "image_choice", "judged")  # the kinds that read `cluster:`
# the caption keys of each way a choice task names its options
CAPTION_MODES = {"options": {"options", "answer", "answer_base"}, "generate": {"true", "generate"},
                 "false": {"true", "false"}}


def _caption_field(c: Checker, key: str, value: Any) -> dict[str, Any]:
    """A caption source: a field name, or ``{field: NAME, replace: {old: new}, prefix: TEXT}`` (CC-Neg
    drops commas; MMVP-VLM's scorer puts "a photo of " before each statement)."""
    if isinstance(value, str) and value:
        return {"field": value, "replace": {}, "prefix": ""}
    if isinstance(value, dict):
        sub = Checker(c.source, value, f"{c.prefix}{key}.")
        extra = sorted(map(str, set(value) - {"field", "replace", "prefix"}))
        if extra:
            raise sub.fail(extra[0], "unknown key (known: field, replace, prefix)")
        replace = sub.get("replace", dict, False, {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in replace.items()):
            raise sub.fail("replace", "expected a mapping of strings to strings")
        return {"field": sub.get("field", str), "replace": replace, "prefix": sub.get("prefix", str, False, "")}
    raise c.fail(key, "expected a field name or {field: ..., replace: ...}")


def _answer_base(cap: Checker) -> str:
    """How the answer field names the true option: 0-based index, 1-based index, or a letter (A, B, ...)."""
    value = cap.data.get("answer_base", 0)
    if isinstance(value, bool) or str(value) not in ("0", "1", "letter"):
        raise cap.fail("answer_base", f"{short(value)} is not one of 0, 1, letter")
    return str(value)


def _captions(c: Checker, kind: str, generators: dict[str, Any] | None) -> dict[str, Any]:
    raw = c.get("captions", dict)
    # YAML 1.1 reads the bare keys true: / false: as booleans; they mean the field names here
    c.data["captions"] = {("true" if k is True else "false" if k is False else k): v for k, v in raw.items()}
    if kind in ("retrieval", "judged"):  # one text per row
        cap = c.sub("captions", allowed={"field"})
        return {"field": cap.get("field", str)}
    cap = c.sub("captions", allowed=CAPTION_KEYS)
    mode = next((m for m in CAPTION_MODES if m in cap.data), "false")
    extra = sorted(set(cap.data) - CAPTION_MODES[mode])
    if extra:  # e.g. `false` beside `options`: one of the two would be ignored
        raise cap.fail(extra[0], f"not read beside {mode!r} (with {mode!r}: "
                                 f"{', '.join(sorted(CAPTION_MODES[mode]))})")
    if "options" in cap.data:
        options = cap.get("options", list)
        if len(options) < 2:
            raise cap.fail("options", "a choice needs at least two option fields")
        return {"options": [_caption_field(cap, f"options.{i}", o) for i, o in enumerate(options)],
                "answer": cap.get("answer", str),
                "answer_base": _answer_base(cap)}
    out: dict[str, Any] = {"true": _caption_field(cap, "true", cap.get("true", (str, dict)))}
    if "generate" in cap.data:
        name = cap.get("generate", str)
        known = {**KNOWN_GENERATORS, **(generators or {})}
        if name in known:
            out["generate"] = known[name]
        elif generators is not None:
            raise cap.fail("generate", f"unknown generator {short(name)} (known: {', '.join(sorted(known)) or 'none'})")
        else:  # --include-path: the plugins' generators are known once their hooks have run
            out["generate"] = GeneratorName(name, c.source)
        return out
    false = cap.get("false", (str, dict, list))
    false = false if isinstance(false, list) else [false]
    if not false:
        raise cap.fail("false", "at least one false-caption field")
    out["false"] = [_caption_field(cap, f"false.{i}", f) for i, f in enumerate(false)]
    return out


def _caption_fields(spec: dict[str, Any]) -> set[str]:
    """Every field a task reads captions from (its caption sources, ``data.explode``)."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict) and isinstance(value.get("field"), str):
            found.add(value["field"])
        elif isinstance(value, (dict, list)):
            for v in (value.values() if isinstance(value, dict) else value):
                walk(v)

    walk(spec.get("captions") or {})
    if spec["data"].get("explode"):
        found.add(spec["data"]["explode"])
    return found


def _check_cells(d: Checker, spec: dict[str, Any]) -> None:
    """``data.cells`` names columns the task reads captions from: any other (a typo) would be ignored."""
    fields = _caption_fields(spec)
    bare = {re.sub(r"^\d+\.", "", f) for f in fields}  # a joined row's 0.caption is column caption
    for name in spec["data"]["cells"]:
        if name not in fields and name not in bare:
            raise d.fail(f"cells.{name}", f"not a field this task reads captions from "
                                          f"({', '.join(sorted(fields)) or 'none'})")


def _where(d: Checker) -> dict[str, Any]:
    """Row filters: ``field: value``, or a mapping of ``min``/``max`` (numbers), ``in``/``not in``
    (lists of values) and ``reason`` (why, recorded with the count of rows the filter dropped)."""
    where: dict[str, Any] = d.get("where", dict, False, {})
    for field, cond in where.items():
        if not isinstance(field, str) or not field:
            raise d.fail(f"where.{field}", "a filter's key is a field name (text)")
        if not isinstance(cond, dict):
            if isinstance(cond, list):
                raise d.fail(f"where.{field}", "a list: write {in: [...]} or {not in: [...]}")
            continue
        unknown = sorted(map(str, set(cond) - set(FILTER_KEYS)))
        if unknown:
            raise d.fail(f"where.{field}.{unknown[0]}",
                         f"unknown key (filter operators: {', '.join(FILTER_KEYS)})")
        if set(cond) <= {"reason"}:
            raise d.fail(f"where.{field}", "a filter needs min, max, in or not in")
        for key in ("min", "max"):
            if key in cond and (isinstance(cond[key], bool) or not isinstance(cond[key], (int, float))
                                or not math.isfinite(cond[key])):
                raise d.fail(f"where.{field}.{key}", f"expected a finite number, got {short(cond[key])}")
        for key in ("in", "not in"):
            if key in cond and (not isinstance(cond[key], list) or not cond[key]):
                raise d.fail(f"where.{field}.{key}", "expected a non-empty list of values")
        if "reason" in cond and not (isinstance(cond["reason"], str) and cond["reason"]):
            raise d.fail(f"where.{field}.reason", "expected a non-empty string")
    return where


def _authors(c: Checker) -> dict[str, str] | None:
    """How the benchmark's authors score (``ties: first`` or ``wrong``, and a ``note`` saying where
    that rule is read from); their number is then kept beside the safe one as ``<metric>_authors_rule``."""
    a = c.sub("authors", required=False, allowed=AUTHORS_KEYS)
    if a is None:
        return None
    return {"ties": a.choice("ties", AUTHORS_TIES), "note": a.get("note", str)}


def _published(c: Checker, source: str) -> tuple[str, ...]:
    """The papers' tables of this task (`negharness.records.published`): files relative to the YAML's
    folder, inside it, read now so that a malformed line stops here naming file and line. Their
    numbers are shown only on the collection the ``collections.csv`` beside them describes."""
    folder = Path(source).parent
    out = []
    for i, name in enumerate(c.strings("published", required=False) or []):
        key = "published" if isinstance(c.data["published"], str) else f"published.{i}"
        folded = os.path.normpath(name.replace("\\", "/"))
        if os.path.isabs(name) or folded == ".." or folded.startswith("../"):
            raise c.fail(key, f"{short(name)} leaves the task's folder; a table is named relative to it")
        if not (folder / folded).is_file():
            raise c.fail(key, f"{short(name)}: no such file beside the task")
        out.append(str(folder / folded))
    table_rows(out)  # every line typed now, before any model loads
    return tuple(out)


def _cluster(c: Checker, media_kind: str) -> dict[str, str]:
    """What a row's queries share, for the intervals: ``row`` (the default: each row its own
    cluster), ``media`` (the row's image or video: rows on one file, or one embedded image, resample
    together; a crop is of its image) or ``{field: NAME}`` (a field of the row, e.g. the file name of
    the image a text-only row is about; ``name:`` says what it names, default the field)."""
    raw = c.data.get("cluster", "row")
    if isinstance(raw, dict):
        sub = c.sub("cluster", allowed={"field", "name"})
        field = sub.get("field", str)
        spec = {"by": "field", "field": field, "name": sub.get("name", str, False) or field}
    elif raw in CLUSTER_WORDS:
        spec = {"by": raw, "name": media_kind if raw == "media" else "row"}
    else:
        raise c.fail("cluster", f"{short(raw)} is not one of {', '.join(CLUSTER_WORDS)} or {{field: NAME}}")
    problems = cluster_problems(spec["name"])
    if problems:
        raise c.fail("cluster", problems[0])
    return spec


def _metric_name(c: Checker, key: str, name: str, known: dict[str, MetricInfo], kind: str) -> str:
    """The catalogue's name of a declared metric (``MdR`` -> ``MedR``), or an error naming the key."""
    found = catalog.canonical(name)
    if found not in known:
        aliases = [f"{a} = {m}" for a, m in catalog.ALIASES.items() if m in known]
        raise c.fail(key, f"unknown metric {short(name)} (known for {kind} tasks: {', '.join(known)}"
                          + (f"; also read: {', '.join(aliases)})" if aliases else ")"))
    return found


def _declared(c: Checker, kind: str, spec: dict[str, Any]) -> dict[str, MetricInfo]:
    """metric_info of a choice or retrieval task: its declared metrics (catalogue names), and with
    ``authors:`` each accuracy's authors' twin."""
    known = {"retrieval": QRELS_METRICS if spec.get("qrels") else YAML_RETRIEVAL_METRICS,
             "group": GROUP_METRICS, "judged": catalog.JUDGED_METRICS}.get(kind, CHOICE_METRICS)
    metrics = c.strings("metrics", required=False) or DEFAULT_METRICS[kind]
    names = list(dict.fromkeys(_metric_name(c, f"metrics.{i}", m, known, kind) for i, m in enumerate(metrics)))
    if "macro_accuracy" in names and not spec.get("group_by"):
        raise c.fail("metrics", "macro_accuracy needs group_by (the field whose groups are averaged)")
    info = catalog.infos(catalog.with_companions(names))  # tie_rate brings same_words_rate, order_blind_ceiling
    if spec.get("authors"):  # the authors' number beside each accuracy the task reports
        twins = [m + AUTHORS_SUFFIX for m in names if m + AUTHORS_SUFFIX in catalog.METRICS]
        info.update(catalog.infos(twins))
    return info


def _metrics(c: Checker, kind: str, spec: dict[str, Any]) -> None:
    if kind not in ("choice", "image_choice") and "authors" in c.data:
        raise c.fail("authors", "only choice and image_choice tasks have an authors' tie rule")
    if kind == "suite":
        spec["metric_info"] = {**{m: MetricInfo(True, ".1f") for m in spec["members"]}, "mean": MetricInfo(True, ".1f")}
    else:
        spec["metric_info"] = _declared(c, kind, spec)
    main = catalog.canonical(c.get("main_score", str)) if kind != "suite" else c.get("main_score", str)
    if main not in spec["metric_info"]:
        raise c.fail("main_score", f"{short(main)} is not among this task's metrics ({', '.join(spec['metric_info'])})")
    spec["main_score"] = main
    board = c.strings("leaderboard_metrics", required=False) or ([main] if kind != "suite" else list(spec["metric_info"]))
    if kind != "suite":
        board = [catalog.canonical(m) for m in board]
    for i, m in enumerate(board):
        if m not in spec["metric_info"]:
            raise c.fail(f"leaderboard_metrics.{i}", f"{short(m)} is not among this task's metrics")
    spec["leaderboard_metrics"] = tuple(board)


def _stays_under_root(c: Checker, key: str, path: str, what: str) -> None:
    """The data root's rule as written, before anything is read: ``path`` (its ``{field}`` parts
    standing for one folder name) is relative and no ``..`` takes it above the data root. Symlinks
    are followed when the task opens it (`negharness.io.paths.RootGuard`)."""
    written = re.sub(r"\{[^{}]*\}", "x", path).replace("\\", "/")
    folded = os.path.normpath(written)
    if os.path.isabs(written) or re.match(r"^[A-Za-z]:", written) or folded == ".." or folded.startswith("../"):
        raise c.fail(key, f"{short(path)} leaves the data root (an absolute path or '..'); {what} is read "
                          "relative to the data root and must stay under it")


def _media(c: Checker, kind: str, spec: dict[str, Any]) -> dict[str, Any] | None:
    """``media``: where each record's image(s) are, its crop or boxes; none for a text-only task."""
    if spec["text_only"]:
        if "media" in c.data:
            raise c.fail("media", "not read with text_only: true (the captions are compared with each other)")
        return None
    m = c.sub("media", allowed=MEDIA_KEYS)
    elsewhere = {"members", "embedded"} & set(m.data)
    out = {"kind": m.choice("kind", ("image", "video"), "image"), "base64": m.get("base64", str, False),
           "path": m.strings("path", required=not ({"base64"} | elsewhere) & set(m.data)),
           "strip_prefix": m.strings("strip_prefix", required=False) or [],
           "crop": m.strings("crop", required=False),
           **item_media(m, kind, bool(spec.get("qrels")))}
    for key in ("members", "path"):
        for i, template in enumerate(out[key] or []):
            _stays_under_root(m, key if isinstance(m.data[key], str) else f"{key}.{i}", template, "a media path")
    if out["crop"] is not None and len(out["crop"]) != 4:
        raise m.fail("crop", "expected four field names: x, y, width, height")
    if out["crop"] is not None and (out["box"] or out["boxes"]):
        raise m.fail("crop", "give crop (four fields) or box/boxes (a field holding the box), not both")
    if out["crop"] is not None and (out["members"] or out["embedded"]):  # record_media reads crop with path only
        raise m.fail("crop", "not read with members or embedded images: give box (a field holding [x, y, w, h])")
    regions = [k for k in ("crop", "box", "boxes") if out[k]]
    if out["kind"] == "video" and regions:  # frames are decoded whole: a region would be dropped unseen
        raise m.fail(regions[0], "regions of a video are not read: crop, box and boxes cut images only")
    if kind == "group" and not (out["members"] or out["embedded"]):
        raise m.fail("members", "missing (a group names its images in order: members or embedded)")
    return out


def parse_spec(data: dict[str, Any], source: str, generators: dict[str, Any] | None = None) -> dict[str, Any]:
    """A checked task specification (plain dict) from one YAML mapping; raises naming ``source`` and the key.
    ``generators`` (name -> function or "module:function") are those the file may name on top of the
    ones plugins registered; None (``--include-path``) defers an unknown name to the task's first row."""
    c = Checker(source, data)
    unknown = sorted(map(str, set(data) - TOP_KEYS))
    if unknown:
        raise c.fail(unknown[0], f"unknown key (known: {', '.join(sorted(TOP_KEYS))})")
    kind = c.choice("kind", KINDS)
    unread = sorted(map(str, set(data) - KIND_KEYS[kind]))
    if unread:
        raise c.fail(unread[0], f"not read by a {kind} task (its keys: {', '.join(sorted(KIND_KEYS[kind]))})")
    spec: dict[str, Any] = {"source": source, "kind": kind, "name": c.get("name", str), "family": c.get("family", str),
                            "version": str(c.get("version", (str, int), False, "1")),
                            "description": c.get("description", str), "citation": c.get("citation", str),
                            "data_help": c.get("data_help", str), "licence": c.get("licence", str, False, "")}
    if any(ch in spec["name"] for ch in "*?[] /"):
        raise c.fail("name", f"{short(spec['name'])}: no spaces, slashes or glob characters")
    problem = name_problem(spec["name"])  # the registry's rule, said here with the file: a look-alike
    if problem:  # (a Greek omicron in negbench_mcq_coco) was answered "unknown task ..., did you mean"
        raise c.fail("name", f"{short(spec['name'])}: {problem}")
    if kind == "suite":
        members = c.get("members", dict)
        if not members or not all(isinstance(k, str) and isinstance(v, str) for k, v in members.items()):
            raise c.fail("members", "expected a mapping of metric name -> choice task name")
        spec["members"] = dict(members)
        _metrics(c, kind, spec)
        return spec
    d = c.sub("data", allowed=DATA_KEYS)
    files = d.strings("file")
    file_keys = ["file"] if isinstance(d.data["file"], str) else [f"file.{i}" for i in range(len(files))]
    for key, f in zip(file_keys, files):
        _stays_under_root(d, key, f, "a data file")
    spec["data"] = {"files": files, "file_keys": [f"data.{k}" for k in file_keys],
                    "format": data_format(d, "format", files), "revision": d.get("revision", (str, int), False),
                    "records": d.get("records", (str, dict), False), "explode": d.get("explode", str, False),
                    "where": _where(d), "slice": d.get("slice", list, False),
                    "rows_per_item": d.get("rows_per_item", int, False, 1),
                    "cells": d.choices_by_name("cells", CELL_READINGS)}
    if spec["data"]["rows_per_item"] < 1 or isinstance(d.data.get("rows_per_item"), bool):
        raise d.fail("rows_per_item", "expected a whole number >= 1 (consecutive rows that make one item)")
    if spec["data"]["revision"] is not None:
        spec["data"]["revision"] = str(spec["data"]["revision"])
    records = spec["data"]["records"]
    if isinstance(records, dict) and not all(isinstance(k, str) and isinstance(v, str) and v
                                             for k, v in records.items()):
        raise d.fail("records", "expected a field path, or a mapping of field name -> list path (text)")
    if spec["data"]["slice"] is not None and (len(spec["data"]["slice"]) != 2 or not all(
            v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in spec["data"]["slice"])):
        raise d.fail("slice", "expected [start, stop] (integers or null), as a Python slice")
    n = spec["data"]["rows_per_item"]
    if spec["data"]["slice"] is not None and n > 1 and any(v is not None and v % n for v in spec["data"]["slice"]):
        raise d.fail("slice", f"the slice cuts rows before they join into items of {n}: each bound must be a "
                              f"multiple of {n}, or a pair would take rows of two items")
    spec["text_only"] = c.get("text_only", bool, False, False)
    if kind == "retrieval" and any(k in c.data for k in ("qrels", "queries", "texts", "direction", "candidates")):
        spec.update(qrels_spec(c, _stays_under_root))
    if kind == "judged":  # the pool's images are its media
        spec.update(judged_spec(c, _stays_under_root))
    else:
        spec["media"] = _media(c, kind, spec)
    if spec.get("qrels"):  # the queries file holds the texts
        if "captions" in c.data:
            raise c.fail("captions", "not read with qrels (the queries file's text field holds the queries)")
        spec["captions"] = None
    elif kind in ITEM_KINDS:
        spec["captions"] = item_captions(c, kind, _caption_field)
    else:
        spec["captions"] = _captions(c, kind, generators)
    _check_cells(d, spec)
    spec["question"] = c.get("question", str, False)
    spec["group_by"] = c.strings("group_by", required=False)
    spec["min_group"] = c.get("min_group", int, False, 1)
    if spec["min_group"] < 1:
        raise c.fail("min_group", f"expected a whole number >= 1, got {spec['min_group']}")
    spec["authors"] = _authors(c) if kind in ("choice", "image_choice") else None
    spec["published"] = _published(c, source) if kind in ("choice", *ITEM_KINDS) else ()
    spec["cluster"] = _cluster(c, (spec["media"] or {}).get("kind", "image")) if kind in CLUSTERED_KINDS else {"by": "row", "name": "row"}
    if spec["cluster"]["by"] == "media" and spec.get("text_only"):
        raise c.fail("cluster", "a text_only task scores no media: cluster by the field naming the image ({field: NAME})")
    if spec["cluster"]["by"] == "media" and kind == "judged":
        raise c.fail("cluster", "a judged task's rows are queries, none of one image: row, or {field: NAME}")
    _metrics(c, kind, spec)
    return spec
