"""Shift figures: what the fire bets took and paid in a shift or a day, against the odds.

The one home of the floor's figures (docs/floor.md, "Shift figures"). Pure: settled
hands in, figures out; the store keeps each settled hand's figures
(:func:`settled_hand`, saved with its hand log) and the console reads them back for a
period (:class:`Period`: a date and a shift, in the floor's time zone).

For a table, or the whole floor, over a period:

* **handle**: the fire bets placed on the hands settled in the period;
* **won**: the winnings alone (a $5 bet won at 24 to 1 wins $120), what the console and
  the CSV call **paid** everywhere (the alert card's "paid" is the same); **returned**:
  the winning wagers given back ($5), shown apart; the field ``paid`` here is the two
  together (what left the rack);
* **hold** = handle - won - returned, and **hold %** = hold / handle;
* **theoretical hold**: the house edge of the pay table each hand was settled under
  (:func:`controller.core.odds.house_edge`, the ``odds`` command's), weighted by the
  handle; with no handle, the edge of the pay table in force;
* **points made**: how many hands made 0 to 6 different points, beside the counts
  the exact odds give (:func:`controller.core.odds.exact_distribution`).

A hand counts in the period in which the record that settled it was journaled. All
arithmetic is exact (integers and :class:`~fractions.Fraction`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, tzinfo
from fractions import Fraction
from functools import cache
from typing import Any

from controller.core.config import FireBetRules
from controller.core.odds import exact_distribution, house_edge

POINTS = range(7)  # 0 to 6 different points made
WHOLE_DAY = "all-day"  # a period's name for the whole day (a shift may be called "day")
MAX_SHIFTS = 12
SHIFT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
CLOCK = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])|24:00")


# the shifts --------------------------------------------------------------------------
@dataclass(frozen=True)
class Shift:
    """A named part of the day: ``start`` and ``end`` in minutes after midnight, local
    time; an ``end`` at or before ``start`` ends the next day (a night shift)."""

    name: str
    start: int
    end: int

    @property
    def span(self) -> str:
        """``08:00-16:00``."""
        return f"{clock_text(self.start)}-{clock_text(self.end)}"


DEFAULT_SHIFTS = (Shift("grave", 0, 480), Shift("day", 480, 960), Shift("swing", 960, 1440))
"""Three 8-hour shifts, when ``floor.toml`` names none."""


def clock_text(minutes: int) -> str:
    """``HH:MM`` of minutes after midnight (``24:00`` for the end of the day)."""
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def clock_minutes(text: str) -> int | None:
    """Minutes after midnight of ``HH:MM`` (00:00 to 24:00); None when it is not that."""
    if not CLOCK.fullmatch(text):
        return None
    hours, minutes = text.split(":")
    return int(hours) * 60 + int(minutes)


def shift_problem(name: str, value: Any) -> str | None:
    """Why ``name = value`` is not a shift line (``"08:00-16:00"``); None when it is."""
    if not SHIFT_NAME.fullmatch(name):
        return "a shift's name is a letter, then letters, digits, _ or - (at most 32)"
    if not isinstance(value, str):
        return f'must be "HH:MM-HH:MM", not {value!r}'
    start, sep, end = value.partition("-")
    a, b = clock_minutes(start), clock_minutes(end)
    if not sep or a is None or b is None:
        return f'must be "HH:MM-HH:MM" (00:00 to 24:00), not {value!r}'
    if a == 1440:
        return "a shift cannot start at 24:00 (say 00:00)"
    if a == b % 1440:
        return "a shift cannot start and end at the same time (a whole day is the day)"
    return None


def parse_shifts(table: Mapping[str, Any]) -> tuple[Shift, ...]:
    """The shifts of a checked ``[shifts]`` table (ValueError naming the shift when bad)."""
    if len(table) > MAX_SHIFTS:
        raise ValueError(f"at most {MAX_SHIFTS} shifts")
    shifts = []
    for name, value in table.items():
        problem = shift_problem(name, value)
        if problem:
            raise ValueError(f"{name}: {problem}")
        start, _, end = value.partition("-")
        shifts.append(Shift(name, clock_minutes(start) or 0, clock_minutes(end) or 0))
    return tuple(shifts)


@dataclass(frozen=True)
class Period:
    """A stretch of local time on a date: a shift, the whole day, or a span asked for."""

    day: date
    name: str  # the shift's name, WHOLE_DAY, or the span
    start: datetime  # aware
    end: datetime  # aware, after start

    @property
    def start_ms(self) -> int:
        return int(self.start.timestamp()) * 1000

    @property
    def end_ms(self) -> int:
        return int(self.end.timestamp()) * 1000

    @property
    def span(self) -> str:
        """``08:00-16:00`` (the end's date too when it is not the start's)."""
        end = self.end.strftime("%H:%M")
        if self.end.date() != self.start.date() and end == "00:00":
            end = "24:00"
        elif self.end.date() != self.start.date():
            end = self.end.strftime("%a %H:%M")
        return f"{self.start.strftime('%H:%M')}-{end}"


def local(day: date, minutes: int, zone: tzinfo) -> datetime:
    """The aware time ``minutes`` after local midnight of ``day`` (24:00: the next day's
    midnight). A wall time that a clock change skips is taken after the change."""
    moment = datetime.combine(day + timedelta(days=minutes // 1440), time(), zone)
    wall = moment + timedelta(minutes=minutes % 1440)  # wall-clock arithmetic in ``zone``
    return wall


def whole_day(day: date, zone: tzinfo) -> Period:
    """Local midnight to the next midnight (23 or 25 hours across a clock change)."""
    return Period(day, WHOLE_DAY, local(day, 0, zone), local(day, 1440, zone))


def shift_period(day: date, shift: Shift, zone: tzinfo) -> Period:
    """``shift`` of ``day`` (a night shift ends the next day)."""
    end = shift.end if shift.end > shift.start else shift.end + 1440
    return Period(day, shift.name, local(day, shift.start, zone), local(day, end, zone))


def span_period(day: date, start: int, end: int, zone: tzinfo) -> Period:
    """From ``start`` to ``end`` (minutes, local) on ``day``; an end at or before the
    start is the next day's."""
    stop = end if end > start else end + 1440
    return Period(
        day,
        f"{clock_text(start)}-{clock_text(end)}",
        local(day, start, zone),
        local(day, stop, zone),
    )


