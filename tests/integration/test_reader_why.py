"""Issue 29's "Why", one test a case, through the real driver and the real service on a
pseudo-terminal: the session is known, never guessed. Each of these failed on the code
before issue 29 (the ``reader_sync`` / ``reader_advanced`` guesses, no HELLO answer, no
way out of ``SEQ_CONFLICT``) and passes now."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from gpiozero.pins.mock import MockFactory, MockPWMPin

from controller.cli.run import assemble
from drivers import codec
from drivers.serial_reader import SerialDiceReader
from drivers.sim_reader import SimulatedReader
from tests.integration.test_reader_rolls_service import events_of
from tests.support import (
    PROCESS_DEADLINE_S,
    RunningTable,
    table_config,
    table_running,
    wait_for,
)


def settled(t: RunningTable) -> None:
    """Every frame sent so far is read and every command it made is decided: one more
    throw, ACKed (the line and the queue keep their order), so one roll more."""
    t.throw(1, 2)
    wait_for(t.controller.queue.empty, what="the queue drained")


def test_a_late_heartbeat_then_the_rolls_repeat_applies_it_once(tmp_path: Path) -> None:
    # before: a heartbeat one seq behind was taken for a reader restart, and the reader's
    # repeat of its last roll was applied again (1 throw, 2 rolls)
    with table_running(tmp_path / "s", tmp_path / "c.sock", protocol=2) as t:
        seq = t.throw(2, 2)
        t.device.send_raw(codec.encode_hb(seq - 1))  # a heartbeat delivered late
        t.device.roll_frame(seq, 2, 2)  # the reader's repeat (its ACK was lost)
        settled(t)
        s = t.status()
        assert s["rolls"] == 2 and s["reader"]["copies"]["repeated"] >= 1
        assert not events_of(t, "reader_restarted")


def test_a_heartbeat_far_ahead_drops_no_roll(tmp_path: Path) -> None:
    # before: one heartbeat 10,000 seqs ahead moved the reference up; the next genuine
    # rolls were ACKed and never applied for hours while the table showed running
    with table_running(tmp_path / "s", tmp_path / "c.sock", protocol=2) as t:
        seq = t.throw(2, 2)
        t.device.send_raw(codec.encode_hb((seq + 10_000) % 65536))
        for dice in ((3, 3), (4, 4), (5, 6)):
            t.throw(*dice)
        s = t.status()
        assert s["rolls"] == 4 and s["reader"]["copies"]["stale"] == 0
        assert not events_of(t, "reader_advanced")


def test_protocol_1_noise_that_passes_the_xor_drops_no_roll(tmp_path: Path) -> None:
    # a two-bit burst turns HB,1001 into HB,9009 with the same XOR (1^9 twice cancels)
    genuine = codec.encode_hb(1001, protocol=1)
    noise = genuine.replace(b"1001", b"9009")
    assert codec.parse_line(noise, 1).ok  # the check cannot tell
    with table_running(tmp_path / "s", tmp_path / "c.sock", protocol=1) as t:
        t.throw(2, 2)
        t.device.send_raw(noise)
        for dice in ((3, 3), (4, 4), (5, 6)):  # before: 3 of 3 genuine rolls dropped
            t.throw(*dice)
        assert t.status()["rolls"] == 4


@pytest.mark.parametrize("back", [500, 5000])
def test_a_bridge_replaying_its_buffer_applies_nothing_twice(tmp_path: Path, back: int) -> None:
    # heartbeats around an already-applied ROLL, replayed ``back`` seqs later
    with table_running(tmp_path / "s", tmp_path / "c.sock", protocol=2) as t:
        seq = t.throw(2, 2)
        t.throw(3, 3)
        for _ in range(back):
            t.device.heartbeat()
        t.throw(5, 6)  # (the line drained of the heartbeats: a pty drops past its buffer)
        replay = codec.encode_hb(seq - 1) + codec.encode_roll(seq, 2, 2) + codec.encode_hb(seq + 1)
        t.device.send_raw(replay)
        settled(t)
        s = t.status()
        assert s["rolls"] == 4 and s["mode"] == "running"
        assert s["reader"]["copies"]["stale"] == 1  # counted, never applied
        assert not events_of(t, "reader_restarted")


@contextmanager
def service_on(state: Path, sock: Path, device: SimulatedReader) -> Iterator[RunningTable]:
    """The service on ``device`` (already started), stopped and released afterwards."""
    config = table_config()
    config = replace(config, reader=replace(config.reader, protocol=device.protocol))
    reader = SerialDiceReader(
        device.port, 9600, heartbeat_timeout_s=2.0, backoff_max_s=0.2, protocol=device.protocol
    )
    factory = MockFactory(pin_class=MockPWMPin)
    service = assemble(config, state, reader=reader, pin_factory=factory, socket_path=sock)

    def engine() -> None:
        service.start()
        service.serve()

    thread = threading.Thread(target=engine, daemon=True)
    thread.start()
    try:
        wait_for(service.ready.is_set)
        wait_for(lambda: reader.status().connected, what="the reader's port to open")
        yield RunningTable(service, device, factory, sock)
    finally:
        service.stop()
        thread.join(timeout=PROCESS_DEADLINE_S)
        service.close()
        factory.close()


def test_a_late_copy_as_the_first_frame_after_a_restart_applies_nothing_twice(
    tmp_path: Path,
) -> None:
    # before: the first frame read after the service started again, a late copy of an
    # older roll, was taken for a reader restart: 3 throws became 5 rolls
    state, sock = tmp_path / "s", tmp_path / "c.sock"
    device = SimulatedReader(heartbeat_s=None, retransmit_s=0.1).start()
    try:
        with service_on(state, sock, device) as t:
            first = t.throw(2, 2)
            t.throw(3, 3)
            t.throw(4, 4)
        with service_on(state, sock, device) as t:
            t.device.roll_frame(first, 2, 2)  # the late copy, the first frame read
            t.device.roll_frame(first + 1, 3, 3)  # and the late copies after it
            t.device.roll_frame(first + 2, 4, 4)
            settled(t)
            s = t.status()
            assert s["rolls"] == 4 and s["mode"] == "running"
            assert not events_of(t, "reader_restarted")[1:]  # only the device's first HELLO
    finally:
        device.stop()


def test_a_corrupted_hello_is_repeated_until_welcomed(tmp_path: Path) -> None:
    # before: nothing acknowledged a HELLO; one corrupted by line noise was never seen, and
    # the next 5 throws were ACKed and silently never applied
    with table_running(tmp_path / "s", tmp_path / "c.sock", protocol=3) as t:
        for dice in ((2, 2), (3, 3), (4, 4)):
            t.throw(*dice)
        write = t.device._link.write
        corrupted: list[bytes] = []

        def noisy(data: bytes) -> bool:  # the line flips a bit of the first HELLO
            if data.startswith(b"$HELLO") and not corrupted:
                corrupted.append(data)
                data = data.replace(b"SIM", b"SIO", 1)
            return write(data)

        t.device._link.write = noisy  # type: ignore[method-assign]
        t.device.replug(power_cycle=True)  # the reader restarts: a new session
        wait_for(lambda: t.device.welcomed, what="the repeated HELLO WELCOMEd")
        assert corrupted and t.status()["reader"]["counters"]["bad_checksum"] >= 1
        for dice in ((5, 5), (6, 6), (1, 2), (2, 3), (3, 4)):
            t.throw(*dice)
        s = t.status()
        assert s["rolls"] == 8 and s["mode"] == "running"
        assert s["reader"]["session"] == t.device.session == t.device.sessions[-1]


def test_a_seq_collision_leaves_seq_conflict_by_itself(tmp_path: Path) -> None:
    # before: a reader whose new seq collided with one in the window locked the table in
    # SEQ_CONFLICT with no way back but a technician
    with table_running(tmp_path / "s", tmp_path / "c.sock", protocol=3) as t:
        first = t.throw(2, 2)
        t.throw(3, 3)
        old = t.device.session
        t.device.roll_frame(first, 6, 5)  # the reader numbers a throw as one applied
        wait_for(lambda: t.device.session != old and t.device.welcomed, what="a new session")
        assert ((first, "CONFLICT")) in t.device.naks
        assert len(events_of(t, "seq_conflict")) == 1  # journaled, with both dice
        wait_for(lambda: t.status()["mode"] == "running", what="the fault to end")
        t.throw(4, 4)
        s = t.status()
        assert s["rolls"] == 3 and s["reader"]["fault"] is None


def test_a_replayed_hello_of_a_past_session_changes_nothing(tmp_path: Path) -> None:
    with table_running(tmp_path / "s", tmp_path / "c.sock", protocol=3) as t:
        hello = next(f for f in t.device.sent if f.startswith(b"$HELLO"))
        t.throw(2, 2)
        t.device.replug(power_cycle=True)  # a second session
        wait_for(lambda: t.device.welcomed, what="the second session")
        t.throw(3, 3)
        t.device.send_raw(hello)  # a bridge replays the first session's HELLO
        first = t.device.sessions[0]
        t.device.send_raw(codec.encode_roll(1, 6, 6, 3, first))  # and roll 1 of it, other dice
        settled(t)
        s = t.status()
        assert s["rolls"] == 3 and s["reader"]["session"] == t.device.session
        assert len(events_of(t, "reader_restarted")) == 2 and not events_of(t, "seq_conflict")
        assert t.device.sessions == [first, t.device.session]  # (not its session: ignored)


def test_a_roll_unacked_at_a_restart_is_applied_once(tmp_path: Path) -> None:
    # protocol 3: the roll the reader carries over is sent again only when the WELCOME
    # says the table did not apply it
    with table_running(tmp_path / "s", tmp_path / "c.sock", protocol=3) as t:
        t.throw(2, 2)
        acked = t.device._on_ack
        t.device._on_ack = lambda seq: None  # type: ignore[method-assign]  # ACKs lost
        before = len(t.device.rolls_sent)
        t.device.throw(3, 3)
        wait_for(lambda: t.status()["rolls"] == 2, what="the roll applied, its ACK lost")
        t.device._on_ack = acked  # type: ignore[method-assign]
        assert len(t.device.rolls_sent) == before + 1
        t.device.replug(power_cycle=True)
        wait_for(lambda: t.device.welcomed and t.device.rolls_waiting == 0, what="the WELCOME")
        assert t.device.dropped_carried == [(t.device.sessions[0], 2)]
        t.throw(4, 4)
        assert t.status()["rolls"] == 3


# -- protocols 1 and 2: a roll the table cannot prove a copy is held, never dropped ------


def good_frames(t: RunningTable) -> int:
    """Good frames the driver has read so far."""
    return int(t.status()["reader"]["counters"]["ok"])


def walk(t: RunningTable, frames: int, batch: int = 200) -> None:
    """``frames`` heartbeats from the reader, sent fast: a batch at a time, each read by the
    driver before the next (a pty drops what nobody reads past its buffer)."""
    left = frames
    while left:
        n = min(batch, left)
        before = good_frames(t)
        for _ in range(n):
            t.device.heartbeat()
        wait_for(lambda b=before, k=n: good_frames(t) >= b + k, what=f"{n} heartbeats read")
        left -= n


def held_reason(t: RunningTable) -> str:
    """The reason of the one held roll, once it shows in status."""
    wait_for(lambda: t.status()["held_rolls"], what="the held roll")
    ((held,),) = (t.status()["held_rolls"],)
    return str(held.get("reason", ""))


def test_an_idle_table_holds_the_next_roll_for_the_dealer(tmp_path: Path) -> None:
    # before: heartbeats walked the seq past half the ring from the last roll (about 9 h
    # idle); the next genuine roll was "not newer", ACKed and silently not applied while
    # the table showed running
    with table_running(tmp_path / "s", tmp_path / "c.sock", protocol=2) as t:
        last = t.throw(2, 2)  # point 4
        walk(t, codec.MAX_SEQ // 2 + 100)
        seq = t.throw(3, 3)  # ACKed: recorded, held
        assert (seq - last) % 65536 >= 32768  # "not newer" than the last roll
        reason = held_reason(t)
        assert f"seq {seq} is not newer than {last}" in reason and "cannot be proven" in reason
        s = t.status()
        assert s["rolls"] == 1 and s["holding_reader_rolls"]
        assert [(h["seq"], h["dice"]) for h in s["held_rolls"]] == [(seq, [3, 3])]
        assert t.ask("held-apply", number=1)["ok"]  # the dealer counts it
        t.device.roll_frame(seq, 3, 3)  # the reader's repeat of it (an ACK lost)
        after = t.throw(4, 4)  # and the reader's rolls count by themselves again
        s = t.status()
        assert s["rolls"] == 3 and not s["held_rolls"] and s["mode"] == "running"
        applied = [(e["source"], e["seq"], e["d1"], e["d2"]) for _, e in events_of(t, "roll")]
        assert applied == [  # once each (a held roll counts as the dealer's, "held")
            ("reader", last, 2, 2), ("held", None, 3, 3), ("reader", after, 4, 4)
        ]  # fmt: skip
        ((_, done),) = events_of(t, "held_applied")
        assert done["seq"] == seq and done["actor"]  # who applied it, journaled


def test_a_reader_restarted_while_the_service_was_down_is_held_not_dropped(
    tmp_path: Path,
) -> None:
    # protocol 2: the reader restarted (numbering from 1 again) while the service was
    # stopped, so its HELLO was never read; its rolls look older than the last one applied
    state, sock = tmp_path / "s", tmp_path / "c.sock"
    device = SimulatedReader(heartbeat_s=None, retransmit_s=0.1, protocol=2).start()
    try:
        with service_on(state, sock, device) as t:
            walk(t, 400)  # a reader that has run a while: its seqs are past 400
            last = t.throw(2, 2)
            t.throw(3, 3)
        device.unplug()
        device.hello()  # it restarts with the service down: the HELLO is lost
        device.replug()
        with service_on(state, sock, device) as t:
            first = t.throw(5, 6)  # ACKed (journaled as held), never silently dropped
            assert first < last and t.status()["rolls"] == 2
            assert "cannot be proven" in held_reason(t)
            t.throw(4, 4)  # the next one waits behind it
            s = t.status()
            assert [h["dice"] for h in s["held_rolls"]] == [[5, 6], [4, 4]]
            assert s["rolls"] == 2 and s["reader"]["copies"]["stale"] == 0
            for number in (1, 2):
                assert t.ask("held-apply", number=number)["ok"]
            t.throw(1, 1)
            s = t.status()
            assert s["rolls"] == 5 and not s["held_rolls"] and s["mode"] == "running"
    finally:
        device.stop()


def test_a_late_copy_within_the_window_is_acked_not_applied_not_held(tmp_path: Path) -> None:
    with table_running(tmp_path / "s", tmp_path / "c.sock", protocol=2) as t:
        first = t.throw(2, 2)
        for dice in ((3, 3), (5, 6)):
            t.throw(*dice)
        walk(t, 300)  # heartbeats between: the copy is far back, still among the 64 rolls
        acks = t.device.acked.count(first)
        t.device.roll_frame(first, 2, 2)
        wait_for(lambda: t.device.acked.count(first) > acks, what="the copy's ACK")
        s = t.status()
        assert s["rolls"] == 3 and not s["held_rolls"] and s["mode"] == "running"
        assert s["reader"]["copies"]["stale"] == 1
