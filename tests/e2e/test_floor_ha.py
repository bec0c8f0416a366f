"""Two real ``firebet floor`` services on one real PostgreSQL and one real mosquitto, one of
them SIGKILLed mid-stream (#34).

Issue 34: one floor process on one box was the only way the surveillance room heard of a
5th point. Here the tables publish, floor A is killed with SIGKILL while a table streams,
and floor B still has every record of every table (none twice), shows the 5th-point alert
raised after the kill, and its confirmation reaches the table once and is journaled once;
A restarts and catches up from the shared store and its broker session, no duplicate."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import pytest

from controller.core.commands import Confirm
from controller.floor.passwords import hash_password
from tests.broker import Mosquitto
from tests.floor_support import FloorProcess, Publisher, TableJournal, make_points, post_form
from tests.postgres import Postgres
from tests.support import wait_for

pytestmark = pytest.mark.slow

STREAM = 300  # records CR-08 publishes while floor A dies


def stored(url: str) -> dict[str, tuple[int, int, int, int]]:
    """Per table: rows, distinct records, lowest and highest record, as PostgreSQL holds."""
    import psycopg

    with psycopg.connect(url) as con:
        rows = con.execute(
            "SELECT table_id, COUNT(*), COUNT(DISTINCT record), MIN(record), MAX(record) "
            "FROM records GROUP BY table_id"
        ).fetchall()
    return {r[0]: (int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows}


def test_two_floors_one_killed_mid_stream_the_other_hears_everything_once(
    tmp_path: Path, mosquitto: Mosquitto, postgres: Postgres
) -> None:
    url = postgres.database()
    users = {"alice": hash_password("correct horse")}
    extra = f'[store]\nurl = "{url}"'
    five = TableJournal(tmp_path / "cr07.db", table="CR-07")
    five.do("bet 1 5", *make_points(4, 5, 6, 8))  # four points: the 5th comes after the kill
    busy = TableJournal(tmp_path / "cr08.db", table="CR-08")
    busy.do("bet 1 5", *["2 3", "3 4"] * (STREAM // 4))
    floors = {
        "a": FloorProcess(tmp_path / "a", mosquitto, users=users, extra=extra),
        "b": FloorProcess(tmp_path / "b", mosquitto, users=users, extra=extra, user="floor-2"),
    }
    cr07, cr08 = Publisher(mosquitto, "CR-07"), Publisher(mosquitto, "CR-08")
    confirms: list[dict[str, object]] = []

    def at_the_table(_c: object, _u: object, msg: object) -> None:
        body = json.loads(msg.payload)  # type: ignore[attr-defined]
        if body.get("op") != "confirm":
            return
        confirms.append(body)
        new = five.apply(Confirm(body["hand"], body["by"], body["id"], actor="floor"))
        threading.Thread(target=cr07.publish, args=(new,), daemon=True).start()

    cr07.client.message_callback_add("firebet/CR-07/command", at_the_table)  # type: ignore[arg-type]
    streaming = threading.Thread(
        target=lambda: [cr08.publish(busy.records()[i : i + 10]) for i in range(0, STREAM, 10)]
    )
    try:
        cr07.online(record=0)
        cr08.online(record=0)
        cr07.publish(five.records())
        wait_for(lambda: (floors["b"].table("CR-07") or {}).get("record") == len(five.records()))
        streaming.start()
        wait_for(lambda: (floors["a"].table("CR-08") or {}).get("record", 0) >= 40,
                 what="CR-08 streaming")  # fmt: skip
        floors["a"].proc.send_signal(signal.SIGKILL)  # mid-stream
        killed = time.monotonic()
        floors["a"].stop()  # reaped (it is dead already)
        cr07.publish(five.do("4 5", "4 5"))  # the 5th point, heard by B alone
        b = floors["b"]
        wait_for(lambda: b.get("/api/alerts"), what="B to show the 5th-point alert")
        failover_s = time.monotonic() - killed
        streaming.join(timeout=120)
        head = {"CR-07": len(five.records()), "CR-08": len(busy.records())}
        wait_for(lambda: all((b.table(t) or {}).get("record") == n for t, n in head.items()),
                 timeout=120, what="B to hold every record")  # fmt: skip
        assert stored(url) == {t: (n, n, 1, n) for t, n in head.items()}  # each once
        (alert,) = b.get("/api/alerts")
        assert (alert["table"], alert["kind"], alert["hand"]) == ("CR-07", "surveillance", 1)

        session = post_form(b.url, "/login", {"user": "alice", "password": "correct horse"})[1]
        cookie = session.split(";")[0]
        path = f"/alerts/{alert['id']}/confirm"
        assert post_form(b.url, path, {}, cookie)[0] == 303
        assert post_form(b.url, path, {}, cookie)[0] in (303, 400)  # clicked twice
        wait_for(lambda: [a["status"] for a in b.get("/api/alerts?all=1")
                          if a["kind"] == "surveillance"] == ["confirmed"],
                 what="B to show the alert confirmed by the table")  # fmt: skip
        assert len(confirms) == 1, confirms
        journaled = [r for r in five.records() if r.payload.get("command") == "confirm"]
        assert len(journaled) == 1, journaled

        floors["a"] = FloorProcess(tmp_path / "a", mosquitto, users=users, extra=extra)
        a = floors["a"]
        head["CR-07"] = len(five.records())
        wait_for(lambda: all((a.table(t) or {}).get("record") == n for t, n in head.items()),
                 timeout=120, what="A to catch up")  # fmt: skip
        assert [x["status"] for x in a.get("/api/alerts?all=1") if x["kind"] == "surveillance"] \
            == ["confirmed"]  # fmt: skip
        assert stored(url) == {t: (n, n, 1, n) for t, n in head.items()}  # still each once
        assert len(confirms) == 1
        print(f"\nfailover (kill to the next alert on the other console): {failover_s:.2f} s")
    finally:
        cr07.close()
        cr08.close()
        for floor in floors.values():
            if floor.proc.poll() is None:
                floor.stop()
