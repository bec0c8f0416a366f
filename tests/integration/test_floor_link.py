"""The floor link against a real mosquitto: records in order, outages, retained state,
the confirm round trip, resend, and the ACL refusing a command from the wrong identity."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.core.commands import Roll
from controller.core.config import Config, load_config
from controller.core.engine import Engine
from controller.core.lamps import Effect
from controller.core.state import TableState
from controller.journal import Journal, recover, verify
from controller.journal.play import decide
from controller.journal.recipe import decode_command, to_ms
from controller.link.link import FloorLink
from tests import schemas, support
from tests.broker import Mosquitto, Subscriber, one_shot
from tests.support import RunningTable, wait_for

pytestmark = pytest.mark.slow

EVENT, STATE, ONLINE = "firebet/CR-07/event", "firebet/CR-07/state", "firebet/CR-07/online"
COMMAND = "firebet/CR-07/command"


def floor_config(
    tmp: Path, broker: Mosquitto, *, snapshot_every: int = 1000, **extra: str
) -> Config:
    lines = [
        "[table]",
        'id = "CR-07"',
        "[journal]",
        'key_file = "journal.key"',
        f"snapshot_every = {snapshot_every}",
        "[floor]",
        f'broker = "{broker.url}"',
        'username = "CR-07"',
        f'password_file = "{broker.password_file("CR-07")}"',
        *(f'{k} = "{v}"' for k, v in extra.items()),
    ]
    path = tmp / "table.toml"
    path.write_text("\n".join(lines) + "\n")
    return load_config(path)


@pytest.fixture
def floor(mosquitto: Mosquitto) -> Iterator[Subscriber]:
    subscriber = Subscriber(mosquitto)
    yield subscriber
    subscriber.close()


@pytest.fixture
def table(tmp_path: Path, mosquitto: Mosquitto, floor: Subscriber) -> Iterator[RunningTable]:
    config = floor_config(tmp_path, mosquitto)
    with support.table_running(tmp_path / "state", tmp_path / "control.sock", config) as running:
        yield running


def journal_records(table: RunningTable) -> list[tuple[int, str, str]]:
    """(record, kind, chain) of every record of the table's journal."""
    assert table.controller.journal is not None
    with Journal(table.controller.journal.path, read_only=True) as journal:
        journal.attach()
        return [(r.record, r.kind, r.hash) for r in journal.records()]


