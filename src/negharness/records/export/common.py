"""What every export format reads the same way: which records are exported (the board's: no --limit
run, no variant, every damaged record refused as the leaderboard refuses it), the model's identity
and revision, a metric's unit (`negharness.scoring.catalog.record_scale`: the catalogue's, as the record
declares it), interval and standard error, the number of queries; and where a file may go.

A metric whose unit the catalogue does not know (a third-party task's) is left out of every format and
named with the records left aside, and a record whose main score is such a metric is left aside: MTEB
and lm-eval keep shares of 1 and have no field saying a number is in another unit, so a percent
written there as it is reads 100x too high on their boards, and a guess would be that bug again. A
catalogue percent the record declares as a share of 1 (``accuracy`` formatted ``.3f`` or ``.2%``) is
exported as that share.

Nothing leaves OUT: every part of a file's path taken from a record (model folder, revision, task,
family) or a paper's row is made one plain folder or file name (`safe_component`), and every file is
checked to resolve inside OUT before any is written (`write_inside`), else the export is refused naming
the record. ``leaderboard --check`` refuses such a record first (`negharness.records.schema.name_problems`).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from negharness.contracts.errors import UserError
from negharness.contracts.hashing import hash_json
from negharness.records.board_pass import checked_records
from negharness.records.published import PublishedRow
from negharness.scoring.catalog import Scale, record_scale, scale_of
from negharness.io.atomic_files import atomic_write_json

FORMATS = ("mteb", "lm-eval", "eee")
ORG = "negharness"  # the namespace of a model id: negharness/<record folder>, one per model configuration

PublishedOf = Callable[[str], Sequence[PublishedRow]]  # task name -> the papers' numbers for it
NO_UNIT = ("its unit is not in negharness' metric catalogue, or the record declares it in the other direction, "
           "so no format can say it")


@dataclass(frozen=True)
class Export:
    """What `export` wrote, and the records it left aside with why."""

    files: list[Path]
    left_aside: list[str]


@dataclass(frozen=True)
class Run:
    """One exported record: the record and the folder name of its model (its configuration)."""

    path: Path
    rec: dict[str, Any]

    @property
    def model_dir(self) -> str:
        return self.path.parent.name

    @property
    def model_id(self) -> str:
        """``negharness/<record folder>``: unique per model, options and precision, as the board's row."""
        return f"{ORG}/{self.model_dir}"

    @property
    def task(self) -> str:
        return str(self.rec["task"]["name"])

    @property
    def family(self) -> str:
        return str(self.rec["task"].get("family") or self.task)

    @property
    def revision(self) -> str | None:
        """The weights' revision (hub commit or checkpoint hash); None in records made before it."""
        value = (self.rec.get("model") or {}).get("revision")
        return str(value) if value else None

    @property
    def created(self) -> _dt.datetime:
        text = self.rec.get("created_at")
        try:
            when = _dt.datetime.fromisoformat(str(text))
        except ValueError:
            raise UserError(f"{self.path}: created_at {text!r} is not an ISO date") from None
        return when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc)

    @property
    def numbers(self) -> dict[str, float]:
        """The record's numbers, the board's metrics first (a metric without a value is left out)."""
        values = self.rec["metrics"]
        first = [m for m in self.rec["task"].get("leaderboard_metrics") or () if m in values]
        order = first + [m for m in values if m not in first]
        return {m: float(values[m]) for m in order if isinstance(values[m], (int, float))}

    @property
    def metrics(self) -> dict[str, float]:
        """The numbers the formats carry: those whose unit is known (`unscaled` names the others)."""
        return {m: v for m, v in self.numbers.items() if self.scale(m) is not None}

    @property
    def unscaled(self) -> list[str]:
        """The record's metrics of no known unit, left out of every format."""
        return [m for m in self.numbers if self.scale(m) is None]

    def scale(self, metric: str) -> Scale | None:
        """The unit of one of this record's metrics (a suite's columns are its members' accuracy)."""
        members = ((self.rec.get("config") or {}).get("task") or {}).get("members")
        declared = (self.rec.get("metric_info") or {}).get(metric)
        return record_scale(metric, declared, members if isinstance(members, dict) else ())

    def paper_unit(self, metric: str) -> Scale | None:
        """The unit a paper's number for this record's task is printed in: the catalogue's (the published
        tables are in the board's units), whatever this record declares."""
        members = ((self.rec.get("config") or {}).get("task") or {}).get("members")
        return scale_of(metric, members if isinstance(members, dict) else ())

    def unit(self, metric: str) -> Scale:
        """The unit of an exported metric (`exportable` left out those of no known unit)."""
        scale = self.scale(metric)
        if scale is None:
            raise ValueError(f"{self.path}: metric {metric!r} has no unit in the metric catalogue")
        return scale

    def per_one(self, metric: str, value: float) -> float:
        """``value`` of ``metric`` as the tools that keep shares of 1 hold it (MTEB, lm-eval)."""
        return self.unit(metric).per_one(value)

    @property
    def main(self) -> tuple[str, float]:
        name = str(self.rec["main_score"]["name"])
        return name, float(self.rec["main_score"]["value"])

    def higher_is_better(self, metric: str) -> bool:
        return bool((self.rec.get("metric_info") or {}).get(metric, {}).get("higher_is_better", True))

    def interval(self, metric: str) -> tuple[float, float] | None:
        found = (self.rec.get("intervals") or {}).get(metric)
        return (float(found[0]), float(found[1])) if isinstance(found, list) and len(found) == 2 else None

    @property
    def interval_method(self) -> dict[str, Any]:
        return dict(self.rec.get("interval_method") or {})

    def standard_error(self, metric: str) -> float | None:
        """The record's standard error of a metric, where the record has one (``standard_errors``)."""
        found = (self.rec.get("standard_errors") or {}).get(metric)
        return float(found) if isinstance(found, (int, float)) else None

    @property
    def queries(self) -> int:
        """The number of queries (rows) scored: what each metric averages over."""
        counted = self.interval_method.get("queries")
        if isinstance(counted, int):
            return counted
        items = self.rec.get("n_items") or {}
        value = items.get("queries", next((v for v in items.values() if isinstance(v, int)), 0))
        return int(value)

    @property
    def split(self) -> str:
        return str(((self.rec.get("config") or {}).get("task") or {}).get("split") or "test")

    @property
    def data_revision(self) -> str:
        """The content digest of the data files the task read; a generated collection (no files) is
        named by the hash of the task settings that generate it."""
        data = self.rec.get("data") or {}
        if data.get("n_files") and data.get("digest"):
            return str(data["digest"])
        return "config-" + hash_json((self.rec.get("config") or {}).get("task") or {}, 16)


