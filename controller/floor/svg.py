"""Bar charts drawn on the server as SVG: axes, ticks, labels, a legend, accessible titles.

The floor has no internet and no front-end build, so its charts are text the page
carries: :func:`bar_chart` draws grouped bars (one group per category, one bar per
series, negative values below the zero line) with a labelled value axis, the value on
every bar, a ``<title>`` on every bar for a tooltip or a screen reader, and the chart's
own ``<title>`` and ``<desc>`` (``role="img"``). Every text is escaped here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

WIDTH, HEIGHT = 760, 300
LEFT, RIGHT, TOP, BOTTOM = 72, 16, 36, 56
LEGEND_Y, NOTE_Y = 20, 36  # the legend's line; the off-the-scale note's line below it
NOTE_LINE = 16  # the note's line pushes the plot down by this much when there is one
PAD = 16  # room for a value's words above the highest bar and below the lowest, so they
# never run into the legend, the note or the category names (#32: they overlapped)
MAX_CATEGORIES = 5000  # a floor's tables (the caller widens the chart for many)


@dataclass(frozen=True)
class Series:
    """One series of bars: its name (the legend), a value per category (None: no bar)
    and the text shown for each value."""

    name: str
    values: Sequence[float | None]
    labels: Sequence[str]
    css: str = ""


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values from at or below ``lo`` to at or above ``hi`` (about ``count``
    steps of 1, 2, 2.5 or 5 times a power of ten); 0 always among them."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if not math.isfinite(hi - lo) or hi - lo < 1e-9:  # nothing to span (or a float's dust)
        hi = lo + 1.0
    raw = (hi - lo) / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))
    first = math.floor(lo / step)
    last = math.ceil(hi / step)
    if first * step > lo:  # a quotient that underflowed or rounded: one step further out
        first -= 1
    if last * step < hi:
        last += 1
    places = max(0, 2 - math.floor(math.log10(step)))  # no float dust (0.30000000000000004)
    return [round(i * step, places) for i in range(first, last + 1)]


OUTLIER_FACTOR = 5.0
"""A bar this many times longer than the next longest is off the scale: drawn to the
chart's edge and named, so it never flattens every other bar."""


