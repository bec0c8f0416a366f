"""The rules engine: ``state + command -> events``, folded into the next state.

Pure: no pins, ports, clocks or files. The engine is the table's front desk: it takes a
command, decides its events and folds them. The craps rules of a hand come from the hand
machine (:mod:`controller.core.hand`), read once into a table so a roll costs a dictionary
lookup; the roll rule (different points, ordinals, surveillance alert, settlement, seven-out,
the reader's sequence and held rolls) and its fast paths are :mod:`controller.core.rolls`;
the other fire-bet rules (wagers, surrender, void, confirmation) are
:mod:`controller.core.wagers`.
"""

from __future__ import annotations

from collections.abc import Sequence

from controller.core import wagers
from controller.core.commands import (
    Ack,
    ApplyHeld,
    Bet,
    Cancel,
    Command,
    Confirm,
    Correct,
    DiscardHeld,
    ReaderFault,
    ReaderHello,
    ReaderOk,
    ReaderSync,
    RecordFault,
    Roll,
    RollSource,
    Surrender,
    Void,
)
from controller.core.config import FireBetRules
from controller.core.errors import Refusal
from controller.core.events import (
    Acknowledged,
    Event,
    FaultRecorded,
    HeldRollApplied,
    HeldRollDiscarded,
    ReaderAdvanced,
    ReaderFaultHolds,
    ReaderFaultOver,
    ReaderRestarted,
    Refused,
    RollCorrected,
)
from controller.core.hand import (
    CRAPS,
    HAND_TRANSITIONS,
    NATURALS,
    HandModel,
    RollTable,
    build_hand_machine,
    decision_table,
)
from controller.core.outcome import Outcome
from controller.core.outcome import outcome as _outcome
from controller.core.rolls import LineSweep, Paid, RollPaths, RollRule
from controller.core.state import HeldRoll, TableState, fold_all
from controller.core.table import legacy_sync

__all__ = [
    "CRAPS",
    "HAND_TRANSITIONS",
    "NATURALS",
    "Engine",
    "HandModel",
    "Outcome",
    "RollTable",
    "build_hand_machine",
    "decision_table",
]

# a held reader roll is applied as a roll of its own source, never sent from outside
_HELD_SOURCES = frozenset({RollSource.HELD})
_CORRECTED_SOURCES = frozenset({RollSource.CORRECTED})


