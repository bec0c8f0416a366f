"""The roll rule: what one roll does to the table, written once, and the fast paths over it.

**The rule** (:meth:`RollRule.decide`, the one an auditor reads). A roll of two dice is
refused when a die does not show 1 to 6, when its source is not one a roll may come
from, or when it comes from a reader in ``SEQ_CONFLICT``. Where a reader roll's seq stands
against the last one applied is :func:`controller.core.table.order`'s to say (the one home
of that arithmetic): a copy (protocols 1 and 2: that seq and the 32,767 behind it, modulo
65536; protocol 3: a roll number of the session at or below the last) is a duplicate
(ACKed again, nothing changes) when its dice are the ones applied at that seq (or, under
protocol 3, when that roll number is older than the last 64 remembered); a
``SEQ_CONFLICT`` when they differ; under protocols 1 and 2, a copy whose seq is not one of
the last 64 remembered cannot be proven a copy and is held for the dealer with its reason
(:func:`unproven`); a protocol-3 roll numbered past the next one is refused (a gap: not
ACKed). A reader roll after a roll keyed by hand, or while the reader itself reports
FAULT, is held for the dealer. Any other roll is accepted: the hand machine
(:mod:`controller.core.hand`) says what it does to the hand (natural, craps, point
established or made, seven-out, no decision), and then

- an open betting window closes at the first roll accepted, or at the first point
  established under ``betting_closes = "first_point"`` (:func:`closes_betting`);
- a point made that the shooter had not made before is a new different point with the
  next ordinal; the count reaching ``surveillance_at`` raises the surveillance alert once
  a hand (:func:`alert_due`); the 6th is paid at once under ``pay_six_immediately``
  (:func:`paid_at_six`);
- a seven-out settles the hand's fire bets by the number of different points (unless
  they were paid at the 6th) and starts a new hand with the next shooter.

**The fast paths**, for the rolls that only move the hand (every roll but a seven-out
that settles and a new point that alerts or pays): :class:`RollPaths` (a journal check's
and the service's common case: one roll, or a run of rolls folded at once) and
:class:`LineSweep` (a replay's: a run of script lines across hands). Both are made from
the rule's own pieces (the hand machine's dice table and the predicates above), never
from rules of their own, and the property tests of ``tests/unit/test_rolls.py`` hold
each of them to the rule: the same state (undo buffer included) and the same events
as :meth:`RollRule.decide` folded roll by roll.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controller.core import wagers
from controller.core.commands import ROLL_SOURCES, Command, Roll, RollSource
from controller.core.config import FireBetRules
from controller.core.errors import Refusal
from controller.core.events import (
    BettingClosed,
    DuplicateRoll,
    Event,
    NewDifferentPoint,
    NewHand,
    Refused,
    RollAccepted,
    RollHeld,
    RollOutcome,
    SeqConflict,
    Settlement,
    SurveillanceAlert,
)
from controller.core.hand import DiceTable, decision_table, dice_table
from controller.core.outcome import Outcome
from controller.core.state import (
    Meters,
    Phase,
    RunFields,
    TableState,
    after_rolls,
    rolled,
    settle_meters,
)
from controller.core.table import READER_WINDOW, Order, order
from controller.core.wagers import settle, settlement

_is_int = wagers.is_int


def recalled(state: TableState, seq: int) -> tuple[int, int] | None:
    """The dice the reader's roll at ``seq`` had, when it is among the last
    :data:`~controller.core.table.READER_WINDOW` applied or held (else None)."""
    for known, d1, d2 in reversed(state.reader_recent):
        if known == seq:
            return (d1, d2)
    return None


def unproven(seq: int, last: int | None) -> str:
    """Why a protocol-1 or -2 ROLL at ``seq`` is held (the last roll applied at ``last``):
    not newer, yet not a roll the table remembers applying, in the dealer's words."""
    return (
        f"the reader's numbering cannot be proven: seq {seq} is not newer than {last} and not "
        f"one of the last {READER_WINDOW} rolls this table applied (a table idle for hours, or "
        "a reader restarted while the service was down); apply it if this throw was not "
        "counted, discard it if it was"
    )


