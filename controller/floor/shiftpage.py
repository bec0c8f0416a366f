"""The shift figures page (``/figures``) and its CSV (``/figures.csv``): what is asked,
what the store gives for it, and how it is drawn.

The query is checked strictly (``date``, ``shift`` or ``start`` and ``end``, ``table``:
each at most once, nothing else) and a bad one is a :class:`BadQuery` naming the
parameter and what was wrong (the console answers 400). The figures themselves are
:mod:`controller.floor.figures`'; the charts :mod:`controller.floor.svg`'s.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo
from fractions import Fraction

from markupsafe import Markup

from controller.core.cells import spreadsheet_cell
from controller.floor.figures import (
    POINTS,
    WHOLE_DAY,
    Figures,
    Period,
    RulesHistory,
    SettledHand,
    Shift,
    clock_minutes,
    figures,
    percent,
    shift_period,
    span_period,
    whole_day,
)
from controller.floor.findings import money
from controller.floor.store import Store
from controller.floor.svg import MAX_CATEGORIES, WIDTH, Series, bar_chart
from controller.floor.vocabulary import AlertKind
from controller.journal.recipe import RecordError
from controller.journal.system import read_rules

KNOWN = ("date", "shift", "start", "end", "table")
MAX_VALUE = 64
DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
FIRST_DAY, LAST_DAY = date(1970, 1, 2), date(9999, 12, 30)
"""The days a query may name: a period's end, in any time zone, is still a date."""
FLOOR = "floor"  # the floor total's name in the charts


class BadQuery(ValueError):
    """A query the figures cannot answer; the message names the parameter."""


@dataclass(frozen=True)
class Asked:
    """What the page was asked for: a period, the shift chosen ("" for the whole day or
    a span) and one table (None: the floor)."""

    period: Period
    shift: str
    table: str | None


def parse_query(
    items: Sequence[tuple[str, str]],
    *,
    shifts: Sequence[Shift],
    zone: tzinfo,
    tables: Collection[str],
    now: datetime,
) -> Asked:
    """The period and table a ``/figures`` query asks for (today, the whole day, the
    floor when it names none); a :class:`BadQuery` when it is not one."""
    seen: dict[str, str] = {}
    for key, value in items:
        if key not in KNOWN:
            raise BadQuery(f"unknown parameter {key[:MAX_VALUE]!r} (known: {', '.join(KNOWN)})")
        if key in seen:
            raise BadQuery(f"{key}: given more than once")
        if len(value) > MAX_VALUE:
            raise BadQuery(f"{key}: longer than {MAX_VALUE} characters")
        seen[key] = value
    text = seen.get("date", "")
    if text:
        try:
            if not DATE.fullmatch(text):
                raise ValueError
            day = date.fromisoformat(text)
        except ValueError:
            raise BadQuery(f"date: must be a date YYYY-MM-DD (got {text!r})") from None
        if not FIRST_DAY <= day <= LAST_DAY:
            raise BadQuery(f"date: must be from {FIRST_DAY} to {LAST_DAY} (got {text!r})")
    else:
        day = now.astimezone(zone).date()
    table = seen.get("table", "") or None
    if table is not None and table not in tables:
        raise BadQuery(f"table: no table {table!r} on this floor")
    name, start, end = seen.get("shift", ""), seen.get("start", ""), seen.get("end", "")
    if name and (start or end):
        raise BadQuery("shift: give a shift or a start and an end, not both")
    if name:
        chosen = next((s for s in shifts if s.name == name), None)
        if chosen is None:
            known = ", ".join(s.name for s in shifts)
            raise BadQuery(f"shift: no shift {name!r} (the shifts: {known})")
        return Asked(shift_period(day, chosen, zone), name, table)
    if start or end:
        if not (start and end):
            raise BadQuery(f"{'end' if start else 'start'}: a span needs a start and an end")
        a, b = clock_minutes(start), clock_minutes(end)
        if a is None or a == 1440:
            raise BadQuery(f"start: must be a time HH:MM, 00:00 to 23:59 (got {start!r})")
        if b is None:
            raise BadQuery(f"end: must be a time HH:MM, 00:00 to 24:00 (got {end!r})")
        if a == b % 1440:
            raise BadQuery("end: the span ends when it starts (for the whole day give neither)")
        return Asked(span_period(day, a, b, zone), "", table)
    return Asked(whole_day(day, zone), "", table)


def rules_history(store: Store, table: str) -> RulesHistory:
    """The pay tables a table journaled, by record (a ``rules`` record that cannot be
    read leaves the rules before it in force, as the second opinion's replay does)."""
    changes = []
    for record, payload in store.rules_records(table):
        try:
            rules = read_rules(payload).rules
        except RecordError:
            continue
        changes.append((record, rules))
    return RulesHistory(changes)


HOUR_MS = 3_600_000