class Engine:
    """The fire-bet rules for one table configuration."""

    def __init__(self, rules: FireBetRules | None = None) -> None:
        self.rules = rules if rules is not None else FireBetRules()
        self._rule = RollRule(self.rules)
        self._roll = self._rule.decide
        self._paths = RollPaths(self._rule)
        self._move = self._paths.move
        self._sweep: LineSweep | None = None  # made at a replay's first sweep

    # public API -------------------------------------------------------------
    def apply(self, state: TableState, command: Command) -> Outcome:
        """Decide what ``command`` does to ``state`` and fold it."""
        if type(command) is Roll:
            moved = self._move(state, command.__dict__, True)
            if moved is not None:
                return moved
            events = self._roll(state, command)
        else:
            events = tuple(self.decide(state, command))
        if len(events) == 1 and type(events[0]) is Refused:
            return _outcome((state, events))  # refused: the state as it was
        return _outcome((fold_all(state, events), events))

    def advance(self, state: TableState, command: Command) -> TableState:
        """``apply(state, command).state``, without making the events of a roll that only
        moves the hand (a replay or a check that wants the state alone)."""
        if type(command) is Roll:
            moved = self._move(state, command.__dict__, False)
            if moved is not None:
                return moved[0]
        return self.apply(state, command).state

    def advance_moves(
        self, state: TableState, commands: Sequence[Command], start: int = 0
    ) -> tuple[TableState, int]:
        """The state after ``commands[start:end]`` and ``end``: the longest run of rolls
        from ``start`` that only move the hand or light a marker, ended by a seven-out when
        one comes, folded at once (:meth:`RollPaths.advance_moves`); the same state as
        applying them one by one."""
        return self._paths.advance_moves(state, commands, start)

    def sweep(
        self, state: TableState, lines: Sequence[bytes], start: int = 0, *, one_hand: bool = False
    ) -> tuple[TableState, int, Paid]:
        """The state after ``lines[start:end]`` of a script read as bytes, ``end``, and the
        settlements made on the way with their lines' indexes: the longest run of plain
        script rolls from ``start``, across hands (:class:`LineSweep`; ``one_hand``: to the
        first seven-out at most); the same state and settlements as applying the rolls one
        by one."""
        if self._sweep is None:
            self._sweep = LineSweep(self._rule)
        return self._sweep.run(state, lines, start, one_hand=one_hand)

    def run(self, commands: Sequence[Command], state: TableState | None = None) -> TableState:
        """Apply many commands in order; the final state."""
        current = state if state is not None else TableState()
        for command in commands:
            current = self.apply(current, command).state
        return current

    def decide(self, state: TableState, command: Command) -> list[Event]:
        """The events ``command`` causes in ``state`` (a :class:`Refused` when it may not)."""
        if isinstance(command, Roll):
            return list(self._roll(state, command))
        if isinstance(command, Bet):
            return wagers.bet(self.rules, state, command)
        if isinstance(command, Cancel):
            return wagers.cancel(self.rules, state, command)
        if isinstance(command, Void):
            return wagers.void(state, command)
        if isinstance(command, Correct):
            return self._correct(state, command)
        if isinstance(command, Surrender):
            return wagers.surrender(self.rules, state, command)
        if isinstance(command, ApplyHeld | DiscardHeld):
            return self._resolve_held(state, command)
        if isinstance(command, Ack):
            if not state.surveillance_alert:
                return [
                    Refused(
                        "ack", "there is no surveillance alert to acknowledge", Refusal.NO_ALERT
                    )
                ]
            return [Acknowledged(actor=command.actor, at=command.at)]
        if isinstance(command, Confirm):
            return wagers.confirm(state, command)
        if isinstance(command, ReaderSync):  # a record from before issue 29, replayed
            seq = command.seq
            did = legacy_sync(seq, state.reader_seq) if isinstance(seq, int) else None
            if did == "restart":
                return [ReaderRestarted(seq)]
            return [ReaderAdvanced(seq)] if did == "advance" else []
        if isinstance(command, ReaderHello):
            return self._hello(state, command)
        if isinstance(command, ReaderFault) and command.reported:
            return [FaultRecorded(command.code), ReaderFaultHolds(command.code)]
        if isinstance(command, RecordFault | ReaderFault):
            return [FaultRecorded(command.code)]
        if isinstance(command, ReaderOk):
            if state.reader_faulted:  # the reader's own FAULT is over: its rolls count again
                return [ReaderFaultOver(at=command.at)]
            return []  # the reader's health is the service's business; the game is unchanged
        return [
            Refused(
                getattr(command, "name", "?"), f"unknown command {command!r}", Refusal.BAD_COMMAND
            )
        ]

    @staticmethod
    def _hello(state: TableState, command: ReaderHello) -> list[Event]:
        """A HELLO: protocols 1 and 2 restart the numbering at once; protocol 3 opens the
        session it names, unless it is the one the table holds (a repeat: nothing changes,
        the service answers its WELCOME again) or one already past (a late or replayed copy:
        refused, nothing changes) (``docs/reader-protocol.md``, "Sessions")."""
        session = command.session
        if not session:
            return [ReaderRestarted(command.seq, command.model, command.firmware)]
        if session == state.reader_session:
            return []
        if any(past == session for past, _ in state.reader_past):
            return [
                Refused(
                    "reader_hello",
                    f"the reader's HELLO of session {session} is a late copy: that session "
                    "is over; nothing changes",
                    Refusal.READER_SESSION,
                )
            ]
        applied = 0  # of the session the HELLO carries a roll over from: its last applied
        if command.carried and command.carried == state.reader_session:
            applied = state.reader_seq or 0
        else:
            applied = next((last for past, last in state.reader_past if past == command.carried), 0)
        return [
            ReaderRestarted(
                command.seq, command.model, command.firmware, session=session, applied=applied
            )
        ]

    def betting_closed_reason(self, state: TableState) -> str:
        """Why betting is closed, in a dealer's words."""
        return wagers.betting_closed_reason(self.rules, state)

    # a misread roll corrected -----------------------------------------------------
    def _correct(self, state: TableState, cmd: Correct) -> list[Event]:
        """The last accepted roll voided and the true dice taken in its place, as one
        action (or, after a void that armed a correction, the true dice of the roll it
        voided); never a roll another roll followed, never a settlement made twice."""
        armed = state.correcting
        undone: list[Event]
        if armed is not None:
            was, number, undone, before = armed, state.rolls + 1, [], state
        elif state.undo is None or state.last_roll is None:
            return [
                Refused(
                    "correct",
                    "nothing to correct: no roll was accepted since the last void, wager or "
                    "surrender (an older roll cannot be changed: call surveillance)",
                    Refusal.NOTHING_TO_VOID,
                )
            ]
        else:
            was, number = state.last_roll, state.rolls
            undone, before = [], state
        if cmd.roll is not None and cmd.roll != number:
            return [
                Refused(
                    "correct",
                    f"roll {cmd.roll!r} is not the last roll (roll {number} is): a roll that "
                    "another roll followed is never changed; call surveillance",
                    Refusal.NOT_THE_LAST_ROLL,
                )
            ]
        now = (cmd.d1, cmd.d2)
        if armed is None:
            if now == was:
                return [
                    Refused(
                        "correct",
                        f"roll {number} was read as {was[0]} {was[1]} already: nothing to correct",
                        Refusal.NOTHING_TO_VOID,
                    )
                ]
            undone = wagers.void(state, Void(actor=cmd.actor, at=cmd.at))
            before = fold_all(state, undone)
        roll = Roll(cmd.d1, cmd.d2, source=RollSource.CORRECTED, actor=cmd.actor, at=cmd.at)
        rolled = self._roll(before, roll, _CORRECTED_SOURCES)
        if rolled and type(rolled[0]) is Refused:
            refused = rolled[0]
            return [Refused("correct", refused.reason, refused.code)]
        corrected = RollCorrected(was, now, actor=cmd.actor, at=cmd.at)
        return [*undone, corrected, *rolled]

    # reader rolls held after manual entry ---------------------------------------
    def _resolve_held(self, state: TableState, cmd: ApplyHeld | DiscardHeld) -> list[Event]:
        """Apply (as a roll, now) or discard one held reader roll; the dealer decides."""
        verb = "apply" if isinstance(cmd, ApplyHeld) else "discard"
        if not state.held:
            return [
                Refused(
                    cmd.name, f"no reader roll is held: nothing to {verb}", Refusal.NO_HELD_ROLL
                )
            ]
        held: HeldRoll | None = state.held[0]
        if cmd.number is not None:
            held = next((h for h in state.held if h.number == cmd.number), None)
        if held is None:
            waiting = ", ".join(str(h.number) for h in state.held)
            return [
                Refused(
                    cmd.name, f"no held roll {cmd.number!r} (held: {waiting})", Refusal.NO_HELD_ROLL
                )
            ]
        n, seq, d1, d2 = held.number, held.seq, held.d1, held.d2
        if isinstance(cmd, DiscardHeld):
            return [HeldRollDiscarded(n, seq, d1, d2, actor=cmd.actor, at=cmd.at)]
        roll = Roll(d1, d2, source=RollSource.HELD, actor=cmd.actor, at=cmd.at)
        applied = HeldRollApplied(n, seq, d1, d2, actor=cmd.actor, at=cmd.at)
        return [applied, *self._roll(state, roll, _HELD_SOURCES)]
