"""Reading the annotation files of declarative tasks: JSON, JSON Lines, CSV/TSV, and torch files
(``weights_only``: plain containers of strings and numbers, never arbitrary pickles).

A file becomes a list of `Record` (its fields and where it came from, for error messages). Field
names are dotted paths into nested records (``mturk.caption``, ``sop_data.negative-prompt``,
``attributes.0``). CSV cells holding a list, tuple or set literal or a JSON array (CREPE's
``hard_negs``, NegBench's ``captions``) are read as one when captions are asked for, by the rules
every reader shares (`negharness.io.csv_rows`: one encoding, one caption limit, no eval).
"""

from __future__ import annotations

import csv
import json
import re
import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from negharness.contracts.errors import UserError
from negharness.io.csv_rows import (
    DATA_ENCODING,
    check_caption,
    check_csv_header,
    check_csv_width,
    cell_captions,
    numbered_rows,
    readable_text,
)
from negharness.io.data_limits import MAX_DATA_RECORDS, check_data_file, check_row_count, too_deep

FORMATS = ("json", "jsonl", "csv", "tsv", "torch")
# how a column's text cells are read (a YAML task's ``data.cells``): "text", one caption as written,
# whatever it looks like; "list", a cell written as a list literal is its captions (`cell_captions`)
CELL_READINGS = ("text", "list")
NO_CELL_RULES: Mapping[str, str] = MappingProxyType({})  # shared by every record (no dict per row)
_MISSING = object()
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 4
_SHORT.maxlevel = 2


def short(value: Any) -> str:
    """A bounded repr for error messages: a value read from a user's file may be a megabyte of text or
    a nested list; ``repr`` of it would flood the terminal (or, for a shared nested list, never end)."""
    return _SHORT.repr(value)