# the rule's pieces --------------------------------------------------------------------------
def closes_betting(rules: FireBetRules, outcome: str) -> bool:
    """Whether an accepted roll with ``outcome`` closes an open betting window."""
    return rules.betting_closes == "first_roll" or (
        rules.betting_closes == "first_point" and outcome == RollOutcome.POINT_ESTABLISHED
    )


def alert_due(rules: FireBetRules, count: int, raised: bool) -> bool:
    """Whether the ``count``-th different point raises the surveillance alert."""
    return count == rules.surveillance_at and not raised


def paid_at_six(rules: FireBetRules, count: int, settled: bool) -> bool:
    """Whether the ``count``-th different point settles the hand at once."""
    return count == 6 and rules.pay_six_immediately and not settled


class RollRule:
    """The roll rule under one table's rules (see the module's docstring)."""

    def __init__(self, rules: FireBetRules) -> None:
        self.rules = rules
        self.dice: DiceTable = dice_table(decision_table())
        self.odds = [rules.odds_for(k) for k in range(7)]  # (tier, odds) by count
        self.closing = BettingClosed(
            "the come-out roll was thrown"
            if rules.betting_closes == "first_roll"
            else "the first point was established"
        )

    def decide(
        self, state: TableState, cmd: Roll, sources: frozenset[str] = ROLL_SOURCES
    ) -> tuple[Event, ...]:
        """The events of ``cmd`` in ``state`` (a :class:`Refused` when it may not count)."""
        c = cmd.__dict__
        d1, d2, seq = c["d1"], c["d2"], c["seq"]
        whole = type(d1) is int and type(d2) is int
        rule = self.dice.get((state.phase, state.point, d1, d2)) if whole else None
        if rule is None:
            label, die = ("die 1", d1) if not (_is_int(d1) and 1 <= d1 <= 6) else ("die 2", d2)
            return (
                Refused("roll", f"{label} shows {die!r}: a die shows 1 to 6", Refusal.BAD_DICE),
            )
        if c["source"] not in sources:
            return (Refused("roll", f"unknown roll source {c['source']!r}", Refusal.BAD_COMMAND),)
        if c["source"] == RollSource.READER and state.reader_conflict is not None:
            return (
                Refused(
                    "roll",
                    f"the dice reader is in fault (SEQ_CONFLICT at seq {state.reader_conflict}): "
                    "its rolls are refused until it restarts (HELLO); enter rolls by hand",
                    Refusal.READER_CONFLICT,
                ),
            )
        if seq is not None:
            if not _is_int(seq) or not 0 <= seq <= 65535:
                return (
                    Refused(
                        "roll", f"reader sequence {seq!r} is not 0..65535", Refusal.BAD_COMMAND
                    ),
                )
            where = order(seq, state.reader_seq, state.reader_session)
            if where is Order.COPY:  # a copy: the last roll's, or a stale one
                recorded = state.reader_dice if seq == state.reader_seq else recalled(state, seq)
                if recorded is None and state.reader_session is None:
                    # protocols 1 and 2: not newer, and not a roll the table remembers
                    # applying: it cannot prove it a copy, so the dealer decides
                    why = unproven(seq, state.reader_seq)
                    return (RollHeld(state.held_next, seq, d1, d2, at=c["at"], reason=why),)
                if recorded is None or recorded == (d1, d2):
                    return (DuplicateRoll(seq, stale=seq != state.reader_seq),)
                return (SeqConflict(seq, recorded[0], recorded[1], d1, d2, at=c["at"]),)
            if where is Order.GAP:
                return (
                    Refused(
                        "roll",
                        f"reader roll number {seq} of session {state.reader_session} skips "
                        f"past the next one ({(state.reader_seq or 0) + 1}): not applied, not "
                        "ACKed; the reader starts a new session (NAK GAP)",
                        Refusal.READER_GAP,
                    ),
                )
        if c["source"] == RollSource.READER and (state.hold_reader or state.reader_faulted):
            return (RollHeld(state.held_next, seq, d1, d2, at=c["at"]),)
        if c["source"] == RollSource.MANUAL and state.correcting is not None:
            return tuple(wagers.correction_pending("roll", state))
        total, outcome, phase, point = rule
        accepted = RollAccepted(
            d1, d2, total, outcome, phase, point, c["source"], seq, c["actor"], c["at"]
        )
        events: list[Event] = [accepted]
        rules = self.rules
        if state.finishing_point and outcome != RollOutcome.NO_DECISION:
            # the surrendered shooter's point decided, nothing riding on it: the point
            # made opens the successor's own hand, a seven-out the next shooter's
            if outcome == RollOutcome.SEVEN_OUT and not state.settled:
                events.append(wagers.settlement(self.odds, state, state.points, immediate=False))
            made = outcome == RollOutcome.POINT_MADE
            events.append(NewHand(state.hand + 1, state.shooter + (0 if made else 1)))
            return tuple(events)
        if state.betting_open and closes_betting(rules, outcome):
            events.append(self.closing)
        if outcome == RollOutcome.POINT_MADE and state.point not in state.points:
            made_point = state.point
            assert made_point is not None
            points = (*state.points, made_point)
            events.append(NewDifferentPoint(made_point, len(points)))
            if alert_due(rules, len(points), state.alert_raised):
                events.append(SurveillanceAlert(state.hand, len(points), rules.confirmable_alerts))
            if paid_at_six(rules, len(points), state.settled):
                events.append(wagers.settlement(self.odds, state, points, immediate=True))
        elif outcome == RollOutcome.SEVEN_OUT:
            if not state.settled:
                events.append(wagers.settlement(self.odds, state, state.points, immediate=False))
            events.append(NewHand(state.hand + 1, state.shooter + 1))
        return tuple(events)