def stable_uuid(*parts: str) -> str:
    """A version-4-shaped UUID drawn from ``parts``: the same records export to the same file names."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()[:16]
    return str(uuid.UUID(bytes=digest, version=4))


def safe_component(text: str) -> str:
    """``text`` as one portable folder or file name, the one rule for every path part an export takes
    from a record or a paper's row: no separator, no character Windows refuses, never ``.``, ``..`` or
    hidden (leading dots go), so a part can name nothing but itself inside its folder."""
    return re.sub(r'[<>:"/\\|?*\x00-\x1f\s]+', "_", text).strip("._") or "unnamed"


@dataclass(frozen=True)
class Planned:
    """One file an export will write: where (`out_path`), what, and the record (or published table)
    its path was built from, to name in a refusal."""

    path: Path
    body: dict[str, Any]
    source: Path | str


def out_path(out: Path, *parts: str) -> Path:
    """``out`` / each of ``parts`` made a plain name (`safe_component`): how every format names a file."""
    return Path(out).joinpath(*(safe_component(p) for p in parts))


def outside(out: Path, path: Path) -> bool:
    """Whether ``path`` resolves (links followed, ``..`` taken) outside ``out``."""
    return not Path(path).resolve().is_relative_to(Path(out).resolve())


def write_inside(out: Path, planned: Sequence[Planned]) -> list[Path]:
    """Write every planned file, once each is known to resolve inside ``out``: a path that would land
    elsewhere (a link inside OUT that leads out, a part no rule made safe) refuses the export, naming
    the record it came from, before anything is written."""
    for item in planned:
        if outside(out, item.path):
            raise UserError(f"{item.source}: export file {item.path} resolves to {Path(item.path).resolve()}, "
                            f"outside OUT {out}; nothing was written (a link inside OUT, or an unsafe name in "
                            "the record)")
    return [atomic_write_json(item.path, item.body) for item in planned]


def exportable(results_dir: Path) -> tuple[list[Run], list[str]]:
    """The board's records (default runs, not --limit) and why any other record was left aside."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise UserError(f"RESULTS_DIR {results_dir}: no such folder (run `negharness run` first)")
    runs, aside = [], []
    for path, rec in checked_records(results_dir):  # a damaged record is refused, never skipped
        run = Run(path, rec)
        if rec.get("limited"):
            aside.append(f"{path} (a --limit run)")
        elif rec.get("variant_label"):
            aside.append(f"{path} (variant {rec['variant_label']}: the formats name a task once)")
        elif run.scale(run.main[0]) is None:
            aside.append(f"{path} (main score {run.main[0]}: {NO_UNIT})")
        else:
            runs.append(run)
            aside += [f"{path}: metric {m} left out ({NO_UNIT})" for m in run.unscaled]
    if not runs:
        raise UserError(f"RESULTS_DIR {results_dir}: no record to export"
                        + (f" ({len(aside)} left aside: --limit or variant runs, or a main score of no known unit)"
                           if aside else ""))
    return runs, aside
