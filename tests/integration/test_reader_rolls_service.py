"""The service with a reader on a pty: SEQ_CONFLICT, rolls held after manual entry, and
repeated refusals logged once (issue 9 items 6, 7 and 14)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from controller.core.state import TableState
from controller.service.jobs import Halt
from tests.support import RunningTable, run_firebet, wait_for


def records(table: RunningTable) -> list[dict[str, Any]]:
    assert table.controller.journal is not None
    return [
        {"actor": r.actor, "kind": r.kind, **json.loads(r.payload)}
        for r in table.controller.journal.records()
    ]


def events_of(table: RunningTable, kind: str) -> list[tuple[str, dict[str, Any]]]:
    """The events of ``kind`` the journal's commands give (format 2 records the command
    only: its events are the rules' answer, folded here as recovery does)."""
    assert table.controller.journal is not None
    engine, state, out = table.controller.table.replay.engine, TableState(), []
    for r in table.controller.journal.records():
        if r.kind != "command":
            continue
        outcome = engine.apply(state, r.command())
        state = outcome.state
        out += [(r.actor, d) for d in (e.to_dict() for e in outcome.events) if d["event"] == kind]
    return out


def test_same_seq_other_dice_is_a_seq_conflict_until_hello(running_table: RunningTable) -> None:
    t = running_table
    seq = t.throw(2, 2)
    assert t.status()["point"] == 4
    acks = t.device.acked.count(seq)
    t.device.roll_frame(seq, 5, 6)  # the same seq, other dice
    wait_for(lambda: t.status()["mode"] == "reader_fault", what="the SEQ_CONFLICT fault")
    s = t.status()
    assert s["reader"]["fault"] == "SEQ_CONFLICT" and s["rolls"] == 1 and s["point"] == 4
    ((_, conflict),) = events_of(t, "seq_conflict")
    assert (conflict["seq"], conflict["recorded_d1"], conflict["recorded_d2"]) == (seq, 2, 2)
    assert (conflict["d1"], conflict["d2"]) == (5, 6)
    # repeats of it, and new rolls, are neither applied, journaled again, nor ACKed
    t.device.roll_frame(seq, 5, 6)
    t.device.roll_frame(seq + 1, 6, 6)
    t.device.heartbeat()
    wait_for(lambda: t.status()["reader"]["counters"]["ok"] >= 3, what="the frames read")
    wait_for(lambda: t.controller.queue.empty())
    assert t.device.acked.count(seq) == acks and seq + 1 not in t.device.acked
    assert len(events_of(t, "seq_conflict")) == 1 and t.status()["rolls"] == 1
    # manual entry is allowed meanwhile (a reader fault)
    assert t.ask("roll", d1=1, d2=1)["ok"]
    # the reader restarts: the fault ends
    t.device.hello()
    wait_for(lambda: t.status()["mode"] == "running", what="the fault to end at HELLO")


def _fault_and_key(t: RunningTable, d1: int, d2: int) -> None:
    """Pull the reader's plug on a throw the dealer then keys by hand."""
    t.device.silence()
    wait_for(lambda: t.status()["mode"] == "reader_fault", what="the heartbeat fault")
    t.device.throw(d1, d2)  # the reader holds it: the line is silent
    reply = t.ask("roll", d1=d1, d2=d2)
    assert reply["ok"], reply


