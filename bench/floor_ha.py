"""``make floor-ha-demo``: two floor services on one PostgreSQL, one killed, and the figures.

1. The failover, narrated: a real PostgreSQL on a free local port (Debian's server,
   ``tests/postgres.py``), a real mosquitto, two ``firebet floor`` services (users ``floor``
   and ``floor-2``) on the same ``[store] url``, and two tables publishing: CR-07 plays a
   hand to its 4th point, CR-08 streams. Floor A is SIGKILLed mid-stream; CR-07 makes its
   5th point; the time until floor B's console shows the alert is the failover time.
   Surveillance confirms on B; the table journals it once; A restarts and catches up.
2. The figures (docs/floor.md, Two floors): records/s ingested in-process by
   :class:`controller.floor.ingest.Ingest` into SQLite and into PostgreSQL (batches of
   1,000 messages, each one transaction, as the service does) from the same sample (real
   journal records of a randomly played game), and the bytes a record takes on disk in
   each: every table and index of the store (records, hand logs, settled figures,
   alerts, tables) over the records stored, after a VACUUM/checkpoint, with each table's
   share, and a year of a 200-table floor at that size.

    python bench/floor_ha.py [--tables 20] [--records 2000] [--figures-only]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
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
RECORDS_A_TABLE_A_DAY = 8900  # issue 34's measured pace (docs/floor.md, Retention and size)


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


def sample(work: Path, tables: int, records: int, seed: int = 1) -> list[list[Message]]:
    """``tables`` tables of ``records`` real journal records each, in broker batches: a
    game as ``bench/floor.py`` plays it (bets while betting is open, up to three, then
    random dice), so the hands are as long as a real table's."""
    journal = TableJournal(work / "sample.db", table="S")
    rng = random.Random(seed)
    while journal.journal.last_record < records:
        state = journal.replay.state
        if state.betting_open and len(state.bets) < 3:
            journal.do(f"bet {rng.randint(1, 16)} {rng.randint(1, 5)}")
        else:
            journal.do(f"{rng.randint(1, 6)} {rng.randint(1, 6)}")
    base = journal.records()[:records]
    messages: list[Message] = []
    for n in range(tables):
        name = f"T{n:03d}"
        for rec in base:
            moved: FloorRecord = replace(rec, table=name)
            messages.append(Message(f"firebet/{name}/event", event_bytes(moved), qos=1))
    messages.sort(key=lambda m: json.loads(m.payload)["record"])  # the tables interleave
    return [messages[i : i + BATCH] for i in range(0, len(messages), BATCH)]


def ingest_rate(store: Store, batches: list[list[Message]], size: Callable[[], int]) -> Rate:
    """Records/s of ``batches`` through one :class:`Ingest` (as the service stores them),
    and the store's bytes a record: over all it holds, and what each record added
    between the half and the end (the growth a long-running floor sees, without the few
    pages every table and index takes however little it holds)."""
    ingest = Ingest(store, "firebet", lambda _t, _p: None)
    half = len(batches) // 2
    spent = 0.0
    sizes: list[tuple[int, int]] = []
    for part in (batches[:half], batches[half:]):
        started = time.perf_counter()
        for batch in part:
            ingest.handle(batch)
        spent += time.perf_counter() - started
        sizes.append((store.counts()["records"], size()))
    (n1, b1), (n2, b2) = sizes
    return Rate(sum(len(b) for b in batches) / spent, b2 / n2, (b2 - b1) / (n2 - n1))


@dataclass(frozen=True)
class Rate:
    """One store's figures."""

    records_s: float
    bytes_all: float  # the store's bytes over the records it holds
    bytes_grown: float  # the bytes each record of the second half added


def sqlite_bytes(path: Path) -> int:
    """The floor.db's bytes on disk: every table and index, after a checkpoint and a
    VACUUM."""
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("VACUUM")
    finally:
        con.close()
    return path.stat().st_size


def postgres_bytes(url: str) -> int:
    """The store's bytes in PostgreSQL: ``pg_total_relation_size`` (heap, TOAST, indexes
    and their maps) of every table the store made, after a ``VACUUM`` (the space updated
    hand logs leave is counted: it is on disk)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute("VACUUM ANALYZE")
        row = con.execute(
            "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c "
            "WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace"
        ).fetchone()
    assert row is not None
    return int(row[0])


def figures(work: Path, postgres: Postgres, tables: int, records: int) -> dict[str, Rate]:
    """Records/s ingested and bytes a record, SQLite and PostgreSQL, from the same sample."""
    batches = sample(work, tables, records)
    lite = SqliteStore(work / "floor.db")
    try:
        lite_rate = ingest_rate(lite, batches, lambda: sqlite_bytes(work / "floor.db"))
    finally:
        lite.close()
    url = postgres.database()
    pg = PostgresStore(url)
    try:
        pg_rate = ingest_rate(pg, batches, lambda: postgres_bytes(url))
    finally:
        pg.close()
    return {"SQLite": lite_rate, "PostgreSQL": pg_rate}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tables", type=int, default=20)
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
    lite, pg = f["SQLite"], f["PostgreSQL"]
    total = args.tables * args.records
    print(
        f"| ingest, {total:,} records of {args.tables} tables, batches of {BATCH} | "
        f"SQLite {lite.records_s:,.0f} records/s, PostgreSQL {pg.records_s:,.0f} records/s |"
    )
    print(
        f"| bytes a record on disk, every table and index of the store: over all it holds "
        f"/ what each of the second {total // 2:,} added | SQLite {lite.bytes_all:.0f} / "
        f"{lite.bytes_grown:.0f}, PostgreSQL {pg.bytes_all:.0f} / {pg.bytes_grown:.0f} |"
    )
    year = RECORDS_A_TABLE_A_DAY * 200 * 365
    print(f"| a year of a 200-table floor ({year:,} records, {RECORDS_A_TABLE_A_DAY:,} a table "
          f"a day) | PostgreSQL {pg.bytes_grown * year / 1e9:,.0f} GB, SQLite "
          f"{lite.bytes_grown * year / 1e9:,.0f} GB |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
