"""Published numbers as data: the papers' tables, typed and validated, and a run's difference to them.

A table is a CSV file (``#`` lines are comments) with one line per (paper row, task)::

    paper,table,row,model,arch,pretrained,task,note,<metric>,<metric>*100,<metric>/100,...

``row`` is the paper's own label; ``model``/``arch``/``pretrained`` the negharness model it
corresponds to (empty ``model``: no counterpart, the row is still shown beside measured ones;
empty ``arch``/``pretrained``: any; ``a|b``: either). A metric column is named as the task emits
the metric; ``name*k`` or ``name/k`` converts the printed number to the task's units, so the cells
stay exactly as the paper prints them. An empty or ``-`` cell is a value the paper does not report.

A task owns its tables: it names the files when it registers (``registry.add(..., published=files)``)
and passes them to `published_notes`; the leaderboard reads them from the registration, so it
imports no task code and globs no package folder.

A published number is only comparable with one measured on the collection the paper measured. The
folder of the tables holds ``collections.csv`` (not a table), one line per count a task's record
gives (its ``n_items``)::

    task,count,value,source
    msrvtt3k_original,videos,2990,"nT2VR Table 1, MSR-VTT3k test"

`published_notes` shows the differences only when every listed count of the task equals the run's;
otherwise (a stand-in collection, a --limit run, or a task with no line there) the record's notes
say why no published numbers are shown. Counts alone cannot tell a file with one caption changed
from the paper's, so where the paper's files are known the line ``content_sha256`` gives the
digest of their content as the task reads it (`collection_digest` of what decides every number:
captions, answers, templates and media file names, never the folders a copy moved them to); the
task passes its own digest and a run on any other content shows none of the paper's numbers.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.io.json_files import read_capped

FIXED = ("paper", "table", "row", "model", "arch", "pretrained", "task", "note")
REQUIRED = ("paper", "table", "row", "task")
MISSING = {"", "-", "–", "—", "_"}
MAX_TABLE_BYTES = 16 * 2**20  # a table of published numbers; the largest shipped is a few KB
METRIC_HEADER = re.compile(r"^(?P<name>[^*/\s][^*/]*?)(?:(?P<op>[*/])(?P<k>\d+(?:\.\d+)?))?$")


class PublishedTableError(UserError):
    """A published table that cannot be read: the message names the file and line."""


@dataclass(frozen=True)
class ModelIdentity:
    """What decides which published rows a run reproduces: plugin name, architecture, weights (tag or hash)."""

    name: str
    arch: str | None = None
    weights: str | None = None

    @classmethod
    def of(cls, model: Any) -> "ModelIdentity":
        """From a model or editor plugin: ``name`` and ``describe()`` (``arch``; ``weights`` or ``source``)."""
        info = model.describe() if hasattr(model, "describe") else {}
        weights = info.get("weights") or info.get("source")
        return cls(str(getattr(model, "name", "")), info.get("arch"), None if weights is None else str(weights))


@dataclass(frozen=True)
class PublishedRow:
    """One published number, in the task's units, with where it was printed."""

    paper: str
    table: str
    row: str
    model: str
    arch: str
    pretrained: tuple[str, ...]
    task: str
    metric: str
    value: float
    printed: str
    note: str
    file: str
    line: int

    @property
    def source(self) -> str:
        return f"{self.paper}, {self.table}, row {self.row!r}"

    def matches(self, who: ModelIdentity) -> bool:
        """Same model plugin, and the same architecture and weights where the row names them."""
        if not self.model or self.model != who.name:
            return False
        if self.arch and self.arch != who.arch:
            return False
        return not self.pretrained or who.weights in self.pretrained


def _metric_columns(path: Path, line: int, header: Sequence[str]) -> list[tuple[int, str, float]]:
    """(column index, metric name, factor to the task's units) for every non-fixed column."""
    out = []
    for i, col in enumerate(header):
        if col in FIXED:
            continue
        m = METRIC_HEADER.match(col.strip())
        if not m:
            raise PublishedTableError(f"{path}:{line}: column {col!r} is not a metric name, name*k or name/k")
        k = float(m["k"]) if m["k"] else 1.0
        if k == 0:
            raise PublishedTableError(f"{path}:{line}: column {col!r} scales by zero")
        out.append((i, m["name"].strip(), k if m["op"] != "/" else 1.0 / k))
    if not out:
        raise PublishedTableError(f"{path}:{line}: no metric columns")
    return out


def _lines(path: Path) -> Iterable[tuple[int, list[str]]]:
    """(line number, cells) of the non-comment, non-blank lines."""
    try:  # a task file from elsewhere names its tables: a regular file, capped, like every file it names
        text = read_capped(path, MAX_TABLE_BYTES, str(path), "a published table").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PublishedTableError(f"{path}: cannot read ({exc})") from exc
    except UserError as exc:
        raise PublishedTableError(str(exc)) from None
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            yield lineno, next(csv.reader([line]))


