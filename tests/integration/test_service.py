"""The controller in-process: real serial driver on a pty, simulated reader, mock pins,
a real journal file and the real control socket."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from controller.journal import JournalWriteError
from tests.support import MARKER_PINS, RunningTable, run_firebet, table_running, wait_for


def test_rolls_are_acked_and_markers_lit_on_the_pins(running_table: RunningTable) -> None:
    table = running_table
    table.throw(6, 5)  # natural
    table.make(6, 8)
    s = table.status()
    assert (s["mode"], s["phase"], s["points"], s["rolls"]) == ("running", "come_out", [6, 8], 5)
    assert s["markers"]["6"] == {"lit": True, "ordinal": 1}
    assert s["markers"]["8"] == {"lit": True, "ordinal": 2}
    assert s["markers"]["4"] == {"lit": False, "ordinal": None}
    assert table.pin(MARKER_PINS[6]).state == 1  # steady
    assert table.pin(MARKER_PINS[4]).state == 0  # dark
    assert table.pin(20).state == 1  # status lamp steady: reader fine


def test_a_dealer_action_s_json_is_valid_by_its_shipped_schema(
    running_table: RunningTable,
) -> None:
    """#33: the done object of a dealer action had no schema (run_firebet checks each
    line against cli-action.schema.json: the events and the status after it)."""
    import json

    from tests import schemas

    where = ("--json", "--socket", str(running_table.socket))
    bet = run_firebet("bet", "2", "5", *where)
    assert bet.returncode == 0, bet.stderr
    placed = json.loads(bet.stdout)
    assert [e["event"] for e in placed["events"]] == ["bet"] and placed["status"]["bets"]
    running_table.throw(2, 2)
    void = run_firebet("void", *where)
    assert void.returncode == 0, void.stderr
    assert [e["event"] for e in json.loads(void.stdout)["events"]] == ["void"]
    assert schemas.cli_schema(("void", "--json")) == "cli-action"
    assert schemas.problem("cli-action", {**placed, "events": [{"event": "bet"}]}) is not None


def test_status_carries_the_time_it_was_read(running_table: RunningTable) -> None:
    """#33: a status kept by a script said nothing of when it was true."""
    from datetime import UTC, datetime

    before = datetime.now(UTC)
    first = running_table.ask("status")
    second = running_table.ask("status")
    after = datetime.now(UTC)
    read = [datetime.fromisoformat(s["at"]) for s in (first, second)]
    assert first["at"].endswith("+00:00") and len(first["at"]) == len(
        "2026-01-01T00:00:00.000+00:00"
    )
    # the service's clock, read at each request (a millisecond's rounding either side)
    assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= read[0] <= read[1]
    assert read[1] <= after


def test_a_settlement_with_payouts_through_the_socket(running_table: RunningTable) -> None:
    table = running_table
    assert table.ask("bet", position=3, amount=5)["ok"]
    refused = table.ask("bet", position=4, amount=6)
    assert not refused["ok"] and refused["error"] == "position 4: $6 is over the $5 maximum"
    table.make(4, 5, 6, 8)
    table.throw(2, 2)
    table.throw(3, 4)
    s = table.status()
    assert s["last_settlement"]["payouts"] == {"3": 120}
    assert s["hand"] == 2 and s["meters"]["paid"] == {"4": {"count": 1, "amount": 120}}
    (hand1, _) = table.ask("history", hands=2)["hands"]
    assert hand1["result"] == "win" and hand1["points"] == [4, 5, 6, 8]
    bet = hand1["actions"][0]
    assert bet["action"] == "bet" and bet["actor"].endswith(f"({os.getuid()})")


def test_a_copy_of_a_roll_is_applied_once_and_acked_again(running_table: RunningTable) -> None:
    table = running_table
    seq = table.throw(2, 2)
    wait_for(lambda: table.device.acked.count(seq) >= 1)
    from drivers import codec

    table.device.send_raw(codec.encode_roll(seq, 2, 2))  # a late copy of the same roll
    wait_for(lambda: table.device.acked.count(seq) >= 2)
    assert table.status()["rolls"] == 1 and table.status()["point"] == 4


def test_reader_fault_blinks_and_allows_manual_rolls(running_table: RunningTable) -> None:
    table = running_table
    table.throw(2, 2)
    assert not table.ask("roll", d1=2, d2=2)["ok"]  # reader healthy: no manual entry
    table.device.fault("CAMERA")
    wait_for(lambda: table.status()["mode"] == "reader_fault")
    reply = table.ask("roll", d1=2, d2=2)
    assert reply["ok"] and reply["status"]["points"] == [4]
    assert table.status()["reader"]["fault"] == "CAMERA"
    table.device.clear_fault()
    wait_for(lambda: table.status()["mode"] == "running")
    history = table.ask("history", hands=1)["hands"][-1]
    assert history["rolls"] == [[2, 2], [2, 2]]


