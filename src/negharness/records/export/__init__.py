"""`negharness export`: result records in the layouts other boards read, so our numbers can reach
them: MTEB's results folder, lm-eval's ``results_<date>.json`` and Every Eval Ever's records.

Each format is one module with a ``write(runs, out, published)`` function naming the files it would
write (`common.Planned`); `common` picks the records and reads them the same way for all three, and
writes the files once every one is known to stay inside OUT (`common.write_inside`).
"""

from __future__ import annotations

from pathlib import Path

from negharness.contracts.errors import UserError
from negharness.records.export import eee, lm_eval, mteb
from negharness.records.export.common import FORMATS, Export, PublishedOf, exportable, stable_uuid, write_inside

__all__ = ["FORMATS", "Export", "export", "stable_uuid"]
WRITERS = {"mteb": mteb.write, "lm-eval": lm_eval.write, "eee": eee.write}


def export(results_dir: Path, out: Path, fmt: str, published: PublishedOf = lambda task: ()) -> Export:
    """Write the records of ``results_dir`` into ``out`` in format ``fmt`` (one of `FORMATS`)."""
    if fmt not in WRITERS:
        raise UserError(f"--format {fmt}: not a format (use {', '.join(FORMATS)})")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"OUT {out}: is a file, not a folder")
    runs, aside = exportable(results_dir)
    try:
        files = write_inside(out, WRITERS[fmt](runs, out, published))
    except OSError as exc:
        raise UserError(f"OUT {out}: cannot write ({exc.strerror or exc})") from exc
    return Export(files, aside)