def test_reader_rolls_after_manual_entry_are_held_for_the_dealer(
    running_table: RunningTable,
) -> None:
    t = running_table
    t.throw(3, 3)  # point 6
    _fault_and_key(t, 4, 4)
    assert t.status()["rolls"] == 2
    t.device.speak()  # the cable is back: the reader's pending ROLL for that throw arrives
    wait_for(lambda: t.status()["held_rolls"], what="the held roll")
    s = t.status()
    assert s["rolls"] == 2 and s["holding_reader_rolls"]  # not counted twice
    ((held),) = s["held_rolls"]
    assert held["number"] == 1 and held["dice"] == [4, 4]
    assert t.device.wait_acked(held["seq"], timeout=10)  # durably recorded, so ACKed
    # another throw arrives while the dealer decides: held too
    seq = t.throw(5, 6)
    assert [h["number"] for h in t.status()["held_rolls"]] == [1, 2]
    assert t.status()["rolls"] == 2
    # the dealer discards the repeat and applies the new throw
    assert t.ask("held-discard", number=1)["ok"]
    bad = t.ask("held-apply", number=1)
    assert not bad["ok"] and "held: 2" in bad["error"]
    applied = t.ask("held-apply", number=2)
    assert applied["ok"], applied
    s = t.status()
    assert s["rolls"] == 3 and s["held_rolls"] == [] and not s["holding_reader_rolls"]
    assert s["last_roll"] == [5, 6]
    # both decisions journaled with who
    ((who1, discarded),) = events_of(t, "held_discarded")
    ((who2, applied_event),) = events_of(t, "held_applied")
    assert discarded["number"] == 1 and applied_event["number"] == 2 and applied_event["seq"] == seq
    assert who1 == who2 and discarded["actor"] == who1 and who1 not in ("reader", "")
    # the reader's rolls count again
    t.throw(1, 2)
    assert t.status()["rolls"] == 4


@pytest.mark.slow
def test_held_rolls_by_cli_and_button(running_table: RunningTable) -> None:
    t = running_table
    _fault_and_key(t, 2, 3)
    t.device.speak()
    wait_for(lambda: t.status()["held_rolls"], what="the held roll")
    listed = run_firebet("held", "--socket", str(t.socket))
    assert listed.returncode == 0, listed.stderr
    assert "1: 2 3" in listed.stdout
    done = run_firebet("held", "apply", "1", "--socket", str(t.socket))
    assert done.returncode == 0, done.stderr
    assert "applied" in done.stdout and t.status()["rolls"] == 2
    assert run_firebet("held", "apply", "--socket", str(t.socket)).returncode == 2
    # again, decided with the button (the oldest held roll)
    _fault_and_key(t, 6, 6)
    t.device.speak()
    wait_for(lambda: t.status()["held_rolls"], what="the second held roll")
    pin = t.pin(t.controller.config.buttons.discard_held)
    pin.drive_low()
    wait_for(lambda: not t.status()["held_rolls"], what="the button's discard")
    pin.drive_high()
    assert t.status()["rolls"] == 3
    ((actor, _),) = events_of(t, "held_discarded")
    assert actor == "button"


@pytest.mark.parametrize("how", ["paused", "halted"])
def test_a_repeated_refused_roll_is_logged_once_and_counted(
    running_table: RunningTable, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    t = running_table
    if how == "paused":
        assert t.ask("diagnostics-on")["ok"]
    else:
        t.controller.queue.put(Halt(None, "a test halt"))
        wait_for(lambda: t.status()["mode"] == "halted")
    with caplog.at_level(logging.INFO, logger="firebet.service"):
        seq = t.throw(4, 5, acked=False)
        wait_for(lambda: t.device.transmissions[seq] >= 12, what="the reader's repeats")
        wait_for(lambda: t.controller.table.refusals.total >= 12, what="the refusals")
        lines = [
            r.getMessage()
            for r in caplog.records
            if r.name == "firebet.service" and "roll" in r.getMessage()
        ]
        assert len(lines) == 1, lines
        assert seq not in t.device.acked
        if how == "paused":
            assert t.ask("diagnostics-off")["ok"]
            assert t.device.wait_acked(seq, timeout=10)
            wait_for(lambda: any("repeated" in r.getMessage() for r in caplog.records))
            (summary,) = [r.getMessage() for r in caplog.records if "repeated" in r.getMessage()]
            assert int(summary.split("repeated ")[1].split()[0]) >= 11
