"""The service with a reader on a pty, the reader protocol as a contract (issue 23): a stale
copy is ACKed and never applied (held for the dealer when the table cannot prove it a copy:
issue 29), a stale copy with other dice is a SEQ_CONFLICT, a ROLL in
the reader's own FAULT is held and counts once, a wrong HELLO is answered with a NAK, and
HELLO's model and firmware are journaled and shown."""

from __future__ import annotations

import argparse
import io
import json
import logging
import random
from pathlib import Path

import pytest
import serial
from rich.console import Console

from controller.cli.diag.reader import monitor_reader
from controller.cli.display import render_status
from controller.cli.doctor import Doctor
from drivers.codec import encode, encode_hello
from tests import schemas
from tests.integration.test_reader_rolls_service import events_of, records
from tests.support import RunningTable, table_config, table_running, wait_for


def hello(t: RunningTable) -> None:
    """The reader restarts (its HELLO at power-up may come before the port is open)."""
    t.device.hello()
    wait_for(lambda: t.status()["reader"]["model"] == t.device.model, what="the HELLO")


def test_a_stale_copy_is_acked_never_applied(running_table: RunningTable) -> None:
    t = running_table
    hello(t)
    first = t.throw(2, 2)  # point 4
    t.throw(3, 3)
    t.throw(5, 6)
    assert t.status()["rolls"] == 3
    acks = t.device.acked.count(first)
    t.device.roll_frame(first, 2, 2)  # seq going backwards, without a HELLO: a late copy
    wait_for(lambda: t.device.acked.count(first) > acks, what="the stale copy's ACK")
    s = t.status()
    assert s["rolls"] == 3 and s["mode"] == "running"
    assert s["reader"]["copies"]["stale"] == 1
    # with other dice, it contradicts what was applied at that seq: SEQ_CONFLICT
    t.device.roll_frame(first, 6, 6)
    wait_for(lambda: t.status()["mode"] == "reader_fault", what="the SEQ_CONFLICT")
    assert t.status()["reader"]["fault"] == "SEQ_CONFLICT" and t.status()["rolls"] == 3
    ((_, conflict),) = events_of(t, "seq_conflict")
    assert (conflict["seq"], conflict["recorded_d1"], conflict["d1"]) == (first, 2, 6)
    assert t.device.acked.count(first) == acks + 1  # the conflicting copy is not ACKed
    hello(t)
    wait_for(lambda: t.status()["mode"] == "running", what="the fault to end at HELLO")


def test_a_roll_in_the_readers_own_fault_is_held_and_counts_once(
    running_table: RunningTable,
) -> None:
    t = running_table
    t.throw(4, 4)  # point 8
    t.device.fault("CAMERA")
    wait_for(lambda: t.status()["reader"]["fault"] == "CAMERA", what="the reader's FAULT")
    seq = t.throw(5, 5)  # the faulted reader reports a throw: held, and ACKed (recorded)
    s = t.status()
    assert s["rolls"] == 1 and [h["seq"] for h in s["held_rolls"]] == [seq]
    assert t.ask("roll", d1=5, d2=5)["ok"]  # the dealer keys the same throw by hand
    assert t.ask("held-discard", number=1)["ok"]
    t.device.clear_fault()
    wait_for(lambda: t.status()["mode"] == "running", what="the OK")
    s = t.status()
    assert s["rolls"] == 2 and s["held_rolls"] == [] and not s["holding_reader_rolls"]
    t.throw(1, 2)  # the reader's rolls count again
    assert t.status()["rolls"] == 3


def test_a_wrong_hello_is_answered_with_a_nak_and_counted(running_table: RunningTable) -> None:
    t = running_table
    t.device.send_raw(encode("HELLO,0,DR-7,2.1"))  # no protocol number: the wrong shape
    assert t.device.wait_nak("BAD_HELLO", timeout=30)
    t.device.send_raw(encode("HELLO,0,DR-1,0.9", protocol=1))  # an older reader's HELLO
    assert t.device.wait_nak("PROTOCOL", timeout=30)
    wait_for(lambda: sum(t.status()["reader"]["naks"].values()) == 2, what="the NAKs counted")
    reader = t.status()["reader"]
    assert reader["naks"]["BAD_HELLO"] == 1 and reader["naks"]["PROTOCOL"] == 1
    assert "NAK,0,PROTOCOL" in reader["last_nak"] and "HELLO,0,DR-1" in reader["last_nak"]
    # never a NAK for a ROLL it can ACK
    t.throw(3, 4)
    assert all(r != "BAD_FRAME" for _, r in t.device.naks)