def load_table(path: Path | str) -> list[PublishedRow]:
    """Every published number of one table file; any malformed line is an error naming file and line."""
    path = Path(path)
    lines = iter(_lines(path))
    try:
        header_line, header = next(lines)
    except StopIteration:
        raise PublishedTableError(f"{path}: empty table") from None
    header = [h.strip() for h in header]
    absent = [c for c in REQUIRED if c not in header]
    if absent:
        raise PublishedTableError(f"{path}:{header_line}: header lacks column(s) {', '.join(absent)}")
    if len(set(header)) != len(header):
        raise PublishedTableError(f"{path}:{header_line}: a column name appears twice")
    metrics = _metric_columns(path, header_line, header)
    at = {c: header.index(c) for c in FIXED if c in header}
    out: list[PublishedRow] = []
    for lineno, cells in lines:
        if len(cells) != len(header):
            raise PublishedTableError(f"{path}:{lineno}: {len(cells)} cells, the header has {len(header)}")
        def get(c: str) -> str:
            return cells[at[c]].strip() if c in at else ""

        for c in REQUIRED:
            if not get(c):
                raise PublishedTableError(f"{path}:{lineno}: empty {c!r}")
        reported = 0
        for i, metric, factor in metrics:
            printed = cells[i].strip()
            if printed in MISSING:
                continue
            try:
                value = float(printed)
            except ValueError:
                raise PublishedTableError(f"{path}:{lineno}: {header[i]} = {printed!r} is not a number") from None
            reported += 1
            out.append(PublishedRow(get("paper"), get("table"), get("row"), get("model"), get("arch"),
                                    tuple(p for p in get("pretrained").split("|") if p), get("task"), metric,
                                    value * factor, printed, get("note"), str(path), lineno))
        if not reported:
            raise PublishedTableError(f"{path}:{lineno}: no value on this line")
    return out


COLLECTIONS_FILE = "collections.csv"
COLLECTION_COLUMNS = ("task", "count", "value", "source")


def tables_beside(module_file: str | Path) -> tuple[Path, ...]:
    """The ``published/*.csv`` table files in the folder of ``module_file`` (not its
    ``collections.csv``): what a task package passes as its tables (``tables_beside(__file__)`` in
    its ``__init__``)."""
    return tuple(sorted(p for p in (Path(module_file).parent / "published").glob("*.csv") if p.name != COLLECTIONS_FILE))


CONTENT = "content_sha256"  # the collections.csv count whose value is the digest of the paper's files
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Collection:
    """The collection a paper measured one task on: count name (as the task's record names it in
    ``n_items``) -> value, the digest of its content where the paper's files are known, and where
    each number comes from."""

    task: str
    counts: dict[str, int]
    sources: dict[str, str]
    content: dict[str, str] = field(default_factory=dict)  # CONTENT -> digest (at most one entry)


def collection_digest(items: Iterable[Any]) -> str:
    """SHA-256 of a collection's content as a task reads it: a JSON-able item per row, in file
    order. What a task passes to `published_notes` and what ``content_sha256`` lines hold."""
    return hash_json(list(items), 64)


def load_collections(path: Path | str) -> dict[str, Collection]:
    """Task -> its paper's collection, from one ``collections.csv``; a malformed line is an error
    naming file and line."""
    path = Path(path)
    lines = iter(_lines(path))
    try:
        header_line, header = next(lines)
    except StopIteration:
        raise PublishedTableError(f"{path}: empty collections table") from None
    if tuple(h.strip() for h in header) != COLLECTION_COLUMNS:
        raise PublishedTableError(f"{path}:{header_line}: the header must be {','.join(COLLECTION_COLUMNS)}")
    out: dict[str, Collection] = {}
    for lineno, cells in lines:
        if len(cells) != len(COLLECTION_COLUMNS):
            raise PublishedTableError(f"{path}:{lineno}: {len(cells)} cells, the header has {len(COLLECTION_COLUMNS)}")
        task, count, value, source = (c.strip() for c in cells)
        if not (task and count and source):
            raise PublishedTableError(f"{path}:{lineno}: task, count and source must all be given")
        entry = out.setdefault(task, Collection(task, {}, {}))
        if count in entry.counts or count in entry.content:
            raise PublishedTableError(f"{path}:{lineno}: {task} {count} given twice")
        if count == CONTENT:
            if not _HEX64.match(value):
                raise PublishedTableError(f"{path}:{lineno}: {count} = {value!r} is not a SHA-256 (64 hex digits)")
            entry.content[count] = value
        elif not value.isdigit():
            raise PublishedTableError(f"{path}:{lineno}: {count} = {value!r} is not a whole number")
        else:
            entry.counts[count] = int(value)
        entry.sources[count] = source
    return out


