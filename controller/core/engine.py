"""The rules engine: ``state + command -> events``, folded into the next state.

Pure: no pins, ports, clocks or files. The hand itself is a ``transitions``
state machine (new_shooter / come_out / point); at start-up the engine drives
that machine through every (phase, point, total) once and keeps the answers
in a table, so the machine is the single source of the craps rules and a roll
costs a dictionary lookup. The fire-bet rules (different points, ordinals,
betting window, wagers, surveillance, settlement, surrender, void) sit on top.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

from transitions import Machine

from controller.core.commands import (
    ROLL_SOURCES,
    SURRENDER_KINDS,
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
from controller.core.config import POINT_NUMBERS, FireBetRules
from controller.core.events import (
    Acknowledged,
    BetAccepted,
    BetCancelled,
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
    RollVoided,
    SeqConflict,
    Settlement,
    Surrendered,
    SurveillanceAlert,
    SurveillanceConfirmed,
)
from controller.core.state import (
    HeldRoll,
    Phase,
    RunFields,
    TableState,
    after_rolls,
    fold_all,
    rolled,
)

# a held reader roll is applied as a roll of its own source, never sent from outside
_HELD_SOURCES = frozenset({"held"})


class _QuietOverrides(logging.Filter):
    """Drop transitions' notice for each helper model_override=True leaves unbound (by design)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "due to model override policy" not in record.getMessage()


logging.getLogger("transitions.core").addFilter(_QuietOverrides())

NATURALS = (7, 11)
CRAPS = (2, 3, 12)


class HandModel:
    """The model the hand machine drives: the phase, the point and the roll in hand."""

    state: Phase

    def __init__(self) -> None:
        self.point: int | None = None
        self.total = 0
        self.outcome = ""

    # triggers: placeholders the machine replaces (model_override=True) -------
    def roll(self) -> bool:
        """Fire the roll trigger (bound by the hand machine)."""
        raise RuntimeError("not bound to a hand machine")

    def surrender(self) -> bool:
        """Fire the surrender trigger (bound by the hand machine)."""
        raise RuntimeError("not bound to a hand machine")

    # conditions -----------------------------------------------------------
    def is_natural(self) -> bool:
        return self.total in NATURALS

    def is_craps(self) -> bool:
        return self.total in CRAPS

    def is_point_number(self) -> bool:
        return self.total in POINT_NUMBERS

    def makes_point(self) -> bool:
        return self.total == self.point

    def is_seven(self) -> bool:
        return self.total == 7

    # effects on the model only (no I/O) -------------------------------------
    def on_natural(self) -> None:
        self.outcome = "natural"

    def on_craps(self) -> None:
        self.outcome = "craps"

    def on_point_established(self) -> None:
        self.outcome, self.point = "point_established", self.total

    def on_point_made(self) -> None:
        self.outcome, self.point = "point_made", None

    def on_seven_out(self) -> None:
        self.outcome, self.point = "seven_out", None

    def on_no_decision(self) -> None:
        self.outcome = "no_decision"

    def on_surrender(self) -> None:
        self.outcome, self.point = "surrender", None


COME_OUT_PHASES = [Phase.NEW_SHOOTER, Phase.COME_OUT]

HAND_TRANSITIONS: list[dict[str, Any]] = [
    {"trigger": "roll", "source": COME_OUT_PHASES, "dest": Phase.COME_OUT,
     "conditions": "is_natural", "after": "on_natural"},
    {"trigger": "roll", "source": COME_OUT_PHASES, "dest": Phase.COME_OUT,
     "conditions": "is_craps", "after": "on_craps"},
    {"trigger": "roll", "source": COME_OUT_PHASES, "dest": Phase.POINT,
     "conditions": "is_point_number", "after": "on_point_established"},
    {"trigger": "roll", "source": Phase.POINT, "dest": Phase.COME_OUT,
     "conditions": "makes_point", "after": "on_point_made"},
    {"trigger": "roll", "source": Phase.POINT, "dest": Phase.NEW_SHOOTER,
     "conditions": "is_seven", "after": "on_seven_out"},
    {"trigger": "roll", "source": Phase.POINT, "dest": None, "after": "on_no_decision"},
    {"trigger": "surrender", "source": "*", "dest": Phase.NEW_SHOOTER, "after": "on_surrender"},
]  # fmt: skip


