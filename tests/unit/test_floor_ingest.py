"""The floor's ingest without a broker: once each, gaps and resends, integrity, presence."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from controller.core.config import FireBetRules
from controller.floor.ingest import Ingest, Message
from controller.floor.store import SqliteStore
from controller.wire.messages import FloorRecord
from tests.conftest import StoreOpener
from tests.floor_support import TableJournal, event_bytes, make_points
from tests.support import wait_for


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Floor:
    """An ingest on a store (SQLite, then PostgreSQL), with the commands it sends kept."""

    def __init__(self, open_store: StoreOpener) -> None:
        self.sent: list[tuple[str, dict]] = []  # type: ignore[type-arg]
        self.clock = Clock()
        self.store = open_store()
        self.ingest = Ingest(
            self.store, "firebet", lambda t, p: self.sent.append((t, json.loads(p))),
            clock=self.clock, gap_grace_s=1.0, resend_every_s=5.0,
        )  # fmt: skip

    def events(self, *records: FloorRecord) -> None:
        self.ingest.handle(
            [Message(f"firebet/{r.table}/event", event_bytes(r), qos=1) for r in records]
        )

    def msg(self, table: str, leaf: str, body: object) -> None:
        self.ingest.handle([Message(f"firebet/{table}/{leaf}", json.dumps(body).encode())])

    def stored(self, table: str = "T1") -> list[int]:
        return [r.record for r in self.store.records(table, 1, 10**9)]

    def alerts(self, **kw: object) -> list:  # type: ignore[type-arg]
        return self.store.alerts(**kw)  # type: ignore[arg-type]


@pytest.fixture
def records(tmp_path: Path) -> list[FloorRecord]:
    table = TableJournal(tmp_path / "table.db")
    table.do("bet 1 5", "bet 2 2", *make_points(4, 5, 6, 8, 9), "4 4", "3 4")
    return table.records()


def test_each_record_is_stored_once(
    store_engine: StoreOpener, tmp_path: Path, records: list[FloorRecord]
) -> None:
    floor = Floor(store_engine)
    floor.events(*records[:5])
    floor.events(*records[:8])
    floor.events(*records)
    assert floor.stored() == [r.record for r in records]
    summary = floor.ingest.summaries["T1"]
    assert summary["record"] == records[-1].record and summary["missing"] is None
    assert floor.ingest.tables["T1"].repeats == 13
    assert floor.sent == []
    assert summary["checked_hand"] == 1


def test_a_gap_asks_for_a_resend_and_closes(
    store_engine: StoreOpener, tmp_path: Path, records: list[FloorRecord]
) -> None:
    floor = Floor(store_engine)
    floor.events(*records[:3], *records[5:8])
    assert floor.ingest.summaries["T1"]["missing"] == [4, 5]
    floor.ingest.tick()
    assert floor.sent == []  # not yet: it may close by itself
    floor.clock.now += 1.5
    floor.ingest.tick()
    assert floor.sent == [("firebet/T1/command", {"op": "resend", "from": 4, "v": 1})]
    floor.clock.now += 1.0
    floor.ingest.tick()
    assert len(floor.sent) == 1  # asked once, again only after resend_every_s
    floor.clock.now += 5.0
    floor.ingest.tick()
    assert len(floor.sent) == 2
    floor.events(*records[3:])
    assert floor.stored() == [r.record for r in records]
    assert floor.ingest.summaries["T1"]["missing"] is None
    # records 6..8 were checked from the store: their events were kept with them
    summary = floor.ingest.summaries["T1"]
    assert summary["checked_hand"] == 1 and summary["unchecked_records"] == 0
    assert floor.store.records("T1", 6, 8) == records[5:8]
    floor.clock.now += 60
    floor.ingest.tick()
    assert len(floor.sent) == 2


def test_a_table_first_heard_midway_is_asked_from_record_one(
    store_engine: StoreOpener, tmp_path: Path, records: list[FloorRecord]
) -> None:
    floor = Floor(store_engine)
    floor.msg("T1", "online", {"online": True, "program": "p", "record": len(records)})
    floor.clock.now += 2
    floor.ingest.tick()
    assert floor.sent == [("firebet/T1/command", {"op": "resend", "from": 1, "v": 1})]


def test_a_rewritten_record_is_an_integrity_alert_until_cleared(
    store_engine: StoreOpener, tmp_path: Path, records: list[FloorRecord]
) -> None:
    floor = Floor(store_engine)
    floor.events(*records)
    forged = replace(records[2], chain="f" * 64, payload={"forged": True})
    floor.events(forged)
    floor.events(forged)
    floor.events(records[2])
    floor.events(replace(records[4], chain="e" * 64), replace(records[5], chain="d" * 64))
    found = [a for a in floor.alerts() if a.kind == "integrity"]
    assert len(found) == 1  # a history sent again is one alert, with every record it touched
    assert found[0].detail["more_records"] == [5, 6]
    alert = found[0]
    assert alert.record == 3 and alert.detail["received_chain"] == "f" * 64
    assert alert.detail["stored_chain"] == records[2].chain
    assert floor.store.records("T1", 3, 3)[0].chain == records[2].chain  # the first one stays
    # nothing clears it by itself: not more records, not a restart
    again = Floor(store_engine)
    again.events(*records)
    assert [a.id for a in again.alerts() if a.kind == "integrity"] == [alert.id]
    assert again.ingest.summaries["T1"]["alerts"]["integrity"] == 1
    cleared = again.ingest.clear(alert.id, "alice", "table reinstalled")
    assert (cleared.status, cleared.status_by) == ("cleared", "alice")
    assert [a for a in again.alerts() if a.kind == "integrity"] == []


def test_offline_alert_follows_the_will(store_engine: StoreOpener, tmp_path: Path) -> None:
    floor = Floor(store_engine)
    floor.msg("T9", "online", {"online": True, "program": "p", "record": 0})
    floor.msg("T9", "online", {"online": False})
    assert [a.kind for a in floor.alerts()] == ["offline"]
    assert floor.ingest.summaries["T9"]["online"] is False
    floor.msg("T9", "online", {"online": False})
    assert len(floor.alerts()) == 1
    floor.msg("T9", "online", {"online": True, "program": "p", "record": 0})
    assert floor.alerts() == []
    assert [a.status for a in floor.alerts(open_only=False)] == ["resolved"]


def test_bad_messages_are_counted_not_stored(
    store_engine: StoreOpener, tmp_path: Path, records: list[FloorRecord]
) -> None:
    floor = Floor(store_engine)
    floor.ingest.handle([
        Message("firebet/T1/event", b"not json"),
        Message("firebet/T1/event", json.dumps({**records[0].message(), "table": "T2"}).encode()),
        Message("firebet/T1/event", json.dumps({**records[0].message(), "record": 0}).encode()),
        Message("firebet/T1/event", json.dumps({**records[0].message(), "chain": "xyz"}).encode()),
        Message("firebet/T1/online", b'{"online": "yes"}'),
        Message("elsewhere/T1/event", event_bytes(records[0])),
    ])  # fmt: skip
    assert floor.stored() == []
    assert floor.ingest.tables["T1"].row.bad == 5
    assert floor.ingest.bad_topics == 1


def test_a_message_of_a_version_the_floor_does_not_know_is_counted_with_the_reason(
    store_engine: StoreOpener, tmp_path: Path, records: list[FloorRecord]
) -> None:
    floor = Floor(store_engine)
    newer = json.dumps({**records[0].message(), "v": 2}).encode()
    floor.ingest.handle([Message("firebet/T1/event", newer)])
    assert floor.stored() == []
    live = floor.ingest.tables["T1"]
    assert live.row.bad == 1
    assert live.row.last_bad == "event: an event of version 2: this end reads version 1 " + (
        "(docs/floor.md, Versions)"
    )
    from controller.floor.summary import table_summary

    shown = table_summary(floor.ingest.store, live)
    assert shown["bad"] == 1 and "of version 2" in str(shown["last_bad"])  # /api/tables
    floor.ingest.handle([Message("firebet/T1/event", event_bytes(records[0]))])
    assert len(floor.stored()) == 1  # the version it knows: taken


def test_the_surveillance_alert_shows_the_hand_and_a_restart_keeps_everything(
    store_engine: StoreOpener, tmp_path: Path, records: list[FloorRecord]
) -> None:
    floor = Floor(store_engine)
    floor.events(*records[:14])  # up to the 5th point
    (alert,) = floor.alerts()
    assert (alert.kind, alert.table, alert.hand) == ("surveillance", "T1", 1)
    hand = floor.store.hand("T1", 1)
    assert hand is not None and hand["points"] == [4, 5, 6, 8, 9]
    sent = floor.ingest.confirm(alert.id, "alice", "id-1")
    assert sent.status == "sent" and sent.status_by == "alice"
    assert floor.sent == [
        ("firebet/T1/command", {"op": "confirm", "hand": 1, "by": "alice", "id": "id-1", "v": 1})
    ]
    floor.store.close()
    again = Floor(store_engine)
    assert again.ingest.summaries["T1"]["record"] == 14
    again.events(*records)
    assert len(again.alerts(open_only=False)) == 1
    assert again.stored() == [r.record for r in records]
    assert again.ingest.summaries["T1"]["checked_hand"] == 1


def test_a_floor_db_from_before_the_events_column_is_opened(tmp_path: Path) -> None:
    import sqlite3

    db = sqlite3.connect(tmp_path / "floor.db")
    db.execute(
        "CREATE TABLE records (table_id TEXT NOT NULL, record INTEGER NOT NULL, at TEXT NOT NULL,"
        " kind TEXT NOT NULL, actor TEXT NOT NULL, payload TEXT NOT NULL, chain TEXT NOT NULL,"
        " received TEXT NOT NULL, PRIMARY KEY (table_id, record)) WITHOUT ROWID"
    )
    db.execute("INSERT INTO records VALUES ('T1', 1, 'a', 'start', 's', '{}', 'c', 'r')")
    db.commit()
    db.close()
    store = SqliteStore(tmp_path / "floor.db")
    assert store.records("T1", 1, 1)[0].events is None
    store.close()


GOOD = {"table": "T1", "record": 1, "at": "2026-01-01T00:00:00.000Z", "kind": "command",
        "actor": "dealer", "payload": {}, "chain": "ab" * 32}  # fmt: skip


def nested(depth: int) -> bytes:
    return (
        json.dumps({**GOOD, "payload": None})
        .replace('"payload": null', '"payload": ' + "[" * (depth - 1) + "]" * (depth - 1))
        .encode()
    )


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"[" * 5000 + b"]" * 5000, "not JSON: nested more than 32 deep"),
        (nested(33), "not JSON: nested more than 32 deep"),
        (json.dumps({**GOOD, "record": 2**63}).encode(), "a whole number of 19 digits"),
        (json.dumps({**GOOD, "payload": [-(2**63)]}).encode(), "a whole number of 20 digits"),
        (json.dumps({**GOOD, "payload": float("nan")}).encode(), "NaN is not a JSON number"),
        (json.dumps({**GOOD, "payload": 1e308}).replace("1e+308", "1e999").encode(),
         "1e999 is not a finite number"),
        (b'{"x": ' + b"9" * 5000 + b"}", "not JSON"),  # past Python's 4,300 digits
        (b'{"table": "\xff"}', "not UTF-8"),
        (json.dumps({**GOOD, "payload": "x" * 300_000}).encode(), "a message of 300"),
        (json.dumps({**GOOD, "chain": "z" * 10_000}).encode(), "chain 'zzzz"),
    ],
)  # fmt: skip
def test_each_message_is_judged_on_its_own(
    store_engine: StoreOpener,
    tmp_path: Path,
    records: list[FloorRecord],
    payload: bytes,
    reason: str,
) -> None:
    floor = Floor(store_engine)
    floor.ingest.handle([
        Message("firebet/T1/event", event_bytes(records[0])),
        Message("firebet/T1/event", payload),
        Message("firebet/T1/event", event_bytes(records[1])),
    ])  # fmt: skip
    assert floor.stored() == [1, 2]  # the bad one is not stored; the others are
    row = floor.ingest.tables["T1"].row
    assert row.bad == 1 and row.last_bad is not None and reason in row.last_bad
    assert len(row.last_bad) <= 300  # a reason never carries the message


def test_nested_32_deep_is_a_message(store_engine: StoreOpener, tmp_path: Path) -> None:
    floor = Floor(store_engine)
    floor.ingest.handle([Message("firebet/T1/event", nested(32))])
    assert floor.stored() == [1] and floor.ingest.tables["T1"].row.bad == 0


def test_a_table_that_keeps_sending_bad_ones_is_quarantined_until_a_person_clears_it(
    store_engine: StoreOpener, tmp_path: Path, records: list[FloorRecord]
) -> None:
    floor = Floor(store_engine)
    for _ in range(9):
        floor.ingest.handle([Message("firebet/T1/event", b"junk")])
        floor.clock.now += 10  # 9 in 80 s: not yet
    assert floor.ingest.tables["T1"].row.quarantined is None
    floor.ingest.handle([Message("firebet/T1/event", b"junk")])  # the 10th within 60 s? no
    assert floor.ingest.tables["T1"].row.quarantined is None
    for _ in range(10):
        floor.ingest.handle([Message("firebet/T1/event", b"junk")])
    row = floor.ingest.tables["T1"].row
    assert row.quarantined is not None and row.quarantined.startswith("10 bad messages")
    (alert,) = floor.alerts()
    assert (alert.kind, alert.table) == ("quarantine", "T1")
    floor.events(records[0])  # its good records are still stored
    assert floor.stored() == [1]
    again = Ingest(floor.store, "firebet", lambda t, p: None)  # a restart keeps it
    assert again.tables["T1"].row.quarantined == row.quarantined
    assert again.tables["T1"].row.bad == 20
    floor.ingest.clear(alert.id, "alice", "the table's link was fixed")
    assert floor.ingest.tables["T1"].row.quarantined is None
    assert floor.ingest.summaries["T1"]["quarantined"] is None


def rules_body(n: int) -> dict[str, object]:
    """A rules record's settings whose 6-point tier pays ``1000 + n`` to 1."""
    firebet = FireBetRules(pays={4: 24, 5: 249, 6: 1000 + n}).to_dict()
    del firebet["positions"]
    return {"table": {"id": "T1", "game": "craps", "positions": 16}, "firebet": firebet}


