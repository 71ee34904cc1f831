"""The YAML keys of the item kinds (``group``, ``multi_choice``, ``image_choice``) and of retrieval with
qrels, checked key by key as `negharness.declarative.register` checks the others: every complaint
names the file and the dotted key, and a key a kind does not read is an error.

- ``group``: N images x N captions per record (``media.members`` or ``media.embedded``: the images in
  order; ``captions.members``: caption k belongs to image k); Winoground's text, image and group scores.
- ``multi_choice``: one medium, several true captions (``captions.positives``) and false ones
  (``captions.false``): right when every positive scores above every negative (SugarCrepe++ ITT); with
  ``text_only: true`` no medium: the two positives must be closer to each other than either is to a
  negative (SugarCrepe++ TOT, as the authors' evaluate_ulms.py and test_*.py score it).
- ``image_choice``: one caption (``captions.text``), several images or regions of one image
  (``media.boxes``); right when the true one (``media.true_box``, else the first) scores highest.
- ``retrieval`` with ``queries`` and ``qrels``: many relevant items per query, judged by a qrels file.
  With ``direction: media_to_text`` the data's media are the queries and a ``texts`` file holds the
  candidates (MRMR's image-to-text Negation); ``candidates`` limits each query to the items whose key
  (a regular expression's first group over the id) equals its own (MRMR's four per query).
- ``judged``: one row per query (``captions.field`` its text), with two judge questions
  (``questions.negation``, answered "no" by an image that respects the negation, and
  ``questions.verification``, answered "yes" by an image of what the query is about); the model
  retrieves the top ``top_k`` images of a ``pool`` (a folder's files in sorted order, the first
  ``pool.size``) and the run's judge (``--judge``) checks each, as SimpleNeg's script does
  (`negharness.declarative.judged`).
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

from negharness.declarative.annotations import FORMATS

ITEM_KINDS = ("group", "multi_choice", "image_choice")
SOURCE_FORMATS = ("parquet", "imagefolder", "arrow")  # `negharness.declarative.sources`
ALL_FORMATS = FORMATS + SOURCE_FORMATS
ITEM_MEDIA_KEYS = {"members", "embedded", "box", "boxes", "box_format", "true_box", "id"}
BOX_FORMATS = ("xywh", "xyxy")
QUERY_KEYS = {"file", "format", "id", "text"}
QRELS_KEYS = {"file", "format", "query", "item", "score"}
DIRECTIONS = ("text_to_media", "media_to_text")  # which side the queries are; the other is ranked
CANDIDATE_KEYS = {"query", "item"}
ITEM_CAPTIONS = {"group": {"members"}, "multi_choice": {"positives", "false"}, "image_choice": {"text"}}
QUESTION_KEYS = {"negation", "verification"}  # the judge's two questions of a judged task, as fields
POOL_KEYS = {"folder", "size", "pattern"}
DEFAULT_TOP_K = 5  # SimpleNeg's
MAX_TOP_K = 100
DEFAULT_ITEM_METRICS = {"group": ["text_score", "image_score", "group_score"],
                        "multi_choice": ["accuracy", "tie_rate"], "image_choice": ["accuracy", "tie_rate"]}


def data_format(c: Any, key: str, files: list[str]) -> str:
    """A data file's format: declared, or read from the first file's suffix (a folder: imagefolder)."""
    suffix = Path(files[0]).suffix.lstrip(".").lower()
    guess = {"pt": "torch", "pth": "torch"}.get(suffix, suffix)
    chosen: str = c.choice(key, ALL_FORMATS, guess if guess in ALL_FORMATS else None)
    return chosen


def item_media(m: Any, kind: str, qrels: bool) -> dict[str, Any]:
    """The media keys only the item kinds (and qrels retrieval) read; an error names a key read elsewhere."""
    allowed = set(ITEM_MEDIA_KEYS) if kind in ITEM_KINDS or qrels else set()
    if kind != "image_choice":
        allowed -= {"true_box"}
    if not qrels:
        allowed -= {"id"}
    if kind != "group":
        allowed -= {"members"}
    for key in sorted(ITEM_MEDIA_KEYS - allowed):
        if key in m.data:
            raise m.fail(key, f"not read by a {kind}{' task with qrels' if qrels else ''} task")
    out = {"members": m.strings("members", required=False), "embedded": m.strings("embedded", required=False),
           "box": m.get("box", str, False), "boxes": m.get("boxes", str, False),
           "box_format": m.choice("box_format", BOX_FORMATS, "xywh"), "true_box": m.get("true_box", str, False),
           "id": m.get("id", str, False)}
    if sum(bool(m.data.get(k)) for k in ("path", "base64", "members", "embedded")) > 1:
        raise m.fail("embedded" if "embedded" in m.data else "members",
                     "give one of path, base64, members, embedded (where the images are)")
    if out["box"] and out["boxes"]:
        raise m.fail("boxes", "give box (one region) or boxes (a list of regions), not both")
    if out["boxes"] and (out["members"] or len(out["embedded"] or [None]) > 1):
        raise m.fail("boxes", "regions are cut from one image: not with several members")
    if out["embedded"] and kind != "group" and len(out["embedded"]) != 1:
        raise m.fail("embedded", f"a {kind} task reads one image field")
    if out["boxes"] and (kind == "multi_choice" or qrels):  # they score one medium per record
        raise m.fail("boxes", f"not read by a {kind}{' task with qrels' if qrels else ''} task (it scores one image "
                              "per record): give box (one region)")
    if kind == "image_choice" and not out["boxes"]:
        raise m.fail("boxes", "missing (the field holding the regions an image_choice task chooses among)")
    if qrels and not out["id"]:
        raise m.fail("id", "missing (the field naming each item, as the qrels file names it)")
    return out


def item_captions(c: Any, kind: str, caption_field: Any) -> dict[str, Any]:
    """``captions`` of an item kind: each value a field name or ``{field, replace}`` (`caption_field`)."""
    raw = c.get("captions", dict)  # YAML 1.1 reads a bare false: as a boolean; it means the field name here
    c.data["captions"] = {("true" if k is True else "false" if k is False else k): v for k, v in raw.items()}
    cap = c.sub("captions", allowed=ITEM_CAPTIONS[kind])
    if kind == "group":
        fields = cap.get("members", (str, list))
        fields = [fields] if isinstance(fields, str) else fields  # one field holding the list of captions
        return {"members": [caption_field(cap, f"members.{i}", f) for i, f in enumerate(fields)]}
    if kind == "image_choice":
        return {"text": caption_field(cap, "text", cap.get("text", (str, dict)))}
    positives = cap.get("positives", (str, list))
    positives = [positives] if isinstance(positives, str) else positives
    false = cap.get("false", (str, dict, list))
    false = false if isinstance(false, list) else [false]
    if not positives or not false:
        raise cap.fail("positives" if not positives else "false", "at least one caption field")
    return {"positives": [caption_field(cap, f"positives.{i}", f) for i, f in enumerate(positives)],
            "false": [caption_field(cap, f"false.{i}", f) for i, f in enumerate(false)]}


def file_source(c: Any, key: str, allowed: set[str], fields: tuple[str, ...], stays: Any) -> dict[str, Any]:
    """A side file of qrels retrieval (``queries``, ``qrels``): its path under the data root, format and fields."""
    s = c.sub(key, allowed=allowed)
    path = s.get("file", str)
    stays(s, "file", path, f"the {key} file")
    out = {"file": path, "file_key": f"{key}.file", "format": data_format(s, "format", [path])}
    for f in fields:
        out[f] = s.get(f, str, f != "score")
    return out


def qrels_spec(c: Any, stays: Any) -> dict[str, Any]:
    """``queries`` (texts that rank the media) or, with ``direction: media_to_text``, ``texts`` (the
    candidates the media rank); ``qrels`` (query id, item id as the direction names them); ``candidates``."""
    direction = c.choice("direction", DIRECTIONS, DIRECTIONS[0])
    side, other = ("queries", "texts") if direction == DIRECTIONS[0] else ("texts", "queries")
    if other in c.data:
        raise c.fail(other, f"not read with direction: {direction} (the text file is '{side}')")
    return {"direction": direction, "queries": file_source(c, side, QUERY_KEYS, ("id", "text"), stays),
            "qrels": file_source(c, "qrels", QRELS_KEYS, ("query", "item", "score"), stays),
            "candidates": candidate_rule(c)}


MAX_PATTERN_CHARS = 200  # an id's key pattern is a few characters; a task file is untrusted input


# the stdlib's own parse of a pattern: `re._parser` from 3.11, `sre_parse` before (deprecated since)
re_parser: Any = importlib.import_module("re._parser" if sys.version_info >= (3, 11) else "sre_parse")


def pattern_problem(pattern: str) -> str | None:
    """Why a task file's id pattern is refused, or None. It runs on every id of the data with Python's
    backtracking `re`, which has no time limit: a repetition whose body can itself match in several ways
    with no literal to fix where one turn ends (``(a+)+``, ``(a|ab)*``, ``(\\w+\\s?)+``) can take exponential
    time on one long id, so it is refused with the pattern's other faults before any row is read;
    ``(?:-\\d+)*`` (each turn starts with its literal ``-``) stands."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"a pattern of {len(pattern)} characters (at most {MAX_PATTERN_CHARS})"
    try:
        parsed = re_parser.parse(pattern)
    except re.error as e:
        return f"not a regular expression ({e})"
    if _ambiguous_repeat(list(parsed)):
        return ("a repeated group whose body itself repeats or alternates with no literal between turns "
                "(e.g. (a+)+ or (a|ab)*) can take exponential time on a long id: write it without the nesting")
    return None


