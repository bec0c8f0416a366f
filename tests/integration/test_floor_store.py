"""The floor's store, once with SQLite and once with PostgreSQL (``store_engine``), and two
floor services' ingests sharing one store: each (table, record) once, each alert once, a
confirmation claimed by one console, a rewritten record still an integrity alert (#34).

Issue 34: two floors with ``$share`` split each table's stream; two floors each hearing
everything must write the same store without a record or an alert twice."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from controller.floor.ingest import Ingest, Message
from controller.floor.store import Store
from controller.wire.messages import FloorRecord
from tests.conftest import StoreOpener
from tests.floor_support import TableJournal, event_bytes, make_points
from tests.postgres import Postgres


def batch(records: list[FloorRecord]) -> list[Message]:
    return [Message(f"firebet/{r.table}/event", event_bytes(r), qos=1) for r in records]


def stored(store: Store, table: str) -> list[int]:
    return [r.record for r in store.records(table, 1, 10**9)]


@pytest.fixture
def five(tmp_path: Path) -> list[FloorRecord]:
    """A hand that reaches its 5th point (a surveillance alert) and sevens out."""
    table = TableJournal(tmp_path / "table.db", table="CR-07")
    table.do("bet 1 5", *make_points(4, 5, 6, 8, 9), "3 4")
    return table.records()


def test_a_record_is_kept_once_and_a_repeat_is_not_stored_again(
    store_engine: StoreOpener, five: list[FloorRecord]
) -> None:
    store = store_engine()
    with store.transaction():
        assert store.add_record(five[0], "2026-01-01T00:00:00.000+00:00")
        assert not store.add_record(five[0], "2026-01-01T00:00:01.000+00:00")
        # a batch in one statement: the held one is not stored again, the others are
        recs = [*five[:-1], replace(five[-1], snapshot="ab" * 32)]  # one with a snapshot
        assert store.add_records(recs, "2026-01-01T00:00:02.000+00:00") == {
            ("CR-07", r.record) for r in five[1:]}  # fmt: skip
    assert stored(store, "CR-07") == [r.record for r in five]
    assert store.chain("CR-07", 1) == five[0].chain
    # packed small on disk (#34), given back exactly: payload, events, chain and snapshot
    assert store.records("CR-07", 1, len(five)) == recs
    assert any(r.events for r in five)
    assert store.counts() == {"records": len(five), "distinct": len(five), "tables": 1}


def test_an_alert_with_a_key_is_raised_once_and_an_open_key_frees_when_resolved(
    store_engine: StoreOpener,
) -> None:
    store = store_engine()
    at = "2026-01-01T00:00:00.000+00:00"
    with store.transaction():
        first = store.raise_alert("CR-07", "surveillance", at, {"u": 5}, hand=3, key="hand 3")
        assert first is not None
        assert store.raise_alert("CR-07", "surveillance", at, {}, hand=3, key="hand 3") is None
        assert store.raise_alert("CR-08", "surveillance", at, {}, hand=3, key="hand 3")
        off = store.raise_alert("CR-07", "offline", at, {"what": "gone"}, key="open")
        assert off is not None
        assert store.raise_alert("CR-07", "offline", at, {"what": "gone"}, key="open") is None
        store.set_alert(off, "resolved", at, "table back online")
        assert store.raise_alert("CR-07", "offline", at, {"what": "gone"}, key="open")
        assert store.raise_alert("CR-07", "audit", at, {"what": "a"}, record=1)  # no key ...
        assert store.raise_alert("CR-07", "audit", at, {"what": "a"}, record=1)  # ... no limit
    counts, newest = store.table_alerts("CR-07", 3)
    assert counts == {"surveillance": 1, "offline": 1, "audit": 2}
    assert newest is not None and newest.id == first and newest.detail == {"u": 5}
    groups = {g.newest.kind: g for g in store.open_groups()}
    assert groups["audit"].count == 2 and groups["audit"].whats == {"a": 2}


def test_of_two_consoles_confirming_at_once_one_sends(store_engine: StoreOpener) -> None:
    store, other = store_engine(), store_engine()
    at, later = "2026-01-01T00:00:00.000+00:00", "2026-01-01T00:00:10.000+00:00"
    with store.transaction():
        alert = store.raise_alert("CR-07", "surveillance", at, {}, hand=1, key="hand 1")
    assert alert is not None
    assert store.claim_confirm(alert, later, "alice", "c1", stale_before=at)
    assert not other.claim_confirm(alert, later, "bob", "c2", stale_before=at)
    sent = other.alert(alert)
    assert sent is not None and (sent.status, sent.status_by, sent.command_id) == (
        "sent", "alice", "c1",
    )  # fmt: skip
    # a confirm sent long ago and never journaled (its floor died): it may be sent again
    assert other.claim_confirm(alert, "2026-01-01T00:01:00.000+00:00", "bob", "c3",
                               stale_before="2026-01-01T00:00:30.000+00:00")  # fmt: skip


def test_two_floors_on_one_store_keep_each_record_and_the_5th_point_alert_once(
    store_engine: StoreOpener, five: list[FloorRecord]
) -> None:
    """Two ingests (two floor services) hear the same messages, in overlapping batches:
    with SQLite as two connections to one file, with PostgreSQL as two services do."""
    sent: list[str] = []
    a = Ingest(store_engine(), "firebet", lambda t, p: sent.append(t))
    b = Ingest(store_engine(), "firebet", lambda t, p: sent.append(t))
    a.handle(batch(five[:4]))
    b.handle(batch(five[:6]))
    a.handle(batch(five[4:]))
    b.handle(batch(five))
    for ingest in (a, b):
        assert stored(ingest.store, "CR-07") == [r.record for r in five]
        assert ingest.summaries["CR-07"]["record"] == five[-1].record
    surveillance = [x for x in a.store.alerts(open_only=False) if x.kind == "surveillance"]
    assert len(surveillance) == 1, surveillance
    assert b.ingested + a.ingested == len(five)  # each stored by one of them
    assert sent == []


def test_a_record_another_floor_stored_with_a_different_chain_is_an_integrity_alert(
    store_engine: StoreOpener, five: list[FloorRecord], tmp_path: Path
) -> None:
    rewritten = TableJournal(tmp_path / "other.db", table="CR-07")
    rewritten.do("bet 2 5", "2 3")
    a = Ingest(store_engine(), "firebet", lambda t, p: None)
    b = Ingest(store_engine(), "firebet", lambda t, p: None)
    a.handle(batch(five[:3]))
    b.handle(batch(rewritten.records()[:3]))  # b never held them: the store did
    integrity = [x for x in b.store.alerts() if x.kind == "integrity"]
    assert len(integrity) == 1 and integrity[0].record is not None
    assert integrity[0].detail["stored_chain"] == five[integrity[0].record - 1].chain


def test_two_floor_services_start_together_and_make_the_schema_once(postgres: Postgres) -> None:
    from controller.floor.pgstore import PostgresStore

    url = postgres.database()
    opened: list[PostgresStore] = []
    failed: list[BaseException] = []

    def start() -> None:
        try:
            opened.append(PostgresStore(url))
        except BaseException as exc:  # the test reports it
            failed.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    try:
        assert not failed, failed
        assert len(opened) == 4
        versions = opened[0]._w("SELECT COUNT(*) FROM schema_version").fetchone()
        assert versions is not None and versions[0] == 1
    finally:
        for store in opened:
            store.close()


def test_a_store_the_floor_cannot_reach_is_a_config_error_naming_the_key(
    postgres: Postgres,
) -> None:
    from controller.core.errors import ConfigError
    from controller.floor.pgstore import PostgresStore

    url = postgres.url("postgres").replace("floor-store-secret", "wrong")
    with pytest.raises(ConfigError, match=r"store\.url.*cannot reach") as caught:
        PostgresStore(url)
    assert "wrong" not in str(caught.value)  # the password is never shown


def test_another_floor_s_alert_change_is_heard(postgres: Postgres, five: list[FloorRecord]) -> None:
    from controller.floor.pgstore import PostgresStore

    url = postgres.database()
    a, b = PostgresStore(url), PostgresStore(url)
    heard: list[set[str]] = []
    got = threading.Event()
    b.hear(lambda tables: (heard.append(tables), got.set()))
    try:
        ingest = Ingest(a, "firebet", lambda t, p: None)
        from tests.support import wait_for

        def told() -> bool:  # the listener may still be connecting: announce until heard
            a.announce(["CR-07"])
            return got.wait(0.2)

        wait_for(told, what="b to hear a's announcement")
        heard.clear()
        got.clear()
        ingest.handle(batch(five))  # the 5th point: an alert, announced
        wait_for(got.is_set, what="b to hear the alert")
        assert {"CR-07"} in heard
        assert json.loads(json.dumps(sorted(heard[0]))) == ["CR-07"]
    finally:
        a.close()
        b.close()


def test_what_is_past_keep_days_is_archived_then_deleted_and_open_alerts_stay(
    store_engine: StoreOpener, five: list[FloorRecord], tmp_path: Path
) -> None:
    import gzip

    from controller.clock import now_ms
    from controller.core.times import to_ms

    store = store_engine()
    ingest = Ingest(store, "firebet", lambda t, p: None)
    lost = TableJournal(tmp_path / "lost.db", table="CR-08")
    lost.do("bet 1 5", "2 2", "3 4")  # a hand settled: its log and figures
    ingest.handle(batch(five) + batch(lost.records()))
    assert store.settled_between(0, now_ms() + 1)  # (a cursor: read below)
    assert [h.table for h in store.settled_between(0, now_ms() + 1)] == ["CR-08"]
    at = "2026-01-01T00:00:00.000+00:00"
    with store.transaction():
        closed = store.raise_alert("CR-07", "audit", at, {"what": "x"}, record=1)
        assert closed is not None
        store.set_alert(closed, "cleared", at, "alice")
    archive = tmp_path / "archive" / "floor.jsonl.gz"
    assert store.expire(0, archive) == {"records": 0, "hands": 0, "alerts": 0}  # none so old
    assert not archive.parent.exists()  # and no archive made for nothing
    done = store.expire(now_ms() + 86_400_000, archive, chunk=4)  # in chunks of 4
    assert done == {"records": len(five) + len(lost.records()), "hands": 1, "alerts": 1}
    with gzip.open(archive, "rt", encoding="utf-8") as f:
        kept = [json.loads(line) for line in f]
    archived = [(r["table"], r["record"], r["chain"]) for r in kept if r["part"] == "records"]
    assert archived == [(r.table, r.record, r.chain) for r in [*five, *lost.records()]]
    assert [(r["kind"], r["id"]) for r in kept if r["part"] == "alerts"] == [("audit", closed)]
    assert [(r["table"], r["hand"]) for r in kept if r["part"] == "hands"] == [("CR-08", 1)]
    first = next(r for r in kept if r["part"] == "records")  # the archive is text, not packed
    assert (json.loads(first["payload"]), first["snapshot"]) == (five[0].payload, five[0].snapshot)
    assert to_ms(first["received"]) is not None
    assert json.loads(next(r for r in kept if r["part"] == "hands")["log"])["hand"] == 1
    assert stored(store, "CR-07") == [] == stored(store, "CR-08")
    assert [h["hand"] for h in store.recent_hands("CR-08", 5)] == [2]  # not settled: kept
    assert list(store.settled_between(0, now_ms() + 1)) == []
    assert [a.kind for a in store.alerts()] == ["surveillance"]  # open: a person's still
    ingest.handle(batch(five[:3]))  # an old record delivered again is a repeat, not rewritten
    assert [a.kind for a in store.alerts()] == ["surveillance"]
    assert stored(store, "CR-07") == []