def test_the_floor_keeps_a_bounded_number_of_rules_engines(
    store_engine: StoreOpener, tmp_path: Path, records: list[FloorRecord]
) -> None:
    from controller.journal import replay

    floor = Floor(store_engine)
    start = records[0]
    rules = [
        FloorRecord("T1", n, start.at, "rules", "service", rules_body(n), "ab" * 32)
        for n in range(1, 41)
    ]
    floor.events(*rules)
    assert floor.stored() == list(range(1, 41))
    assert floor.ingest.tables["T1"].audit.rules.pay_table()[6] == 1040
    assert len(replay._engines) <= replay.ENGINES_KEPT
    audit = floor.ingest.tables["T1"].audit  # the floor's engine is the cache's, no other
    assert audit.replay.engine is replay._engines[audit.rules.key()]


def test_a_clear_halt_from_far_back_is_checked_by_folding_the_stored_records_again(
    store_engine: StoreOpener,
    tmp_path: Path,
) -> None:
    from controller.floor.audit import RECENT_STATES, TableAudit

    table = TableJournal(tmp_path / "table.db")
    table.do("bet 1 5", "bet 2 2", *["6 5"] * (RECENT_STATES + 10))
    records = table.records()
    audit = TableAudit()
    for rec in records[:3]:
        audit.step(rec)
    good, forged = audit.state.to_dict(), {**audit.state.to_dict(), "bets": {"1": 5}}
    floor = Floor(store_engine)
    floor.events(*records)
    n = len(records)

    def clear(number: int, state: dict[str, object]) -> FloorRecord:
        body = {"resume_from": 3, "resume_state": state}
        return FloorRecord("T1", number, records[0].at, "clear_halt", "service", body, "ab" * 32)

    floor.events(clear(n + 1, good))  # 3 is far past the recent states: folded again
    assert floor.ingest.tables["T1"].audit.state.to_dict() == good
    assert [a.kind for a in floor.alerts()] == []
    floor.events(clear(n + 2, forged))
    (alert,) = floor.alerts()
    assert alert.detail["what"] == "resume" and alert.record == n + 2
    assert "a state the table's records do not give" in alert.detail["detail"]
    # folded from a checkpoint (at most CHECKPOINT_EVERY records): no limit on how often
    floor.events(clear(n + 3, good))
    assert len(floor.alerts()) == 1
    assert floor.ingest.tables["T1"].audit.state.to_dict() == good