def test_hello_model_and_firmware_are_journaled_and_shown(running_table: RunningTable) -> None:
    t = running_table
    t.device.model, t.device.firmware = "DR-7", "2.1.0"
    hello(t)
    reader = t.status()["reader"]
    assert (reader["model"], reader["firmware"]) == ("DR-7", "2.1.0")
    said = [r for r in records(t) if r.get("command") == "reader_hello"]
    assert said and (said[-1]["model"], said[-1]["firmware"]) == ("DR-7", "2.1.0")
    assert json.dumps(reader)  # JSON-ready


def hellos(t: RunningTable) -> list[tuple[int, str]]:
    """The journal's ``reader_hello`` records: (record, firmware)."""
    assert t.controller.journal is not None
    return [
        (r.record, json.loads(r.payload).get("firmware", ""))
        for r in t.controller.journal.records()
        if r.kind == "command" and json.loads(r.payload).get("command") == "reader_hello"
    ]


def status_text(status: dict) -> str:  # type: ignore[type-arg]
    """What ``firebet status`` shows for ``status`` (the reader's line among it)."""
    console = Console(width=200, record=True, color_system=None)
    console.print(render_status(status))
    return console.export_text()


def test_firmware_carried_from_the_journal_is_not_claimed_current(tmp_path: Path) -> None:
    # issue 33: the reader restarted with other firmware while the service was down; under
    # protocol 2 its HELLO is sent once, unread: status must not claim the old firmware
    state, sock = tmp_path / "state", tmp_path / "control.sock"
    with table_running(state, sock, protocol=2) as t:
        t.device.model, t.device.firmware = "DR-7", "2.1.0"
        hello(t)
        reader = t.status()["reader"]
        assert (reader["firmware"], reader["firmware_seen"]) == ("2.1.0", "this_run")
        ((said, _),) = hellos(t)
        assert reader["firmware_record"] == said
        assert "(DR-7, firmware 2.1.0)" in status_text(t.status())
    # a new start: the simulated reader powers up anew with firmware 1.0 (SIMREADER), its
    # one HELLO sent before the service's port was open (opening drops what came before)
    with table_running(state, sock, protocol=2) as t:
        assert hellos(t) == [(said, "2.1.0")], "the new HELLO was heard: this test needs it unheard"
        status = t.status()
        reader = status["reader"]
        assert (reader["model"], reader["firmware"]) == ("DR-7", "2.1.0")  # the journal's
        assert (reader["firmware_seen"], reader["firmware_record"]) == ("journal", said)
        schemas.check("cli-status", status)
        line = next(x for x in status_text(status).splitlines() if "firmware" in x)
        assert f"(DR-7, firmware 2.1.0, as of record {said}, before this start)" in line
        t.device.hello()  # the reader's next HELLO: heard, and shown at once
        wait_for(lambda: t.status()["reader"]["firmware"] == "1.0", what="the new HELLO")
        status = t.status()
        reader = status["reader"]
        assert (reader["model"], reader["firmware_seen"]) == ("SIMREADER", "this_run")
        assert reader["firmware_record"] > said
        schemas.check("cli-status", status)
        assert "(SIMREADER, firmware 1.0)" in status_text(status)
        assert "before this start" not in status_text(status)


def test_the_readers_own_fault_holds_its_rolls_across_a_restart(tmp_path: Path) -> None:
    state, sock = tmp_path / "state", tmp_path / "control.sock"
    with table_running(state, sock) as t:
        t.device.fault("CAMERA")
        wait_for(lambda: t.status()["reader"]["fault"] == "CAMERA", what="the reader's FAULT")
    with table_running(state, sock) as t:  # the reader is still in fault: it says no more
        assert t.status()["mode"] == "reader_fault"
        seq = t.throw(6, 5)
        assert [h["seq"] for h in t.status()["held_rolls"]] == [seq]
        t.device.clear_fault()  # its OK, the first since this start, ends the fault
        wait_for(lambda: t.status()["mode"] == "running", what="the OK")
        assert t.ask("held-apply", number=1)["ok"]
        assert t.status()["rolls"] == 1


def test_rolls_across_the_wrap_with_late_copies_are_applied_once(
    running_table: RunningTable,
) -> None:
    t = running_table
    hello(t)
    rng = random.Random(23)
    throws = [((65530 + 3 * i) % 65536, rng.randint(1, 6), rng.randint(1, 6)) for i in range(8)]
    late = 0
    for i, (seq, d1, d2) in enumerate(throws):
        t.device.roll_frame(seq, d1, d2)
        assert t.device.wait_acked(seq, timeout=30)
        for _ in range(rng.randint(0, 2)):  # a bridge delivers an earlier copy late
            old, o1, o2 = throws[rng.randint(0, i)]
            before = t.device.acked.count(old)
            t.device.roll_frame(old, o1, o2)
            wait_for(lambda o=old, b=before: t.device.acked.count(o) > b, what="the copy's ACK")
            late += 1
    s = t.status()
    assert s["rolls"] == len(throws) and s["mode"] == "running"
    copies = s["reader"]["copies"]
    assert copies["stale"] + copies["repeated"] == late
    applied = [(e["seq"], e["d1"], e["d2"]) for _, e in events_of(t, "roll")]
    assert applied == throws


