"""``make floor-ha-demo``: two floor services on one PostgreSQL, one killed, and the figures.

1. The failover, narrated: a real PostgreSQL on a free local port (Debian's server,
   ``tests/postgres.py``), a real mosquitto, two ``firebet floor`` services (users ``floor``
   and ``floor-2``) on the same ``[store] url``, and two tables publishing: CR-07 plays a
   hand to its 4th point, CR-08 streams. Floor A is SIGKILLed mid-stream; CR-07 makes its
   5th point; the time until floor B's console shows the alert is the failover time.
   Surveillance confirms on B; the table journals it once; A restarts and catches up.
2. The figures (docs/floor.md, Two floors): records/s ingested in-process by
   :class:`controller.floor.ingest.Ingest` into SQLite and into PostgreSQL (batches of
   1,000 messages, each one transaction, as the service does), and the bytes each
   record takes on disk in each (table and indexes, measured after a VACUUM/checkpoint).

    python bench/floor_ha.py [--tables 10] [--records 2000] [--figures-only]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.core.commands import Confirm  # noqa: E402
from controller.floor.ingest import Ingest, Message  # noqa: E402
from controller.floor.passwords import hash_password  # noqa: E402
from controller.floor.pgstore import PostgresStore  # noqa: E402
from controller.floor.store import SqliteStore, Store  # noqa: E402
from controller.wire.messages import FloorRecord  # noqa: E402
from tests.broker import Mosquitto  # noqa: E402
from tests.floor_support import (  # noqa: E402
    FloorProcess,
    Publisher,
    TableJournal,
    event_bytes,
    make_points,
    post_form,
)
from tests.postgres import Postgres  # noqa: E402
from tests.support import wait_for  # noqa: E402

BATCH = 1000


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def failover(work: Path, postgres: Postgres) -> float:
    """The scenario of issue 34's done-when, narrated; the failover time in seconds."""
    url = postgres.database()
    broker = Mosquitto(work / "mosquitto")
    broker.start()
    users = {"surveillance": hash_password("demo-password")}
    extra = f'[store]\nurl = "{url}"'
    five = TableJournal(work / "cr07.db", table="CR-07")
    five.do("bet 1 5", *make_points(4, 5, 6, 8))
    busy = TableJournal(work / "cr08.db", table="CR-08")
    busy.do("bet 1 5", *["2 3", "3 4"] * 250)
    floors: dict[str, FloorProcess] = {}
    tables: list[Publisher] = []
    confirms: list[dict[str, object]] = []
    try:
        floors["A"] = FloorProcess(work / "a", broker, users=users, extra=extra)
        floors["B"] = FloorProcess(work / "b", broker, users=users, extra=extra, user="floor-2")
        say(f"floor A at {floors['A'].url}, floor B at {floors['B'].url}, one PostgreSQL")
        cr07, cr08 = Publisher(broker, "CR-07"), Publisher(broker, "CR-08")
        tables += [cr07, cr08]

        def at_the_table(_c: object, _u: object, msg: object) -> None:
            body = json.loads(msg.payload)  # type: ignore[attr-defined]
            if body.get("op") == "confirm":
                confirms.append(body)
                new = five.apply(Confirm(body["hand"], body["by"], body["id"], actor="floor"))
                threading.Thread(target=cr07.publish, args=(new,), daemon=True).start()

        cr07.client.message_callback_add("firebet/CR-07/command", at_the_table)  # type: ignore[arg-type]
        for table in tables:
            table.online(record=0)
        cr07.publish(five.records())
        say(f"CR-07 published {len(five.records())} records: four points made")
        records = busy.records()
        stream = threading.Thread(
            target=lambda: [cr08.publish(records[i : i + 10]) for i in range(0, len(records), 10)]
        )
        stream.start()
        a, b = floors["A"], floors["B"]
        wait_for(lambda: (a.table("CR-08") or {}).get("record", 0) >= 100, timeout=120)
        a.proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        a.stop()
        say(f"floor A SIGKILLed while CR-08 streams ({len(records)} records)")
        cr07.publish(five.do("4 5", "4 5"))
        wait_for(lambda: b.get("/api/alerts"), timeout=120)
        took = time.monotonic() - killed
        say(f"CR-07 made its 5th point: floor B shows the alert {took:.2f} s after the kill")
        stream.join(timeout=300)
        head = {"CR-07": len(five.records()), "CR-08": len(records)}
        wait_for(
            lambda: all((b.table(t) or {}).get("record") == n for t, n in head.items()),
            timeout=300,
        )
        say(f"floor B holds every record: {head}")
        (alert,) = b.get("/api/alerts")
        cookie = post_form(b.url, "/login",
                           {"user": "surveillance", "password": "demo-password"})[1]  # fmt: skip
        post_form(b.url, f"/alerts/{alert['id']}/confirm", {}, cookie.split(";")[0])
        wait_for(lambda: b.get("/api/alerts") == [], timeout=60)
        say(f"confirmed on B: the table got {len(confirms)} confirm and journaled it")
        floors["A"] = a = FloorProcess(work / "a", broker, users=users, extra=extra)
        head["CR-07"] = len(five.records())
        wait_for(
            lambda: all((a.table(t) or {}).get("record") == n for t, n in head.items()),
            timeout=300,
        )
        store = PostgresStore(url)
        try:
            counts = store.counts()
        finally:
            store.close()
        say(f"floor A restarted and caught up; the store holds {counts['records']} records, "
            f"{counts['distinct']} distinct")  # fmt: skip
        return took
    finally:
        for table in tables:
            table.close()
        for floor in floors.values():
            floor.stop()
        broker.stop()