def refolded(stream: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Each command record's events, folded again here from genesis through the rules engine
    (the journal keeps commands, not events: docs/journal.md): what the link must publish."""
    engine, state, out = Engine(), TableState(), {}
    for e in sorted({e["record"]: e for e in stream}.values(), key=lambda e: e["record"]):
        if e["kind"] == "command":
            command = decode_command(e["payload"], e["actor"], to_ms(e["at"]) or 0)
            outcome = engine.apply(state, command)
            state = outcome.state
            out[e["record"]] = [json.loads(json.dumps(x.to_dict())) for x in outcome.events]
    return out


def published_events(stream: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """The events each command record's message carried (every message of it the same)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for e in stream:
        if e["kind"] == "command":
            assert "events" in e, f"record {e['record']} was published without its events"
            assert out.setdefault(e["record"], e["events"]) == e["events"]
    return out


def all_published(table: RunningTable, floor: Subscriber) -> bool:
    head = journal_records(table)[-1][0]
    return set(floor.records()) >= set(range(1, head + 1))


def test_every_record_arrives_once_in_order_with_the_spec_payload(
    table: RunningTable, floor: Subscriber
) -> None:
    assert table.ask("bet", position=3, amount=5)["ok"]
    table.make(4, 5)
    table.throw(2, 2)  # point 4
    table.throw(3, 4)  # seven-out: settles hand 1
    wait_for(lambda: all_published(table, floor), what="every record at the floor")
    wait_for(lambda: table.status()["floor"]["backlog"] == 0, what="the cursor to catch up")
    journal = journal_records(table)
    events = floor.on(EVENT)
    assert [e["record"] for e in events] == [r for r, _, _ in journal]  # once each, in order
    assert published_events(events) == refolded(events)  # what the table's engine decided
    for event, (_, kind, chain) in zip(events, journal, strict=True):
        assert set(event) - {"events"} == {
            "table",
            "record",
            "at",
            "kind",
            "actor",
            "payload",
            "chain",
            "v",
        }
        assert (event["table"], event["kind"], event["chain"]) == ("CR-07", kind, chain)
    kinds = [e["kind"] for e in events]
    assert kinds[:3] == ["start", "start", "rules"]  # genesis, this start, its rules
    rules = events[2]["payload"]
    assert rules["table"]["id"] == "CR-07" and rules["firebet"]["pays"] == {
        "4": 24,
        "5": 249,
        "6": 999,
    }
    assert len(rules["program"]) == 64
    settled = [
        ev
        for e in events
        if e["kind"] == "command"
        for ev in e["events"]
        if ev["event"] == "settlement"
    ]
    assert settled and settled[0]["payouts"] == {"3": 0}
    status = table.status()["floor"]
    assert status["connected"] and status["cursor"] == journal[-1][0]
    assert status["last_error"] is None


def test_retained_state_and_online_reach_a_late_subscriber(
    table: RunningTable, mosquitto: Mosquitto
) -> None:
    table.make(6)
    late = Subscriber(mosquitto, "firebet/CR-07/+", client_id="late-floor")
    try:
        wait_for(lambda: late.on(ONLINE) and late.on(STATE), what="the retained messages")
        online = late.on(ONLINE)[-1]
        assert online["online"] is True and len(online["program"]) == 64
        assert isinstance(online["record"], int)
        wait_for(lambda: late.on(STATE)[-1]["points"] == [6], what="the state after point 6")
        state = late.on(STATE)[-1]
        assert state["table"] == "CR-07" and state["mode"] == "running"
        assert state["floor"]["enabled"] is True
    finally:
        late.close()
    # a clean stop says offline (retained) in place of the will
    table.controller.link.stop()  # type: ignore[union-attr]
    wait_for(lambda: late_online(mosquitto) == {"online": False, "v": 1}, what="online false")


def late_online(broker: Mosquitto) -> object:
    probe = Subscriber(broker, ONLINE, client_id="probe")
    try:
        wait_for(lambda: probe.on(ONLINE), what="a retained online message")
        return probe.on(ONLINE)[-1]
    finally:
        probe.close()


def test_broker_stopped_and_restarted_mid_stream_loses_nothing(
    table: RunningTable, floor: Subscriber, mosquitto: Mosquitto
) -> None:
    table.make(4)
    wait_for(lambda: all_published(table, floor), what="the first records")
    mosquitto.stop()
    wait_for(lambda: not table.status()["floor"]["connected"], what="the link to notice")
    for point in (5, 6, 8):  # the table plays on meanwhile, ACKing every roll
        table.make(point)
    # six rolls journaled and not published (the link reads the head on its own thread)
    wait_for(lambda: table.status()["floor"]["backlog"] >= 6, what="the backlog to show")
    assert "lost the broker" in (table.status()["floor"]["last_error"] or "")
    mosquitto.start()
    wait_for(lambda: all_published(table, floor), what="the backlog at the floor")
    wait_for(lambda: table.status()["floor"]["backlog"] == 0, what="the cursor to catch up")
    heard = floor.records()
    journal = [r for r, _, _ in journal_records(table)]
    assert sorted(set(heard)) == journal  # nothing skipped
    first_seen = list(dict.fromkeys(heard))
    assert first_seen == journal  # in record order
    assert len(heard) - len(journal) <= table.controller.link.window  # type: ignore[union-attr]


def test_confirm_round_trip_and_refusals(
    table: RunningTable, floor: Subscriber, mosquitto: Mosquitto
) -> None:
    relay = table.pin(table.controller.config.lights.surveillance)
    assert table.ask("bet", position=2, amount=5)["ok"]
    table.make(4, 5, 6, 8, 9)  # the 5th different point raises the alert
    status = table.status()
    assert status["surveillance_alert"] and status["alert_hand"] == 1
    assert status["surveillance_confirmed"] is None
    assert table.controller.lights is not None
    assert table.controller.lights._applied["relay"] == Effect.BLINK  # blinking: not confirmed
    wait_for(lambda: len(relay.states) >= 3, what="the relay blinking")

    floor.publish(COMMAND, {"op": "confirm", "hand": 2, "by": "alice", "id": "u-1"})
    floor.publish(COMMAND, {"op": "confirm", "hand": 1, "by": "alice", "id": "u-2"})
    wait_for(lambda: table.status()["surveillance_confirmed"] is not None, what="the confirm")
    assert table.status()["surveillance_confirmed"] == {"hand": 1, "by": "alice"}
    assert table.status()["surveillance_alert"] is True  # still up until acknowledged
    assert table.controller.lights._applied["relay"] == Effect.ON  # steady
    assert relay.state == 1

    def confirms() -> list[dict[str, object]]:
        return [
            e for e in floor.on(EVENT) if e["kind"] == "command"
            and e["payload"]["command"] == "confirm"
        ]  # fmt: skip

    wait_for(lambda: len(confirms()) == 2, what="both confirms in the event stream")
    refused, accepted = confirms()
    assert refused["events"] == [
        {
            "event": "refused",
            "command": "confirm",
            "reason": "hand 2 has no surveillance alert to confirm (the alert is for hand 1)",
            "code": "no_alert",
        }
    ]
    assert accepted["actor"] == "floor:alice"
    (confirmed,) = accepted["events"]
    assert confirmed == {
        "event": "surveillance_confirmed",
        "hand": 1,
        "by": "alice",
        "id": "u-2",
        "actor": "floor:alice",
        "at": confirmed["at"],
    }
    # again (a second console) and a repeated id: answered, not journaled again (#32);
    # the confirm of a hand that raised no alert after them is, with why (in order)
    floor.publish(COMMAND, {"op": "confirm", "hand": 1, "by": "bob", "id": "u-3"})
    floor.publish(COMMAND, {"op": "confirm", "hand": 1, "by": "alice", "id": "u-2"})
    floor.publish(COMMAND, {"op": "confirm", "hand": 7, "by": "bob", "id": "u-4"})
    wait_for(lambda: len(confirms()) == 3, what="the confirm of hand 7")
    assert confirms()[2]["payload"]["hand"] == 7
    assert confirms()[2]["events"][0]["reason"] == (
        "hand 7 has no surveillance alert to confirm (the alert is for hand 1)"
    )
    # history shows who confirmed, in hand 1's actions
    (hand,) = table.ask("history", hands=1)["hands"]
    actions = [a for a in hand["actions"] if a["action"] == "surveillance_confirmed"]
    assert [(a["by"], a["actor"]) for a in actions] == [("alice", "floor:alice")]
    # not JSON, unknown op: refused by the link, counted, the table plays on
    floor.publish(COMMAND, {"op": "pay-everyone"})
    wait_for(lambda: table.status()["floor"]["commands_refused"] == 1, what="the refusal")
    assert "unknown command op" in table.status()["floor"]["last_error"]


def test_three_five_point_hands_are_confirmed_in_reverse_through_the_link(
    tmp_path: Path, mosquitto: Mosquitto, floor: Subscriber
) -> None:
    """#32: every 5-point hand confirmable in any order while its alert is open; the
    relay blinks until the last one is confirmed, then is steady; the journal, a
    snapshot at every record, verifies."""
    config = floor_config(tmp_path, mosquitto, snapshot_every=1)
    state = tmp_path / "state"
    with support.table_running(state, tmp_path / "control.sock", config) as table:
        confirm_three_in_reverse(table, floor)
    with Journal(state / "journal.db", durable=False) as journal:
        recovered = recover(journal, config.firebet).replay.state
        report = verify(journal, config.firebet)
    assert report.ok and report.snapshots > 40, report
    assert recovered.alerts() == ((1, "alice"), (2, "bob"), (3, "carol"))


def confirm_three_in_reverse(table: RunningTable, floor: Subscriber) -> None:
    """Three 5-point hands at ``table``, confirmed from the floor in reverse."""
    assert table.controller.lights is not None
    for hand in (1, 2, 3):
        assert table.ask("bet", position=hand, amount=5)["ok"]
        table.make(4, 5, 6, 8, 9)  # hand's 5th different point: its alert
        table.throw(4, 4)  # a point
        table.throw(3, 4)  # seven-out: settled, the next hand
    status = table.status()
    assert status["hand"] == 4 and status["alert_hand"] == 3
    assert status["surveillance_alerts"] == [{"hand": h, "confirmed_by": None} for h in (1, 2, 3)]
    assert table.controller.lights._applied["relay"] == Effect.BLINK

    def kept() -> list[dict[str, Any]]:
        return list(table.status()["surveillance_alerts"])

    for hand, by, still in ((3, "carol", Effect.BLINK), (2, "bob", Effect.BLINK),
                            (1, "alice", Effect.ON)):  # fmt: skip
        floor.publish(COMMAND, {"op": "confirm", "hand": hand, "by": by, "id": f"u-{hand}"})
        wait_for(
            lambda hand=hand: kept()[hand - 1]["confirmed_by"] is not None,  # type: ignore[misc]
            what=f"hand {hand}'s confirmation",
        )
        assert kept()[hand - 1] == {"hand": hand, "confirmed_by": by}
        assert table.controller.lights._applied["relay"] == still
    assert table.status()["surveillance_confirmed"] == {"hand": 3, "by": "carol"}

    # each hand's confirmation in its history, with who and when
    hands = {h["hand"]: h for h in table.ask("history", hands=4)["hands"]}
    for hand, by in ((1, "alice"), (2, "bob"), (3, "carol")):
        (action,) = [a for a in hands[hand]["actions"] if a["action"] == "surveillance_confirmed"]
        assert (action["by"], action["actor"]) == (by, f"floor:{by}") and action["at"]

    # each journaled once, in the order surveillance confirmed; a repeat is not
    floor.publish(COMMAND, {"op": "confirm", "hand": 2, "by": "dave", "id": "u-2"})
    floor.publish(COMMAND, {"op": "confirm", "hand": 4, "by": "dave", "id": "u-9"})

    def confirms() -> list[dict[str, Any]]:
        return [
            e for e in floor.on(EVENT) if e["kind"] == "command"
            and e["payload"]["command"] == "confirm"
        ]  # fmt: skip

    wait_for(lambda: len(confirms()) == 4, what="the confirm of hand 4 in the stream")
    assert [c["events"][0]["event"] for c in confirms()] == [
        "surveillance_confirmed", "surveillance_confirmed", "surveillance_confirmed", "refused",
    ]  # fmt: skip
    assert [c["payload"]["hand"] for c in confirms()] == [3, 2, 1, 4]
    assert confirms()[3]["events"][0]["reason"] == (
        "hand 4 has no surveillance alert to confirm (the alerts are for hands 1, 2, 3)"
    )


def test_after_a_restart_the_backlog_is_published_with_its_events(
    tmp_path: Path, mosquitto: Mosquitto, floor: Subscriber
) -> None:
    config = floor_config(tmp_path, mosquitto, snapshot_every=5)
    state, sock = tmp_path / "state", tmp_path / "control.sock"
    with support.table_running(state, sock, config) as table:
        assert table.ask("bet", position=3, amount=5)["ok"]
        table.make(4)
        wait_for(lambda: all_published(table, floor), what="the first records")
        mosquitto.stop()
        wait_for(lambda: not table.status()["floor"]["connected"], what="the link to notice")
        table.make(5, 6, 8)
        table.throw(2, 2)  # point 4
        table.throw(3, 4)  # seven-out: hand 1 settled in the backlog
        wait_for(lambda: table.status()["floor"]["backlog"] >= 8, what="the backlog to show")
        cursor = table.status()["floor"]["cursor"]
    mosquitto.start()
    with support.table_running(state, sock, config) as table:  # the backlog goes after it
        wait_for(lambda: all_published(table, floor), what="the backlog at the floor")
        assert table.controller.link is not None and table.controller.link.report.underived == 0
    stream = floor.on(EVENT)
    backlog = [e for e in stream if e["record"] > cursor and e["kind"] == "command"]
    assert len(backlog) >= 8 and all("events" in e for e in backlog)
    settled = [ev for e in backlog for ev in e["events"] if ev["event"] == "settlement"]
    assert [(s["hand"], s["unique_points"], s["payouts"]) for s in settled] == [
        (1, 4, {"3": 5 * 24})
    ]
    assert published_events(stream) == refolded(stream)  # the fold went on past snapshots


def test_resend_publishes_again_from_the_record_asked(
    table: RunningTable, floor: Subscriber
) -> None:
    table.make(4)
    wait_for(lambda: all_published(table, floor), what="the records")
    count = len(floor.records())
    floor.publish(COMMAND, {"op": "resend", "from": 2})
    wait_for(lambda: len(floor.records()) >= 2 * count - 1, what="the records again")
    assert floor.records()[count:] == list(range(2, count + 1))
    stream = floor.on(EVENT)
    again = {e["record"]: e.get("events") for e in stream[count:]}
    first = {e["record"]: e.get("events") for e in stream[:count]}
    assert again == {n: first[n] for n in again}  # the resent records carry their events
    assert published_events(stream) == refolded(stream)


def test_a_command_from_an_identity_without_the_right_is_refused_by_the_broker(
    table: RunningTable, floor: Subscriber, mosquitto: Mosquitto
) -> None:
    table.make(4, 5, 6, 8, 9)
    confirm = {"op": "confirm", "hand": 1, "by": "mallory", "id": "x"}
    not_authorized = 0x87
    # another table may not command this one, nor may this table command itself
    assert one_shot(mosquitto, "CR-08", COMMAND, confirm) == not_authorized
    assert one_shot(mosquitto, "CR-07", COMMAND, confirm) == not_authorized
    # nor write another table's records or state
    assert one_shot(mosquitto, "CR-08", EVENT, {"record": 999}) == not_authorized
    assert one_shot(mosquitto, "CR-08", STATE, {"mode": "running"}, retain=True) == 0x87
    # the floor may (from its own session: with client ids bound to user names, a second
    # "floor" client would take the floor's session over)
    floor.publish(COMMAND, confirm)
    wait_for(lambda: table.status()["surveillance_confirmed"] is not None, what="the confirm")
    assert table.status()["surveillance_confirmed"] == {"hand": 1, "by": "mallory"}
    wait_for(lambda: all_published(table, floor), what="every record at the floor")
    confirms = [e for e in floor.on(EVENT) if '"confirm"' in json.dumps(e)]
    assert len(confirms) == 1  # only the floor's reached the table


def test_a_backlog_is_read_in_bounded_batches_with_a_bounded_window(
    tmp_path: Path, mosquitto: Mosquitto, floor: Subscriber
) -> None:
    state = tmp_path / "state"
    engine = Engine()
    with Journal(state / "journal.db", durable=False) as journal:
        replayed = recover(journal, engine.rules).replay
        for i in range(600):  # a backlog the link has never published
            decide(journal, replayed, Roll(1 + i % 6, 1 + (i * 5) % 6, seq=i + 1))
        head = journal.last_record
    config = floor_config(tmp_path, mosquitto)
    link = FloorLink(
        config.floor, "CR-07", state / "journal.db", state,
        status=lambda: schemas.idle_status("CR-07"), post=lambda command: None, program="test",
        rules=engine.rules, window=8,
    )  # fmt: skip
    seen: list[int] = []  # records in flight, sampled while it catches up
    queued: list[int] = []  # messages paho holds (records, plus online and state)

    def caught_up() -> bool:
        seen.append(len(link._inflight))
        if link._client is not None:
            queued.append(len(link._client._out_messages))
        return link.cursor.record >= head

    link.start()
    try:
        wait_for(caught_up, what="the link to catch up")
        wait_for(lambda: set(floor.records()) >= set(range(1, head + 1)), what="the backlog")
    finally:
        link.stop()
    assert max(queued) <= 8 + 2
    assert max(seen) <= 8 and link.cursor.record == head
    assert list(dict.fromkeys(floor.records())) == list(range(1, head + 1))


def test_a_consumer_checks_every_message_s_seal_with_the_table_s_key_snapshots_included(
    tmp_path: Path, mosquitto: Mosquitto, floor: Subscriber
) -> None:
    """A casino's consumer, written from docs/floor.md ("Checking the chain") alone."""
    import hashlib
    import hmac

    config = floor_config(tmp_path, mosquitto, snapshot_every=5)
    state = tmp_path / "state"
    with support.table_running(state, tmp_path / "control.sock", config) as table:
        assert table.ask("bet", position=3, amount=5)["ok"]
        table.make(4, 5, 6)
        table.throw(2, 2)
        table.throw(3, 4)
        wait_for(lambda: all_published(table, floor), what="every record at the floor")
    key = bytes.fromhex((state / "journal.key").read_text().strip())
    messages = sorted({e["record"]: e for e in floor.on(EVENT)}.values(), key=lambda e: e["record"])
    assert [m["record"] for m in messages] == list(range(1, len(messages) + 1))
    snapshots = [m for m in messages if "snapshot" in m]
    assert len(snapshots) >= 2  # every 5 records
    prev = bytes(32)
    for m in messages:
        body = json.dumps(m["payload"], sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        snap = 1 if "snapshot" in m else 0
        message = prev + f"{m['record']}\n{m['at']}\n{m['actor']}\n{m['kind']}\n{snap}\n".encode()
        message += body.encode()
        if snap:
            message += b"\nsnapshot " + bytes.fromhex(m["snapshot"])
        assert hmac.new(key, message, hashlib.sha256).digest() == bytes.fromhex(m["chain"]), m
        prev = bytes.fromhex(m["chain"])


def test_a_link_that_stops_says_why_and_starts_again_with_back_off(
    tmp_path: Path, mosquitto: Mosquitto, floor: Subscriber, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#33: in the installed unit's sandbox the link died on "Network is unreachable" and
    never tried again. Now it says why in status, waits, and tries again, for ever."""
    from controller.link import link as link_module

    monkeypatch.setattr(link_module, "RETRY_FIRST_S", 0.2)
    state = tmp_path / "state"
    engine = Engine()
    with Journal(state / "journal.db", durable=False) as journal:
        replayed = recover(journal, engine.rules).replay
        decide(journal, replayed, Roll(2, 2, seq=1))
        head = journal.last_record
    config = floor_config(tmp_path, mosquitto)
    link = FloorLink(
        config.floor, "CR-07", state / "journal.db", state,
        status=lambda: schemas.idle_status("CR-07"), post=lambda command: None, program="test",
        rules=engine.rules,
    )  # fmt: skip
    real = link._connect
    tries: list[float] = []

    def sandboxed() -> Any:  # what paho's loop_start raised with no network at all
        tries.append(time.monotonic())
        if len(tries) <= 3:
            raise OSError(101, "Network is unreachable")
        return real()

    monkeypatch.setattr(link, "_connect", sandboxed)
    link.start()
    try:
        seen: list[dict[str, Any]] = []

        def waiting() -> bool:
            seen.append(link.status())
            return bool(seen[-1]["retry_at"]) and "unreachable" in str(seen[-1]["last_error"])

        wait_for(waiting, what="status to say why the link waits")
        last = seen[-1]
        wait_for(lambda: link.cursor.record >= head, what="the link to publish after its retries")
        wait_for(lambda: set(floor.records()) >= set(range(1, head + 1)), what="the records")
        after = link.status()
    finally:
        link.stop()
    assert len(tries) == 4
    gaps = [b - a for a, b in itertools.pairwise(tries)]
    assert gaps[0] >= 0.19 and gaps[1] >= 0.39 and gaps[2] >= 0.79  # twice as long each time
    assert (
        "Network is unreachable" in last["last_error"] and "trying again in" in last["last_error"]
    )
    assert last["retry_at"] is not None and last["connected"] is False
    assert after["connected"] is True and after["retry_at"] is None
