"""The roll paths: the rolls that only move the hand, decided and folded without the
full decision (a replay's, a journal check's and the service's common case).

Every roll but a seven-out (a point made counts when its number was made before) is
kept here by situation: by (point, die 1, die 2) in the point phase, by (die 1, die 2)
on a come-out (where a new shooter's roll and a come-out roll do the same; a roll they
do not agree on is left to the full decision); the seven-outs are kept apart.
:meth:`RollPaths.move` is one roll that only moves the hand, its state made straight
from it; :meth:`RollPaths.advance_moves` folds a run of them at once, and the seven-out
that ends the run with it. Both give the same state as the engine's full decision and
fold (the engine's tests hold them to that).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controller.core.commands import ROLL_SOURCES, Command, Roll
from controller.core.config import FireBetRules
from controller.core.events import BettingClosed, Event, NewHand, RollAccepted
from controller.core.hand import DiceTable
from controller.core.outcome import Outcome
from controller.core.state import Phase, RunFields, TableState, after_rolls, rolled
from controller.core.wagers import settlement

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


class RollPaths:
    """The rolls that only move the hand under one table's rules, and the two paths over them."""

    def __init__(
        self,
        rules: FireBetRules,
        dice: DiceTable,
        closing: BettingClosed,
        odds: list[tuple[int, int]],
    ) -> None:
        self.rules = rules
        self._closing = closing
        self._odds = odds  # the pay table's (tier, odds to one) by the number of points
        self._on_point: dict[tuple[int | None, int, int], _Move] = {}
        # the seven-outs, by (point, die 1, die 2): the last roll advance_moves folds
        self._seven_out: dict[tuple[int | None, int, int], _Move] = {}
        self._come_out: dict[tuple[int, int], _Move] = {}
        closes_at = rules.betting_closes
        moves: dict[tuple[Phase, int | None, int, int], _Move] = {}
        for (phase, point, d1, d2), (total, outcome, after, next_point) in dice.items():
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
            if outcome == "seven_out":
                self._seven_out[(point, d1, d2)] = move
                continue
            moves[(phase, point, d1, d2)] = move
            if phase is Phase.POINT:
                self._on_point[(point, d1, d2)] = move
        for (phase, _, d1, d2), move in moves.items():
            other = moves.get((Phase.COME_OUT, None, d1, d2))
            if phase is Phase.NEW_SHOOTER and other is not None and other[:8] == move[:8]:
                self._come_out[(d1, d2)] = move

    def move(self, state: TableState, c: dict[str, Any], events: bool) -> Outcome | None:
        """The roll path: the outcome of a roll (``c``: its fields) that only moves the hand,
        its state made straight from the roll (:func:`rolled`), its events only when
        ``events`` (else none); None for every other roll (the full decision decides)."""
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

    def advance_moves(
        self, state: TableState, commands: Sequence[Command], start: int = 0
    ) -> tuple[TableState, int]:
        """The state after ``commands[start:end]`` and ``end``: the longest run of rolls
        from ``start`` that only move the hand or light a marker (no surveillance alert, no
        pay at the 6th point, no manual or held roll, no reader roll refused, held or
        repeated), ended by a seven-out when one comes (its settlement, when the hand was
        not paid at the 6th point, is the state's ``last_settlement``): a replay's and a
        journal check's common case, folded in locals with one state made at the end (its
        undo buffer the state before the run's last roll); the same state as applying them
        one by one."""
        s = state.__dict__
        phase, point, points, open_ = s["phase"], s["point"], s["points"], s["betting_open"]
        rolls, made, last_roll = s["rolls"], 0, s["last_roll"]
        seq_now, dice_now = s["reader_seq"], s["reader_dice"]
        reader_ok = s["reader_conflict"] is None and not s["hold_reader"]
        before: RunFields | None = None
        on_point, come_out = self._on_point, self._come_out
        alert_at, alert_raised = self.rules.surveillance_at, s["alert_raised"]
        pay_at_six = self.rules.pay_six_immediately and not s["settled"]
        seven_out = False
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
                if move is None:
                    move = self._seven_out.get((point, d1, d2))
                    if move is None or open_:
                        break
                    seven_out = True  # the run's last roll
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
            if seven_out:
                break
        if before is None:
            return state, start
        now = (phase, point, open_, rolls, made, last_roll, points, seq_now, dice_now)
        if not seven_out:
            return after_rolls(state, now, before), end
        # the seven-out's own events after its roll: the hand's settlement (unless paid at
        # the 6th point) and the new hand; the run never changes the hand, the shooter or
        # the wagers, so the state given holds them as they were at the seven-out
        new_hand = NewHand(s["hand"] + 1, s["shooter"] + 1)
        if s["settled"]:
            return after_rolls(state, now, before, (new_hand,)), end
        paid = settlement(self._odds, state, points, immediate=False)
        return after_rolls(state, now, before, (paid, new_hand)), end
