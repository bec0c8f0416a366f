"""The rules engine: ``state + command -> events``, folded into the next state.

Pure: no pins, ports, clocks or files. The engine is the table's front desk: it takes a
command, decides its events and folds them. The craps rules of a hand come from the hand
machine (:mod:`controller.core.hand`), read once into a table so a roll costs a dictionary
lookup; the full decision of a roll (different points, ordinals, surveillance alert,
settlement, seven-out, the reader's sequence and held rolls) is here; the other fire-bet
rules (wagers, surrender, void, confirmation) are :mod:`controller.core.wagers`; the fast
paths for rolls that only move the hand are :mod:`controller.core.moves`.
"""

from __future__ import annotations

from collections.abc import Sequence

from controller.core import wagers
from controller.core.commands import (
    ROLL_SOURCES,
    Ack,
    ApplyHeld,
    Bet,
    Cancel,
    Command,
    Confirm,
    DiscardHeld,
    ReaderFault,
    ReaderHello,
    ReaderOk,
    RecordFault,
    Roll,
    Surrender,
    Void,
)
from controller.core.config import FireBetRules
from controller.core.events import (
    Acknowledged,
    BettingClosed,
    DuplicateRoll,
    Event,
    FaultRecorded,
    HeldRollApplied,
    HeldRollDiscarded,
    NewDifferentPoint,
    NewHand,
    ReaderRestarted,
    Refused,
    RollAccepted,
    RollHeld,
    SeqConflict,
    SurveillanceAlert,
)
from controller.core.hand import (
    CRAPS,
    HAND_TRANSITIONS,
    NATURALS,
    HandModel,
    RollTable,
    build_hand_machine,
    decision_table,
    dice_table,
)
from controller.core.moves import RollPaths
from controller.core.outcome import Outcome
from controller.core.outcome import outcome as _outcome
from controller.core.state import HeldRoll, TableState, fold_all
from controller.core.sweep import LineSweep, Paid

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
_HELD_SOURCES = frozenset({"held"})
_is_int = wagers.is_int


