"""``firebet floor`` as a real process on a real mosquitto, fed by a small publisher
shaped as docs/floor.md says."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest

from controller.floor.passwords import hash_password, verify_password
from controller.floor.settings import load_settings
from controller.wire.messages import FloorRecord
from tests.broker import Mosquitto
from tests.floor_support import (
    FloorProcess,
    Publisher,
    TableJournal,
    fill_floor,
    login,
    make_points,
    post_form,
)
from tests.support import run_firebet, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def records(tmp_path: Path) -> list[FloorRecord]:
    table = TableJournal(tmp_path / "table.db", table="CR-07")
    table.do("bet 1 5", "bet 2 2", *make_points(4, 5, 6, 8, 9), "4 4", "3 4")
    return table.records()


def test_records_arrive_once_gaps_close_and_a_restart_loses_nothing(
    tmp_path: Path, mosquitto: Mosquitto, records: list[FloorRecord]
) -> None:
    floor = FloorProcess(tmp_path / "floor", mosquitto)
    table = Publisher(mosquitto, "CR-07")
    try:
        table.online(record=0)
        table.publish(records[:6], skip=[3, 4])
        wait_for(lambda: (floor.table("CR-07") or {}).get("record") == 6, what="the resend")
        assert any(c == {"op": "resend", "from": 3, "v": 1} for c in table.commands)
        assert floor.stop() == 0
        table.publish(records[6:])  # while the floor is down: the broker keeps them
        floor = FloorProcess(tmp_path / "floor", mosquitto)
        wait_for(lambda: (floor.table("CR-07") or {}).get("record") == len(records))
        summary = floor.table("CR-07")
        assert summary is not None and summary["checked_hand"] == 1 and summary["missing"] is None
        alerts = floor.get("/api/alerts?all=1")
        assert [(a["kind"], a["hand"]) for a in alerts] == [("surveillance", 1)]
    finally:
        table.close()
        floor.stop()


def test_a_record_without_the_table_s_events_shows_as_not_checked(
    tmp_path: Path, mosquitto: Mosquitto, records: list[FloorRecord]
) -> None:
    floor = FloorProcess(tmp_path / "floor", mosquitto)
    table = Publisher(mosquitto, "CR-07")
    try:
        bare = replace(records[5], events=None)  # the table could not derive them
        assert records[5].kind == "command" and records[5].events
        table.publish([*records[:5], bare, *records[6:]])
        wait_for(lambda: (floor.table("CR-07") or {}).get("record") == len(records))
        summary = floor.table("CR-07")
        assert summary is not None
        assert (summary["checked_hand"], summary["folded_hand"]) == (0, 1)
        assert (summary["unchecked_hands"], summary["unchecked_records"]) == ([1], 1)
        alerts = floor.get("/api/alerts?all=1")
        assert sorted((a["kind"], a["hand"]) for a in alerts) == [("audit", 1), ("surveillance", 1)]
        (unchecked,) = [a for a in alerts if a["kind"] == "audit"]
        assert unchecked["detail"]["what"] == "unchecked" and unchecked["record"] == 6
        page = floor.page("/tables/CR-07")
        assert "payouts checked up to hand 0" in page
        assert "not checked: hand 1 (1 record without the table's events)" in page
        assert "followed up to hand 1" in page
        assert "<strong>not checked</strong> at record 6: hand 1 is not checked" in page
    finally:
        table.close()
        floor.stop()


def test_the_pit_reads_and_only_surveillance_confirms(
    tmp_path: Path, mosquitto: Mosquitto, records: list[FloorRecord]
) -> None:
    users = {"alice": hash_password("correct horse")}
    floor = FloorProcess(tmp_path / "floor", mosquitto, users=users)
    table = Publisher(mosquitto, "CR-07")
    try:
        table.publish(records[:14])  # to the 5th point
        wait_for(lambda: len(floor.get("/api/alerts")) == 1)
        (alert,) = floor.get("/api/alerts")
        page = urllib.request.urlopen(floor.url + "/", timeout=10).read().decode()
        assert 'data-table="CR-07"' in page and "pit view (read-only)" in page
        assert "would pay at 4, 5 and 6 different points" in page and "$1,245" in page  # 249 to 1
        path = f"/alerts/{alert['id']}/confirm"
        assert post_form(floor.url, path, {})[0] == 401
        assert post_form(floor.url, "/login", {"user": "alice", "password": "wrong"})[0] == 401
        assert (
            post_form(floor.url, "/login", {"user": "mallory", "password": "correct horse"})[0]
            == 401
        )
        status, cookie, _ = post_form(
            floor.url, "/login", {"user": "alice", "password": "correct horse"}
        )
        assert status == 303 and "HttpOnly" in cookie and "SameSite=strict" in cookie
        session = cookie.split(";")[0]
        assert post_form(floor.url, path, {}, session)[0] == 303
        wait_for(lambda: any(c.get("op") == "confirm" for c in table.commands))
        confirm = next(c for c in table.commands if c.get("op") == "confirm")
        assert (confirm["hand"], confirm["by"]) == (1, "alice") and confirm["id"]
        (sent,) = floor.get("/api/alerts")
        assert (sent["status"], sent["status_by"]) == ("sent", "alice")
    finally:
        table.close()
        floor.stop()


def test_1010_alerts_of_one_table_hide_no_other_table_s_alert_from_the_console(
    tmp_path: Path, mosquitto: Mosquitto, records: list[FloorRecord]
) -> None:
    """Issue 32: 1,010 genuine 5-point alerts from CR-07 left CR-08's open alert out of
    ``/api/alerts`` and ``/`` (the console listed the 1,000 newest), with no Confirm. Here
    through the real ``firebet floor``'s HTTP: counted, paged, on CR-08's tile, confirmed."""
    from controller.floor.store import SqliteStore
    from controller.floor.vocabulary import AlertKind

    other = TableJournal(tmp_path / "cr08.db", table="CR-08")
    other.do("bet 1 5", *make_points(4, 5, 6, 8, 9))  # CR-08's own 5th point: hand 1
    db = tmp_path / "floor" / "state" / "floor.db"
    fill_floor(db, {"CR-08": other.records(), "CR-07": records[:14]})  # CR-07's alert too
    store = SqliteStore(db)
    with store.transaction():  # then 1,009 more from CR-07, as its own 5th points raise them
        for hand in range(2, 1011):
            store.raise_alert("CR-07", AlertKind.SURVEILLANCE, "2026-12-03T10:00:01+00:00",
                              {"unique_points": 5}, hand=hand, record=14 * hand,
                              key=f"hand {hand}")  # fmt: skip
    store.close()
    users = {"alice": hash_password("correct horse")}
    floor = FloorProcess(tmp_path / "floor", mosquitto, users=users)
    table = Publisher(mosquitto, "CR-08")
    try:
        with urllib.request.urlopen(floor.url + "/api/alerts", timeout=30) as reply:
            first = json.loads(reply.read())
            assert (reply.headers["X-Total-Items"], reply.headers["X-Pages"]) == ("1011", "2")
        second = floor.get("/api/alerts?page=2")
        listed = [(a["table"], a["hand"]) for a in first + second]
        assert len(listed) == len(set(listed)) == 1011 and ("CR-08", 1) in listed
        (mine,) = [a for a in first + second if a["table"] == "CR-08"]
        page = urllib.request.urlopen(floor.url + "/", timeout=30).read().decode()
        tile = page[page.index('data-table="CR-08"') :]
        tile = tile[: tile.index("</article>")]
        assert f'action="/alerts/{mine["id"]}/confirm"' in tile  # its Confirm, on its tile
        session = login(floor.url, "alice", "correct horse")
        assert post_form(floor.url, f"/alerts/{mine['id']}/confirm", {}, session)[0] == 303
        wait_for(lambda: any(c.get("op") == "confirm" for c in table.commands))
        confirm = next(c for c in table.commands if c.get("op") == "confirm")
        assert (confirm["hand"], confirm["by"]) == (1, "alice")
    finally:
        table.close()
        floor.stop()


def test_a_bad_floor_config_names_the_key(tmp_path: Path) -> None:
    cases = {
        "[floor]\nbrokr = 'mqtt://x:1'\n": "floor.brokr",
        "[floor]\nbroker = 'http://x:1'\n": "floor.broker",
        "[floor]\ngap_grace_s = -1\n": "floor.gap_grace_s",
        "[users]\nalice = 'plain-text'\n": "users.alice",
        "[pit]\nx = 1\n": "pit",
    }
    for text, key in cases.items():
        config = tmp_path / "floor.toml"
        config.write_text(text)
        done = run_firebet("floor", "--config", str(config), "--state-dir", str(tmp_path))
        assert done.returncode == 2, (text, done.stderr)
        assert key in done.stderr, (text, done.stderr)
    done = run_firebet("floor", "--http", "nowhere", "--state-dir", str(tmp_path))
    assert done.returncode == 2 and "--http" in done.stderr


def test_passwd_makes_a_hash_the_config_takes(tmp_path: Path) -> None:
    done = run_firebet("floor", "passwd", "alice", input="a long password\n")
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith('alice = "scrypt$')
    encoded = line.split('"')[1]
    assert verify_password("a long password", encoded)
    assert not verify_password("another password", encoded)
    config = tmp_path / "floor.toml"
    config.write_text(f"[users]\n{line}\n")
    assert load_settings(config).users == {"alice": encoded}
    assert run_firebet("floor", "passwd", "alice", input="short\n").returncode == 2