@dataclass
class Hour:
    """One hour of the period, for the trend: the fire bets settled in it (handle, and
    paid with the wagers returned) and the 5th-point alerts raised in it."""

    start_ms: int
    clock: str  # its local start, HH:MM
    handle: int = 0
    paid: int = 0
    alerts: int = 0

    @property
    def hold_pct(self) -> Fraction | None:
        """(handle - paid) / handle; None with no handle."""
        return Fraction(self.handle - self.paid, self.handle) if self.handle else None


def hours(period: Period) -> list[Hour]:
    """The period's hours (the last may be shorter), at most :data:`MAX_CATEGORIES`."""
    zone = period.start.tzinfo
    out = []
    for at in range(period.start_ms, period.end_ms, HOUR_MS)[:MAX_CATEGORIES]:
        local = datetime.fromtimestamp(at / 1000, zone)
        out.append(Hour(at, local.strftime("%H:%M")))
    return out


@dataclass
class Shown:
    """The figures of a period, ready for the page and the CSV."""

    asked: Asked
    tables: list[Figures]
    floor: Figures
    trend: list[Hour] = field(default_factory=list)  # the scope's hold and alerts by hour

    @property
    def scope(self) -> Figures:
        """The figures the page is about: the table asked for, or the floor."""
        return self.tables[0] if self.asked.table is not None and self.tables else self.floor


def load(store: Store, asked: Asked) -> Shown:
    """The figures for ``asked``, from the floor's stored hands."""
    names = [asked.table] if asked.table is not None else store.table_names()
    p = asked.period
    trend = hours(p)

    def counted(hands: Iterable[SettledHand]) -> Iterator[SettledHand]:
        for hand in hands:  # the trend, as the figures read the hands (a cursor: once)
            i = (hand.at_ms - p.start_ms) // HOUR_MS
            if 0 <= i < len(trend):
                trend[i].handle += hand.wagered
                trend[i].paid += hand.paid
            yield hand

    hands = store.settled_between(p.start_ms, p.end_ms, asked.table)
    rules = {t: rules_history(store, t) for t in names}
    per_table, floor = figures(counted(hands), rules, names)
    for at in store.raised_between(AlertKind.SURVEILLANCE, p.start_ms, p.end_ms, asked.table):
        i = (at - p.start_ms) // HOUR_MS
        if 0 <= i < len(trend):
            trend[i].alerts += 1
    return Shown(asked, per_table, floor, trend)


# the charts --------------------------------------------------------------------------
def _pct(x: Fraction | None) -> float | None:
    return None if x is None else float(x * 100)


def _axis_pct(v: float) -> str:
    return f"{v:,.0f}%" if abs(v) >= 10 or v == int(v) else f"{v:,.1f}%"


def _axis_money(v: float) -> str:
    return money(round(v))


def _axis_count(v: float) -> str:
    return f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"


def charts(shown: Shown) -> list[tuple[str, Markup]]:
    """The page's charts: hold against the theoretical hold, handle and paid, the points
    made per hand against the exact odds, and the trend hour by hour (hold, alerts)."""
    rows = shown.tables if shown.asked.table is not None else [*shown.tables, shown.floor]
    names = [f.table or FLOOR for f in rows]
    where = shown.asked.table or "the floor"
    wide = max(WIDTH, 36 * len(names) + 100)  # a bar pair a table, however many (it scrolls)
    hold = bar_chart(
        ident="chart-hold",
        title=f"Hold % by table against the pay table's theoretical hold, {when(shown)}",
        desc="; ".join(
            f"{n}: hold {percent(f.hold_pct)}, theoretical {percent(f.theoretical)}"
            for n, f in zip(names, rows, strict=True)
        ),
        categories=names,
        series=[
            Series(
                "hold %",
                [_pct(f.hold_pct) for f in rows],
                [percent(f.hold_pct) for f in rows],
                "s-hold",
            ),
            Series(
                "theoretical hold %",
                [_pct(f.theoretical) for f in rows],
                [percent(f.theoretical) for f in rows],
                "s-theory",
            ),
        ],
        axis=_axis_pct,
        width=wide,
    )
    money_chart = bar_chart(
        ident="chart-handle",
        title=f"Fire bets placed (handle) and paid by table, {when(shown)}",
        desc="; ".join(
            f"{n}: handle {money(f.handle)}, paid {money(f.won)}"
            for n, f in zip(names, rows, strict=True)
        ),
        categories=names,
        series=[
            Series(
                "handle",
                [float(f.handle) for f in rows],
                [money(f.handle) for f in rows],
                "s-handle",
            ),
            Series("paid", [float(f.won) for f in rows], [money(f.won) for f in rows], "s-paid"),
        ],
        axis=_axis_money,
        width=wide,
    )
    scope = shown.scope
    expected = scope.expected_points
    points = bar_chart(
        ident="chart-points",
        title=(
            f"Different points made per hand at {where}, {when(shown)}: "
            f"{scope.hands:,} hands against the exact odds"
        ),
        desc="; ".join(
            f"{k} points: {scope.points[k]} hands, expected {float(expected[k]):.2f}"
            for k in POINTS
        ),
        categories=[str(k) for k in POINTS],
        series=[
            Series(
                "hands",
                [float(c) for c in scope.points],
                [f"{c:,}" for c in scope.points],
                "s-hands",
            ),
            Series(
                "expected (exact odds)",
                [float(e) for e in expected],
                [f"{float(e):,.2f}" for e in expected],
                "s-expected",
            ),
        ],
        axis=_axis_count,
    )
    return [(_title(c), c) for c in (hold, money_chart, points, *trend_charts(shown))]