def test_a_clear_halt_from_before_a_restart_is_checked_by_a_fold_apart(
    store_engine: StoreOpener, tmp_path: Path
) -> None:
    """After a restart the floor holds no checkpoint before its audit's: the fold from the
    first record runs on a thread of its own, the table's audit waits for it, and the
    ingest thread goes on serving every table (#32: it re-folded on the ingest thread)."""
    from controller.floor.audit import TableAudit
    from controller.floor.live import CHECKPOINT_EVERY

    table = TableJournal(tmp_path / "table.db")
    table.do("bet 1 5", "bet 2 2", *["6 5"] * 20)
    records = table.records()
    template = records[-1]
    records += [replace(template, record=n) for n in range(len(records) + 1, 2 * CHECKPOINT_EVERY)]
    audit = TableAudit()
    for rec in records[: CHECKPOINT_EVERY + 5]:
        audit.step(rec)
    good = audit.state.to_dict()
    first = Floor(store_engine)
    for at in range(0, len(records), 500):
        first.events(*records[at : at + 500])
    n = len(records)
    second = Floor(lambda: first.store)  # the same store, a restarted ingest
    second.ingest.tables["T1"].checkpoints.clear()  # as if the checkpoints were long gone
    body = {"resume_from": CHECKPOINT_EVERY + 5, "resume_state": good}
    halt = FloorRecord("T1", n + 1, records[0].at, "clear_halt", "service", body, "ab" * 32)
    second.events(halt)
    live = second.ingest.tables["T1"]
    assert live.folding == CHECKPOINT_EVERY + 5 and live.audit.record == n  # it waits
    other = TableJournal(tmp_path / "other.db", table="T2")
    other.do("bet 1 5", "6 5")
    second.events(*other.records())
    assert second.ingest.tables["T2"].audit.record == 3  # another table is served meanwhile
    wait_for(lambda: second.ingest.tick() is not None and live.folding is None, what="fold")
    assert live.audit.record == n + 1 and live.audit.state.to_dict() == good
    assert [a.detail.get("what") for a in second.alerts()] == []  # no false alert