_REPEATS = tuple(getattr(re_parser, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(re_parser, n))


def _variable(low: int, high: Any) -> bool:
    return bool(high is re_parser.MAXREPEAT or high > low)  # x{2} is fixed, x+ and x? are not


def _children(op: Any, arg: Any) -> list[list[Any]]:
    """The sub-patterns of one parsed element (a repeat's body, each branch, a group, an assertion)."""
    if op in _REPEATS:
        return [list(arg[2])]
    if op is re_parser.BRANCH:
        return [list(b) for b in arg[1]]
    if op is re_parser.SUBPATTERN:
        return [list(arg[-1])]
    if op in (re_parser.ASSERT, re_parser.ASSERT_NOT):
        return [list(arg[1])]
    return []


def _varies(items: list[Any]) -> bool:
    """Whether a parsed pattern can match in more than one way: a repeat of variable count or an alternation."""
    return any((op in _REPEATS and _variable(arg[0], arg[1])) or op is re_parser.BRANCH
               or any(_varies(c) for c in _children(op, arg)) for op, arg in items)


def _flat(items: list[Any]) -> list[Any]:
    """The elements of a sequence, groups opened (their contents are part of the sequence)."""
    out: list[Any] = []
    for op, arg in items:
        out += _flat(list(arg[-1])) if op is re_parser.SUBPATTERN else [(op, arg)]
    return out


def _ambiguous_repeat(items: list[Any]) -> bool:
    """A variable repeat whose body varies and holds no literal of its own, anywhere in the pattern."""
    for op, arg in items:
        if op in _REPEATS and _variable(arg[0], arg[1]):
            body = list(arg[2])
            if _varies(body) and not any(o is re_parser.LITERAL for o, _ in _flat(body)):
                return True
        if any(_ambiguous_repeat(c) for c in _children(op, arg)):
            return True
    return False


def candidate_rule(c: Any) -> dict[str, Any] | None:
    """``candidates: {query: REGEX, item: REGEX}``: each id's key is the pattern's first group (the whole
    id where a side has no pattern); a query ranks only the items whose key equals its own."""
    if "candidates" not in c.data:
        return None
    s = c.sub("candidates", allowed=CANDIDATE_KEYS)
    out = {}
    for side in ("query", "item"):
        pattern = s.get(side, str, False)
        if pattern is not None:
            problem = pattern_problem(pattern)
            if problem:
                raise s.fail(side, problem)
        out[side] = pattern
    if not any(out.values()):
        raise c.fail("candidates", "give query or item (a pattern whose first group is the shared key)")
    return out


def _whole(c: Any, key: str, default: int | None, low: int, high: int | None = None) -> int | None:
    """An optional whole number in [low, high] (a YAML true is no number)."""
    value = c.data.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise c.fail(key, f"expected a whole number {bound}, got {value!r}"[:200])
    return value


def judged_spec(c: Any, stays: Any) -> dict[str, Any]:
    """``questions`` (the fields holding each row's negation and verification questions), ``pool`` (the
    folder whose files, in sorted order, the model retrieves from: ``size`` keeps the first N,
    ``pattern`` the names a glob matches) and ``top_k`` (images judged per query, ``-T top_k`` to
    change); the pool's images are the task's media."""
    q = c.sub("questions", allowed=QUESTION_KEYS)
    p = c.sub("pool", allowed=POOL_KEYS)
    folder = p.get("folder", str)
    stays(p, "folder", folder, "the pool folder")
    return {"questions": {k: q.get(k, str) for k in sorted(QUESTION_KEYS)},
            "pool": {"folder": folder, "size": _whole(p, "size", None, 1), "pattern": p.get("pattern", str, False, "*")},
            "top_k": _whole(c, "top_k", DEFAULT_TOP_K, 1, MAX_TOP_K),
            "media": {"kind": "image"}}

