"""The reader's sequence as a contract (SPEC section 4, issue 23): a ROLL whose seq is not
newer than the last applied one (modulo 65536) is a stale copy, ACKed and never applied (held
for the dealer when it is not one of the last 64 applied: issue 29), a
``SEQ_CONFLICT`` when its dice differ from those applied at that seq (the last 64 are
remembered); a ROLL while the reader itself reports FAULT is held; HELLO's model and
firmware are kept. Properties over retransmits, duplicates, reorders and wraps: every roll
applied exactly once."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.commands import (
    ApplyHeld,
    Command,
    DiscardHeld,
    ReaderFault,
    ReaderHello,
    ReaderOk,
    ReaderSync,
    Roll,
)
from controller.core.engine import Engine
from controller.core.events import (
    DuplicateRoll,
    ReaderAdvanced,
    ReaderFaultHolds,
    ReaderFaultOver,
    ReaderRestarted,
    RollAccepted,
    RollHeld,
    SeqConflict,
)
from controller.core.state import TableState, fold
from controller.core.table import READER_WINDOW, SEQ_ADVANCE, not_newer

SEQ_SYNC_EVERY = 4096  # how often the driver before issue 29 sent a reader_sync

ENGINE = Engine()


def reader(seq: int, d1: int, d2: int) -> Roll:
    return Roll(d1, d2, source="reader", seq=seq, actor="reader")


def run(commands: list[Command], state: TableState | None = None) -> tuple[TableState, list]:
    state = state if state is not None else TableState()
    events: list = []
    for c in commands:
        out = ENGINE.apply(state, c)
        state = out.state
        events.extend(out.events)
    return state, events


def test_not_newer_counts_modulo_65536() -> None:
    assert not not_newer(5, None)
    assert not_newer(3, 3) and not_newer(2, 3) and not_newer(65535, 0)
    assert not not_newer(4, 3) and not not_newer(0, 65535)
    assert not_newer(3 - 32768 + 65536, 3)  # the 32,768th behind is still behind
    assert not not_newer(3 + 32767, 3)  # the 32,767th ahead is newer


def test_an_older_copy_with_the_same_dice_is_acked_never_applied() -> None:
    # the case: after seq 3 was applied, a copy of seq 2 came again
    state, _ = run([reader(1, 2, 2), reader(2, 3, 3), reader(3, 5, 6)])
    assert state.rolls == 3
    out = ENGINE.apply(state, reader(2, 3, 3))
    assert out.events == (DuplicateRoll(2, stale=True),)
    assert out.state.rolls == 3 and out.state.reader_seq == 3
    # the last one's copy is the plain duplicate
    assert ENGINE.apply(state, reader(3, 5, 6)).events == (DuplicateRoll(3),)


def test_an_older_copy_with_other_dice_is_a_seq_conflict() -> None:
    state, _ = run([reader(10, 2, 2), reader(11, 3, 3), reader(12, 5, 6)])
    out = ENGINE.apply(state, reader(10, 1, 1))
    assert out.events == (SeqConflict(10, 2, 2, 1, 1),)
    assert out.state.rolls == 3 and out.state.reader_conflict == 10


def test_a_seq_going_backwards_beyond_the_window_is_held_for_the_dealer() -> None:
    # issue 29: not newer, yet not a roll the table remembers applying (an idle table whose
    # heartbeats ran past half the ring, a reader restarted unseen): it cannot be proven a
    # copy, so it is held with its reason, never ACKed and silently dropped
    state, _ = run([reader(s, 1, 2) for s in range(100, 100 + READER_WINDOW + 5)])
    rolls = state.rolls
    assert len(state.reader_recent) == READER_WINDOW
    for seq in (100, 0, 50):  # older than the 64 remembered: dice unknown
        out = ENGINE.apply(state, reader(seq, 6, 6))
        (held,) = out.events
        assert isinstance(held, RollHeld) and (held.seq, held.d1, held.d2) == (seq, 6, 6)
        assert f"seq {seq} is not newer than {100 + READER_WINDOW + 4}" in held.reason
        assert out.state.rolls == rolls and out.state.held[0].reason == held.reason
        assert out.state.held[0].to_dict()["reason"] == held.reason  # status shows it
    # the reader's next rolls wait behind it; its repeat (an ACK lost) is a plain copy
    state, events = run([reader(50, 6, 6), reader(50, 6, 6), reader(51, 2, 2)], state)
    assert [type(e) for e in events] == [RollHeld, DuplicateRoll, RollHeld]
    assert events[2].reason == ""  # behind the first: held as after manual entry
    # the dealer applies both: each counts once, and the reader's rolls count again
    state, _ = run([ApplyHeld(1), ApplyHeld(2), reader(52, 3, 4)], state)
    assert state.rolls == rolls + 3 and not state.held and not state.hold_reader
    assert ENGINE.apply(state, reader(50, 6, 6)).events == (DuplicateRoll(50, stale=True),)
    # a HELLO restarts the numbering
    state, _ = run([ReaderHello(seq=0), reader(1, 6, 6)], state)
    assert state.rolls == rolls + 4 and state.reader_recent == ((1, 6, 6),)


def test_an_old_roll_number_of_a_protocol_3_session_is_a_copy() -> None:
    # protocol 3 numbers a session's rolls 1, 2, 3: a number at or below the last is a
    # copy the table can prove, even when older than the window
    state, _ = run([ReaderHello(seq=0, session="A1B2C3D4")])
    state, _ = run([reader(n, 1, 2) for n in range(1, READER_WINDOW + 6)], state)
    out = ENGINE.apply(state, reader(1, 6, 6))
    assert out.events == (DuplicateRoll(1, stale=True),) and not out.state.held


def test_the_wrap_is_newer() -> None:
    state, _ = run([reader(65534, 1, 2), reader(65535, 2, 2), reader(0, 3, 3)])
    assert state.rolls == 3 and state.reader_seq == 0
    out = ENGINE.apply(state, reader(65535, 2, 2))  # a copy from before the wrap
    assert out.events == (DuplicateRoll(65535, stale=True),)


def test_old_reader_sync_records_of_an_idle_table_replay_as_written() -> None:
    # no driver sends reader_sync since issue 29; the records of the guess that moved the
    # reference up must still fold to the states their journals hold
    state, _ = run([reader(100, 2, 2), reader(101, 3, 3)])  # point 4, then a 6
    # heartbeats ran on: the driver tells where the numbering stands every 4,096 seqs
    near = ENGINE.apply(state, ReaderSync(seq=101 + SEQ_SYNC_EVERY))
    assert near.events == () and near.state == state  # not far yet: nothing to keep
    far = 101 + 2 * SEQ_SYNC_EVERY
    assert far - 101 >= SEQ_ADVANCE
    moved = ENGINE.apply(state, ReaderSync(seq=far))
    assert moved.events == (ReaderAdvanced(far),)
    assert moved.state.reader_seq == far and moved.state.reader_recent == state.reader_recent
    # ... and on past half the ring from the last roll: without the reference moved up,
    # the next roll (seq 101 + 40,000) would be "not newer" than 101: a stale copy
    late = (101 + 40_000) % 65536
    assert not_newer(late, 101)
    state, _ = run([ReaderSync(seq=(far + k * SEQ_SYNC_EVERY) % 65536) for k in range(1, 8)],
                   moved.state)  # fmt: skip
    out = ENGINE.apply(state, reader(late, 4, 4))
    assert out.state.rolls == 3 and out.state.reader_seq == late  # counted
    assert ENGINE.apply(out.state, reader(late, 4, 4)).events == (DuplicateRoll(late),)
    assert json.loads(json.dumps(moved.events[0].to_dict())) == {
        "event": "reader_advanced", "seq": far
    }  # fmt: skip


def test_a_roll_in_the_readers_own_fault_is_held_and_counts_once() -> None:
    state, events = run([reader(1, 2, 2), ReaderFault(code="JAM", reported=True)])
    assert ReaderFaultHolds("JAM") in events and state.reader_faulted
    held = ENGINE.apply(state, reader(2, 5, 6))  # a throw the faulted reader reported
    assert isinstance(held.events[0], RollHeld) and held.state.rolls == 1
    # the dealer keys the same throw by hand; the held copy is then discarded
    state, _ = run([Roll(5, 6, source="manual", actor="alice")], held.state)
    assert state.rolls == 2
    state, events = run([ReaderOk(), reader(3, 1, 1)], state)
    assert any(isinstance(e, ReaderFaultOver) for e in events)
    # held like after manual entry: the reader's next rolls wait until the dealer decided
    assert any(isinstance(e, RollHeld) for e in events) and state.rolls == 2
    state, _ = run([DiscardHeld(1), ApplyHeld(2)], state)
    assert state.rolls == 3 and not state.held and not state.hold_reader
    # a copy of the held-then-discarded seq never counts
    assert ENGINE.apply(state, reader(2, 5, 6)).events == (DuplicateRoll(2, stale=True),)
    state, _ = run([reader(4, 3, 3)], state)
    assert state.rolls == 4


def test_a_fault_the_driver_found_holds_nothing() -> None:
    state, events = run([ReaderFault(code="HEARTBEAT"), ReaderOk(), reader(1, 2, 2)])
    assert not any(isinstance(e, ReaderFaultHolds | ReaderFaultOver) for e in events)
    assert state.rolls == 1


def test_hello_keeps_model_and_firmware_in_the_state_and_its_snapshot() -> None:
    state, _ = run([ReaderHello(seq=0, model="DR-7", firmware="2.1.0")])
    assert (state.reader_model, state.reader_firmware) == ("DR-7", "2.1.0")
    again = TableState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert (again.reader_model, again.reader_firmware) == ("DR-7", "2.1.0")
    assert "reader_model" not in TableState().to_dict()  # older snapshots read as before


# -- properties -------------------------------------------------------------------------


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[list[tuple[int, int, int]], list[Roll]]:
    """A reader's throws (seq, d1, d2), seq +1..+5 a throw (heartbeats between), from a
    start near the wrap or not; and what reached the controller: each throw's first copy
    in order (the reader holds one pending roll), with copies of earlier throws (a lost
    ACK, a reordering bridge) anywhere after their original."""
    start = draw(st.one_of(st.integers(0, 65535), st.integers(65400, 65535)))
    count = draw(st.integers(1, 90))
    throws, seq = [], start
    for _ in range(count):
        throws.append((seq, draw(st.integers(1, 6)), draw(st.integers(1, 6))))
        seq = (seq + draw(st.integers(1, 5))) % 65536
    sent: list[Roll] = []
    for i, throw in enumerate(throws):
        sent.append(reader(*throw))
        for _ in range(draw(st.integers(0, 2))):  # late copies of this or an earlier throw
            back = draw(st.integers(0, min(i, READER_WINDOW - 1)))  # (within the window)
            sent.append(reader(*throws[i - back]))
    return throws, sent


@settings(max_examples=200, deadline=None)
@given(deliveries())
def test_property_every_roll_applied_exactly_once(
    case: tuple[list[tuple[int, int, int]], list[Roll]],
) -> None:
    throws, sent = case
    state, events = run(sent)
    applied = [(e.seq, e.d1, e.d2) for e in events if isinstance(e, RollAccepted)]
    assert applied == throws
    assert not any(isinstance(e, SeqConflict) for e in events)
    assert state.reader_recent == tuple(throws[-READER_WINDOW:])


@settings(max_examples=200, deadline=None)
@given(deliveries(), st.data())
def test_property_a_copy_with_other_dice_is_never_applied(
    case: tuple[list[tuple[int, int, int]], list[Roll]], data: st.DataObject
) -> None:
    throws, sent = case
    state, _ = run(sent)
    back = data.draw(st.integers(0, min(len(throws), READER_WINDOW) - 1))
    seq, d1, d2 = throws[-1 - back]
    other = (d1 % 6 + 1, d2)
    out = ENGINE.apply(state, reader(seq, *other))
    assert out.events == (SeqConflict(seq, d1, d2, *other),)
    assert out.state.rolls == state.rolls


@settings(max_examples=150, deadline=None)
@given(deliveries())
def test_property_the_folded_run_and_the_events_keep_the_same_window(
    case: tuple[list[tuple[int, int, int]], list[Roll]],
) -> None:
    _, sent = case
    one_by_one, events = run(sent)
    assert fold(events).reader_recent == one_by_one.reader_recent
    state, start = TableState(), 0
    while start < len(sent):  # the journal check's fast path over the same commands
        got, end = ENGINE.advance_moves(state, sent, start)
        if end == start:
            got, end = ENGINE.apply(state, sent[start]).state, start + 1
        state, start = got, end
    assert state.to_dict() == one_by_one.to_dict()
    assert state.reader_recent == one_by_one.reader_recent
    assert state.undo is not None and one_by_one.undo is not None
    assert state.undo.reader_recent == one_by_one.undo.reader_recent


def test_old_reader_sync_records_of_a_restart_replay_as_written() -> None:
    state, _ = run([reader(s, 2, 3) for s in range(40, 44)])
    # the first frame after the port opened again is behind the last roll: a lost HELLO
    out = ENGINE.apply(state, ReaderSync(seq=2))
    assert out.events == (ReaderRestarted(2),)
    state, _ = run([reader(3, 1, 1)], out.state)
    assert state.rolls == 5
    # the last roll's own copy (its ACK was lost in a crash) or a newer frame: in step
    assert ENGINE.apply(state, ReaderSync(seq=3)).events == ()
    assert ENGINE.apply(state, ReaderSync(seq=9)).events == ()
    assert ENGINE.apply(TableState(), ReaderSync(seq=9)).events == ()
