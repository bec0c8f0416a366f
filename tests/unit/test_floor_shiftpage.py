"""The shift figures page's query, CSV and charts (controller/floor/shiftpage.py, svg.py):
a bad query is refused naming the parameter; the CSV has a header, a row a table and the
floor's total, with exact numbers; the charts draw every value, escaped."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, date, datetime
from fractions import Fraction
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from controller.core.config import FireBetRules
from controller.core.odds import house_edge
from controller.core.times import to_ms
from controller.floor.figures import DEFAULT_SHIFTS, SettledHand, figures
from controller.floor.shiftpage import (
    CSV_HEADER,
    Asked,
    BadQuery,
    Shown,
    charts,
    csv_name,
    csv_text,
    load,
    parse_query,
    trend_charts,
    when,
)
from controller.floor.store import SqliteStore
from controller.floor.svg import Series, bar_chart, nice_ticks, outliers
from controller.floor.vocabulary import AlertKind

NY = ZoneInfo("America/New_York")
NOW = datetime(2026, 12, 2, 17, 0, tzinfo=UTC)  # noon in New York


def ask(query: str) -> Asked:
    items = [tuple(p.split("=", 1)) for p in query.split("&") if p]
    return parse_query(
        items,  # type: ignore[arg-type]
        shifts=DEFAULT_SHIFTS, zone=NY, tables={"CR-07", "CR-08"}, now=NOW,
    )  # fmt: skip


def test_no_query_is_today_the_whole_day_the_floor() -> None:
    a = ask("")
    assert (a.period.day, a.period.name, a.shift, a.table) == (
        date(2026, 12, 2),
        "all-day",
        "",
        None,
    )
    assert a.period.start == datetime(2026, 12, 2, 5, tzinfo=UTC)


def test_a_shift_a_span_and_a_table() -> None:
    a = ask("date=2026-11-30&shift=swing&table=CR-08")
    assert (a.period.day, a.shift, a.table) == (date(2026, 11, 30), "swing", "CR-08")
    assert a.period.start == datetime(2026, 11, 30, 21, tzinfo=UTC)
    b = ask("date=2026-11-30&start=20:00&end=02:00")
    assert (b.shift, b.period.name, b.period.end) == (
        "",
        "20:00-02:00",
        datetime(2026, 12, 1, 7, tzinfo=UTC),
    )


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("when=today", "unknown parameter 'when' (known: date, shift, start, end, table)"),
        ("date=2026-12-01&date=2026-12-02", "date: given more than once"),
        ("date=2026-13-01", "date: must be a date YYYY-MM-DD (got '2026-13-01')"),
        ("date=20261201", "date: must be a date YYYY-MM-DD"),
        ("date=" + "9" * 65, "date: longer than 64 characters"),
        # the last day's period ended past the calendar: a 500 (#32)
        ("date=9999-12-31", "date: must be from 1970-01-02 to 9999-12-30 (got '9999-12-31')"),
        ("date=0001-01-01", "date: must be from 1970-01-02 to 9999-12-30"),
        ("shift=night", "shift: no shift 'night' (the shifts: grave, day, swing)"),
        ("shift=day&start=01:00&end=02:00", "give a shift or a start and an end, not both"),
        ("start=08:00", "end: a span needs a start and an end"),
        ("end=08:00", "start: a span needs a start and an end"),
        ("start=8&end=16:00", "start: must be a time HH:MM, 00:00 to 23:59 (got '8')"),
        ("start=24:00&end=08:00", "start: must be a time HH:MM"),
        ("start=08:00&end=16:60", "end: must be a time HH:MM, 00:00 to 24:00"),
        ("start=08:00&end=08:00", "end: the span ends when it starts"),
        ("table=CR-99", "table: no table 'CR-99' on this floor"),
    ],
)
def test_a_bad_query_names_the_parameter_and_what_was_wrong(query: str, words: str) -> None:
    with pytest.raises(BadQuery) as caught:
        ask(query)
    assert words in str(caught.value)


def shown(query: str = "date=2026-12-02&shift=day") -> Shown:
    hands = [
        SettledHand("CR-07", 1, 10, 0, 4, 7, 168, 175),
        SettledHand("CR-07", 2, 20, 0, 0, 5, 0, 0),
        SettledHand("CR-08", 1, 10, 0, 1, 8, 0, 0),
    ]
    asked = ask(query)
    if asked.table:
        hands = [h for h in hands if h.table == asked.table]
    tables, floor = figures(hands, {}, [asked.table] if asked.table else ["CR-07", "CR-08"])
    return Shown(asked, tables, floor)


def test_the_csv_has_a_header_a_row_a_table_and_the_floor_total() -> None:
    text = csv_text(shown())
    rows = list(csv.reader(io.StringIO(text)))
    assert text.endswith("\r\n") and rows[0] == CSV_HEADER
    data = [dict(zip(CSV_HEADER, r, strict=True)) for r in rows[1:]]
    assert [(r["scope"], r["table"]) for r in data] == [
        ("table", "CR-07"), ("table", "CR-08"), ("floor", "")
    ]  # fmt: skip
    a, b, total = data
    assert (a["date"], a["shift"], a["start"], a["end"]) == (
        "2026-12-02", "day", "2026-12-02T08:00:00-05:00", "2026-12-02T16:00:00-05:00"
    )  # fmt: skip
    # paid: the winnings, as on an alert card; the wagers given back apart (#32)
    assert [a[k] for k in ("hands", "handle", "paid", "wagers_returned", "hold", "hold_pct")] == [
        "2", "12", "168", "7", "-163", "-1358.3333"
    ]  # fmt: skip
    assert [total[k] for k in ("hands", "handle", "paid", "hold", "hold_pct")] == [
        "3", "20", "168", "-155", "-775.0000"
    ]  # fmt: skip
    edge = house_edge(FireBetRules()) * 100
    assert total["theoretical_hold_pct"] == "20.7628" and abs(float(edge) - 20.7628) < 5e-5
    assert total["pay_tables"] == "4: 24, 5: 249, 6: 999"
    assert [a[f"points_{k}"] for k in range(7)] == ["1", "0", "0", "0", "1", "0", "0"]
    assert total["expected_points_0"] == "1.7818"  # 3 * 98/165
    assert b["hold_pct"] == "100.0000"
    assert csv_name(shown()) == "figures-2026-12-02-day.csv"


def test_one_table_s_csv_is_its_row() -> None:
    one = shown("date=2026-12-02&table=CR-08")
    rows = list(csv.reader(io.StringIO(csv_text(one))))
    assert len(rows) == 2 and rows[1][4:7] == ["table", "CR-08", "1"]
    assert csv_name(one) == "figures-2026-12-02-all-day-CR-08.csv"


def test_a_text_cell_is_never_a_formula() -> None:
    s = shown()
    s.tables[0].table = "=HYPERLINK(1)"
    rows = list(csv.reader(io.StringIO(csv_text(s))))
    assert rows[1][5] == "'=HYPERLINK(1)"


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("CR;=1+1", "CR;'=1+1"),  # a spreadsheet splitting at ";" read the formula (#32)
        ("CR,@SUM(A1)", "CR,'@SUM(A1)"),
        ("a | +1", "a | '+1"),
        ("x\t=1", "x '=1"),
        ("x\r\n-1", "x  '-1"),
        ("CR-07", "CR-07"),
        ("4: 24, 5: 249, 6: 999", "4: 24, 5: 249, 6: 999"),
    ],
)
def test_a_formula_character_is_neutralised_wherever_it_starts_a_part(text: str, cell: str) -> None:
    s = shown()
    s.tables[0].table = text
    rows = list(csv.reader(io.StringIO(csv_text(s))))
    assert rows[1][5] == cell


def test_the_charts_carry_every_number() -> None:
    (caption, hold), (_, money), (_, points), *_ = charts(shown())
    assert caption.startswith("Hold % by table against the pay table's theoretical hold, day")
    assert when(shown()) == "day shift, Wed 2 Dec 2026, 08:00-16:00"
    bars = dict(re.findall(r'data-category="([^"]+)" data-value="([^"]+)"', str(hold)))
    assert "CR-07" in bars and "floor" in bars
    titles = re.findall(r"<title>([^<]+)</title>", str(hold))
    assert "CR-07, hold %: -1,358.33%" in titles and "floor, theoretical hold %: 20.76%" in titles
    assert "CR-08, paid: $0" in re.findall(r"<title>([^<]+)</title>", str(money))
    texts = re.findall(r"<title>([^<]+)</title>", str(points))
    assert "4, hands: 1" in texts and "0, expected (exact odds): 1.78" in texts
    assert 'role="img"' in str(points) and 'aria-labelledby="chart-points-title' in str(points)


def test_the_trend_draws_each_hour_s_hold_and_alerts_from_the_store(tmp_path: Path) -> None:
    """The console had no trend over the shift (#32): the figures page draws the hold of
    each hour's settled hands and the 5th-point alerts raised each hour, from the store."""
    store = SqliteStore(tmp_path / "floor.db")
    day = ask("date=2026-12-02&shift=day")  # 08:00-16:00 in New York: 13:00-21:00 UTC
    with store.transaction():
        for table, hand, at, wagered, paid in (
            ("CR-07", 1, "2026-12-02T13:30:00+00:00", 7, 175),  # 08:00: -2,400%
            ("CR-08", 1, "2026-12-02T15:10:00+00:00", 8, 0),  # 10:00: 100%
            ("CR-08", 2, "2026-12-02T22:10:00+00:00", 5, 0),  # after the shift
        ):
            won = paid - wagered if paid else 0
            row = (table, hand, to_ms(at), wagered, won, paid)
            store._w("INSERT INTO settled VALUES (?, ?, 1, ?, 4, ?, ?, ?)", row)
        for table, at in (
            ("CR-07", "2026-12-02T13:45:00+00:00"),
            ("CR-08", "2026-12-02T10:50:00-05:00"),  # a table writing its own zone: 10:00
            ("CR-08", "2026-12-02T21:00:00+00:00"),  # the shift's end: not in it
        ):
            store.raise_alert(table, AlertKind.SURVEILLANCE, at, {}, hand=1, key=at)
    shown_day = load(store, day)
    assert [h.clock for h in shown_day.trend] == [f"{h:02d}:00" for h in range(8, 16)]
    assert [h.hold_pct for h in shown_day.trend[:3]] == [Fraction(-24), None, Fraction(1)]
    assert [h.alerts for h in shown_day.trend] == [1, 0, 1, 0, 0, 0, 0, 0]
    hold, alerts = trend_charts(shown_day)
    bars = dict(re.findall(r'data-category="([^"]+)" data-value="([^"]+)"', str(alerts)))
    assert bars["08:00"] == "1.0" and bars["10:00"] == "1.0" and bars["09:00"] == "0.0"
    assert "08:00, hold %: -2,400.00%" in re.findall(r"<title>([^<]+)</title>", str(hold))
    one = load(store, ask("date=2026-12-02&shift=day&table=CR-08"))
    assert [h.alerts for h in one.trend][:3] == [0, 0, 1]
    store.close()


def test_a_chart_escapes_its_words_and_draws_negative_bars_below_zero() -> None:
    svg = str(
        bar_chart(
            ident="c", title="<b>&", desc="d", categories=["<x>", "y"],
            series=[Series("s", [-50.0, 100.0], ["-50", "100"])], axis=str,
        )
    )  # fmt: skip
    assert "<b>" not in svg and "&lt;b&gt;&amp;" in svg and "&lt;x&gt;" in svg
    zero = re.search(r'class="zero" x1="\d+" x2="\d+" y1="([\d.]+)"', svg)
    assert zero is not None
    rects = re.findall(r'data-value="([^"]+)" x="[\d.]+" y="([\d.]+)" width="[\d.]+" '
                       r'height="([\d.]+)"', svg)  # fmt: skip
    (_, y_neg, h_neg), (_, y_pos, h_pos) = rects
    assert float(y_neg) == pytest.approx(float(zero.group(1)))  # hangs from the zero line
    assert float(y_pos) + float(h_pos) == pytest.approx(float(zero.group(1)))
    assert float(h_pos) == pytest.approx(2 * float(h_neg), abs=0.2)  # to a tenth of a pixel
    with pytest.raises(ValueError, match="one value and one label a category"):
        bar_chart(ident="c", title="t", desc="d", categories=["a"], series=[Series("s", [], [])],
                  axis=str)  # fmt: skip


@settings(max_examples=500)
@example(5e-324, -6.0)  # a subnormal whose quotient underflows (found by hypothesis)
@example(5e-324, 0.0)
@given(st.floats(-1e9, 1e9), st.floats(-1e9, 1e9))
def test_the_ticks_cover_the_values_and_zero(a: float, b: float) -> None:
    lo, hi = min(a, b), max(a, b)
    ticks = nice_ticks(lo, hi)
    assert ticks[0] <= min(lo, 0) and ticks[-1] >= max(hi, 0) and 0 in ticks
    assert 2 <= len(ticks) <= 12 and ticks == sorted(ticks)


def test_a_floor_of_many_tables_gets_wide_charts_with_every_bar() -> None:
    names = [f"T{i:03d}" for i in range(250)]
    hands = [SettledHand(t, 1, 10, 0, 0, 5, 0, 0) for t in names]
    tables, floor = figures(hands, {}, names)
    (_, hold), (_, money), *_ = charts(Shown(ask(""), tables, floor))
    assert str(hold).count('data-series="hold %"') == 251  # and the floor's
    assert 'style="min-width: 9136px"' in str(money)


def test_an_outlier_is_drawn_off_the_scale_and_named_so_every_bar_stays_readable() -> None:
    """One hand with a -99,900% hold flattened every other bar of the shift chart (#32)."""
    chart = str(
        bar_chart(
            ident="c", title="hold", desc="hold by table",
            categories=["CR-06", "CR-07", "CR-08"],
            series=[Series("hold", [20.0, -99_900.0, 35.0], ["20%", "-99,900%", "35%"], "s")],
            axis=lambda v: f"{v:g}%",
        )
    )  # fmt: skip
    assert outliers([20.0, -99_900.0, 35.0]) == {1}
    assert outliers([20.0, -30.0, 35.0]) == set()
    ticks = [float(t) for t in re.findall(r'<text x="\d+" y="[\d.]+" dy="4">(-?[\d.]+)%', chart)]
    assert min(ticks) >= -10 and max(ticks) <= 40  # the scale of the readable bars
    heights = {
        m[0]: float(m[1])
        for m in re.findall(r'data-category="([^"]+)"[^>]*height="([\d.]+)"', chart)
    }
    assert heights["CR-08"] > 100 and heights["CR-06"] > 50  # not flattened
    assert 'class="bar s clipped" data-series="hold" data-category="CR-07"' in chart
    assert "off the scale: CR-07 hold -99,900%" in chart