def shift_at(moment: datetime, shifts: Sequence[Shift]) -> tuple[date, Shift] | None:
    """The shift ``moment`` (aware, in the floor's zone) falls in, with the date it began."""
    minutes = moment.hour * 60 + moment.minute
    for s in shifts:
        if s.start < s.end and s.start <= minutes < s.end:
            return moment.date(), s
        if s.end <= s.start:  # a night shift: this date's evening or the last date's night
            if minutes >= s.start:
                return moment.date(), s
            if minutes < s.end:
                return moment.date() - timedelta(days=1), s
    return None


# one hand ----------------------------------------------------------------------------
@dataclass(frozen=True)
class SettledHand:
    """What one settled hand adds to the figures."""

    table: str
    hand: int
    record: int  # the record that settled it (its rules are the ones in force there)
    at_ms: int  # that record's time
    unique_points: int
    wagered: int
    won: int  # the winnings alone
    paid: int  # the winnings and the winning wagers back


def settled_hand(table: str, log: Mapping[str, Any], at_ms: int) -> SettledHand | None:
    """The figures of a hand log (:mod:`controller.journal.handlog`) settled at ``at_ms``;
    None for a hand not settled (or settled and then voided)."""
    record = log.get("settled_record")
    if log.get("result") is None or not isinstance(record, int):
        return None
    wagers = {str(p): int(a) for p, a in (log.get("wagers") or {}).items()}
    payouts = {str(p): int(a) for p, a in (log.get("payouts") or {}).items()}
    wagered = sum(wagers.values())
    won = sum(payouts.values())
    back = sum(a for p, a in wagers.items() if payouts.get(p, 0) > 0)
    return SettledHand(
        table, int(log["hand"]), record, at_ms, int(log.get("unique_points") or 0),
        wagered, won, won + back,
    )  # fmt: skip


# the rules each hand was settled under -----------------------------------------------
class RulesHistory:
    """A table's pay tables by record: the rules of each ``rules`` record, in force for
    every record after it (the NJ defaults before the first), as the replay has them."""

    def __init__(self, changes: Iterable[tuple[int, FireBetRules]] = ()) -> None:
        ordered = sorted(changes, key=lambda c: c[0])
        self._records = [r for r, _ in ordered]
        self._rules = [rules for _, rules in ordered]

    def at(self, record: int) -> FireBetRules:
        """The rules in force at ``record``."""
        i = bisect.bisect_left(self._records, record)
        return self._rules[i - 1] if i else FireBetRules()

    def latest(self) -> FireBetRules:
        """The rules in force now."""
        return self._rules[-1] if self._rules else FireBetRules()


