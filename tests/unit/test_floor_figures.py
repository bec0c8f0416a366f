"""Shift figures (controller/floor/figures.py) with exact numbers: handle, paid, hold and
hold %, the theoretical hold from the odds module the ``odds`` command uses, the points
made against the exact odds, the periods of a shift or a day in the floor's zone; and
the settled hands the store keeps for them, from a table's real records."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.config import FireBetRules
from controller.core.odds import exact_distribution, house_edge, report
from controller.core.times import iso, to_ms
from controller.floor.figures import (
    DEFAULT_SHIFTS,
    Figures,
    RulesHistory,
    SettledHand,
    Shift,
    figures,
    parse_shifts,
    percent,
    settled_hand,
    shift_at,
    shift_period,
    shift_problem,
    span_period,
    theoretical_hold,
    whole_day,
)
from controller.floor.ingest import Ingest, Message
from controller.floor.store import SqliteStore
from controller.wire.messages import FloorRecord
from tests.floor_support import TableJournal, event_bytes, make_points

NJ = FireBetRules()
RICH = FireBetRules(pays={4: 25, 5: 250, 6: 1000})
NY = ZoneInfo("America/New_York")


def hand(table: str, n: int, points: int, wagers: dict[str, int], odds: int, record: int = 10,
         at_ms: int = 0) -> SettledHand:  # fmt: skip
    log = {
        "hand": n, "result": "win" if odds else "lose", "settled_record": record,
        "unique_points": points, "wagers": wagers,
        "payouts": {p: (a * odds) for p, a in wagers.items()},
    }  # fmt: skip
    got = settled_hand(table, log, at_ms)
    assert got is not None
    return got


# one hand ------------------------------------------------------------------------------------
def test_a_won_hand_is_paid_its_winnings_and_its_wagers_back() -> None:
    won = hand("CR-07", 1, 4, {"1": 5, "2": 2}, 24)
    assert (won.wagered, won.won, won.paid, won.unique_points) == (7, 168, 175, 4)
    lost = hand("CR-07", 2, 2, {"3": 5}, 0)
    assert (lost.wagered, lost.won, lost.paid) == (5, 0, 0)


def test_a_hand_not_settled_or_settled_and_voided_has_no_figures() -> None:
    assert settled_hand("T", {"hand": 1, "result": None, "settled_record": None}, 0) is None
    assert settled_hand("T", {"hand": 1, "result": "lose", "settled_record": None}, 0) is None


# the figures ---------------------------------------------------------------------------------
def test_the_figures_of_a_shift_exactly() -> None:
    hands = [
        hand("CR-07", 1, 4, {"1": 5, "2": 2}, 24),  # paid 175 on 7
        hand("CR-07", 2, 0, {"1": 5}, 0),
        hand("CR-07", 3, 1, {"4": 3, "9": 5}, 0),
        hand("CR-08", 1, 2, {"1": 1}, 0),
        hand("CR-08", 2, 5, {"1": 2}, 249),  # paid 500 on 2
        hand("CR-08", 3, 3, {}, 0),  # no wager: a hand all the same
    ]
    tables, floor = figures(hands, {}, ["CR-09"])
    a, b, c = tables
    assert [t.table for t in tables] == ["CR-07", "CR-08", "CR-09"]
    assert (a.hands, a.handle, a.paid, a.won, a.hold) == (3, 20, 175, 168, -155)
    assert a.hold_pct == Fraction(-155, 20)
    assert (b.hands, b.handle, b.paid, b.hold) == (3, 3, 500, -497)
    assert (c.hands, c.handle, c.hold_pct) == (0, 0, None)
    assert (floor.hands, floor.handle, floor.paid, floor.hold) == (6, 23, 675, -652)
    assert floor.hold_pct == Fraction(-652, 23)
    assert a.points == [1, 1, 0, 0, 1, 0, 0] and b.points == [0, 0, 1, 1, 0, 1, 0]
    assert floor.points == [1, 1, 1, 1, 1, 1, 0]
    edge = house_edge(NJ)
    assert a.theoretical == b.theoretical == c.theoretical == floor.theoretical == edge
    assert percent(a.hold_pct) == "-775.00%" and percent(edge) == "20.76%"


def test_the_theoretical_hold_is_the_odds_command_s_house_edge() -> None:
    for rules in (NJ, RICH, FireBetRules(pays={4: 7, 5: 50, 6: 200})):
        assert str(theoretical_hold(rules)) == report(rules)["exact"]["house_edge"]
    assert percent(theoretical_hold(NJ), 4) == "20.7628%"


def test_the_theoretical_hold_weighs_each_pay_table_by_its_handle() -> None:
    rules = {"CR-07": RulesHistory([(1, NJ), (50, RICH)])}
    hands = [
        hand("CR-07", 1, 0, {"1": 5}, 0, record=20),  # under NJ
        hand("CR-07", 2, 0, {"1": 3, "2": 4}, 0, record=60),  # under RICH
    ]
    [t], _ = figures(hands, rules)
    assert t.theoretical == (5 * house_edge(NJ) + 7 * house_edge(RICH)) / 12
    assert t.pay_tables == {
        "4: 24, 5: 249, 6: 999": house_edge(NJ),
        "4: 25, 5: 250, 6: 1000": house_edge(RICH),
    }
    # no handle, several pay tables: no one theoretical hold
    [none], _ = figures([hand("CR-07", 3, 1, {}, 0, record=20),
                         hand("CR-07", 4, 1, {}, 0, record=60)], rules)  # fmt: skip
    assert none.handle == 0 and none.theoretical is None
    # a table without hands shows the pay table in force
    [idle], _ = figures([], rules, ["CR-07"])
    assert idle.theoretical == house_edge(RICH)


def test_the_rules_in_force_are_the_last_rules_record_before() -> None:
    history = RulesHistory([(50, RICH), (1, NJ)])
    assert history.at(1) == FireBetRules() and history.at(2) == NJ
    assert history.at(50) == NJ and history.at(51) == RICH and history.latest() == RICH
    assert RulesHistory().at(7) == FireBetRules()


def test_the_expected_points_are_the_exact_distribution() -> None:
    p = exact_distribution()
    assert sum(p) == 1
    f = Figures("T", hands=330)
    assert f.expected_points == [330 * q for q in p]
    assert f.expected_points[0] == 196  # 330 * 98/165


hands_strategy = st.lists(
    st.tuples(
        st.sampled_from(["A", "B", "C"]),
        st.integers(0, 6),
        st.dictionaries(
            st.sampled_from([str(i) for i in range(1, 17)]), st.integers(1, 5), max_size=6
        ),
        st.integers(1, 400),
    ),
    max_size=60,
)


@given(hands_strategy)
def test_the_floor_is_the_sum_of_its_tables_and_hold_is_handle_less_paid(
    drawn: list[tuple[str, int, dict[str, int], int]],
) -> None:
    rules = {"B": RulesHistory([(100, RICH)])}
    hands = []
    for i, (table, points, wagers, record) in enumerate(drawn):
        r = rules.get(table, RulesHistory()).at(record)
        odds = r.odds_for(points)[1]
        hands.append(hand(table, i, points, wagers, odds, record=record))
    tables, floor = figures(hands, rules)
    assert floor.hands == len(hands) == sum(t.hands for t in tables) == sum(floor.points)
    assert floor.handle == sum(sum(w.values()) for _, _, w, _ in drawn)
    assert floor.paid == sum(t.paid for t in tables)
    for f in [*tables, floor]:
        assert f.hold == f.handle - f.paid
        if f.handle:
            assert f.hold_pct is not None and f.hold_pct * f.handle == f.hold
        assert sum(f.expected_points) == f.hands
        # the theoretical hold lies between the pay tables' edges
        edges = sorted(f.pay_tables.values())
        if f.theoretical is not None:
            assert edges[0] <= f.theoretical <= edges[-1]
    expected = sum(
        (sum(w.values()) * house_edge(rules.get(t, RulesHistory()).at(rec))
         for t, _, w, rec in drawn),
        Fraction(0),
    )  # fmt: skip
    assert floor.expected_hold == expected


def test_percent_is_rounded_exactly() -> None:
    assert percent(Fraction(1, 3)) == "33.33%"
    assert percent(Fraction(-2, 3)) == "-66.67%"
    assert percent(Fraction(12345, 10)) == "123,450.00%"
    assert percent(Fraction(1, 8), 0) == "12%"  # half to even
    assert percent(None) == "—"


# periods -------------------------------------------------------------------------------------
def test_a_day_and_its_shifts_in_the_floor_s_zone() -> None:
    day = whole_day(date(2026, 12, 2), NY)
    assert day.start == datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    assert day.end - day.start == timedelta(hours=24)
    grave, shift, swing = (shift_period(date(2026, 12, 2), s, NY) for s in DEFAULT_SHIFTS)
    assert (grave.start, grave.end, swing.end) == (day.start, shift.start, day.end)
    assert shift.start_ms == to_ms("2026-12-02T13:00:00+00:00")
    assert shift.span == "08:00-16:00" and swing.span == "16:00-24:00"


def test_a_day_across_a_clock_change_is_23_or_25_hours() -> None:
    spring = whole_day(date(2026, 3, 8), NY)
    autumn = whole_day(date(2026, 11, 1), NY)
    assert spring.end_ms - spring.start_ms == 23 * 3_600_000  # (aware minus aware: wall time)
    assert autumn.end_ms - autumn.start_ms == 25 * 3_600_000


def test_a_night_shift_ends_the_next_day() -> None:
    night = Shift("night", 22 * 60, 6 * 60)
    p = shift_period(date(2026, 12, 2), night, NY)
    assert p.start == datetime(2026, 12, 3, 3, 0, tzinfo=UTC)
    assert p.end - p.start == timedelta(hours=8) and p.span == "22:00-Thu 06:00"
    span = span_period(date(2026, 12, 2), 20 * 60, 2 * 60, NY)
    assert span.end - span.start == timedelta(hours=6) and span.name == "20:00-02:00"
    late = datetime(2026, 12, 3, 1, 30, tzinfo=NY)
    assert shift_at(late, [night]) == (date(2026, 12, 2), night)
    assert shift_at(late, DEFAULT_SHIFTS) == (date(2026, 12, 3), DEFAULT_SHIFTS[0])


def test_shift_lines_are_checked() -> None:
    assert parse_shifts({"early": "06:00-14:00", "late": "14:00-06:00"}) == (
        Shift("early", 360, 840),
        Shift("late", 840, 360),
    )
    assert shift_problem("day", "08:00-16:00") is None
    assert "HH:MM-HH:MM" in (shift_problem("day", "8-16") or "")
    assert "HH:MM-HH:MM" in (shift_problem("day", "08:00-25:00") or "")
    assert "same time" in (shift_problem("day", "00:00-24:00") or "")
    assert "24:00" in (shift_problem("day", "24:00-08:00") or "")
    assert "name" in (shift_problem("1st", "08:00-16:00") or "")
    assert "not 8" in (shift_problem("day", 8) or "")
    with pytest.raises(ValueError, match="at most 12"):
        parse_shifts({f"s{i}": "01:00-02:00" for i in range(13)})


# the store's settled hands, from a table's real records -------------------------------------
def ingest(path: Path) -> tuple[SqliteStore, Ingest]:
    store = SqliteStore(path)
    return store, Ingest(store, "firebet", lambda t, p: None)


def send(floor: Ingest, records: list[FloorRecord]) -> None:
    floor.handle([Message(f"firebet/{r.table}/event", event_bytes(r), qos=1) for r in records])


def test_the_store_keeps_each_settled_hand_at_its_settlement_s_time(tmp_path: Path) -> None:
    table = TableJournal(tmp_path / "table.db", table="CR-07")
    table.do("bet 1 5", "bet 2 2", *make_points(4, 5, 6, 8), "2 2", "3 4")  # 4 points: won
    table.do("bet 3 4", "2 2", "3 4")  # hand 2: no point made, lost
    at = to_ms("2026-12-02T14:30:00+00:00")
    assert at is not None

    def timed(records: list[FloorRecord]) -> list[FloorRecord]:
        return [replace(r, at=iso(at + 1000 * r.record)) for r in records]

    records = timed(table.records())
    store, floor = ingest(tmp_path / "floor.db")
    send(floor, records)
    sevens = [r.record for r in records if r.events and any(
        e.get("event") == "settlement" for e in r.events)]  # fmt: skip
    assert list(store.settled_between(0, 2**62)) == [
        SettledHand("CR-07", 1, sevens[0], at + 1000 * sevens[0], 4, 7, 168, 175),
        SettledHand("CR-07", 2, sevens[1], at + 1000 * sevens[1], 0, 4, 0, 0),
    ]
    # [start, end): the first hand's time is in, the second's is out
    assert [h.hand for h in store.settled_between(at + 1000 * sevens[0],
                                                  at + 1000 * sevens[1])] == [1]  # fmt: skip
    assert list(store.settled_between(0, 2**62, "CR-08")) == []
    assert store.table_names() == ["CR-07"]
    # the seven-out voided: hand 2 is not settled any more
    send(floor, timed(table.do("void")))
    assert [h.hand for h in store.settled_between(0, 2**62)] == [1]
    store.close()


def test_a_floor_db_from_before_the_figures_gets_its_hands_figures(tmp_path: Path) -> None:
    table = TableJournal(tmp_path / "table.db", table="CR-07")
    table.do("bet 1 5", *make_points(4, 5), "4 4", "3 4", "bet 1 5", "4 4", "3 4")
    store, floor = ingest(tmp_path / "floor.db")
    send(floor, table.records())
    before = list(store.settled_between(0, 2**62))
    assert [(h.hand, h.unique_points, h.paid) for h in before] == [(1, 2, 0), (2, 0, 0)]
    store.close()
    db = sqlite3.connect(tmp_path / "floor.db")
    db.execute("DROP TABLE settled")
    db.commit()
    db.close()
    again = SqliteStore(tmp_path / "floor.db")
    assert list(again.settled_between(0, 2**62)) == before
    again.close()


def test_the_rules_records_are_read_back(tmp_path: Path) -> None:
    from controller.core.config import load_config

    store, floor = ingest(tmp_path / "floor.db")
    config = load_config(None)
    table = TableJournal(tmp_path / "table.db", table="CR-07", config=config)
    send(floor, table.records())
    [(number, payload)] = store.rules_records("CR-07")
    assert number == 2 and json.loads(payload)["firebet"]["pays"] == {"4": 24, "5": 249, "6": 999}
    store.close()
