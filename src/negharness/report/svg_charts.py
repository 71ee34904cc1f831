"""Small hand-written SVG charts for the leaderboard page: grouped or stacked bars with error bars,
and scatter plots, each with axes, ticks, axis labels, a title and a legend.

Plain strings, no plotting library: a page of plots builds in milliseconds, nothing heavy is
imported, and the same data always gives byte-identical SVG (coordinates are rounded to 0.1 px).
Text stays text, so a browser test can find the labels and a reader can search the page.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Sequence

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
CHAR_W = 6.2  # average width of an 11 px sans-serif character, for layout
MAX_LABEL = 28  # category labels longer than this are cut (the full label is the hover text)


@dataclass(frozen=True)
class Series:
    """One bar per category; None leaves a category's bar out; errs are (below, above) the value,
    None where the value has no interval (then no whisker: a zero-width one would claim certainty)."""

    name: str
    values: Sequence[float | None]
    errs: Sequence[tuple[float, float] | None] | None = None

    def err(self, i: int) -> tuple[float, float] | None:
        return self.errs[i] if self.errs else None


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    xerr: tuple[float, float] = (0.0, 0.0)
    yerr: tuple[float, float] = (0.0, 0.0)
    label: str = ""  # written beside the point
    tip: str = ""  # hover text


def _n(v: float) -> str:
    """A coordinate: 0.1 px is finer than any screen, and keeps the SVG small and stable."""
    s = f"{v:.1f}"
    return "0" if s in ("0.0", "-0.0") else s.removesuffix(".0")


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def text_width(text: str, font_size: float = 11) -> float:
    """Estimated width in pixels of ``text`` at ``font_size``: what the layout reserves for it."""
    return len(text) * CHAR_W * font_size / 11


def fit(text: str, width: float, font_size: float = 11) -> str:
    """``text`` cut (with an ellipsis) to what ``width`` pixels hold, so no label leaves its figure."""
    room = max(1, int(width / (CHAR_W * font_size / 11)))
    return text if len(text) <= room else text[:room - 1] + "…"


def nice_ticks(lo: float, hi: float, n: int = 5) -> tuple[list[float], float]:
    """About n round tick values (steps of 1, 2, 2.5 or 5 times a power of ten) covering [lo, hi]."""
    if not hi > lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(i * step, 12) for i in range(first, last + 1)], step


def tick_text(v: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    if round(step / 10 ** math.floor(math.log10(step) + 1e-9), 6) == 2.5:
        decimals += 1
    s = f"{v:.{decimals}f}"
    return s[1:] if s.startswith("-") and float(s) == 0 else s


class _Frame:
    """The plot area (pixels) and the data ranges it shows; writes the axes."""

    def __init__(self, box: tuple[float, float, float, float], xr: tuple[float, float] | None,
                 yr: tuple[float, float]):
        self.x0, self.y0, self.x1, self.y1 = box
        self.yticks, self.ystep = nice_ticks(*yr)
        self.ylo, self.yhi = self.yticks[0], self.yticks[-1]
        self.xticks, self.xstep = nice_ticks(*xr) if xr else ([], 1.0)
        self.xlo, self.xhi = (self.xticks[0], self.xticks[-1]) if xr else (0.0, 1.0)

    def px(self, x: float) -> float:
        return self.x0 + (x - self.xlo) / (self.xhi - self.xlo) * (self.x1 - self.x0)

    def py(self, y: float) -> float:
        return self.y1 - (y - self.ylo) / (self.yhi - self.ylo) * (self.y1 - self.y0)

    def axes(self, xlabel: str, ylabel: str) -> list[str]:
        out = ["<g class='axes' stroke='#999' stroke-width='1'>"]
        for t in self.yticks:
            y = _n(self.py(t))
            out.append(f"<line x1='{_n(self.x0)}' x2='{_n(self.x1)}' y1='{y}' y2='{y}' stroke='#e6e6e6'/>")
        for t in self.xticks:
            x = _n(self.px(t))
            out.append(f"<line x1='{x}' x2='{x}' y1='{_n(self.y0)}' y2='{_n(self.y1)}' stroke='#e6e6e6'/>")
        out.append(f"<path d='M{_n(self.x0)} {_n(self.y0)}V{_n(self.y1)}H{_n(self.x1)}' fill='none' stroke='#444'/>")
        out.append("</g><g class='ticks' fill='#333'>")
        out += [f"<text x='{_n(self.x0 - 5)}' y='{_n(self.py(t) + 4)}' text-anchor='end'>{tick_text(t, self.ystep)}</text>"
                for t in self.yticks]
        out += [f"<text x='{_n(self.px(t))}' y='{_n(self.y1 + 15)}' text-anchor='middle'>{tick_text(t, self.xstep)}</text>"
                for t in self.xticks]
        out.append("</g>")
        cy = (self.y0 + self.y1) / 2
        shown = fit(ylabel, self.y1 - self.y0 + 20)  # rotated: it runs along the plot's height
        tip = f"<title>{_e(ylabel)}</title>" if shown != ylabel else ""
        out.append(f"<text class='ylabel' x='14' y='{_n(cy)}' text-anchor='middle' "
                   f"transform='rotate(-90 14 {_n(cy)})'>{tip}{_e(shown)}</text>")
        if xlabel:
            out.append(f"<text class='xlabel' x='{_n((self.x0 + self.x1) / 2)}' y='{_n(self.y1 + 34)}' "
                       f"text-anchor='middle'>{_e(xlabel)}</text>")
        return out


def _legend(items: Sequence[tuple[str, str, str]], x0: float, y0: float, width: float) -> tuple[list[str], float]:
    """(svg, height) of a legend laid out in rows above the plot: (name, colour, 'bar'|'dot') items."""
    out, x, y = ["<g class='legend'>"], x0, y0
    for full, colour, kind in items:
        name = fit(full, width - 22)
        w = 22 + text_width(name)
        if x + w > x0 + width and x > x0:
            x, y = x0, y + 16
        mark = (f"<rect x='{_n(x)}' y='{_n(y - 9)}' width='10' height='10' fill='{colour}'/>" if kind == "bar"
                else f"<circle cx='{_n(x + 5)}' cy='{_n(y - 4)}' r='4' fill='{colour}'/>")
        out.append(f"{mark}<text x='{_n(x + 14)}' y='{_n(y)}'>{_e(name)}</text>")
        x += w
    out.append("</g>")
    return out, (y - y0) + 16 if items else 0.0


def _open(width: float, height: float, title: str) -> list[str]:
    shown = fit(title, width - 8, 13)
    tip = f"<title>{_e(title)}</title>" if shown != title else ""
    return [f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {_n(width)} {_n(height)}' width='{_n(width)}' "
            f"height='{_n(height)}' font-family='system-ui,sans-serif' font-size='11' role='img' aria-label='{_e(title)}'>",
            f"<text class='title' x='{_n(width / 2)}' y='16' text-anchor='middle' font-size='13'>{tip}{_e(shown)}</text>"]


def _errbar(x: float, ya: float, yb: float, horizontal: bool = False, cap: float = 3.0) -> str:
    """A whisker from ya to yb at x (pixels), with caps; horizontal swaps the axes."""
    if horizontal:
        return (f"<path class='err' d='M{_n(ya)} {_n(x)}H{_n(yb)}M{_n(ya)} {_n(x - cap)}v{_n(2 * cap)}"
                f"M{_n(yb)} {_n(x - cap)}v{_n(2 * cap)}' stroke='#222' fill='none'/>")
    return (f"<path class='err' d='M{_n(x)} {_n(ya)}V{_n(yb)}M{_n(x - cap)} {_n(ya)}h{_n(2 * cap)}"
            f"M{_n(x - cap)} {_n(yb)}h{_n(2 * cap)}' stroke='#222' fill='none'/>")


LABEL_ANGLE = 35  # degrees: category labels are rotated this much, their end under their bar


def bar_chart(categories: Sequence[str], series: Sequence[Series], *, title: str, ylabel: str,
              stacked: bool = False, width: float = 640, height: float = 340) -> str:
    """Grouped bars (one per series in each category, each with its interval as an error bar where
    the series has one), or stacked ones. Every mark stays inside the figure: the left margin grows
    for a long first category label, labels and titles too long for the figure are cut."""
    tops, bottoms = [0.0], [0.0]
    for i in range(len(categories)):
        vals = [(v, s.err(i) or (0.0, 0.0)) for s in series if (v := s.values[i]) is not None]
        if stacked:
            tops.append(sum(v for v, _ in vals))
        else:
            tops += [v + e[1] for v, e in vals]
            bottoms += [v - e[0] for v, e in vals]
    legend, lh = _legend([(s.name, PALETTE[k % len(PALETTE)], "bar") for k, s in enumerate(series)], 50, 36, width - 60)
    shown = [c if len(c) <= MAX_LABEL else c[:MAX_LABEL - 1] + "…" for c in categories]
    cos, sin = math.cos(math.radians(LABEL_ANGLE)), math.sin(math.radians(LABEL_ANGLE))
    bottom_margin = 24 + sin * CHAR_W * max((len(c) for c in shown), default=1)
    frame = _Frame((56, 30 + lh + 6, width - 12, height - bottom_margin), None, (min(bottoms), max(tops)))
    # the y tick labels and the first rotated category label need room left of the plot area
    ticks = max(text_width(tick_text(t, frame.ystep)) for t in frame.yticks)
    first = text_width(shown[0]) * cos if shown else 0.0
    x0 = max(56.0, 24 + ticks + 8)
    if categories:
        # the first label ends at the middle of its band: x0 + band / 2 - first >= 2
        x0 = max(x0, (2 + first - (width - 12) / (2 * len(categories))) / (1 - 1 / (2 * len(categories))))
    frame = _Frame((x0, frame.y0, width - 12, frame.y1), None, (min(bottoms), max(tops)))
    out = _open(width, height, title) + legend + frame.axes("", ylabel)
    band = (frame.x1 - frame.x0) / max(len(categories), 1)
    group = band * (0.6 if stacked else 0.8)
    bar_w = group if stacked else group / max(len(series), 1)
    out.append("<g class='bars'>")
    for i, cat in enumerate(categories):
        left, base = frame.x0 + band * i + (band - group) / 2, 0.0
        for k, s in enumerate(series):
            v = s.values[i]
            if v is None:
                continue
            x = left if stacked else left + k * bar_w
            lo, hi = (base, base + v) if stacked else (min(0.0, v), max(0.0, v))
            err = None if stacked else s.err(i)
            tip = f"{cat} · {s.name}: {v:.4g}" + (f" [{v - err[0]:.4g}, {v + err[1]:.4g}]" if err else "")
            out.append(f"<rect x='{_n(x)}' y='{_n(frame.py(hi))}' width='{_n(bar_w)}' "
                       f"height='{_n(frame.py(lo) - frame.py(hi))}' fill='{PALETTE[k % len(PALETTE)]}' "
                       f"data-series='{_e(s.name)}'><title>{_e(tip)}</title></rect>")
            if err is not None:  # a zero-width interval still gets its (flat) whisker: the bar has one
                out.append(_errbar(x + bar_w / 2, frame.py(v - err[0]), frame.py(v + err[1]), cap=min(3.0, bar_w / 3)))
            base += v if stacked else 0.0
    out.append("</g><g class='categories' fill='#333'>")
    for i, (cat, text) in enumerate(zip(categories, shown)):
        x, y = frame.x0 + band * (i + 0.5), frame.y1 + 12
        out.append(f"<text x='{_n(x)}' y='{_n(y)}' text-anchor='end' transform='rotate(-{LABEL_ANGLE} {_n(x)} {_n(y)})'>"
                   f"<title>{_e(cat)}</title>{_e(text)}</text>")
    out.append("</g></svg>")
    return "".join(out)


def _range(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.05
    return lo - pad, hi + pad


def scatter(groups: Sequence[tuple[str, Sequence[Point]]], *, title: str, xlabel: str, ylabel: str,
            width: float = 640, height: float = 420, radius: float = 3.5, zero_line: bool = False) -> str:
    """Points coloured by group (one legend entry per group), with optional error bars and labels."""
    pts = [p for _, ps in groups for p in ps]
    xs = [v for p in pts for v in (p.x - p.xerr[0], p.x + p.xerr[1])] or [0.0, 1.0]
    ys = [v for p in pts for v in (p.y - p.yerr[0], p.y + p.yerr[1])] or [0.0, 1.0]
    legend, lh = _legend([(name, PALETTE[k % len(PALETTE)], "dot") for k, (name, _) in enumerate(groups)],
                         50, 36, width - 60) if len(groups) > 1 else ([], 0.0)
    frame = _Frame((56, 30 + lh + 6, width - 16, height - 42), _range(xs), _range(ys))
    out = _open(width, height, title) + legend + frame.axes(xlabel, ylabel)
    if zero_line and frame.ylo < 0 < frame.yhi:
        out.append(f"<line x1='{_n(frame.x0)}' x2='{_n(frame.x1)}' y1='{_n(frame.py(0))}' y2='{_n(frame.py(0))}' "
                   "stroke='#888' stroke-dasharray='4 3'/>")
    for k, (name, points) in enumerate(groups):
        colour = PALETTE[k % len(PALETTE)]
        out.append(f"<g class='group' data-group='{_e(name)}' fill='{colour}'>")
        for p in points:
            cx, cy = frame.px(p.x), frame.py(p.y)
            if p.yerr != (0.0, 0.0):
                out.append(_errbar(cx, frame.py(p.y - p.yerr[0]), frame.py(p.y + p.yerr[1])))
            if p.xerr != (0.0, 0.0):
                out.append(_errbar(cy, frame.px(p.x - p.xerr[0]), frame.px(p.x + p.xerr[1]), horizontal=True))
            tip = f"<title>{_e(p.tip)}</title>" if p.tip else ""
            out.append(f"<circle class='pt' cx='{_n(cx)}' cy='{_n(cy)}' r='{_n(radius)}' fill-opacity='0.75'>{tip}</circle>")
            if p.label:  # beside the point, on whichever side keeps it inside the figure
                right = cx + 5 + text_width(p.label, 9) <= width - 2
                x, anchor = (cx + 5, "start") if right else (cx - 5, "end")
                out.append(f"<text x='{_n(x)}' y='{_n(cy - 5)}' font-size='9' fill='#333' text-anchor='{anchor}'>"
                           f"{_e(p.label)}</text>")
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)