@cache
def _edge(pays: tuple[tuple[int, int], ...]) -> Fraction:
    return house_edge(FireBetRules(pays=dict(pays)))


def theoretical_hold(rules: FireBetRules) -> Fraction:
    """The pay table's house edge, exactly (what ``firebet odds`` prints)."""
    return _edge(tuple(sorted(rules.pay_table().items())))


def pay_table_text(rules: FireBetRules) -> str:
    """``4: 24, 5: 249, 6: 999`` (different points: odds to 1)."""
    return ", ".join(f"{k}: {v}" for k, v in sorted(rules.pay_table().items()))


# the figures -------------------------------------------------------------------------
@dataclass
class Figures:
    """A table's (or the floor's) figures over a period."""

    table: str | None  # None: the whole floor
    hands: int = 0
    handle: int = 0
    paid: int = 0
    won: int = 0
    points: list[int] = field(default_factory=lambda: [0] * 7)
    expected_hold: Fraction = Fraction(0)  # in dollars: each wager times its pay table's edge
    pay_tables: dict[str, Fraction] = field(default_factory=dict)  # text -> its edge

    @property
    def returned(self) -> int:
        """The winning wagers given back (shown apart from what was paid: the winnings)."""
        return self.paid - self.won

    @property
    def hold(self) -> int:
        """handle - paid."""
        return self.handle - self.paid

    @property
    def hold_pct(self) -> Fraction | None:
        """hold / handle (None with no handle)."""
        return Fraction(self.hold, self.handle) if self.handle else None

    @property
    def theoretical(self) -> Fraction | None:
        """The theoretical hold: handle-weighted, or the one pay table's edge with no
        handle (None with no handle and several pay tables)."""
        if self.handle:
            return self.expected_hold / self.handle
        if len(set(self.pay_tables.values())) == 1:
            return next(iter(self.pay_tables.values()))
        return None

    @property
    def expected_points(self) -> list[Fraction]:
        """How many of the hands the exact odds expect to make 0 to 6 different points."""
        return [self.hands * p for p in exact_distribution()]

    def add(self, hand: SettledHand, rules: FireBetRules) -> None:
        """Count one settled hand, settled under ``rules``."""
        edge = theoretical_hold(rules)
        self.hands += 1
        self.handle += hand.wagered
        self.paid += hand.paid
        self.won += hand.won
        self.points[min(max(hand.unique_points, 0), 6)] += 1
        self.expected_hold += hand.wagered * edge
        self.pay_tables.setdefault(pay_table_text(rules), edge)

    def merge(self, other: Figures) -> None:
        """Add another table's figures (for the floor's total)."""
        self.hands += other.hands
        self.handle += other.handle
        self.paid += other.paid
        self.won += other.won
        self.points = [a + b for a, b in zip(self.points, other.points, strict=True)]
        self.expected_hold += other.expected_hold
        for text, edge in other.pay_tables.items():
            self.pay_tables.setdefault(text, edge)


@dataclass
class Report:
    """Every table's figures over a period, and the floor's total."""

    period: Period
    tables: list[Figures]
    floor: Figures


def figures(
    hands: Iterable[SettledHand],
    rules: Mapping[str, RulesHistory],
    tables: Iterable[str] = (),
) -> tuple[list[Figures], Figures]:
    """Each table's figures (sorted by table; ``tables`` are shown even without a hand)
    and the floor's total, from the settled hands of a period."""
    by_table: dict[str, Figures] = {t: Figures(t) for t in tables}
    for hand in hands:
        f = by_table.get(hand.table)
        if f is None:
            f = by_table[hand.table] = Figures(hand.table)
        f.add(hand, rules.get(hand.table, RulesHistory()).at(hand.record))
    out = [by_table[t] for t in sorted(by_table)]
    floor = Figures(None)
    for f in out:
        if not f.hands:  # its pay table in force, for the theoretical hold without hands
            now = rules.get(f.table or "", RulesHistory()).latest()
            f.pay_tables.setdefault(pay_table_text(now), theoretical_hold(now))
        floor.merge(f)
    return out, floor


# words and numbers -------------------------------------------------------------------
def percent(value: Fraction | None, places: int = 2) -> str:
    """``20.76%`` (rounded half to even, exactly); ``—`` for None."""
    if value is None:
        return "—"
    scaled = round(value * 100 * 10**places)
    sign = "-" if scaled < 0 else ""
    whole, part = divmod(abs(scaled), 10**places)
    return f"{sign}{whole:,}.{part:0{places}d}%" if places else f"{sign}{whole:,}%"