class Engine:
    """The fire-bet rules for one table configuration."""

    def __init__(self, rules: FireBetRules | None = None) -> None:
        self.rules = rules if rules is not None else FireBetRules()
        self._table = decision_table()
        self._dice = dice_table(self._table)
        self._odds = [self.rules.odds_for(k) for k in range(7)]  # (tier, odds) by count
        self._closing = BettingClosed(
            "the come-out roll was thrown"
            if self.rules.betting_closes == "first_roll"
            else "the first point was established"
        )
        self._paths = RollPaths(self.rules, self._dice, self._closing, self._odds)
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
            self._sweep = LineSweep(self.rules, self._dice, self._odds)
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
        if isinstance(command, Surrender):
            return wagers.surrender(self.rules, state, command)
        if isinstance(command, ApplyHeld | DiscardHeld):
            return self._resolve_held(state, command)
        if isinstance(command, Ack):
            if not state.surveillance_alert:
                return [Refused("ack", "there is no surveillance alert to acknowledge")]
            return [Acknowledged(actor=command.actor, at=command.at)]
        if isinstance(command, Confirm):
            return wagers.confirm(state, command)
        if isinstance(command, ReaderHello):
            return [ReaderRestarted(command.seq)]
        if isinstance(command, RecordFault | ReaderFault):
            return [FaultRecorded(command.code)]
        if isinstance(command, ReaderOk):
            return []  # the reader's health is the service's business; the game is unchanged
        return [Refused(getattr(command, "name", "?"), f"unknown command {command!r}")]

    def betting_closed_reason(self, state: TableState) -> str:
        """Why betting is closed, in a dealer's words."""
        return wagers.betting_closed_reason(self.rules, state)

    # rolls ----------------------------------------------------------------------
    def _roll(
        self, state: TableState, cmd: Roll, sources: frozenset[str] = ROLL_SOURCES
    ) -> tuple[Event, ...]:
        c = cmd.__dict__
        d1, d2, seq = c["d1"], c["d2"], c["seq"]
        whole = type(d1) is int and type(d2) is int
        rule = self._dice.get((state.phase, state.point, d1, d2)) if whole else None
        if rule is None:
            label, die = ("die 1", d1) if not (_is_int(d1) and 1 <= d1 <= 6) else ("die 2", d2)
            return (Refused("roll", f"{label} shows {die!r}: a die shows 1 to 6"),)
        if c["source"] not in sources:
            return (Refused("roll", f"unknown roll source {c['source']!r}"),)
        if c["source"] == "reader" and state.reader_conflict is not None:
            return (
                Refused(
                    "roll",
                    f"the dice reader is in fault (SEQ_CONFLICT at seq {state.reader_conflict}): "
                    "its rolls are refused until it restarts (HELLO); enter rolls by hand",
                ),
            )
        if seq is not None:
            if not _is_int(seq) or not 0 <= seq <= 65535:
                return (Refused("roll", f"reader sequence {seq!r} is not 0..65535"),)
            if seq == state.reader_seq:
                recorded = state.reader_dice
                if recorded is None or recorded == (d1, d2):
                    return (DuplicateRoll(seq),)
                return (SeqConflict(seq, recorded[0], recorded[1], d1, d2, at=c["at"]),)
        if c["source"] == "reader" and state.hold_reader:
            return (RollHeld(state.held_next, seq, d1, d2, at=c["at"]),)
        total, outcome, phase, point = rule
        accepted = RollAccepted(
            d1, d2, total, outcome, phase, point, c["source"], seq, c["actor"], c["at"]
        )
        events: list[Event] = [accepted]
        rules = self.rules
        if state.betting_open and (
            rules.betting_closes == "first_roll"
            or (rules.betting_closes == "first_point" and outcome == "point_established")
        ):
            events.append(self._closing)
        if outcome == "point_made" and state.point not in state.points:
            made_point = state.point
            assert made_point is not None
            points = (*state.points, made_point)
            events.append(NewDifferentPoint(made_point, len(points)))
            if len(points) == rules.surveillance_at and not state.alert_raised:
                events.append(SurveillanceAlert(state.hand, len(points)))
            if len(points) == 6 and rules.pay_six_immediately and not state.settled:
                events.append(wagers.settlement(self._odds, state, points, immediate=True))
        elif outcome == "seven_out":
            if not state.settled:
                events.append(wagers.settlement(self._odds, state, state.points, immediate=False))
            events.append(NewHand(state.hand + 1, state.shooter + 1))
        return tuple(events)

    # reader rolls held after manual entry ---------------------------------------
    def _resolve_held(self, state: TableState, cmd: ApplyHeld | DiscardHeld) -> list[Event]:
        """Apply (as a roll, now) or discard one held reader roll; the dealer decides."""
        verb = "apply" if isinstance(cmd, ApplyHeld) else "discard"
        if not state.held:
            return [Refused(cmd.name, f"no reader roll is held: nothing to {verb}")]
        held: HeldRoll | None = state.held[0]
        if cmd.number is not None:
            held = next((h for h in state.held if h.number == cmd.number), None)
        if held is None:
            waiting = ", ".join(str(h.number) for h in state.held)
            return [Refused(cmd.name, f"no held roll {cmd.number!r} (held: {waiting})")]
        n, seq, d1, d2 = held.number, held.seq, held.d1, held.d2
        if isinstance(cmd, DiscardHeld):
            return [HeldRollDiscarded(n, seq, d1, d2, actor=cmd.actor, at=cmd.at)]
        roll = Roll(d1, d2, source="held", actor=cmd.actor, at=cmd.at)
        applied = HeldRollApplied(n, seq, d1, d2, actor=cmd.actor, at=cmd.at)
        return [applied, *self._roll(state, roll, _HELD_SOURCES)]
