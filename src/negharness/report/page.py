"""`negharness leaderboard --html DIR`: the board as a static page (one index.html, no server, no CDN).

Sortable tables (a few lines of inline JS: click a header), every measured value linking to its
record with its exact interval as a tooltip, and the plots inlined as SVG. `site_files` is a pure
function of the records (byte-identical output), so `--check` can compare the page on disk too.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

from negharness.report.leaderboard import Cell, Links, Row, TaskTable, summary_rows, table_heading, table_notes
from negharness.report.labels import short_label
from negharness.report.plots import all_plots, pca_scatter

STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;color:#222}
.scroll{overflow-x:auto;max-width:100%;margin:.5em 0 1.5em}.scroll table{margin:0}
table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:not(:first-child){white-space:nowrap}th{background:#f0f0f0;cursor:pointer;user-select:none}th:first-child,td:first-child{text-align:left}
tr.published td{color:#666;font-style:italic}td.best{font-weight:bold}a{color:#1a55a0;text-decoration:none}
.plot{margin:1em 0}.plot svg{max-width:100%;height:auto}.note{color:#555;font-size:.9em}"""

SORT_JS = """document.querySelectorAll('table.sortable th').forEach(function(th){th.addEventListener('click',function(){
var table=th.closest('table'),body=table.tBodies[0],col=th.cellIndex,asc=th.dataset.asc!=='1';
table.querySelectorAll('th').forEach(function(h){h.dataset.asc=''});th.dataset.asc=asc?'1':'0';
var key=function(tr){var c=tr.cells[col],v=c.dataset.value;return v===undefined||v===''?null:(isNaN(+v)?v:+v)};
Array.from(body.rows).sort(function(a,b){var x=key(a),y=key(b);if(x===null)return 1;if(y===null)return -1;
return (x<y?-1:x>y?1:0)*(asc?1:-1)}).forEach(function(tr){body.appendChild(tr)})})});"""


