"""Reading the annotation files of declarative tasks: JSON, JSON Lines, CSV/TSV, and torch files
(``weights_only``: plain containers of strings and numbers, never arbitrary pickles).

A file becomes a list of `Record` (its fields and where it came from, for error messages). Field
names are dotted paths into nested records (``mturk.caption``, ``sop_data.negative-prompt``,
``attributes.0``). CSV cells holding a Python list literal (CREPE's ``hard_negs``, NegBench's
``captions``) are read with `ast.literal_eval` when a list is asked for.
"""

from __future__ import annotations

import ast
import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from negharness.contracts.errors import UserError

FORMATS = ("json", "jsonl", "csv", "tsv", "torch")
_MISSING = object()


@dataclass(frozen=True)
class Record:
    fields: Any
    where: str  # "file: item 'key'", "file:line 5", "file: record 3"

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
        value = self.get(path)
        if not isinstance(value, (str, int, float)):
            raise UserError(f"{self.where}: field {path!r} is {type(value).__name__}, expected text")
        return str(value).strip()

    def texts(self, path: str) -> list[str]:
        """A field holding one caption or a list of them (a list literal in a CSV cell)."""
        value = self.get(path)
        if isinstance(value, str) and value.strip().startswith("["):
            try:
                value = ast.literal_eval(value.strip())
            except (ValueError, SyntaxError) as exc:
                raise UserError(f"{self.where}: field {path!r} is not a list literal ({exc.__class__.__name__})") from exc
        if isinstance(value, (str, int, float)):
            return [str(value).strip()] if str(value).strip() else []
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return [v.strip() for v in value if v.strip()]
        raise UserError(f"{self.where}: field {path!r} must be a caption or a list of captions")


def _load(path: Path, fmt: str) -> Any:
    try:
        if fmt == "json":
            with open(path, encoding="utf-8") as fh:
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
    raise AssertionError(fmt)


def _lines(path: Path, fmt: str) -> Iterable[Record]:
    try:
        fh = open(path, newline="", encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"file not found: {path}") from None
    with fh:
        if fmt == "jsonl":
            for lineno, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        yield Record(json.loads(line), f"{path}:line {lineno}")
                    except json.JSONDecodeError as exc:
                        raise UserError(f"{path}:line {lineno}: not valid JSON ({exc.msg})") from None
            return
        csv.field_size_limit(1 << 30)  # VLMEvalKit TSVs carry base64 images in a cell
        reader = csv.DictReader(fh, delimiter="\t" if fmt == "tsv" else ",")
        for lineno, row in enumerate(reader, 2):
            yield Record(row, f"{path}:line {lineno}")


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
        return list(_lines(path, fmt))
    data = _load(path, fmt)
    if isinstance(records, dict):
        return [Record(r, f"{path}: record {i}") for i, r in enumerate(_zip_columns(data, records, path))]
    if records:
        data = Record(data, str(path)).get(records)
    if isinstance(data, dict):  # SugarCrepe, VALSE: {"id": {...}, ...}; the key is kept as _key
        return [Record({**v, "_key": k} if isinstance(v, dict) else v, f"{path}: item {k!r}") for k, v in data.items()]
    if isinstance(data, list):
        return [Record(r, f"{path}: record {i}") for i, r in enumerate(data)]
    raise UserError(f"{path}: expected a list or an object of records, found {type(data).__name__}")


def explode(records: list[Record], field: str) -> list[Record]:
    """One record per element of a list field (Karpathy files: one image, five captions)."""
    out = []
    for rec in records:
        for j, value in enumerate(rec.texts(field)):
            fields = dict(rec.fields)
            fields[field] = value
            out.append(Record(fields, f"{rec.where} [{field} {j}]"))
    return out


def keep(rec: Record, where: dict[str, Any]) -> bool:
    """Filters: ``{field: value}`` keeps equal values; ``{field: {min: x, max: y}}`` a range."""
    for field, cond in where.items():
        value = rec.get(field)
        if isinstance(cond, dict):
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise UserError(f"{rec.where}: field {field!r} = {value!r} is not a number") from None
            if ("min" in cond and number < cond["min"]) or ("max" in cond and number > cond["max"]):
                return False
        elif value != cond and str(value) != str(cond):
            return False
    return True


_FIELD = re.compile(r"\{([^{}]+)\}")


def fill(template: str, rec: Record, strip_prefix: Iterable[str] = ()) -> str:
    """``coco/val2017/{filename}`` with the record's fields (dotted paths allowed); a prefix of a
    value listed in ``strip_prefix`` (an author's cluster path) is removed first."""
    def one(m: re.Match) -> str:
        value = str(rec.get(m.group(1))).strip().replace("\\", "/")
        for prefix in strip_prefix:
            if value.startswith(prefix):
                value = value[len(prefix):]
                break
        return value

    return _FIELD.sub(one, template)