# the fast paths -------------------------------------------------------------------------
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
    """The rolls that only move the hand under one table's rules, and the two paths over
    them: one roll (:meth:`move`) and a run of rolls folded at once (:meth:`advance_moves`).

    Every roll but a seven-out (a point made counts when its number was made before) is
    kept by situation: by (point, die 1, die 2) in the point phase, by (die 1, die 2) on a
    come-out (where a new shooter's roll and a come-out roll do the same; a roll they do
    not agree on is left to the full decision); the seven-outs are kept apart. The tables
    are the rule's dice table with the rule's :func:`closes_betting`."""

    def __init__(self, rule: RollRule) -> None:
        rules, dice = rule.rules, rule.dice
        self.rules = rules
        self._closing = rule.closing
        self._odds = rule.odds  # the pay table's (tier, odds to one) by the number of points
        self._on_point: dict[tuple[int | None, int, int], _Move] = {}
        # the seven-outs, by (point, die 1, die 2): the last roll advance_moves folds
        self._seven_out: dict[tuple[int | None, int, int], _Move] = {}
        self._come_out: dict[tuple[int, int], _Move] = {}
        moves: dict[tuple[Phase, int | None, int, int], _Move] = {}
        for (phase, point, d1, d2), (total, outcome, after, next_point) in dice.items():
            closes = closes_betting(rules, outcome)
            made = outcome == RollOutcome.POINT_MADE
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
            if outcome == RollOutcome.SEVEN_OUT:
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
            if s["reader_conflict"] is not None or s["hold_reader"] or s["reader_faulted"]:
                return None
        elif source not in _MOVE_SOURCES or (source == "manual" and s["correcting"] is not None):
            return None
        if seq is not None and (
            type(seq) is not int
            or not 0 <= seq <= 65535
            or order(seq, s["reader_seq"], s["reader_session"]) is not Order.NEW
        ):
            return None
        total, outcome, after, phase, next_point, dice, made, closes, known = move
        if made and (point not in s["points"] or s["finishing_point"]):
            return None  # a new different point, or a surrendered point decided: in full
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
        # the successor throwing for a surrendered point: the roll deciding it, in full
        finishing = s["finishing_point"]
        phase, point, points, open_ = s["phase"], s["point"], s["points"], s["betting_open"]
        rolls, made, last_roll = s["rolls"], 0, s["last_roll"]
        seq_now, dice_now, session = s["reader_seq"], s["reader_dice"], s["reader_session"]
        reader_ok = (
            s["reader_conflict"] is None and not s["hold_reader"] and not s["reader_faulted"]
        )
        seqs: list[tuple[int, int, int]] = []  # the reader rolls of the run, for the window
        seqs_before = 0  # how many of them came before the run's last roll
        before: RunFields | None = None
        on_point, come_out = self._on_point, self._come_out
        rules, alert_raised, settled = self.rules, s["alert_raised"], s["settled"]
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
                type(seq) is not int
                or not 0 <= seq <= 65535
                or order(seq, seq_now, session) is not Order.NEW
            ):
                break
            if phase is _POINT:
                move = on_point.get((point, d1, d2))
                if move is None:
                    move = self._seven_out.get((point, d1, d2))
                    if move is None or open_ or finishing:
                        break
                    seven_out = True  # the run's last roll
                elif finishing and move[6]:
                    break
            elif point is None:
                move = come_out.get((d1, d2))
            else:
                break
            if move is None:
                break
            lit = points
            if move[6] and point not in points:  # a new different point: no alert, no pay
                lit = (*points, point)
                if alert_due(rules, len(lit), alert_raised) or paid_at_six(
                    rules, len(lit), settled
                ):
                    break
            before = (phase, point, open_, rolls, made, last_roll, points, seq_now, dice_now)
            seqs_before = len(seqs)
            points = lit
            phase, point, last_roll = move[3], move[4], move[5]
            rolls += 1
            if move[6]:
                made += 1
            if move[7]:
                open_ = False
            if seq is not None:
                seq_now, dice_now = seq, last_roll
                seqs.append((seq, d1, d2))
            end += 1
            if seven_out:
                break
        if before is None:
            return state, start
        now = (phase, point, open_, rolls, made, last_roll, points, seq_now, dice_now)
        if not seven_out:
            return after_rolls(state, now, before, seqs=(seqs, seqs_before)), end
        # the seven-out's own events after its roll: the hand's settlement (unless paid at
        # the 6th point) and the new hand; the run never changes the hand, the shooter or
        # the wagers, so the state given holds them as they were at the seven-out
        new_hand = NewHand(s["hand"] + 1, s["shooter"] + 1)
        if s["settled"]:
            return after_rolls(state, now, before, (new_hand,), (seqs, seqs_before)), end
        paid = settlement(self._odds, state, points, immediate=False)
        return after_rolls(state, now, before, (paid, new_hand), (seqs, seqs_before)), end


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
    """A replay's common case at a dictionary lookup a roll: a run of script roll lines
    (``3 4``) folded straight from the lines, across hands, each seven-out's settlement
    made on the way.

    A roll's effect depends on the situation it is thrown in: the phase, the point, which
    points are lit (a set: the order they were lit in changes only the settlement's list,
    kept beside) and whether betting is open. Each situation met is kept as a table from
    the script line to its step: the next situation's table and what the roll did besides
    moving the hand (a point made again, a new point lit, a seven-out). A situation's
    table is filled the first time the sweep stands in it, from the rule's dice table and
    predicates; there are at most a few thousand.

    The sweep stops, leaving the line to the full decision, at anything else: a line that
    is not a plain roll, a new point that raises the surveillance alert or is paid at the
    6th point, a seven-out while betting is open, and the seven-out of a hand paid at the
    6th point or surrendered. Its state is the one the rule's fold gives after the same
    rolls, undo buffer included."""

    def __init__(self, rule: RollRule) -> None:
        self.rules = rule.rules
        self._dice = rule.dice
        self._odds = rule.odds  # the pay table's (tier, odds to one) by the number of points
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
            closes = open_ and closes_betting(rules, outcome)
            now_open = open_ and not closes
            kind, new_point = _PLAIN, None
            if outcome == RollOutcome.SEVEN_OUT:
                if open_:
                    continue  # betting open at a seven-out: the full decision closes it
                kind, nxt = _SEVEN, _NEW_HAND
            else:
                lit_after = lit
                if outcome == RollOutcome.POINT_MADE:
                    kind = _MADE
                    if point not in lit:
                        assert point is not None
                        lit_after = lit | {point}
                        count = len(lit_after)
                        if alert_due(rules, count, False) or paid_at_six(rules, count, False):
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
        finishing = s["finishing_point"]  # a surrendered point's deciding roll: in full
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
                if finishing:
                    end = i
                    break
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