def build_hand_machine(model: HandModel | None = None, **kwargs: Any) -> Machine:
    """The hand's state machine; ``kwargs`` go to the Machine (e.g. a diagram class)."""
    cls = kwargs.pop("machine_class", Machine)
    machine: Machine = cls(
        model=model if model is not None else HandModel(),
        states=Phase,
        transitions=HAND_TRANSITIONS,
        initial=Phase.NEW_SHOOTER,
        auto_transitions=False,
        model_override=True,
        **kwargs,
    )
    return machine


RollTable = dict[tuple[Phase, int | None, int], tuple[str, str, int | None]]


def decision_table() -> RollTable:
    """(phase, point, total) -> (outcome, next phase's name, next point), read off the machine."""
    model = HandModel()
    machine = build_hand_machine(model)
    table: RollTable = {}
    starts: list[tuple[Phase, int | None]] = [(Phase.NEW_SHOOTER, None), (Phase.COME_OUT, None)]
    starts += [(Phase.POINT, p) for p in POINT_NUMBERS]
    for phase, point in starts:
        for total in range(2, 13):
            machine.set_state(phase, model)
            model.point, model.total, model.outcome = point, total, ""
            if not model.roll():  # pragma: no cover - every total is decided
                raise RuntimeError(f"hand machine has no rule for {total} in {phase}")
            table[(phase, point, total)] = (model.outcome, model.state.value, model.point)
    return table


class Outcome(NamedTuple):
    """What one command did: the next state and the events that lead there."""

    state: TableState
    events: tuple[Event, ...]

    @property
    def refused(self) -> Refused | None:
        for e in self.events:
            if isinstance(e, Refused):
                return e
        return None


_KNOWN_MAX = 16  # events kept a roll in a situation: by source, actor, betting closing

# what a roll does that only moves the hand: (total, outcome, next phase's name, next
# phase, next point, the dice, a point made, it closes an open betting window, and the
# events it made, by source, actor and closing)
_Move = tuple[
    int, str, str, Phase, int | None, tuple[int, int], bool, bool,
    dict[tuple[str, str, bool], tuple[Event, ...]],
]  # fmt: skip
_POINT = Phase.POINT
# the roll sources of the roll path besides the reader (whose rolls it checks apart)
_MOVE_SOURCES = frozenset(ROLL_SOURCES - {"reader"})
# the roll sources advance_moves folds in a run besides the reader's (a manual roll holds
# the reader's rolls)
_BATCH_SOURCES = frozenset({"script", "sim"})


