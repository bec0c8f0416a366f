"""The pure rules for reader rolls: SEQ_CONFLICT and rolls held after manual entry
(docs/rules.md "Reader fault and manual entry", docs/reader-protocol.md; issue 9 items 6 and 7)."""

from __future__ import annotations

from controller.core.commands import (
    ApplyHeld,
    Command,
    DiscardHeld,
    ReaderHello,
    Roll,
    Void,
)
from controller.core.engine import Engine, Outcome
from controller.core.events import (
    DuplicateRoll,
    HeldRollApplied,
    HeldRollDiscarded,
    Refused,
    RollAccepted,
    RollHeld,
    SeqConflict,
    event_from_dict,
)
from controller.core.state import TableState, fold

ENGINE = Engine()


class Play:
    def __init__(self) -> None:
        self.state = TableState()
        self.events: list[object] = []

    def do(self, command: Command) -> Outcome:
        outcome = ENGINE.apply(self.state, command)
        self.state = outcome.state
        self.events.extend(outcome.events)
        return outcome


def reader(seq: int, d1: int, d2: int) -> Roll:
    return Roll(d1, d2, source="reader", seq=seq, actor="reader")


def manual(d1: int, d2: int) -> Roll:
    return Roll(d1, d2, source="manual", actor="alice")


def test_same_seq_same_dice_is_a_duplicate_other_dice_a_seq_conflict() -> None:
    play = Play()
    play.do(reader(7, 2, 2))
    assert play.do(reader(7, 2, 2)).events == (DuplicateRoll(7),)
    conflict = play.do(reader(7, 5, 6)).events
    assert conflict == (SeqConflict(7, 2, 2, 5, 6),)
    assert play.state.point == 4 and play.state.rolls == 1  # not applied
    assert play.state.reader_conflict == 7
    # the reader is in fault until HELLO: its rolls are refused, even a new seq
    refused = play.do(reader(8, 3, 4)).refused
    assert isinstance(refused, Refused) and "SEQ_CONFLICT" in refused.reason
    assert play.state.rolls == 1
    # manual entry meanwhile is a roll
    assert isinstance(play.do(manual(2, 2)).events[0], RollAccepted)
    play.do(ReaderHello(seq=0, actor="reader"))
    assert play.state.reader_conflict is None


def test_conflict_keeps_both_dice_and_round_trips() -> None:
    event = SeqConflict(7, 2, 2, 5, 6, at="2026-11-30T08:00:00.000+00:00")
    assert event_from_dict(event.to_dict()) == event
    assert {"recorded_d1", "recorded_d2", "d1", "d2"} <= set(event.to_dict())


def test_after_manual_entry_reader_rolls_are_held_then_applied_or_discarded() -> None:
    play = Play()
    play.do(reader(1, 3, 3))  # point 6
    # reader fault: the dealer keys the next throw, 4 4, by hand
    play.do(manual(4, 4))
    assert play.state.hold_reader and play.state.rolls == 2
    # cable back: the reader's pending ROLL for that same throw arrives, and a new one
    held = play.do(reader(2, 4, 4)).events
    assert held == (RollHeld(1, 2, 4, 4),)
    assert play.do(reader(2, 4, 4)).events == (DuplicateRoll(2),)  # a copy: not held twice
    assert play.do(reader(3, 6, 6)).events == (RollHeld(2, 3, 6, 6),)
    assert [h.number for h in play.state.held] == [1, 2] and play.state.rolls == 2
    # the dealer discards the repeat (already keyed) and applies the new throw
    discarded = play.do(DiscardHeld(1, actor="alice")).events
    assert discarded == (HeldRollDiscarded(1, 2, 4, 4, actor="alice"),)
    assert play.state.rolls == 2 and play.state.hold_reader
    applied = play.do(ApplyHeld(2, actor="bob")).events
    assert isinstance(applied[0], HeldRollApplied) and applied[0].actor == "bob"
    assert isinstance(applied[1], RollAccepted) and (applied[1].d1, applied[1].d2) == (6, 6)
    assert applied[1].source == "held" and applied[1].actor == "bob"
    assert play.state.rolls == 3 and play.state.held == ()
    # every held roll dealt with: the reader's rolls count again
    assert not play.state.hold_reader
    assert isinstance(play.do(reader(4, 1, 2)).events[0], RollAccepted)
    assert play.state.rolls == 4
    # folding the journaled events gives the same state
    again = fold(event_from_dict(e.to_dict()) for e in play.events)  # type: ignore[attr-defined]
    assert again == play.state and again.to_dict() == play.state.to_dict()


def test_held_rolls_refusals_and_the_oldest_by_default() -> None:
    play = Play()
    assert "nothing to apply" in (play.do(ApplyHeld()).refused or Refused("", "")).reason
    play.do(manual(3, 4))
    play.do(reader(1, 5, 5))
    play.do(reader(2, 2, 3))
    refusal = play.do(ApplyHeld(9)).refused
    assert isinstance(refusal, Refused) and "held: 1, 2" in refusal.reason
    applied = play.do(ApplyHeld(actor="button")).events  # the oldest
    assert isinstance(applied[0], HeldRollApplied) and applied[0].number == 1


def test_a_void_of_an_applied_held_roll_keeps_later_held_rolls() -> None:
    play = Play()
    play.do(manual(3, 4))
    play.do(reader(1, 5, 5))
    play.do(ApplyHeld(1))
    play.do(reader(2, 6, 5))  # the only held roll was dealt with: this one counts
    assert play.state.hold_reader is False and play.state.rolls == 3
    play = Play()
    play.do(manual(3, 4))
    play.do(reader(1, 5, 5))
    play.do(reader(2, 6, 5))
    play.do(ApplyHeld(1))
    assert [h.number for h in play.state.held] == [2]
    play.do(Void(actor="alice"))
    assert play.state.rolls == 1 and [h.number for h in play.state.held] == [2]
    assert play.state.reader_seq == 2