@dataclass(frozen=True)
class Record:
    fields: Any
    where: str  # "file: item 'key'", "file:line 5", "file: record 3"
    # column -> "text" | "list" (the YAML's data.cells); one shared empty mapping by default, no dict per row
    cells: Mapping[str, str] = field(default_factory=lambda: NO_CELL_RULES)

    def get(self, path: str, default: Any = _MISSING) -> Any:
        """The value at a dotted path; missing -> ``default`` or a `UserError` naming the record and field."""
        value = self.fields
        for part in path.split("."):
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, (list, tuple)) and re.fullmatch(r"-?\d+", part) and -len(value) <= int(part) < len(value):
                value = value[int(part)]
            else:
                if default is not _MISSING:
                    return default
                raise UserError(f"{self.where}: no field {path!r}")
        return value

    def text(self, path: str) -> str:
        """A field's text, stripped, with surrogates read as every caption is (`readable_text`)."""
        value = self.get(path)
        if not isinstance(value, (str, int, float)):
            raise UserError(f"{self.where}: field {path!r} is {type(value).__name__}, expected text")
        return readable_text(str(value)).strip()

    def reading(self, path: str, default: str) -> str:
        """How the text cells of field ``path`` are read: as the task declared for its column (a joined
        row's ``0.caption`` is column ``caption``), else ``default`` (the field's role decides)."""
        return self.cells.get(path) or self.cells.get(re.sub(r"^\d+\.", "", path)) or default

    def texts(self, path: str, keep_empty: bool = False, default: str = "list") -> list[str]:
        """A field holding one caption or a list of them: a JSON list is a list; a text cell is one
        caption when its column is read as ``text`` (`reading`), and under ``list`` a cell written as a
        list, tuple or set literal or a JSON array is its captions (`cell_captions`). Empty ones are
        dropped unless ``keep_empty`` (options matched to an answer by position must keep their
        places). A caption over the shared limit is refused (`check_caption`), never cut by a tokenizer."""
        value = self.get(path)
        where = f"{self.where}: field {path!r}"
        if isinstance(value, str):
            value = [value] if self.reading(path, default) == "text" else cell_captions(value, where)
        if isinstance(value, (str, int, float)):
            value = [str(value)]
        if not (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
            raise UserError(f"{where} must be a caption or a list of captions")
        return [check_caption(v.strip(), where) for v in value if v.strip() or keep_empty]


def _load(path: Path, fmt: str) -> Any:
    try:
        check_data_file(path)
        if fmt == "json":
            with open(path, encoding=DATA_ENCODING) as fh:
                return json.load(fh)
        if fmt == "torch":
            import pickle

            import torch

            try:
                return torch.load(path, map_location="cpu", weights_only=True)
            except pickle.UnpicklingError as exc:
                raise UserError(f"{path}: holds objects beyond plain containers, strings and tensors; "
                                "negharness reads torch files with weights_only=True only") from exc
    except FileNotFoundError:
        raise UserError(f"file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except RecursionError:
        raise too_deep(path, what="JSON" if fmt == "json" else "a torch file's containers") from None
    raise AssertionError(fmt)


def _lines(path: Path, fmt: str) -> Iterable[Record]:
    check_data_file(path)
    try:
        fh = open(path, newline="", encoding=DATA_ENCODING)
    except FileNotFoundError:
        raise UserError(f"file not found: {path}") from None
    with fh:
        try:
            yield from (_jsonl(path, fh) if fmt == "jsonl" else _table(path, fh, fmt))
        except UnicodeDecodeError as exc:
            raise UserError(f"{path}: not UTF-8 text ({exc.reason})") from None


def _jsonl(path: Path, fh: Iterable[str]) -> Iterable[Record]:
    for lineno, line in enumerate(fh, 1):
        if line.strip():
            try:
                yield Record(json.loads(line), f"{path}:line {lineno}")
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}:line {lineno}: not valid JSON ({exc.msg})") from None
            except RecursionError:
                raise too_deep(path, f"{path}:line {lineno}") from None


def _table(path: Path, fh: Iterable[str], fmt: str) -> Iterable[Record]:
    csv.field_size_limit(1 << 30)  # VLMEvalKit TSVs carry base64 images in a cell
    reader = csv.DictReader(fh, delimiter="\t" if fmt == "tsv" else ",")
    width = len(check_csv_header(path, reader.fieldnames))  # a repeated column name: one would be lost
    hint = "a tab inside a cell?" if fmt == "tsv" else "an unquoted comma?"
    for lineno, row in numbered_rows(path, reader):
        where = f"{path}:line {lineno}"
        check_csv_width(where, row, width, hint)  # else the fields after it shift
        yield Record(row, where)


def _zip_columns(data: Any, columns: dict[str, str], path: Path) -> list[dict[str, Any]]:
    """Parallel lists (CC-Neg's ``image_paths`` and ``annotations``) -> one dict per index."""
    lists = {}
    for name, key in columns.items():
        value = Record(data, str(path)).get(key)
        if not isinstance(value, (list, tuple)):
            raise UserError(f"{path}: {key!r} is {type(value).__name__}, expected a list")
        lists[name] = value
    lengths = {len(v) for v in lists.values()}
    if len(lengths) > 1:
        raise UserError(f"{path}: the lists {', '.join(map(repr, columns.values()))} differ in length")
    n = lengths.pop() if lengths else 0
    return [{name: v[i] for name, v in lists.items()} for i in range(n)]


def read_records(path: Path, fmt: str, records: str | dict[str, str] | None = None) -> list[Record]:
    """Every record of a file. ``records`` points inside a JSON/torch file: a dotted path to the
    list (or dict of records), or a mapping of field name -> parallel list to zip."""
    if fmt in ("jsonl", "csv", "tsv"):
        rows: list[Record] = []
        for rec in _lines(path, fmt):
            rows.append(rec)
            if len(rows) > MAX_DATA_RECORDS:  # refused as read, not once all are in memory
                check_row_count(path, len(rows))
        return rows
    data = _load(path, fmt)
    if isinstance(records, dict):
        return [Record(r, f"{path}: record {i}") for i, r in enumerate(_zip_columns(data, records, path))]
    if records:
        data = Record(data, str(path)).get(records)
    if isinstance(data, (dict, list)):
        check_row_count(path, len(data))
    if isinstance(data, dict):  # SugarCrepe, VALSE: {"id": {...}, ...}; the key is kept as _key
        return [Record({**v, "_key": k} if isinstance(v, dict) else v, f"{path}: item {k!r}") for k, v in data.items()]
    if isinstance(data, list):
        return [Record(r, f"{path}: record {i}") for i, r in enumerate(data)]
    raise UserError(f"{path}: expected a list or an object of records, found {type(data).__name__}")


def edit_captions(texts: list[str], source: dict[str, Any]) -> list[str]:
    """A caption source's edits: its ``replace`` pairs (CC-Neg drops commas), then its ``prefix``
    (MMVP-VLM's scorer reads "a photo of " + statement); an empty caption stays empty."""
    for old, new in source["replace"].items():
        texts = [t.replace(old, new).strip() for t in texts]
    prefix = source.get("prefix", "")
    return [prefix + t if t and prefix else t for t in texts]


def join_rows(records: list[Record], n: int) -> list[Record]:
    """Every ``n`` consecutive records as one whose fields are the list of theirs (read as
    ``0.field``, ``1.field``): MMVP-VLM's Questions.csv holds a pair as two rows. A count that does
    not divide is refused naming the last row, rather than a pair being made across two items."""
    if len(records) % n:
        raise UserError(f"{records[-1].where}: {len(records)} rows do not make whole items of {n} rows "
                        f"(data.rows_per_item: {n})")
    return [Record([r.fields for r in records[i:i + n]], f"{records[i].where} (+{n - 1} rows)", records[i].cells)
            for i in range(0, len(records), n)]


def explode(records: list[Record], field: str) -> list[Record]:
    """One record per element of a list field (Karpathy files: one image, five captions)."""
    out = []
    for rec in records:
        for j, value in enumerate(rec.texts(field)):
            fields = dict(rec.fields)
            fields[field] = value
            out.append(Record(fields, f"{rec.where} [{field} {j}]", rec.cells))
    return out


FILTER_KEYS = ("min", "max", "in", "not in", "reason")


def _number(rec: Record, field: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise UserError(f"{rec.where}: field {field!r} = {short(value)} is not a number") from None


def _member(value: Any, options: list[Any]) -> bool:
    """Equality as the scalar filter reads it: the value itself or its text (a CSV cell is text)."""
    return any(value == o or str(value) == str(o) for o in options)


def passes(rec: Record, field: str, cond: Any) -> bool:
    """One filter: ``value`` keeps equal values; ``{min: x, max: y}`` a range; ``{in: [...]}`` or
    ``{not in: [...]}`` membership (ARO's VG-Relation drops its excluded relations this way)."""
    value = rec.get(field)
    if not isinstance(cond, dict):
        return _member(value, [cond])
    if ("min" in cond or "max" in cond):
        number = _number(rec, field, value)
        if ("min" in cond and number < cond["min"]) or ("max" in cond and number > cond["max"]):
            return False
    if "in" in cond and not _member(value, cond["in"]):
        return False
    return not ("not in" in cond and _member(value, cond["not in"]))


def keep(rec: Record, where: dict[str, Any]) -> bool:
    """Whether a record passes every filter of ``where`` (see `passes`)."""
    return all(passes(rec, field, cond) for field, cond in where.items())


def describe(field: str, cond: Any) -> str:
    """A filter in words, for the record's count of the rows it dropped."""
    if not isinstance(cond, dict):
        return f"{field} == {cond!r}"
    parts = [f"{field} >= {cond['min']:g}" if "min" in cond else "", f"{field} <= {cond['max']:g}" if "max" in cond else "",
             f"{field} in {len(cond['in'])} values" if "in" in cond else "",
             f"{field} not in {len(cond['not in'])} values" if "not in" in cond else ""]
    return " and ".join(p for p in parts if p)


def filter_counts(records: list[Record], where: dict[str, Any]) -> tuple[list[Record], list[dict[str, Any]]]:
    """The records that pass, and per filter (applied in order) how many it dropped and why, so a
    record can say what was left out (VALSE's validity rule drops 29 of 534)."""
    counts = []
    for field, cond in where.items():
        kept = [r for r in records if passes(r, field, cond)]
        entry: dict[str, Any] = {"filter": describe(field, cond), "rows": len(records) - len(kept)}
        if isinstance(cond, dict) and cond.get("reason"):
            entry["reason"] = cond["reason"]
        counts.append(entry)
        records = kept
    return records, counts


_FIELD = re.compile(r"\{([^{}]+)\}")


def fill(template: str, rec: Record, strip_prefix: Iterable[str] = ()) -> str:
    """``coco/val2017/{filename}`` with the record's fields (dotted paths allowed); a prefix of a
    value listed in ``strip_prefix`` (an author's cluster path) is removed first."""
    def one(m: re.Match[str]) -> str:
        value = str(rec.get(m.group(1))).strip().replace("\\", "/")
        for prefix in strip_prefix:
            if value.startswith(prefix):
                value = value[len(prefix):]
                break
        return value

    return _FIELD.sub(one, template)