def sample(work: Path, tables: int, records: int) -> list[list[Message]]:
    """``tables`` tables of ``records`` real journal records each, in broker batches."""
    journal = TableJournal(work / "sample.db", table="S")
    rolls = ["2 3", "3 4", "4 4", "5 6", "2 2", "3 4"]
    journal.do("bet 1 5", "bet 2 5")
    while journal.journal.last_record < records:
        journal.do(*rolls)
    base = journal.records()[:records]
    messages: list[Message] = []
    for n in range(tables):
        name = f"T{n:03d}"
        for rec in base:
            moved: FloorRecord = replace(rec, table=name)
            messages.append(Message(f"firebet/{name}/event", event_bytes(moved), qos=1))
    messages.sort(key=lambda m: json.loads(m.payload)["record"])  # the tables interleave
    return [messages[i : i + BATCH] for i in range(0, len(messages), BATCH)]


def ingest_rate(store: Store, batches: list[list[Message]]) -> float:
    ingest = Ingest(store, "firebet", lambda _t, _p: None)
    started = time.perf_counter()
    for batch in batches:
        ingest.handle(batch)
    return sum(len(b) for b in batches) / (time.perf_counter() - started)


def figures(work: Path, postgres: Postgres, tables: int, records: int) -> dict[str, float]:
    batches = sample(work, tables, records)
    total = tables * records
    lite = SqliteStore(work / "floor.db")
    lite_rate = ingest_rate(lite, batches)
    lite.close()
    import sqlite3

    con = sqlite3.connect(work / "floor.db")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("VACUUM")
    con.close()
    lite_bytes = (work / "floor.db").stat().st_size / total
    url = postgres.database()
    pg = PostgresStore(url)
    pg_rate = ingest_rate(pg, batches)
    pg.close()
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute("VACUUM ANALYZE records")
        row = con.execute(
            "SELECT pg_total_relation_size('records'), COUNT(*) FROM records"
        ).fetchone()
    assert row is not None
    pg_bytes = int(row[0]) / int(row[1])
    return {"sqlite_rps": lite_rate, "pg_rps": pg_rate, "sqlite_bytes": lite_bytes,
            "pg_bytes": pg_bytes, "records": total}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tables", type=int, default=10)
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--figures-only", action="store_true", help="skip the narrated failover")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="floor-ha-"))  # removed at the end
    postgres = Postgres()
    postgres.start()
    try:
        took = None if args.figures_only else failover(work, postgres)
        f = figures(work, postgres, args.tables, args.records)
    finally:
        postgres.stop()
        shutil.rmtree(work, ignore_errors=True)
    print()
    print("| figure | value |\n|---|---|")
    if took is not None:
        print(f"| failover: SIGKILL of floor A to the next alert on floor B's console | "
              f"{took:.2f} s |")  # fmt: skip
    print(
        f"| ingest, {f['records']:,} records of {args.tables} tables, batches of {BATCH} | "
        f"SQLite {f['sqlite_rps']:,.0f} records/s, PostgreSQL {f['pg_rps']:,.0f} records/s |"
    )
    print(f"| bytes a record on disk (records table and its indexes) | "
          f"SQLite {f['sqlite_bytes']:.0f}, PostgreSQL {f['pg_bytes']:.0f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