def newest_records(records: Iterable[tuple[Path, dict[str, Any]]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(model label, task) -> the newest full (not --limit) record, as the tables choose them. A run
    with other task settings (``-T qrels=...``) is its own table, ``task [variant]``, so it never
    stands in a plot for the task's default run."""
    out: dict[tuple[str, str], tuple[tuple[str, str], dict[str, Any]]] = {}
    for path, rec in records:
        if rec.get("limited"):
            continue
        variant = str(rec.get("variant_label") or "")
        key = (rec["model"]["label"], f"{rec['task']['name']} [{variant}]" if variant else rec["task"]["name"])
        order = (rec.get("created_at", ""), str(path))
        if key not in out or order > out[key][0]:
            out[key] = (order, rec)
    return {k: v[1] for k, v in sorted(out.items())}


def _td(cell: Cell | None, fmt: str, row: Row, links: Links, best: bool) -> str:
    if row.blank or cell is None:
        return "<td data-value=''>–</td>"
    text = html.escape(cell.text(fmt))
    title = ""
    if cell.interval:
        title = f" title='{html.escape(tooltip(cell, fmt))}'"
    if row.measured:
        link = links(cell.record)
        text = f"<a href='{html.escape(link)}'{title}>{text}</a>"
    return f"<td data-value='{cell.value!r}'{' class=best' if best else ''}>{text}</td>"


def tooltip(cell: Cell, fmt: str) -> str:
    """The exact bounds: over clusters (with the standard error) and over rows."""
    def bounds(iv: tuple[float, float]) -> str:
        return f"[{format(iv[0], fmt)}, {format(iv[1], fmt)}]"
    if cell.interval is None:  # `_td` asks only for a cell with an interval
        return ""
    if not cell.clustered:
        return f"95% interval over rows {bounds(cell.interval)} (record made before clusters)"
    se = "" if cell.se is None else f", SE {format(cell.se, fmt)}"
    rows = "" if cell.rows is None else f"; over rows {bounds(cell.rows)}"
    return f"95% interval over clusters {bounds(cell.interval)}{se}{rows}"


def _esc(label: str) -> str:
    """A label as the page shows it: escaped, absolute paths cut to their file name."""
    return html.escape(short_label(label))


def _scroll(table: str) -> str:
    """A table in its own box that scrolls sideways, so a board of many tasks never widens the page."""
    return f"<div class=scroll>{table}</div>"


def _row_label(row: Row) -> str:
    if row.published:
        return f"<td data-value='{_esc(row.label)}'>published: {_esc(row.label)} " \
               f"<span class=note>({html.escape(row.published)})</span>{' §' if row.other_size else ''}</td>"
    mark = (" †" if row.circular else "") + (" ‡" if row.record is not None and row.clusters is None else "")
    return f"<td data-value='{_esc(row.label)}'>{_esc(row.label)}{mark}</td>"


def _summary_table(tables: list[TaskTable], links: Links) -> str:
    # a header may break after an underscore (shapes_t2v_<wbr>original): the summary fits more columns
    head = "".join(f"<th>{_esc(t.task).replace('_', '_<wbr>')} {html.escape(t.main_column.title)}</th>"
                   for t in tables)
    body = []
    for line in summary_rows(tables):
        cells = ["<td data-value=''>–</td>" if row is None else
                 _td(row.cells.get(t.main), t.main_column.fmt, row, links, bold) for t, row, bold in line.cells]
        label = _esc(line.label)
        body.append(f"<tr><td data-value='{label}'>{label}</td>{''.join(cells)}</tr>")
    return _scroll(f"<table class=sortable id=summary><thead><tr><th>model</th>{head}</tr></thead>"
                   f"<tbody>{''.join(body)}</tbody></table>")


def _task_table(t: TaskTable, links: Links) -> str:
    head = "".join(f"<th>{html.escape(c.title)}</th>" for c in t.columns)
    bold = {c.metric: t.bold(c) for c in t.columns}
    body = []
    for row in t.rows:
        cells = "".join(_td(row.cells.get(c.metric), c.fmt, row, links, bold[c.metric] is row) for c in t.columns)
        body.append(f"<tr{' class=published' if row.published else ''}>{_row_label(row)}{cells}</tr>")
    note_html = "".join(f"<p class=note>{_esc(n)}</p>" for n in table_notes(t))
    return (f"<h3 id='task-{_esc(t.task)}'>{_esc(t.task)} <span class=note>({html.escape(table_heading(t))})"
            "</span></h3>"
            + _scroll(f"<table class=sortable data-task='{_esc(t.task)}'><thead><tr><th>model</th>{head}</tr></thead>"
                      f"<tbody>{''.join(body)}</tbody></table>") + note_html)


def markdown_to_html(text: str) -> str:
    """Enough Markdown for the experiment table: headings, paragraphs, pipe tables, **bold**, `code`."""
    out: list[str] = []
    para: list[str] = []  # the lines of the paragraph being read
    rows: list[str] = []  # the lines of the table being read

    def inline(s: str) -> str:
        s = html.escape(s)
        s = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", s)
        return re.sub(r"`(.+?)`", r"<code>\1</code>", s)

    def flush() -> None:
        if para:
            out.append(f"<p>{inline(' '.join(para))}</p>")
            para.clear()
        if rows:
            cells = [[c.strip() for c in r.strip().strip("|").split("|")] for r in rows if not re.match(r"^\|[-:| ]+\|$", r.strip())]
            head, *rest = cells
            out.append(_scroll("<table class=sortable><thead><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head)
                               + "</tr></thead><tbody>" + "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r)
                                                                 + "</tr>" for r in rest) + "</tbody></table>"))
            rows.clear()
    for line in text.splitlines():
        if line.startswith("|"):
            if para:
                flush()
            rows.append(line)
        elif not line.strip():
            flush()
        elif line.startswith("#"):
            flush()
            level = min(len(line) - len(line.lstrip("#")) + 1, 4)
            out.append(f"<h{level}>{inline(line.lstrip('#').strip())}</h{level}>")
        else:
            if rows:
                flush()
            para.append(line.strip())
    flush()
    return "".join(out)


def _diagnoses(diagnoses: Sequence[tuple[Path, dict[str, Any]]], links: Links) -> str:
    """One PCA scatter per diagnosed model (NegBench Fig. 6), with its summary numbers and a link to its file."""
    figures = []
    for path, d in diagnoses:
        s = d["summary"]
        note = (f"{s['n_captions']} captions over {len(d.get('objects') or [])} objects; mean cos('X', 'not X') "
                f"{s['same_object_negation']:.3f}, mean cos('X', 'Y') {s['different_objects']:.3f}, "
                f"negation gap {s['negation_gap']:+.3f}")
        figures.append(f"<figure class=plot id='diagnosis-{html.escape(path.parent.name)}'><figcaption>"
                       f"{_esc(d['model']['label'])}: <a href='{html.escape(links(path))}'>{html.escape(note)}</a>"
                       f"</figcaption>{pca_scatter(d)}</figure>")
    return ("<section id=diagnoses><h2>Embedding diagnosis (NegBench Fig. 6)</h2><p class=note>Made by "
            "<code>negharness diagnose</code>: captions of five template families over a set of objects, through the "
            "model's text tower, projected on their first two principal components. A gap &gt; 0 means 'not X' sits "
            "closer to 'X' than another object does: the model clusters by object and ignores the negation. "
            f"Hover a point for its caption.</p>{''.join(figures)}</section>")


def site_files(tables: list[TaskTable], records: list[tuple[Path, dict[str, Any]]], site_dir: Path,
               experiment: Path | None = None, diagnoses: Sequence[tuple[Path, dict[str, Any]]] = ()
               ) -> dict[str, str]:
    """{file name under site_dir: text}: today one self-contained index.html. ``diagnoses`` are
    checked `negharness diagnose` results (`diagnosis_file.load_all`)."""
    links = Links(Path(site_dir).resolve())
    newest = newest_records(records)
    parts = ["<!doctype html><html lang=en><head><meta charset='utf-8'><title>negharness leaderboard</title>",
             f"<style>{STYLE}</style></head><body><h1>negharness leaderboard</h1>",
             "<p class=note>Generated by <code>negharness leaderboard --html</code> from the result records. "
             "Each value links to its record; <code>±h</code> is half the width of the 95% percentile bootstrap "
             "interval over clusters: the images, videos or source items the task's queries share, resampled "
             "whole (each task's heading says what and how many; hover for the exact bounds, the standard error "
             "and the interval over rows). Bold: best, with an interval that does not overlap the runner-up's. "
             "‡ record made before clusters: interval over rows, never bold. "
             "† circular setup, never bold. Published rows are in italics. "
             "Click a column header to sort.</p>"]
    if not tables:
        parts.append("<p>No result records yet: run <code>negharness run</code> first.</p>")
    else:
        parts.append("<h2 id=summary-title>Summary: main score per task</h2>" + _summary_table(tables, links))
        plots = all_plots(newest)
        if plots:
            parts.append("<h2>Plots</h2>")
            parts += [f"<figure class=plot id='{html.escape(pid)}'><figcaption>{html.escape(title)}</figcaption>"
                      f"{svg}</figure>" for pid, title, svg in plots]
        parts.append("<h2>Tasks</h2>" + "".join(_task_table(t, links) for t in tables))
    if diagnoses:
        parts.append(_diagnoses(list(diagnoses), links))
    if experiment is not None and experiment.is_file():
        parts.append(f"<section id=experiment><h2>Experiment: {html.escape(experiment.name)}</h2>"
                     f"{markdown_to_html(experiment.read_text(encoding='utf-8'))}</section>")
    parts.append(f"<script>{SORT_JS}</script></body></html>\n")
    return {"index.html": "".join(parts)}
