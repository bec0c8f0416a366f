"""The alert queue as surveillance reads it (controller.floor.queue), the floor map's
places and the console's clock (controller.floor.layout): without a broker or a browser.

Issue 22, finding 2: 250 unreadable-record audit alerts from one table must not push
another table's surveillance alert off the queue."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from controller.core.commands import Confirm
from controller.floor.ingest import Ingest, Message
from controller.floor.layout import boxes, clock, place, tile_alert, timeline
from controller.floor.live import BACKLOG_AFTER
from controller.floor.queue import (
    RANK_FLOOD,
    RANK_RED,
    RANK_SURVEILLANCE,
    confirm_problem,
    queue,
    queue_page,
)
from controller.floor.store import SqliteStore
from controller.floor.vocabulary import AlertKind, AlertStatus
from controller.wire.messages import FloorRecord
from tests.floor_support import TableJournal, event_bytes, make_points


class Floor:
    def __init__(self, path: Path) -> None:
        self.store = SqliteStore(path / "floor.db")
        self.ingest = Ingest(self.store, "firebet", lambda _t, _p: None)

    def events(self, records: list[FloorRecord]) -> None:
        self.ingest.handle(
            [Message(f"firebet/{r.table}/event", event_bytes(r), qos=1) for r in records]
        )


def garbled(records: list[FloorRecord]) -> list[FloorRecord]:
    """The records with events no floor can read (an unreadable audit alert each)."""
    return [replace(r, events="garbled") if r.kind == "command" else r for r in records]


@pytest.fixture
def floor(tmp_path: Path) -> Floor:
    return Floor(tmp_path)


def test_a_flood_of_audit_alerts_is_one_item_behind_every_surveillance_alert(
    tmp_path: Path, floor: Floor, caplog: pytest.LogCaptureFixture
) -> None:
    flood = TableJournal(tmp_path / "flood.db", table="CR-30")
    flood.do(*["2 3", "3 4"] * 125)
    floor.events(garbled(flood.records()))  # first the flood, then the 5th point
    five = TableJournal(tmp_path / "five.db", table="CR-05")
    five.do("bet 3 5", *make_points(4, 5, 6, 8, 9))
    floor.events(five.records())
    items = queue(floor.store)
    assert [(i.alert.table, i.alert.kind, i.count) for i in items] == [
        ("CR-05", "surveillance", 1),
        ("CR-30", "audit", 250),
    ]
    assert [i.rank for i in items] == [RANK_SURVEILLANCE, RANK_FLOOD]
    assert items[1].whats == {"unreadable": 250}
    assert (items[1].first_record, items[1].last_record) == (2, 251)
    assert floor.store.open_counts() == {"surveillance": 1, "audit": 250}
    # the old list, oldest first and 200 long, had no room left for CR-05's alert
    assert {a.kind for a in floor.store.alerts(open_only=True)} == {"audit"}
    assert queue(floor.store, table="CR-30")[0].count == 250
    # a flood is cleared whole, with one note
    newest = items[1].alert
    with caplog.at_level(logging.INFO, logger="firebet.floor"):
        floor.ingest.clear(newest.id, "alice", "the reader's firmware, replaced", flood=True)
    assert [(i.alert.table, i.count) for i in queue(floor.store)] == [("CR-05", 1)]
    # the floor's log says who cleared what, and why (issue 32: a line for every alert moved)
    said = [r.getMessage() for r in caplog.records if "cleared" in r.getMessage()]
    assert said == [
        f"table CR-30: alice cleared 250 audit alerts (newest {newest.id}): "
        "the reader's firmware, replaced"
    ]


def test_every_5th_point_first_then_red_then_grey_newest_first(
    tmp_path: Path, floor: Floor
) -> None:
    tables = {}
    for name in ("CR-01", "CR-02"):
        journal = TableJournal(tmp_path / f"{name}.db", table=name)
        journal.do("bet 3 5", *make_points(4, 5, 6, 8, 9))
        tables[name] = journal.records()
        floor.events(tables[name])
    floor.ingest.handle([Message("firebet/CR-03/online", json.dumps({"online": False}).encode())])
    # CR-01's history rewritten: its record 3 again with another chain hash
    floor.events([replace(tables["CR-01"][2], chain="00" * 32)])
    items = queue(floor.store)
    assert [(i.alert.table, i.alert.kind) for i in items] == [
        ("CR-02", "surveillance"),  # yellow, every one first, newest first
        ("CR-01", "surveillance"),
        ("CR-01", "integrity"),  # red
        ("CR-03", "offline"),  # grey
    ]
    assert items[2].rank == RANK_RED and items[2].colour == "red"
    assert [i.colour for i in items] == ["yellow", "yellow", "red", "grey"]
    assert [i.rank for i in items[:2]] == [RANK_SURVEILLANCE, RANK_SURVEILLANCE]


def test_every_open_alert_of_a_table_can_be_confirmed_in_any_order(
    tmp_path: Path, floor: Floor
) -> None:
    journal = TableJournal(tmp_path / "t.db", table="CR-07")
    journal.do("bet 3 5", *make_points(4, 5, 6, 8, 9), "4 4", "3 4")  # hand 1 settled
    floor.events(journal.records())
    (first,) = queue(floor.store)
    summary = floor.ingest.summaries["CR-07"]
    assert confirm_problem(first.alert, summary) is None  # settled, still the table's alert
    with pytest.raises(LookupError, match="confirmed, not cleared"):
        floor.ingest.clear(first.alert.id, "alice", "no")
    floor.events(journal.do("bet 1 5", *make_points(4, 5, 6, 8, 9)))  # hand 2's alert
    summary = floor.ingest.summaries["CR-07"]
    assert summary["table_alerts"] == [[1, None, None], [2, None, None]]
    assert confirm_problem(first.alert, summary) is None  # hand 1's stays confirmable (#32)
    sent = floor.ingest.confirm(first.alert.id, "alice", "id-1")
    assert sent.status is AlertStatus.SENT
    (confirmed,) = journal.apply(Confirm(1, "alice", "id-1", actor="floor:alice"))
    floor.events([confirmed])
    assert floor.store.alert(first.alert.id).status is AlertStatus.CONFIRMED  # type: ignore[union-attr]
    # who confirmed, and when: the time the table journaled it (#32)
    assert floor.ingest.summaries["CR-07"]["table_alerts"] == [
        [1, "alice", confirmed.at], [2, None, None]]  # fmt: skip
    assert [i.alert.hand for i in queue(floor.store)] == [2]
    (second,) = queue(floor.store)
    assert confirm_problem(second.alert, floor.ingest.summaries["CR-07"]) is None
    # an alert the table no longer keeps (past its bound) is cleared with a note
    problem = confirm_problem(second.alert, {"table_alerts": [[3, None], [4, None]]})
    assert problem == "the table keeps the alerts of hands 3, 4 (the newest 2), not hand 2's"


def test_the_floor_map_puts_tables_where_the_config_says_and_fills_a_grid() -> None:
    names = [f"T{n:02d}" for n in range(1, 31)]
    fm = place(names, {})
    assert (fm.rows, fm.cols) == (5, 7)  # about 3 to 2, like a wall screen
    assert fm.spots["T01"] == (1, 1) and fm.spots["T08"] == (2, 1)
    assert len(set(fm.spots.values())) == 30
    fm = place(names, {"T01": (5, 7), "T02": (1, 1)})
    assert fm.spots["T01"] == (5, 7) and fm.spots["T02"] == (1, 1)
    assert fm.spots["T03"] == (1, 2)  # the next free place
    assert len(set(fm.spots.values())) == 30
    assert place([], {}).cols == 1


def test_a_tile_shows_the_markers_the_point_and_the_alert_in_words() -> None:
    summary = {"points": [6, 4], "point": 8, "alerts": {}, "online": True, "missing": None}
    lit = [
        (b["number"], b["ordinal"], b["point"]) for b in boxes(summary) if b["lit"] or b["point"]
    ]
    assert lit == [(4, 2, False), (6, 1, False), (8, None, True)]
    assert tile_alert(summary) == ("ok", "")
    assert tile_alert({**summary, "alerts": {"surveillance": 1, "audit": 2}, "alert_hand": 3}) == (
        "red", "payout check: 2 alerts",
    )  # fmt: skip
    assert tile_alert({**summary, "alerts": {"surveillance": 1}, "alert_hand": 3})[0] == "yellow"
    assert tile_alert({**summary, "online": False}) == ("grey", "OFFLINE")


def test_times_are_the_floor_s_local_time_to_the_second() -> None:
    paris = ZoneInfo("Europe/Paris")
    today = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    assert clock("2026-12-02T08:15:00.123+00:00", paris, today) == "09:15:00"
    assert clock("2026-11-30T23:30:59.999+00:00", paris, today) == "2026-12-01 00:30:59"
    assert clock("", paris, today) == "" and clock("soon", paris, today) == "soon"


def test_a_hand_s_timeline_has_every_roll_and_action_in_record_order(tmp_path: Path) -> None:
    journal = TableJournal(tmp_path / "t.db", table="CR-07")
    journal.do("bet 3 5", "2 2", "cancel 3", "5 2")
    floor = Floor(tmp_path)
    floor.events(journal.records())
    hand = floor.store.hand("CR-07", 1)
    assert hand is not None
    rows = [(r["what"], r.get("dice")) for r in timeline(hand)]
    assert rows[0] == ("bet", None) and ("roll", [2, 2]) in rows and rows[-1] == ("roll", [5, 2])


def test_every_open_5th_point_is_on_a_page_and_counted_however_many_a_table_raises(
    tmp_path: Path, floor: Floor
) -> None:
    """1,010 5th points from CR-07 pushed CR-08's open alert off the queue (#32): the queue
    listed the 1,000 newest. Now every one is paged and counted."""
    store = floor.store
    with store.transaction():
        first = store.raise_alert("CR-08", AlertKind.SURVEILLANCE, "2026-12-03T10:00:00+00:00",
                                  {"unique_points": 5}, hand=1, record=11)  # fmt: skip
        for hand in range(1, 1011):
            store.raise_alert("CR-07", AlertKind.SURVEILLANCE, "2026-12-03T10:00:01+00:00",
                              {"unique_points": 5}, hand=hand, record=hand * 11)  # fmt: skip
    assert store.open_counts() == {AlertKind.SURVEILLANCE: 1011}
    pages = [queue_page(store, page=n) for n in range(1, 12)]
    assert [p.pages for p in pages] == [11] * 11 and pages[0].total == 1011
    seen = [i.alert.id for p in pages for i in p.items]
    assert len(seen) == len(set(seen)) == 1011 and seen[-1] == first
    assert queue_page(store, page=99).page == 11  # past the end: the last page
    mine = queue_page(store, table="CR-08")
    assert [i.alert.id for i in mine.items] == [first] and mine.open == 1
    assert len(queue(store)) == 1011


def test_a_table_s_open_5th_points_are_on_its_tile_and_a_backlog_is_an_alert(
    tmp_path: Path, floor: Floor
) -> None:
    """The tile named only the table's newest alerted hand; a table raising 5th points
    faster than surveillance confirms them was no alert of its own (#32)."""
    journal = TableJournal(tmp_path / "t.db", table="CR-07")
    for _ in range(BACKLOG_AFTER - 1):
        journal.do(*make_points(4, 5, 6, 8, 9), "4 4", "3 4")
    floor.events(journal.records())
    summary = floor.ingest.summaries["CR-07"]
    assert [w["hand"] for w in summary["waiting"]] == [9, 8, 7]  # the newest, first
    colour, words = tile_alert(summary)
    assert (colour, words) == ("yellow", f"5th point: hand 9 (+{BACKLOG_AFTER - 2} more)")
    assert floor.store.open_counts(table="CR-07") == {AlertKind.SURVEILLANCE: 9}
    floor.events(journal.do(*make_points(4, 5, 6, 8, 9), "4 4", "3 4"))
    counts = floor.store.open_counts(table="CR-07")
    assert counts == {AlertKind.SURVEILLANCE: BACKLOG_AFTER, AlertKind.BACKLOG: 1}
    (backlog,) = [i for i in queue(floor.store) if i.alert.kind is AlertKind.BACKLOG]
    assert backlog.colour == "red" and "10 5th-point alerts waiting" in backlog.alert.detail["what"]
    floor.events(
        journal.do(*make_points(4, 5, 6, 8, 9), "4 4", "3 4")
    )  # one backlog alert at a time
    assert floor.store.open_counts(table="CR-07")[AlertKind.BACKLOG] == 1
    # the newest confirmed (sent to the table): the tile turns at once to the next waiting
    newest = floor.ingest.summaries["CR-07"]["waiting"][0]
    floor.ingest.confirm(newest["id"], "alice", "id-1")
    summary = floor.ingest.summaries["CR-07"]
    assert tile_alert(summary)[1].startswith("5th point: hand 10 ")