def test_a_roll_far_behind_is_held_for_the_dealer_and_said_loudly(
    running_table: RunningTable, caplog: pytest.LogCaptureFixture
) -> None:
    # issue 29: not newer and not a roll the table remembers applying: the table cannot
    # prove it a copy, so it is held (ACKed, journaled, shown), never silently dropped
    caplog.set_level(logging.WARNING, logger="firebet.service")
    t = running_table
    hello(t)
    seq = t.throw(2, 2)
    far = (seq - 20_000) % 65536  # a numbering that ran on past half the ring, or a relic
    t.device.roll_frame(far, 3, 4)
    assert t.device.wait_acked(far, timeout=30)
    wait_for(lambda: t.status()["held_rolls"], what="the held roll")
    s = t.status()
    assert s["rolls"] == 1 and s["reader"]["copies"]["stale"] == 0
    ((held,),) = (s["held_rolls"],)
    assert held["seq"] == far and "cannot be proven" in held["reason"]
    wait_for(
        lambda: any("cannot be proven" in r.getMessage() for r in caplog.records),
        what="the warning",
    )
    assert t.ask("held-discard", number=1)["ok"]  # a relic: the dealer discards it
    t.throw(1, 2)
    assert t.status()["rolls"] == 2


def test_diag_reader_names_a_wrong_hello_and_its_nak() -> None:
    port = serial.serial_for_url("loop://", timeout=0.1)
    try:
        port.write(encode_hello(0, "DR-1", "0.9", protocol=1) + encode_hello(0, "DR-7", "2.1"))
        out = io.StringIO()
        counters, error = monitor_reader(port, out, count=2)
    finally:
        port.close()
    wrong, good = out.getvalue().splitlines()
    assert error is None and counters["bad_checksum"] == 1 and counters["ok"] == 1
    assert "HELLO" in wrong and "the service answers NAK,0,PROTOCOL" in wrong
    assert "model DR-7  firmware 2.1  protocol 2" in good and "NAK" not in good


def test_doctor_names_the_reader_that_said_hello(running_table: RunningTable) -> None:
    t = running_table
    t.device.model, t.device.firmware = "DR-7", "2.1.0"
    hello(t)
    check = Doctor(argparse.Namespace(serial=None))
    check.config, check.service = table_config(), t.status()
    check.check_serial()
    (serial_check,) = check.checks
    assert serial_check.ok and "(DR-7, firmware 2.1.0): the service reads it" in serial_check.detail


def test_a_reader_restarted_while_the_service_was_down_plays_on(tmp_path: Path) -> None:
    # protocol 3: the new reader's HELLO is repeated until the table, up again, WELCOMEs it
    state, sock = tmp_path / "state", tmp_path / "control.sock"
    with table_running(state, sock, protocol=3) as t:
        for _ in range(5):
            t.throw(2, 3)
        assert t.status()["rolls"] == 5
    # a new reader (its numbering from 1 in a new session, its HELLO sent before the port
    # was open and repeated until WELCOMEd)
    with table_running(state, sock, protocol=3) as t:
        t.throw(3, 3)
        t.throw(4, 4)
        s = t.status()
        assert s["rolls"] == 7 and s["reader"]["copies"]["stale"] == 0 and s["mode"] == "running"
        assert s["reader"]["session"] == t.device.session
        assert len(events_of(t, "reader_restarted")) == 2  # one a session, each journaled
        # its repeated HELLO was heard: the model and firmware shown are the reader's now
        assert (s["reader"]["firmware_seen"], s["reader"]["session_heard"]) == ("this_run", True)


def test_an_idle_table_s_next_roll_counts_after_hours_of_heartbeats(tmp_path: Path) -> None:
    # protocol 3: heartbeats carry the session's last roll number: nothing to run past
    with table_running(tmp_path / "state", tmp_path / "control.sock", protocol=3) as t:
        t.throw(2, 2)  # point 4
        for _ in range(33_000):  # nine hours of heartbeats, one a second, sent at once
            t.device.heartbeat()
        t.throw(3, 3)
        s = t.status()
        assert s["rolls"] == 2 and s["reader"]["copies"]["stale"] == 0
        assert s["point"] == 4 and s["last_roll"] == [3, 3]
        assert not events_of(t, "reader_advanced")  # nothing guessed, nothing moved