def test_heartbeat_loss_is_a_reader_fault_and_recovers(running_table: RunningTable) -> None:
    table = running_table
    table.device.silence()
    wait_for(lambda: table.status()["mode"] == "reader_fault")
    table.device.speak()
    wait_for(lambda: table.status()["mode"] == "running")
    assert table.status()["meters"]["faults"] >= 1


def test_diagnostics_pause_game_input_and_restore_outputs(running_table: RunningTable) -> None:
    table = running_table
    table.make(6, 5)  # 6 steady, 5 (the newest) pulsing
    assert table.ask("diagnostics-on")["ok"]
    assert table.status()["mode"] == "diagnostics"
    assert table.pin(MARKER_PINS[6]).state == 0  # the lamps are the technician's
    seq = table.throw(4, 4, acked=False)
    time.sleep(0.3)
    assert seq not in table.device.acked and table.status()["rolls"] == 4
    meters = table.status()["meters"]
    assert table.ask("diagnostics-off")["ok"]
    assert table.device.wait_acked(seq, timeout=30)  # retransmitted, applied after diagnostics
    s = table.status()
    assert s["rolls"] == 5 and s["point"] == 8 and s["mode"] == "running"
    assert s["meters"]["voids"] == meters["voids"] and s["meters"]["faults"] == meters["faults"]
    assert table.pin(MARKER_PINS[6]).state == 1


def test_a_damaged_journal_halts_until_a_technician_clears_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "journal.db").write_bytes(b"this is not a database" * 100)
    with table_running(state, tmp_path / "c.sock") as t:
        s = t.status()
        assert s["mode"] == "halted" and "is not a journal" in s["halted"]
        seq = t.throw(3, 4, acked=False)
        time.sleep(0.3)
        assert seq not in t.device.acked  # nothing is applied or ACKed while halted
        refused = t.ask("bet", position=1, amount=5)
        assert not refused["ok"] and "halted" in refused["error"]
        still = t.ask("clear-halt", note="tried too early")
        assert not still["ok"] and "journal init" in still["error"]
        (state / "journal.db").rename(state / "journal.db.damaged")
        gone = t.ask("clear-halt", note="moved aside: still no fresh game from clear-halt")
        assert not gone["ok"] and "journal init" in gone["error"], gone
        assert t.status()["mode"] == "halted"
    done = run_firebet(
        "journal", "init", "--state-dir", str(state), "--reason", "damaged file, ticket 1"
    )
    assert done.returncode == 0, done.stderr
    with table_running(state, tmp_path / "c.sock") as t:
        assert t.status()["mode"] == "running"
        t.throw(3, 4)


def test_a_journal_that_cannot_be_written_refuses_rolls_but_serves_status(
    running_table: RunningTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = running_table
    journal = table.controller.journal
    assert journal is not None

    def disk_full(*args: object, **kwargs: object) -> None:
        raise JournalWriteError(journal.path, "database or disk is full")

    monkeypatch.setattr(journal, "_write", disk_full)
    seq = table.throw(2, 2, acked=False)
    time.sleep(0.3)
    assert seq not in table.device.acked  # not durable, so not ACKed: the reader repeats it
    s = table.status()
    assert s["storage_fault"] == "database or disk is full" and s["rolls"] == 0
    refused = table.ask("bet", position=1, amount=5)
    assert not refused["ok"] and "the journal cannot be written" in refused["error"]
    monkeypatch.undo()  # space freed
    assert table.device.wait_acked(seq, timeout=30)
    s = table.status()
    assert s["storage_fault"] is None and s["rolls"] == 1 and s["point"] == 4


def test_the_change_listener_hears_a_roll_before_its_ack(running_table: RunningTable) -> None:
    """The sim's players bet for a new shooter from ``on_change``: their bets must be queued
    before the reader hears the ACK and throws again (systemd's STATUS may come after)."""
    reader = running_table.controller.reader
    assert reader is not None
    heard: list[tuple[int, int]] = []
    before = reader.acks_sent
    running_table.controller.on_change = lambda p: heard.append((p.state.rolls, reader.acks_sent))
    running_table.throw(3, 4)
    wait_for(lambda: any(rolls == 1 for rolls, _ in heard), what="the listener to hear the roll")
    assert next(acks for rolls, acks in heard if rolls == 1) == before
