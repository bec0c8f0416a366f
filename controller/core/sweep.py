"""A replay's common case at a dictionary lookup a roll: a run of script roll lines
(``3 4``) folded straight from the lines, across hands, each seven-out's settlement made
on the way.

A roll's effect depends on the situation it is thrown in: the phase, the point, which
points are lit (a set: the order they were lit in changes only the settlement's list,
kept beside) and whether betting is open. Each situation met is kept as a table from the
script line to its step: the next situation's table and what the roll did besides moving
the hand (a point made again, a new point lit, a seven-out). A situation's table is
filled the first time the sweep stands in it, from the hand machine's dice table; there
are at most a few thousand.

The sweep stops, leaving the line to the full decision, at anything else: a line that is
not a plain roll, a new point that raises the surveillance alert or is paid at the 6th
point, a seven-out while betting is open, and the seven-out of a hand paid at the 6th
point or surrendered. Its state is the one the engine's fold
gives after the same rolls (the replay's tests hold it to that), undo buffer included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controller.core.config import FireBetRules
from controller.core.events import Settlement
from controller.core.hand import DiceTable
from controller.core.state import Meters, Phase, TableState, settle_meters
from controller.core.wagers import settle

_PLAIN, _MADE, _LIT, _SEVEN = 0, 1, 2, 3  # what a step did besides moving the hand

# a situation: (phase, point, the points lit, betting open)
_Situation = tuple[Phase, int | None, frozenset[int], bool]

# the dice of each line a script writes a roll as
DICE_LINES: dict[bytes, tuple[int, int]] = {}
for _d1 in range(1, 7):
    for _d2 in range(1, 7):
        DICE_LINES[f"{_d1} {_d2}".encode()] = DICE_LINES[f"{_d1} {_d2}\n".encode()] = (_d1, _d2)

_NEW_HAND: _Situation = (Phase.NEW_SHOOTER, None, frozenset(), True)

# (paid line's index, the settlement) of each seven-out a sweep folded
Paid = list[tuple[int, Settlement]]


def _counted(meters: Meters, points_made: int, hands: int) -> Meters:
    """``meters`` with ``points_made`` more points made and ``hands`` more hands."""
    new = object.__new__(Meters)
    fields = {**meters.__dict__}
    fields["points_made"] += points_made
    fields["hands"] += hands
    object.__setattr__(new, "__dict__", fields)
    return new


class _Steps(dict[bytes, tuple[Any, ...]]):
    """One situation's table: script line -> (the next situation's table, what the roll
    did, the point it lit, the situation before it, the situation after it). Empty until
    the sweep first stands in it."""

    __slots__ = ("situation",)

    def __init__(self, situation: _Situation) -> None:
        super().__init__()
        self.situation = situation


class LineSweep:
    """Runs of script roll lines under one table's rules (see the module's docstring)."""

    def __init__(self, rules: FireBetRules, dice: DiceTable, odds: list[tuple[int, int]]) -> None:
        self.rules = rules
        self._dice = dice
        self._odds = odds  # the pay table's (tier, odds to one) by the number of points
        self._tables: dict[_Situation, _Steps] = {}

    def _table(self, situation: _Situation) -> _Steps:
        table = self._tables.get(situation)
        if table is None:
            table = self._tables[situation] = _Steps(situation)
        return table

    def _fill(self, table: _Steps) -> None:
        """Every plain roll's step from ``table``'s situation (those the sweep leaves to
        the full decision have none)."""
        phase, point, lit, open_ = table.situation
        rules = self.rules
        for line, (d1, d2) in DICE_LINES.items():
            rule = self._dice.get((phase, point, d1, d2))
            if rule is None:
                continue
            _, outcome, after, next_point = rule
            closes = open_ and (
                rules.betting_closes == "first_roll"
                or (rules.betting_closes == "first_point" and outcome == "point_established")
            )
            now_open = open_ and not closes
            kind, new_point = _PLAIN, None
            if outcome == "seven_out":
                if open_:
                    continue  # betting open at a seven-out: the full decision closes it
                kind, nxt = _SEVEN, _NEW_HAND
            else:
                lit_after = lit
                if outcome == "point_made":
                    kind = _MADE
                    if point not in lit:
                        assert point is not None
                        lit_after = lit | {point}
                        count = len(lit_after)
                        if count == rules.surveillance_at or (
                            count == 6 and rules.pay_six_immediately
                        ):
                            continue  # an alert or a pay at the 6th point: decided in full
                        kind, new_point = _LIT, point
                nxt = (Phase(after), next_point, lit_after, now_open)
            table[line] = (self._table(nxt), kind, new_point, table.situation, nxt)

    def run(
        self,
        state: TableState,
        lines: Sequence[bytes],
        start: int = 0,
        *,
        one_hand: bool = False,
    ) -> tuple[TableState, int, Paid]:
        """The state after ``lines[start:end]``, ``end``, and the settlements of the
        seven-outs among them with each one's index: the longest run of plain script rolls
        from ``start`` (see the module's docstring). ``one_hand``: stop after the first
        seven-out too, so the caller can act for the new shooter (a player betting)."""
        s = state.__dict__
        points: tuple[int, ...] = s["points"]
        steps = self._table((s["phase"], s["point"], frozenset(points), s["betting_open"]))
        plain = not (s["settled"] or s["surrender_pending"])
        bets: dict[int, int] = s["bets"]  # the first hand's wagers; the next hands have none
        hand, made = s["hand"], 0
        paid: Paid = []
        last: tuple[Any, ...] | None = None
        odds = self._odds
        end = len(lines)
        for i in range(start, end):  # (islice would walk the chunk from its first line)
            step = steps.get(lines[i])
            if step is None:
                if steps:
                    end = i
                    break  # not a plain roll here
                self._fill(steps)
                step = steps.get(lines[i])
                if step is None:
                    end = i
                    break
            kind = step[1]
            if kind:
                if kind == _MADE:
                    made += 1
                elif kind == _LIT:
                    made += 1
                    points = (*points, step[2])
                else:  # a seven-out: the hand's settlement, the next hand
                    if not plain:
                        end = i
                        break
                    paid.append((i, settle(odds, hand, bets, points, immediate=False)))
                    bets = {}
                    hand += 1
                    points = ()
                    if one_hand:
                        last, end = step, i + 1
                        break
            steps = step[0]
            last = step
        if last is None:
            return state, start, paid
        return self._state(s, lines, start, end, last, points, made, paid), end, paid

    @staticmethod
    def _state(
        s: dict[str, Any],
        lines: Sequence[bytes],
        start: int,
        end: int,
        last: tuple[Any, ...],
        points: tuple[int, ...],
        made: int,
        paid: Paid,
    ) -> TableState:
        """The state after the sweep, its undo buffer the state before its last roll."""
        hands = len(paid)
        before = meters = s["meters"]
        if hands and paid[0][1].wagers:  # the first hand's wagers, won or lost
            meters = settle_meters(before, paid[0][1])
        f = s.copy()
        f["phase"], f["point"], _, f["betting_open"] = last[4]
        f["points"] = points
        f["rolls"] = s["rolls"] + end - start
        f["last_roll"] = DICE_LINES[lines[end - 1]]
        f["meters"] = _counted(meters, made, hands)
        if hands:
            f["hand"], f["shooter"] = s["hand"] + hands, s["shooter"] + hands
            f["bets"] = {}
            f["settled"] = f["surrender_pending"] = f["alert_raised"] = False
        u = f.copy()  # the state before the last roll
        u["undo"] = u["last_settlement"] = None
        u["phase"], u["point"], _, u["betting_open"] = last[3]
        u["rolls"] = f["rolls"] - 1
        u["last_roll"] = DICE_LINES[lines[end - 2]] if end - 2 >= start else s["last_roll"]
        kind = last[1]
        if kind == _SEVEN:
            hand_paid = paid[-1][1]
            f["last_settlement"] = hand_paid
            u["points"] = hand_paid.points
            u["hand"], u["shooter"] = f["hand"] - 1, f["shooter"] - 1
            # before the seven-out: the first hand's wagers not yet settled if it was that
            u["meters"] = _counted(before if hands == 1 else meters, made, hands - 1)
            if hands == 1:  # the sweep's first hand: as the state given held it
                for name in ("bets", "settled", "surrender_pending", "alert_raised"):
                    u[name] = s[name]
        else:
            f["last_settlement"] = None
            if kind == _LIT:
                u["points"] = points[:-1]
            if kind != _PLAIN:
                u["meters"] = _counted(meters, made - 1, hands)
        undo = object.__new__(TableState)
        object.__setattr__(undo, "__dict__", u)
        f["undo"] = undo
        new = object.__new__(TableState)
        object.__setattr__(new, "__dict__", f)
        return new