def trend_charts(shown: Shown) -> tuple[Markup, Markup]:
    """The shift as it went: the hold of each hour's settled hands, and the 5th-point
    alerts raised each hour (of the table asked for, or the floor)."""
    where = shown.asked.table or "the floor"
    clocks = [h.clock for h in shown.trend]
    hold = bar_chart(
        ident="chart-trend-hold",
        title=f"Hold % hour by hour at {where}, {when(shown)}",
        desc="; ".join(f"{h.clock}: hold {percent(h.hold_pct)}" for h in shown.trend),
        categories=clocks,
        series=[
            Series(
                "hold %",
                [_pct(h.hold_pct) for h in shown.trend],
                [percent(h.hold_pct) for h in shown.trend],
                "s-hold",
            )
        ],
        axis=_axis_pct,
    )
    alerts = bar_chart(
        ident="chart-trend-alerts",
        title=f"5th-point alerts raised hour by hour at {where}, {when(shown)}",
        desc="; ".join(f"{h.clock}: {h.alerts} alerts" for h in shown.trend),
        categories=clocks,
        series=[
            Series(
                "5th-point alerts",
                [float(h.alerts) for h in shown.trend],
                [f"{h.alerts:,}" for h in shown.trend],
                "s-alerts",
            )
        ],
        axis=_axis_count,
    )
    return hold, alerts


def _title(chart: Markup) -> str:
    """A chart's own title, for the caption the page shows above it."""
    text = str(chart)
    start = text.index('-title">') + len('-title">')
    return str(Markup(text[start : text.index("</title>", start)]).unescape())


def when(shown: Shown) -> str:
    """``day shift, Wed 2 Dec 2026, 08:00-16:00`` (or the whole day, or a span)."""
    p = shown.asked.period
    day = p.start.strftime("%a %-d %b %Y")
    if shown.asked.shift:
        return f"{shown.asked.shift} shift, {day}, {p.span}"
    if p.name == WHOLE_DAY:
        return f"{day}, the whole day"
    return f"{day}, {p.span}"


# the CSV -----------------------------------------------------------------------------
CSV_HEADER = [
    "date", "shift", "start", "end", "scope", "table", "hands", "handle", "paid", "wagers_returned",
    "hold", "hold_pct", "theoretical_hold_pct", "pay_tables",
    *(f"points_{k}" for k in POINTS), *(f"expected_points_{k}" for k in POINTS),
]  # fmt: skip


def _decimal(x: Fraction | None, places: int) -> str:
    if x is None:
        return ""
    scaled = round(x * 10**places)
    sign = "-" if scaled < 0 else ""
    whole, part = divmod(abs(scaled), 10**places)
    return f"{sign}{whole}.{part:0{places}d}"


def csv_rows(shown: Shown) -> Iterable[list[str]]:
    """The header, a row a table and the floor's total (percentages to 4 places)."""
    p = shown.asked.period
    head = [p.day.isoformat(), spreadsheet_cell(shown.asked.shift or p.name), p.start.isoformat(),
            p.end.isoformat()]  # fmt: skip
    yield CSV_HEADER
    rows = [*shown.tables] if shown.asked.table is not None else [*shown.tables, shown.floor]
    for f in rows:
        yield [
            *head,
            "table" if f.table is not None else "floor",
            spreadsheet_cell(f.table or ""),
            str(f.hands), str(f.handle), str(f.won), str(f.returned), str(f.hold),
            _decimal(None if f.hold_pct is None else f.hold_pct * 100, 4),
            _decimal(None if f.theoretical is None else f.theoretical * 100, 4),
            spreadsheet_cell(" | ".join(sorted(f.pay_tables))),
            *(str(c) for c in f.points),
            *(_decimal(e, 4) for e in f.expected_points),
        ]  # fmt: skip


def csv_text(shown: Shown) -> str:
    """The whole CSV."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerows(csv_rows(shown))
    return out.getvalue()


def csv_name(shown: Shown) -> str:
    """``figures-2026-12-02-day.csv`` (``-CR-07`` for one table)."""
    a = shown.asked
    what = a.shift or a.period.name.replace(":", "")
    table = f"-{a.table}" if a.table else ""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", f"figures-{a.period.day.isoformat()}-{what}{table}")
    return safe + ".csv"