def _outcome(pair: tuple[TableState, tuple[Event, ...]]) -> Outcome:
    """An Outcome without NamedTuple's keyword-handling constructor (the roll path's cost)."""
    return tuple.__new__(Outcome, pair)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class Engine:
    """The fire-bet rules for one table configuration."""

    def __init__(self, rules: FireBetRules | None = None) -> None:
        self.rules = rules if rules is not None else FireBetRules()
        self._table = decision_table()
        # (phase, point, die 1, die 2) -> (total, outcome, next phase, next point): the
        # machine's table again, keyed the way rolls come, for every legal pair of dice
        self._dice: dict[tuple[Phase, int | None, int, int], tuple[int, str, str, int | None]] = {}
        for (phase, point, total), (outcome, after, next_point) in self._table.items():
            for d1 in range(max(1, total - 6), min(6, total - 1) + 1):
                self._dice[(phase, point, d1, total - d1)] = (total, outcome, after, next_point)
        # the rolls that only move the hand (every roll but a seven-out; a point made counts
        # when its number was made before), for apply's roll path (:meth:`_move`): by
        # (point, die 1, die 2) in the point phase, by (die 1, die 2) on a come-out (where
        # a new shooter's roll and a come-out roll do the same; a roll they do not agree on
        # is left to the full decision)
        self._on_point: dict[tuple[int | None, int, int], _Move] = {}
        self._come_out: dict[tuple[int, int], _Move] = {}
        closes_at = self.rules.betting_closes
        moves: dict[tuple[Phase, int | None, int, int], _Move] = {}
        for (phase, point, d1, d2), (total, outcome, after, next_point) in self._dice.items():
            if outcome == "seven_out":
                continue
            closes = closes_at == "first_roll" or (
                closes_at == "first_point" and outcome == "point_established"
            )
            made = outcome == "point_made"
            move: _Move = (
                total,
                outcome,
                after,
                Phase(after),
                next_point,
                (d1, d2),
                made,
                closes,
                {},
            )
            moves[(phase, point, d1, d2)] = move
            if phase is Phase.POINT:
                self._on_point[(point, d1, d2)] = move
        for (phase, _, d1, d2), move in moves.items():
            other = moves.get((Phase.COME_OUT, None, d1, d2))
            if phase is Phase.NEW_SHOOTER and other is not None and other[:8] == move[:8]:
                self._come_out[(d1, d2)] = move
        self._odds = [self.rules.odds_for(k) for k in range(7)]  # (tier, odds) by count
        self._closing = BettingClosed(
            "the come-out roll was thrown"
            if self.rules.betting_closes == "first_roll"
            else "the first point was established"
        )

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
        from ``start`` that only move the hand or light a marker (no seven-out, no
        surveillance alert, no pay at the 6th point, no manual or held roll, no reader roll
        refused, held or repeated): a replay's and a journal check's common case, folded in
        locals with one state made at the end (its undo buffer the state before the run's
        last roll); the same state as applying them one by one (the engine's tests hold
        it to that)."""
        s = state.__dict__
        phase, point, points, open_ = s["phase"], s["point"], s["points"], s["betting_open"]
        rolls, made, last_roll = s["rolls"], 0, s["last_roll"]
        seq_now, dice_now = s["reader_seq"], s["reader_dice"]
        reader_ok = s["reader_conflict"] is None and not s["hold_reader"]
        before: RunFields | None = None
        on_point, come_out = self._on_point, self._come_out
        alert_at, alert_raised = self.rules.surveillance_at, s["alert_raised"]
        pay_at_six = self.rules.pay_six_immediately and not s["settled"]
        end, count = start, len(commands)
        while end < count:
            command = commands[end]
            if type(command) is not Roll:
                break
            c = command.__dict__
            d1, d2, seq, source = c["d1"], c["d2"], c["seq"], c["source"]
            if source == "reader":
                if not reader_ok:
                    break
            elif source not in _BATCH_SOURCES:
                break
            if type(d1) is not int or type(d2) is not int:
                break
            if seq is not None and (
                type(seq) is not int or not 0 <= seq <= 65535 or seq == seq_now
            ):
                break
            if phase is _POINT:
                move = on_point.get((point, d1, d2))
            elif point is None:
                move = come_out.get((d1, d2))
            else:
                break
            if move is None:
                break
            lit = points
            if move[6] and point not in points:  # a new different point: no alert, no pay
                lit = (*points, point)
                if (len(lit) == alert_at and not alert_raised) or (len(lit) == 6 and pay_at_six):
                    break
            before = (phase, point, open_, rolls, made, last_roll, points, seq_now, dice_now)
            points = lit
            phase, point, last_roll = move[3], move[4], move[5]
            rolls += 1
            if move[6]:
                made += 1
            if move[7]:
                open_ = False
            if seq is not None:
                seq_now, dice_now = seq, last_roll
            end += 1
        if before is None:
            return state, start
        now = (phase, point, open_, rolls, made, last_roll, points, seq_now, dice_now)
        return after_rolls(state, now, before), end

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
            return self._bet(state, command)
        if isinstance(command, Cancel):
            return self._cancel(state, command)
        if isinstance(command, Void):
            return self._void(state, command)
        if isinstance(command, Surrender):
            return self._surrender(state, command)
        if isinstance(command, ApplyHeld | DiscardHeld):
            return self._resolve_held(state, command)
        if isinstance(command, Ack):
            if not state.surveillance_alert:
                return [Refused("ack", "there is no surveillance alert to acknowledge")]
            return [Acknowledged(actor=command.actor, at=command.at)]
        if isinstance(command, Confirm):
            return self._confirm(state, command)
        if isinstance(command, ReaderHello):
            return [ReaderRestarted(command.seq)]
        if isinstance(command, RecordFault | ReaderFault):
            return [FaultRecorded(command.code)]
        if isinstance(command, ReaderOk):
            return []  # the reader's health is the service's business; the game is unchanged
        return [Refused(getattr(command, "name", "?"), f"unknown command {command!r}")]

    def betting_closed_reason(self, state: TableState) -> str:
        """Why betting is closed, in a dealer's words."""
        if state.surrender_pending:
            return "betting is closed: the surrendered hand's fire bets are still pending"
        if state.settled:
            return "betting is closed: this hand's fire bets were already paid"
        if self.rules.betting_closes == "first_point":
            return "betting is closed: the first point was established"
        return "betting is closed: the come-out roll was thrown"

    # rolls ----------------------------------------------------------------------
    def _move(self, state: TableState, c: dict[str, Any], events: bool) -> Outcome | None:
        """The roll path: the outcome of a roll (``c``: its fields) that only moves the hand,
        its state made straight from the roll (:func:`rolled`), its events only when
        ``events`` (else none); None for every other roll (:meth:`_roll` decides)."""
        d1, d2, seq, source = c["d1"], c["d2"], c["seq"], c["source"]
        if type(d1) is not int or type(d2) is not int:
            return None
        s = state.__dict__
        point = s["point"]
        if s["phase"] is _POINT:  # (an enum member's hash is a Python call: not in the keys)
            move = self._on_point.get((point, d1, d2))
        elif point is None:
            move = self._come_out.get((d1, d2))
        else:
            return None
        if move is None:
            return None
        if source == "reader":
            if s["reader_conflict"] is not None or s["hold_reader"]:
                return None
        elif source not in _MOVE_SOURCES:
            return None
        if seq is not None and (
            type(seq) is not int or not 0 <= seq <= 65535 or seq == s["reader_seq"]
        ):
            return None
        total, outcome, after, phase, next_point, dice, made, closes, known = move
        if made and point not in s["points"]:
            return None  # a new different point: decided in full
        closes = closes and s["betting_open"]
        moved = rolled(s, phase, next_point, dice, seq, source, made, closes)
        if not events:
            return tuple.__new__(Outcome, (moved, ()))
        at, actor = c["at"], c["actor"]
        if seq is not None or at:
            accepted = RollAccepted(
                d1, d2, total, outcome, after, next_point, source, seq, actor, at
            )
            out: tuple[Event, ...] = (accepted, self._closing) if closes else (accepted,)
            return tuple.__new__(Outcome, (moved, out))
        # no reader seq, no time (scripts, simulations): the same roll in the same
        # situation makes equal events, made once and then looked up
        key = (source, actor, closes)
        same = known.get(key)
        if same is None:
            accepted = RollAccepted(d1, d2, total, outcome, after, next_point, source, None, actor)
            same = (accepted, self._closing) if closes else (accepted,)
            if len(known) < _KNOWN_MAX:
                known[key] = same
        return tuple.__new__(Outcome, (moved, same))

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
                events.append(self._settlement(state, points, immediate=True))
        elif outcome == "seven_out":
            if not state.settled:
                events.append(self._settlement(state, state.points, immediate=False))
            events.append(NewHand(state.hand + 1, state.shooter + 1))
        return tuple(events)

    def _settlement(
        self, state: TableState, points: tuple[int, ...], *, immediate: bool
    ) -> Settlement:
        tier, odds = self._odds[len(points)]
        win = odds > 0
        return Settlement(
            hand=state.hand,
            points=points,
            unique_points=len(points),
            result="win" if win else "lose",
            odds_to_one=odds,
            tier=tier,
            payouts={p: (a * odds if win else 0) for p, a in sorted(state.bets.items())},
            wagers=dict(sorted(state.bets.items())),
            immediate=immediate,
        )

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

    # wagers ---------------------------------------------------------------------
    def _position_problem(self, position: object) -> str | None:
        if not _is_int(position) or not 1 <= position <= self.rules.positions:  # type: ignore[operator]
            return f"position {position!r} is not on this layout (1 to {self.rules.positions})"
        return None

    def _bet(self, state: TableState, cmd: Bet) -> list[Event]:
        problem = self._position_problem(cmd.position)
        if problem:
            return [Refused("bet", problem)]
        if not _is_int(cmd.amount) or cmd.amount <= 0:
            return [
                Refused("bet", f"position {cmd.position}: {cmd.amount!r} is not a dollar amount")
            ]
        if not state.betting_open:
            return [Refused("bet", f"position {cmd.position}: {self.betting_closed_reason(state)}")]
        r = self.rules
        have = state.bets.get(cmd.position, 0)
        total = have + cmd.amount
        what = f"${total}" if not have else f"${cmd.amount} more makes ${total}, which"
        if total > r.max_wager:
            return [
                Refused(
                    "bet", f"position {cmd.position}: {what} is over the ${r.max_wager} maximum"
                )
            ]
        if total < r.min_wager:
            return [
                Refused(
                    "bet", f"position {cmd.position}: {what} is under the ${r.min_wager} minimum"
                )
            ]
        if total % r.wager_increment:
            return [
                Refused(
                    "bet",
                    f"position {cmd.position}: {what} is not in ${r.wager_increment} increments",
                )
            ]
        return [BetAccepted(cmd.position, cmd.amount, total, actor=cmd.actor, at=cmd.at)]

    def _cancel(self, state: TableState, cmd: Cancel) -> list[Event]:
        problem = self._position_problem(cmd.position)
        if problem:
            return [Refused("cancel", problem)]
        if not state.betting_open:
            return [
                Refused(
                    "cancel",
                    f"position {cmd.position}: a fire bet cannot be called off: "
                    + self.betting_closed_reason(state),
                )
            ]
        amount = state.bets.get(cmd.position)
        if amount is None:
            return [Refused("cancel", f"position {cmd.position} has no wager")]
        return [BetCancelled(cmd.position, amount, actor=cmd.actor, at=cmd.at)]

    # surveillance ---------------------------------------------------------------
    def _confirm(self, state: TableState, cmd: Confirm) -> list[Event]:
        """Surveillance confirms the alerted hand: refused unless hand and alert match."""
        if not _is_int(cmd.hand):
            return [Refused("confirm", f"{cmd.hand!r} is not a hand number")]
        if not isinstance(cmd.by, str) or not cmd.by.strip():
            return [Refused("confirm", "a confirmation must name who confirmed (by)")]
        if state.alert_hand is None:
            return [
                Refused(
                    "confirm",
                    f"hand {cmd.hand} has no surveillance alert to confirm "
                    "(no alert was raised at this table)",
                )
            ]
        if cmd.hand != state.alert_hand:
            return [
                Refused(
                    "confirm",
                    f"hand {cmd.hand} has no surveillance alert to confirm "
                    f"(the alert is for hand {state.alert_hand})",
                )
            ]
        if state.confirmed_by is not None:
            return [
                Refused("confirm", f"hand {cmd.hand} was already confirmed by {state.confirmed_by}")
            ]
        return [SurveillanceConfirmed(cmd.hand, cmd.by, str(cmd.id), actor=cmd.actor, at=cmd.at)]

    # surrender and void -------------------------------------------------------
    def _surrender(self, state: TableState, cmd: Surrender) -> list[Event]:
        if cmd.kind not in SURRENDER_KINDS:
            return [
                Refused("surrender", f"a surrender is voluntary or compulsory, not {cmd.kind!r}")
            ]
        # with wagers riding and betting closed the hand waits for the successor's loser 7;
        # with betting still open the window stays as it was (SPEC §2, settled questions)
        pending = bool(state.bets) and not state.betting_open
        events: list[Event] = [
            Surrendered(
                surrender=cmd.kind,
                shooter=state.shooter + 1,
                pending=pending,
                carries_points=self.rules.surrender_carries_points,
                actor=cmd.actor,
                at=cmd.at,
            )
        ]
        if not state.bets and not state.betting_open:
            # no fire bet riding: nothing carries, the successor starts a new fire-bet hand
            events.append(NewHand(state.hand + 1, state.shooter + 1))
        return events

    def _void(self, state: TableState, cmd: Void) -> list[Event]:
        if state.undo is None or state.last_roll is None:
            return [
                Refused(
                    "void",
                    "nothing to void: no roll was accepted since the last void, wager or surrender",
                )
            ]
        d1, d2 = state.last_roll
        return [
            RollVoided(
                d1, d2, reversed_settlement=state.last_settlement, actor=cmd.actor, at=cmd.at
            )
        ]
