"""The table state folded from events: the one place a :class:`TableState` changes.

Each event has a rule, a change to the fields of the state it applies to;
:func:`evolve`, :func:`fold` and the engine (:func:`fold_all`, :func:`rolled`) run
these rules on a copy of the fields, so the journal, recovery, void, replay and the
floor's second opinion all fold exactly alike. The state's values are
:mod:`controller.core.table`; they are re-exported here, the import every other
module uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from controller.core.events import (
    Acknowledged,
    BetAccepted,
    BetCancelled,
    BettingClosed,
    CorrectionArmed,
    DuplicateRoll,
    Event,
    FaultRecorded,
    HandResult,
    HeldRollApplied,
    HeldRollDiscarded,
    NewDifferentPoint,
    NewHand,
    ReaderAdvanced,
    ReaderFaultHolds,
    ReaderFaultOver,
    ReaderRestarted,
    Refused,
    RollAccepted,
    RollCorrected,
    RollHeld,
    RollOutcome,
    RollVoided,
    SeqConflict,
    Settlement,
    Surrendered,
    SurveillanceAlert,
    SurveillanceConfirmed,
)
from controller.core.table import (
    READER_WINDOW,
    SESSIONS_KEPT,
    HeldRoll,
    Meters,
    Phase,
    TableState,
    TierMeter,
    remember,
)

__all__ = [
    "HeldRoll",
    "Meters",
    "Phase",
    "TableState",
    "TierMeter",
    "evolve",
    "fold",
    "fold_all",
    "rolled",
]


_T = TypeVar("_T")


def _but(value: _T, **changes: Any) -> _T:
    """A copy of a frozen dataclass value with ``changes``.

    ``dataclasses.replace`` re-runs ``__init__`` and was most of the engine's time on
    the roll path; this copies the fields straight across. Only this module calls it,
    with field names the tests cover.
    """
    return _value(type(value), {**value.__dict__, **changes})


def _value(cls: type[_T], fields: dict[str, Any]) -> _T:
    """A frozen dataclass value made straight from its fields (the roll path's copy)."""
    new = object.__new__(cls)
    object.__setattr__(new, "__dict__", fields)
    return new


_PHASE = {p.value: p for p in Phase}


def _meter_settlement(meters: Meters, s: Settlement, sign: int = 1) -> Meters:
    wagered = sum(s.wagers.values())
    if sign < 0:
        return _but(
            meters,
            reversed=TierMeter(
                meters.reversed.count + 1, meters.reversed.amount + sum(s.payouts.values())
            ),
        )
    if not s.wagers:
        return meters
    if s.result == HandResult.WIN:
        paid = dict(meters.paid)
        old = paid.get(s.tier, TierMeter())
        paid[s.tier] = TierMeter(old.count + len(s.wagers), old.amount + sum(s.payouts.values()))
        return _but(meters, paid=paid)
    return _but(
        meters, lost=TierMeter(meters.lost.count + len(s.wagers), meters.lost.amount + wagered)
    )


def settle_meters(meters: Meters, settlement: Settlement) -> Meters:
    """``meters`` after ``settlement`` (its wagers paid or lost), as its event folds them."""
    return _meter_settlement(meters, settlement)


_new = object.__new__
_set = object.__setattr__
Fields = dict[str, Any]


# Each event's rule, as a change to the fields of the state it applies to. evolve(),
# fold() and the engine all run these (fold_all) on a copy of the fields, so a command's
# several events make one new state, and the engine folds exactly as a replay does.
def _roll(f: Fields, e: RollAccepted) -> None:
    made = e.outcome == RollOutcome.POINT_MADE
    dice = (e.d1, e.d2)
    f.update(rolled(f, _PHASE[e.phase], e.point, dice, e.seq, e.source, made, False).__dict__)


def rolled(
    f: Fields, phase: Phase, point: int | None, dice: tuple[int, int], seq: int | None,
    source: str, made: bool, closes: bool,
) -> TableState:  # fmt: skip
    """The state after an accepted roll, from ``f`` (the fields before it): the rule of
    :class:`RollAccepted` (``phase`` and ``point`` after it, ``dice``, ``seq``, ``source``;
    ``made``: its outcome is ``point_made``) and, when ``closes``, of the
    :class:`BettingClosed` after it. The roll's undo buffer is the state before it,
    without an undo buffer of its own. The engine's roll path makes a roll's state
    with this alone (its tests hold that to the fold of the roll's events)."""
    before = f.copy()  # copy-and-set: a dict display with ** is twice as slow
    before["undo"] = before["last_settlement"] = None
    undo = _new(TableState)
    _set(undo, "__dict__", before)
    new = f.copy()
    new["phase"] = phase
    new["point"] = point
    new["last_roll"] = dice
    new["rolls"] = f["rolls"] + 1
    new["undo"] = undo
    new["last_settlement"] = None
    if seq is not None:
        new["reader_seq"] = seq
        new["reader_dice"] = dice
        new["reader_recent"] = remember(f["reader_recent"], seq, dice[0], dice[1])
    if source == "manual":  # from now on the reader's rolls wait for the dealer
        new["hold_reader"] = True
    if made:
        m = f["meters"]
        new["meters"] = _but(m, points_made=m.points_made + 1)
    if closes:
        new["betting_open"] = False
    state = _new(TableState)
    _set(state, "__dict__", new)
    return state


# (phase, point, betting open, rolls, points made during a run of rolls, last roll,
# the different points, the reader's last seq and dice)
RunFields = tuple[
    Phase, int | None, bool, int, int, tuple[int, int] | None, tuple[int, ...],
    int | None, tuple[int, int] | None,
]  # fmt: skip


def after_rolls(
    state: TableState,
    now: RunFields,
    before: RunFields,
    tail: Sequence[Event] = (),
    seqs: tuple[Sequence[tuple[int, int, int]], int] = ((), 0),
) -> TableState:
    """The state after a run of rolls that only moved the hand or lit markers (no manual
    roll, no alert, no pay at the 6th point): ``now``, the fields the run changed, after
    it; ``before``, the same before its last roll (the undo buffer); ``tail``, the events
    the last roll made besides its :class:`RollAccepted` (a seven-out's
    :class:`Settlement` and :class:`NewHand`), folded by their rules after it; ``seqs``,
    the run's reader rolls as (seq, d1, d2) and how many of them came before its last
    roll (the reader's window, :data:`~controller.core.table.READER_WINDOW`)."""
    meters = state.meters
    run_seqs, seqs_before = seqs

    def fields(run: RunFields, upto: int) -> Fields:
        f = state.__dict__.copy()
        if upto:
            f["reader_recent"] = (*f["reader_recent"], *run_seqs[:upto])[-READER_WINDOW:]
        f["phase"], f["point"], f["betting_open"], f["rolls"] = run[:4]
        f["last_roll"], f["points"] = run[5], run[6]
        f["reader_seq"], f["reader_dice"] = run[7], run[8]
        if run[4]:
            f["meters"] = _but(meters, points_made=meters.points_made + run[4])
        f["last_settlement"] = None
        return f

    undo = fields(before, seqs_before)
    undo["undo"] = None
    new = fields(now, len(run_seqs))
    new["undo"] = _value(TableState, undo)
    for event in tail:
        _RULES[type(event)](new, event)
    return _value(TableState, new)


def _unchanged(f: Fields, e: Event) -> None:
    pass


def _betting_closed(f: Fields, e: BettingClosed) -> None:
    f["betting_open"] = False


def _new_point(f: Fields, e: NewDifferentPoint) -> None:
    f["points"] = (*f["points"], e.point)


def _alert(f: Fields, e: SurveillanceAlert) -> None:
    earlier = f["earlier_alerts"]
    newest = f["alert_hand"]
    if newest is not None and newest != e.hand and e.keep > 1:
        earlier = (*earlier, (newest, f["confirmed_by"]))
    f["earlier_alerts"] = _kept_alerts(earlier, e.keep - 1)
    f["alert_raised"] = f["surveillance_alert"] = True
    f["alert_hand"] = e.hand
    f["confirmed_by"] = None


def _kept_alerts(
    alerts: tuple[tuple[int, str | None], ...], room: int
) -> tuple[tuple[int, str | None], ...]:
    """``alerts`` cut to ``room``: the oldest confirmed go first, then the oldest open
    (surveillance clears such a one on the floor, with a note: docs/floor.md)."""
    kept = list(alerts)
    while len(kept) > max(room, 0):
        confirmed = [i for i, (_, by) in enumerate(kept) if by is not None]
        del kept[confirmed[0] if confirmed else 0]
    return tuple(kept)


def _with_confirmation(state: TableState, hand: int, by: str) -> TableState:
    """``state`` with ``hand``'s kept alert confirmed by ``by`` (as it was when not kept)."""
    if state.alert_hand == hand:
        return _but(state, confirmed_by=by)
    if any(h == hand for h, _ in state.earlier_alerts):
        earlier = tuple((h, by if h == hand else who) for h, who in state.earlier_alerts)
        return _but(state, earlier_alerts=earlier)
    return state


def _confirmed(f: Fields, e: SurveillanceConfirmed) -> None:
    # a void does not take a confirmation back (as it does not an acknowledgement)
    undo = f["undo"]
    if undo is not None:
        f["undo"] = _with_confirmation(undo, e.hand, e.by)
    if f["alert_hand"] == e.hand:
        f["confirmed_by"] = e.by
    else:
        f["earlier_alerts"] = tuple(
            (h, e.by if h == e.hand else who) for h, who in f["earlier_alerts"]
        )


def _acknowledged(f: Fields, e: Acknowledged) -> None:
    f["surveillance_alert"] = False
    if f["undo"] is not None:
        f["undo"] = _but(f["undo"], surveillance_alert=False)


def _settlement(f: Fields, e: Settlement) -> None:
    f["bets"] = {}
    f["settled"] = f["settled"] or e.immediate
    f["meters"] = _meter_settlement(f["meters"], e)
    f["last_settlement"] = e


def _new_hand(f: Fields, e: NewHand) -> None:
    m = f["meters"]
    f.update(
        phase=Phase.NEW_SHOOTER,
        point=None,
        hand=e.hand,
        shooter=e.shooter,
        points=(),
        bets={},
        betting_open=True,
        surrender_pending=False,
        finishing_point=False,
        settled=False,
        alert_raised=False,
        meters=_but(m, hands=m.hands + 1),
    )


def _surrendered(f: Fields, e: Surrendered) -> None:
    keep = e.carries_points or not e.pending
    m = f["meters"]
    # a point that was on stays on: the successor throws for it (SPEC section 2); with
    # no fire bet riding the next hand's betting opens when that point is decided
    on_point = f["phase"] is Phase.POINT
    f.update(
        phase=Phase.POINT if on_point else Phase.NEW_SHOOTER,
        shooter=e.shooter,
        points=f["points"] if keep else (),
        alert_raised=f["alert_raised"] if keep else False,
        betting_open=not e.pending and not on_point,
        surrender_pending=e.pending,
        finishing_point=on_point and not e.pending,
        meters=_but(m, surrenders=m.surrenders + 1),
        undo=None,
        last_settlement=None,
    )


def _bet(f: Fields, e: BetAccepted) -> None:
    m = f["meters"]
    f["bets"] = {**f["bets"], e.position: e.total}
    f["meters"] = _but(m, bets_taken=m.bets_taken + 1, bets_amount=m.bets_amount + e.amount)
    f["undo"] = f["last_settlement"] = None


def _cancelled(f: Fields, e: BetCancelled) -> None:
    m = f["meters"]
    f["bets"] = {p: a for p, a in f["bets"].items() if p != e.position}
    f["meters"] = _but(
        m, bets_cancelled=m.bets_cancelled + 1, cancelled_amount=m.cancelled_amount + e.amount
    )
    f["undo"] = f["last_settlement"] = None


def _voided(f: Fields, e: RollVoided) -> None:
    undo: TableState | None = f["undo"]
    if undo is None:  # pragma: no cover - the engine never emits this
        raise ValueError("a void with nothing to void")
    # the meters go back with the roll (it never counted), but the void is metered,
    # and so is a reversed settlement; faults seen since the roll stay counted
    m = f["meters"]
    meters = _but(undo.meters, voids=m.voids + 1, faults=m.faults)
    if e.reversed_settlement is not None:
        meters = _meter_settlement(meters, e.reversed_settlement, sign=-1)
    # the reader's bookkeeping is not wound back by a void
    reader = {k: f[k] for k in _READER_FIELDS}
    f.clear()
    f.update(undo.__dict__)
    f.update(reader, meters=meters, undo=None, last_settlement=None)


_READER_FIELDS = (
    "reader_seq",
    "reader_dice",
    "reader_conflict",
    "hold_reader",
    "reader_faulted",
    "reader_recent",
    "reader_model",
    "reader_firmware",
    "held",
    "held_next",
)


def _reader_restarted(f: Fields, e: ReaderRestarted) -> None:
    old = f["reader_session"]
    if old is not None:  # the session ends: its last roll is kept for a late HELLO's WELCOME
        f["reader_past"] = (*f["reader_past"], (old, f["reader_seq"] or 0))[-SESSIONS_KEPT:]
    f["reader_session"] = e.session or None
    f["reader_welcome"] = e.applied
    f["reader_seq"] = 0 if e.session else None  # protocol 3 numbers its rolls from 1
    f["reader_dice"] = f["reader_conflict"] = None
    f["reader_recent"] = ()
    f["reader_faulted"] = False
    if e.model or e.firmware:  # (a record from before they were kept names neither)
        f["reader_model"], f["reader_firmware"] = e.model, e.firmware


def _reader_advanced(f: Fields, e: ReaderAdvanced) -> None:
    f["reader_seq"], f["reader_dice"] = e.seq, None  # (the window of rolls is kept)


def _reader_fault_holds(f: Fields, e: ReaderFaultHolds) -> None:
    f["reader_faulted"] = True


def _reader_fault_over(f: Fields, e: ReaderFaultOver) -> None:
    f["reader_faulted"] = False


def _seq_conflict(f: Fields, e: SeqConflict) -> None:
    f["reader_conflict"] = e.seq


def _roll_held(f: Fields, e: RollHeld) -> None:
    f["held"] = (*f["held"], HeldRoll(e.number, e.seq, e.d1, e.d2, e.at, e.reason))
    f["held_next"] = e.number + 1
    f["hold_reader"] = True  # the reader's next rolls wait behind it (SPEC section 4)
    if e.seq is not None:
        f["reader_seq"] = e.seq
        f["reader_dice"] = (e.d1, e.d2)
        f["reader_recent"] = remember(f["reader_recent"], e.seq, e.d1, e.d2)


def _held_done(f: Fields, e: HeldRollApplied | HeldRollDiscarded) -> None:
    left = tuple(h for h in f["held"] if h.number != e.number)
    f["held"] = left
    f["hold_reader"] = bool(left)
    if type(e) is HeldRollApplied:  # the roll thrown again counts: no correction waits
        f["correcting"] = None


def _correction_armed(f: Fields, e: CorrectionArmed) -> None:
    f["correcting"] = (e.d1, e.d2)
    f["hold_reader"] = True  # the reader's rolls wait until the true dice are given


def _corrected(f: Fields, e: RollCorrected) -> None:
    m = f["meters"]
    f["meters"] = _but(m, corrections=m.corrections + 1)
    if f["correcting"] is not None:  # an armed correction completed
        f["correcting"] = None
        f["hold_reader"] = bool(f["held"])


def _fault(f: Fields, e: FaultRecorded) -> None:
    m = f["meters"]
    f["meters"] = _but(m, faults=m.faults + 1)


_RULES: dict[type[Event], Callable[[Fields, Any], None]] = {
    RollAccepted: _roll,
    Refused: _unchanged,
    DuplicateRoll: _unchanged,
    ReaderFaultHolds: _reader_fault_holds,
    ReaderFaultOver: _reader_fault_over,
    BettingClosed: _betting_closed,
    NewDifferentPoint: _new_point,
    SurveillanceAlert: _alert,
    SurveillanceConfirmed: _confirmed,
    Acknowledged: _acknowledged,
    Settlement: _settlement,
    NewHand: _new_hand,
    Surrendered: _surrendered,
    BetAccepted: _bet,
    BetCancelled: _cancelled,
    RollVoided: _voided,
    CorrectionArmed: _correction_armed,
    RollCorrected: _corrected,
    ReaderRestarted: _reader_restarted,
    ReaderAdvanced: _reader_advanced,
    SeqConflict: _seq_conflict,
    RollHeld: _roll_held,
    HeldRollApplied: _held_done,
    HeldRollDiscarded: _held_done,
    FaultRecorded: _fault,
}


def evolve(state: TableState, event: Event) -> TableState:
    """Apply one event to the state. The only place the state changes."""
    return fold_all(state, (event,))


def fold_all(state: TableState, events: Sequence[Event]) -> TableState:
    """The state after ``events``, each folded by its rule in turn on one copy of the fields."""
    fields = state.__dict__.copy()
    rules = _RULES
    for event in events:
        rule = rules.get(type(event))
        if rule is None:
            raise TypeError(f"no rule to fold {event!r}")
        rule(fields, event)
    new = _new(TableState)
    _set(new, "__dict__", fields)
    return new


def fold(events: Iterable[Event], state: TableState | None = None) -> TableState:
    """Fold events into a state, starting from ``state`` (a fresh table by default)."""
    return fold_all(state if state is not None else TableState(), tuple(events))