@lru_cache(maxsize=None)
def _cached_collections(folders: tuple[str, ...]) -> dict[str, Collection]:
    out: dict[str, Collection] = {}
    for folder in folders:
        path = Path(folder) / COLLECTIONS_FILE
        if path.is_file():
            out.update(load_collections(path))
    return out


def collections_beside(tables: Iterable[Path | str]) -> dict[str, Collection]:
    """The papers' collections named in the folders of these table files, read once per process."""
    return _cached_collections(tuple(sorted({str(Path(t).parent) for t in tables})))


def count_mismatches(counts: dict[str, Any], expected: Collection) -> list[tuple[str, int | None, int]]:
    """(name, measured or None, the paper's) for each count of the paper's collection a run's ``counts``
    (its ``n_items``) do not equal: the one comparison of sizes, for a record's notes and the board."""
    out: list[tuple[str, int | None, int]] = []
    for name, want in expected.counts.items():
        got = counts.get(name)
        if got is None or int(got) != want:
            out.append((name, None if got is None else int(got), want))
    return out


def collection_mismatch(task_name: str, counts: dict[str, Any], expected: Collection | None,
                        content: str | None = None) -> str | None:
    """Why a run did not measure the paper's collection (None when every count, and the content
    digest where the paper's files are known, matches)."""
    if expected is None:
        return (f"published numbers not shown: the size of the collection the paper measured {task_name} on "
                f"is not recorded (no {COLLECTIONS_FILE} line), so this run cannot be shown to match it")
    why = []
    for name, got, want in count_mismatches(counts, expected):
        why.append(f"the record gives no {name} count, {expected.sources[name]} has {want:,}" if got is None else
                   f"{got:,} {name} measured, {expected.sources[name]} has {want:,}")
    want_digest = expected.content.get(CONTENT)
    if want_digest and content != want_digest:
        why.append(f"the task gave no content digest, {expected.sources[CONTENT]} has one" if content is None else
                   f"the content read (sha256 {content[:12]}...) is not {expected.sources[CONTENT]} "
                   f"(sha256 {want_digest[:12]}...)")
    return "published numbers not shown: " + "; ".join(why) if why else None


@lru_cache(maxsize=None)
def _cached_rows(files: tuple[str, ...]) -> tuple[PublishedRow, ...]:
    return tuple(r for f in files for r in load_table(f))


def table_rows(files: Iterable[Path | str]) -> tuple[PublishedRow, ...]:
    """Every published number of these table files, read once per process."""
    return _cached_rows(tuple(str(f) for f in files))


def registered_rows(task_name: str, registry: Any) -> list[PublishedRow]:
    """The published numbers of a task, from the tables its registration names (none for a task
    the registry does not know or that names no tables)."""
    try:
        files = registry.get("task", task_name).meta.get("published", ())
    except UserError:  # unknown here (a third party's task not installed) or registered twice
        files = ()
    return published_rows(task_name, table_rows(files))


def published_rows(task_name: str, rows: Iterable[PublishedRow]) -> list[PublishedRow]:
    """Every published number for this task (all models, with or without a negharness counterpart),
    in table order: what a leaderboard shows beside measured rows, marked as published."""
    return [r for r in rows if r.task == task_name]


def compare(task_name: str, who: ModelIdentity, metrics: dict[str, float],
            rows: Iterable[PublishedRow]) -> list[dict[str, Any]]:
    """For each published number of a row this model reproduces: published, measured and the
    difference (measured - published, in the task's units). Several rows may match (a table and
    its erratum, two epochs of one tag); each says where it comes from."""
    out = []
    for r in published_rows(task_name, rows):
        if r.matches(who) and r.metric in metrics:
            measured = float(metrics[r.metric])
            out.append({"metric": r.metric, "published": r.value, "measured": measured,
                        "diff": measured - r.value, "source": r.source, **({"note": r.note} if r.note else {})})
    return out


def published_notes(task_name: str, model: Any, metrics: dict[str, float],
                    tables: Iterable[Path | str], counts: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    """What a task adds to ``TaskResult.notes``: ``{"published": [...]}`` when its model matches a
    row of its own ``tables`` and ``counts`` (the run's ``n_items``) equal those of the collection
    the paper measured (``collections.csv`` beside the tables), and ``content`` (the task's
    `collection_digest`) equals the paper's files' where those are known; ``{"published_not_shown":
    why}`` when a row matches but the collection does not; else {}."""
    tables = tuple(tables)
    found = compare(task_name, ModelIdentity.of(model), metrics, table_rows(tables))
    if not found:
        return {}
    why = collection_mismatch(task_name, counts, collections_beside(tables).get(task_name), content)
    return {"published_not_shown": why} if why else {"published": found}
