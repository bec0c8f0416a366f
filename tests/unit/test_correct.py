"""A misread roll corrected (``Correct``): the last roll voided and the true dice taken,
as one action; never a roll another roll followed, never a settlement made twice; the
void button arms a correction the dealer completes (docs/runbook.md, "Misread roll")."""

from __future__ import annotations

from pathlib import Path

from controller.core.commands import (
    ApplyHeld,
    Bet,
    Cancel,
    Correct,
    Roll,
    RollSource,
    Surrender,
    Void,
)
from controller.core.engine import Engine
from controller.core.errors import Refusal
from controller.core.events import Refused, RollAccepted, RollCorrected, RollVoided, Settlement
from controller.core.state import TableState
from controller.journal import Journal, recover
from controller.journal.play import decide

ENGINE = Engine()


def point_four() -> TableState:
    """$5 on position 1, the point 4 established, then a roll read as 5 3 (roll 2)."""
    return ENGINE.run([Bet(1, 5), Roll(2, 2, seq=1), Roll(5, 3, seq=2)])


def refusal(state: TableState, command: object) -> str | None:
    refused = ENGINE.apply(state, command).refused  # type: ignore[arg-type]
    return str(refused.code) if isinstance(refused, Refused) else None


def test_a_correction_is_the_void_and_the_true_dice_in_one_action() -> None:
    misread = point_four()
    done = ENGINE.apply(misread, Correct(4, 3, roll=2, actor="dana"))
    kinds = [type(e).__name__ for e in done.events]
    assert kinds[:3] == ["RollVoided", "RollCorrected", "RollAccepted"]
    corrected = next(e for e in done.events if isinstance(e, RollCorrected))
    assert (corrected.was, corrected.now, corrected.actor) == ((5, 3), (4, 3), "dana")
    accepted = next(e for e in done.events if isinstance(e, RollAccepted))
    assert accepted.source == RollSource.CORRECTED and accepted.seq is None
    # the same as a void and the true roll, but one action, metered as both
    by_hand = ENGINE.run([Void(), Roll(4, 3, source="manual")], misread)
    assert done.state == by_hand and done.state.rolls == 2 and done.state.last_roll == (4, 3)
    m = done.state.meters
    assert (m.voids, m.corrections, m.lost.count, done.state.hand) == (1, 1, 1, 2)
    assert done.state.reader_seq == 2  # the reader's numbering is not wound back
    assert not done.state.hold_reader  # the reader works: its next roll counts at once


def test_a_roll_another_roll_followed_is_never_corrected() -> None:
    misread = point_four()
    later = ENGINE.apply(misread, Roll(6, 6, seq=3)).state  # the shooter threw again
    assert refusal(later, Correct(4, 3, roll=2)) == Refusal.NOT_THE_LAST_ROLL
    after_a_bet = ENGINE.run([Roll(2, 2), Roll(3, 4), Bet(2, 5)])  # a wager after the roll
    assert refusal(after_a_bet, Correct(2, 2)) == Refusal.NOTHING_TO_VOID
    assert refusal(TableState(), Correct(2, 2)) == Refusal.NOTHING_TO_VOID
    assert refusal(misread, Correct(5, 3)) == Refusal.NOTHING_TO_VOID  # read right
    assert refusal(misread, Correct(7, 3)) == Refusal.BAD_DICE
    assert refusal(misread, Correct(4, 3, roll=2)) is None


def test_a_seven_out_corrected_settles_the_hand_once() -> None:
    """A misread seven-out (lost, new hand) corrected to the point: the settlement is
    reversed and nothing settles; corrected back to the seven-out: settled once again,
    never twice."""
    sevened = ENGINE.run([Bet(1, 5), Roll(2, 2), Roll(4, 4), Roll(4, 4), Roll(3, 4)])
    assert sevened.hand == 2 and sevened.meters.lost.count == 1
    made = ENGINE.apply(sevened, Correct(2, 2))
    assert not any(isinstance(e, Settlement) for e in made.events)
    assert made.state.hand == 1 and made.state.bets == {1: 5} and made.state.points == (4,)
    assert made.state.meters.lost.count == 0 and made.state.meters.reversed.count == 1
    back = ENGINE.apply(made.state, Correct(3, 4))
    settled = [e for e in back.events if isinstance(e, Settlement)]
    assert len(settled) == 1 and back.state.hand == 2
    assert back.state.meters.lost.count == 1 and back.state.meters.corrections == 2
    assert refusal(back.state, Correct(3, 4)) == Refusal.NOTHING_TO_VOID  # as it lies


def test_the_void_button_arms_a_correction_the_dealer_completes() -> None:
    misread = point_four()
    armed = ENGINE.apply(misread, Void(arm=True, actor="button"))
    assert [type(e).__name__ for e in armed.events] == ["RollVoided", "CorrectionArmed"]
    waiting = armed.state
    assert waiting.correcting == (5, 3) and waiting.rolls == 1 and waiting.hold_reader
    # meanwhile: the reader's roll is held; wagers, surrenders and manual rolls wait
    held = ENGINE.apply(waiting, Roll(6, 6, seq=3)).state
    assert [h.d1 for h in held.held] == [6]
    for command in (Bet(2, 5), Cancel(1), Surrender(), Roll(4, 3, source="manual")):
        assert refusal(held, command) == Refusal.CORRECTION_PENDING, command
    assert refusal(held, Void()) == Refusal.NOTHING_TO_VOID
    assert refusal(held, Correct(4, 3, roll=1)) == Refusal.NOT_THE_LAST_ROLL
    done = ENGINE.apply(held, Correct(4, 3, roll=2, actor="dana"))
    assert [type(e).__name__ for e in done.events][:2] == ["RollCorrected", "RollAccepted"]
    after = done.state
    assert after.correcting is None and after.last_roll == (4, 3) and after.rolls == 2
    assert after.meters.voids == 1 and after.meters.corrections == 1
    assert after.hold_reader and len(after.held) == 1  # the throw meanwhile: the dealer's
    # not a misread after all: the throw again counts, and nothing waits any more
    rethrown = ENGINE.apply(waiting, Roll(6, 6, seq=3)).state
    applied = ENGINE.apply(rethrown, ApplyHeld(None)).state
    assert applied.correcting is None and applied.last_roll == (6, 6)
    assert refusal(applied, Bet(2, 5)) in (None, Refusal.BETTING_CLOSED)


def test_a_correction_in_the_journal_replays_to_the_same_table(tmp_path: Path) -> None:
    """Journaled as one ``correct`` record with who; recovery gives the live state."""
    with Journal(tmp_path / "journal.db", durable=False, snapshot_every=3) as journal:
        replayed = recover(journal, ENGINE.rules).replay
        for command in (Bet(1, 5), Roll(2, 2, seq=1), Roll(5, 3, seq=2)):
            decide(journal, replayed, command)
        done = decide(journal, replayed, Correct(4, 3, roll=2, actor="dana(1001)"))
        assert done.record is not None and done.record.actor == "dana(1001)"
        assert done.record.data()["command"] == "correct"
        decide(journal, replayed, Void(arm=True, actor="button"))
        decide(journal, replayed, Roll(6, 6, seq=3))
        decide(journal, replayed, Correct(5, 5, actor="dana(1001)"))
        live = replayed.state
    with Journal(tmp_path / "journal.db", read_only=True) as journal:
        again = recover(journal, ENGINE.rules).state
    assert again == live and again.meters == live.meters and again.held == live.held
    assert again.meters.corrections == 2 and again.meters.voids == 2
    assert any(isinstance(e, RollVoided) for e in done.outcome.events)