def outliers(values: Sequence[float]) -> set[int]:
    """The indexes of the values off the scale: each, from the longest, this many times
    longer than the next (at least two values stay on the scale)."""
    order = sorted(range(len(values)), key=lambda i: -abs(values[i]))
    out: set[int] = set()
    for k in range(len(order) - 2):
        longest, next_ = abs(values[order[k]]), abs(values[order[k + 1]])
        if next_ == 0 or longest <= OUTLIER_FACTOR * next_:
            break
        out.add(order[k])
    return out


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def bar_chart(
    *,
    ident: str,
    title: str,
    desc: str,
    categories: Sequence[str],
    series: Sequence[Series],
    axis: Callable[[float], str],
    width: int = WIDTH,
    height: int = HEIGHT,
) -> Markup:
    """A grouped bar chart as an ``<svg>`` element (``axis`` words the tick values)."""
    if len(categories) > MAX_CATEGORIES:
        raise ValueError(f"at most {MAX_CATEGORIES} categories")
    for s in series:
        if len(s.values) != len(categories) or len(s.labels) != len(categories):
            raise ValueError(f"series {s.name!r}: one value and one label a category")
    values = [v for s in series for v in s.values if v is not None and math.isfinite(v)]
    off = outliers(values)
    scaled = [v for i, v in enumerate(values) if i not in off]
    ticks = nice_ticks(min(scaled, default=0.0), max(scaled, default=0.0))
    lo, hi = ticks[0], ticks[-1]
    plot_w = width - LEFT - RIGHT
    noted = any(not lo <= v <= hi for v in values)  # bars off the scale: the note's line
    top_y = TOP + (NOTE_LINE if noted else 0) + PAD
    bottom_y = height - BOTTOM - PAD
    plot_h = bottom_y - top_y

    def y(v: float) -> float:
        return top_y + (hi - v) / (hi - lo) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{escape(ident)}" '
        f'viewBox="0 0 {width} {height}" role="img" '
        + (f'style="min-width: {width}px" ' if width > WIDTH else "")
        + f'aria-labelledby="{escape(ident)}-title {escape(ident)}-desc">',
        f'<title id="{escape(ident)}-title">{escape(title)}</title>',
        f'<desc id="{escape(ident)}-desc">{escape(desc)}</desc>',
        '<g class="axis y-axis" font-size="11" text-anchor="end">',
    ]
    for t in ticks:
        ty = _num(y(t))
        css = "zero" if t == 0 else "grid"
        out.append(
            f'<line class="{css}" x1="{LEFT}" x2="{width - RIGHT}" y1="{ty}" y2="{ty}"/>'
            f'<text x="{LEFT - 6}" y="{ty}" dy="4">{escape(axis(t))}</text>'
        )
    out.append("</g>")
    n = max(len(categories), 1)
    group = plot_w / n
    bar = group * 0.8 / max(len(series), 1)
    many = len(categories) > 8
    named: list[str] = []  # the bars off the scale, in words
    out.append('<g class="bars" font-size="11" text-anchor="middle">')
    for i, category in enumerate(categories):
        x0 = LEFT + i * group + group * 0.1
        for j, s in enumerate(series):
            v = s.values[i]
            x = x0 + j * bar
            cx = _num(x + bar / 2)
            if v is None or not math.isfinite(v):
                out.append(f'<text class="value none" x="{cx}" y="{_num(y(0) - 4)}">—</text>')
                continue
            clipped = not lo <= v <= hi
            shown = min(max(v, lo), hi)
            top, bottom = (y(shown), y(0)) if shown >= 0 else (y(0), y(shown))
            label_y = top - 4 if v >= 0 else bottom + 12
            words = f"{category}, {s.name}: {s.labels[i]}"
            if clipped:  # drawn to the edge with a break mark, its value inside, named
                named.append(f"{category} {s.name} {s.labels[i]}")
                label_y = top + 12 if v >= 0 else bottom - 4
                edge = _num(top if v >= 0 else bottom)
                out.append(
                    f'<path class="break" d="M{_num(x - 2)} {edge} l{_num(bar / 2)} -4 '
                    f'l{_num(bar / 2)} 8"/>'
                )
            out.append(
                f'<rect class="bar {escape(s.css)}{" clipped" if clipped else ""}" '
                f'data-series="{escape(s.name)}" '
                f'data-category="{escape(category)}" data-value="{v!r}" '
                f'x="{_num(x)}" y="{_num(top)}" width="{_num(max(bar - 2, 1))}" '
                f'height="{_num(max(bottom - top, 0.5))}"><title>{escape(words)}</title></rect>'
            )
            if not many or clipped:
                css = "value clipped" if clipped else "value"
                out.append(
                    f'<text class="{css}" x="{cx}" y="{_num(label_y)}">{escape(s.labels[i])}</text>'
                )
        cx = _num(LEFT + i * group + group / 2)
        ly = height - BOTTOM + 16
        turn = f' transform="rotate(-35 {cx} {ly})" text-anchor="end"' if many else ""
        out.append(f'<text class="category" x="{cx}" y="{ly}"{turn}>{escape(category)}</text>')
    out.append("</g>")
    out.append(f'<line class="axis-line" x1="{LEFT}" x2="{LEFT}" y1="{top_y}" y2="{bottom_y}"/>')
    out.append('<g class="legend" font-size="12">')
    x = LEFT
    for s in series:
        out.append(
            f'<rect class="bar {escape(s.css)}" x="{x}" y="{LEGEND_Y - 10}" width="12" '
            f'height="12"/><text x="{x + 16}" y="{LEGEND_Y}">{escape(s.name)}</text>'
        )
        x += 24 + 7 * len(s.name)
    out.append("</g>")
    if named:
        out.append(
            f'<text class="off-scale" x="{width - RIGHT}" y="{NOTE_Y}" font-size="12" '
            f'text-anchor="end">off the scale: {escape("; ".join(named))}</text>'
        )
    out.append("</svg>")
    return Markup("".join(out))
