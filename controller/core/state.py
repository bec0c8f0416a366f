"""The table state: a plain value, folded from events, serialised to JSON and back.

Equality compares the game (phase, point, hand, points, wagers, alert, rolls).
The meters, the void buffer, the reader's last sequence number and dice, a
sequence conflict, and the reader rolls held after manual entry are bookkeeping
carried along with it; they are kept and serialised but a void does not wind
them back, so equality ignores them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

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
    RollOutcome,
    RollVoided,
    SeqConflict,
    Settlement,
    Surrendered,
    SurveillanceAlert,
    SurveillanceConfirmed,
    event_from_dict,
)


class Phase(StrEnum):
    """Where the hand stands."""

    NEW_SHOOTER = "new_shooter"  # before a new shooter's first come-out roll
    COME_OUT = "come_out"  # come-out roll of a shooter who has already rolled
    POINT = "point"  # a point is established


@dataclass(frozen=True)
class TierMeter:
    count: int = 0
    amount: int = 0


@dataclass(frozen=True)
class Meters:
    """GLI-style counters of what the table did.

    A voided roll never counted: its rolls, points, hands and settlement come off
    again, while ``voids`` and ``reversed`` (settlements taken back) count the voids.
    """

    hands: int = 0
    points_made: int = 0
    bets_taken: int = 0
    bets_amount: int = 0
    bets_cancelled: int = 0
    cancelled_amount: int = 0
    paid: dict[int, TierMeter] = field(default_factory=dict)
    lost: TierMeter = field(default_factory=TierMeter)
    reversed: TierMeter = field(default_factory=TierMeter)
    voids: int = 0
    surrenders: int = 0
    faults: int = 0

    def to_dict(self, rolls: int) -> dict[str, Any]:
        """The meters as JSON; ``rolls`` is the table's accepted-roll count (a void takes
        a roll off it again, so the state's count is the meter)."""
        return {
            "hands": self.hands,
            "rolls": rolls,
            "points_made": self.points_made,
            "bets_taken": {"count": self.bets_taken, "amount": self.bets_amount},
            "bets_cancelled": {"count": self.bets_cancelled, "amount": self.cancelled_amount},
            "paid": {
                str(t): {"count": m.count, "amount": m.amount} for t, m in sorted(self.paid.items())
            },
            "lost": {"count": self.lost.count, "amount": self.lost.amount},
            "reversed": {"count": self.reversed.count, "amount": self.reversed.amount},
            "voids": self.voids,
            "surrenders": self.surrenders,
            "faults": self.faults,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Meters:
        return cls(
            hands=d["hands"],
            points_made=d["points_made"],
            bets_taken=d["bets_taken"]["count"],
            bets_amount=d["bets_taken"]["amount"],
            bets_cancelled=d["bets_cancelled"]["count"],
            cancelled_amount=d["bets_cancelled"]["amount"],
            paid={int(t): TierMeter(**m) for t, m in d["paid"].items()},
            lost=TierMeter(**d["lost"]),
            reversed=TierMeter(**d["reversed"]),
            voids=d["voids"],
            surrenders=d["surrenders"],
            faults=d["faults"],
        )


@dataclass(frozen=True)
class HeldRoll:
    """A reader roll held for the dealer after manual entry (SPEC §2)."""

    number: int
    seq: int | None
    d1: int
    d2: int
    at: str = ""

    def to_dict(self) -> dict[str, Any]:
        """``status --json`` ``held_rolls`` item."""
        return {
            "number": self.number,
            "seq": self.seq,
            "dice": [self.d1, self.d2],
            "at": self.at,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HeldRoll:
        return cls(d["number"], d["seq"], d["dice"][0], d["dice"][1], d.get("at", ""))


@dataclass(frozen=True)
class TableState:
    """The fire-bet table at one instant. Never mutated: every change makes a new value."""

    phase: Phase = Phase.NEW_SHOOTER
    point: int | None = None
    hand: int = 1  # fire-bet hand in play; a surrendered hand keeps its number
    shooter: int = 1
    points: tuple[int, ...] = ()  # different points made this fire-bet hand, in order
    bets: dict[int, int] = field(default_factory=dict)  # position -> dollars riding
    betting_open: bool = True
    surrender_pending: bool = False  # a surrendered hand waits for the successor's loser 7
    settled: bool = False  # this hand's bets were already paid at the 6th point
    alert_raised: bool = False  # the surveillance alert was raised this hand
    surveillance_alert: bool = False  # raised and not yet acknowledged
    alert_hand: int | None = None  # the hand whose alert was raised last
    confirmed_by: str | None = None  # who in surveillance confirmed that hand (the floor)
    last_roll: tuple[int, int] | None = None
    rolls: int = 0  # accepted rolls, all hands
    reader_seq: int | None = field(default=None, compare=False)
    reader_dice: tuple[int, int] | None = field(default=None, compare=False)
    reader_conflict: int | None = field(default=None, compare=False)  # seq, until HELLO
    hold_reader: bool = field(default=False, compare=False)  # a roll was keyed by hand
    held: tuple[HeldRoll, ...] = field(default=(), compare=False)
    held_next: int = field(default=1, compare=False)
    meters: Meters = field(default_factory=Meters, compare=False)
    undo: TableState | None = field(default=None, compare=False, repr=False)
    last_settlement: Settlement | None = field(default=None, compare=False, repr=False)

    @property
    def unique_points(self) -> int:
        return len(self.points)

    def markers(self) -> dict[int, int]:
        """Point number -> ordinal of each lit fire-bet point marker."""
        return {p: i for i, p in enumerate(self.points, start=1)}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` gives the same state back."""
        return {
            "phase": self.phase.value,
            "point": self.point,
            "hand": self.hand,
            "shooter": self.shooter,
            "points": list(self.points),
            "bets": {str(p): a for p, a in sorted(self.bets.items())},
            "betting_open": self.betting_open,
            "surrender_pending": self.surrender_pending,
            "settled": self.settled,
            "alert_raised": self.alert_raised,
            "surveillance_alert": self.surveillance_alert,
            # only when set, so snapshots of tables that never had an alert read as before
            **({"alert_hand": self.alert_hand} if self.alert_hand is not None else {}),
            **({"confirmed_by": self.confirmed_by} if self.confirmed_by is not None else {}),
            "last_roll": list(self.last_roll) if self.last_roll else None,
            "rolls": self.rolls,
            "reader_seq": self.reader_seq,
            **self._reader_dict(),
            "meters": self.meters.to_dict(self.rolls),
            "undo": self.undo.to_dict() if self.undo is not None else None,
            "last_settlement": (
                self.last_settlement.to_dict() if self.last_settlement is not None else None
            ),
        }

    def _reader_dict(self) -> dict[str, Any]:
        """The reader bookkeeping keys, only those not at their defaults (so a journal's
        older snapshots, written before they existed, still match their records)."""
        out: dict[str, Any] = {}
        if self.reader_dice is not None:
            out["reader_dice"] = list(self.reader_dice)
        if self.reader_conflict is not None:
            out["reader_conflict"] = self.reader_conflict
        if self.hold_reader:
            out["hold_reader"] = True
        if self.held:
            out["held"] = [h.to_dict() for h in self.held]
        if self.held_next != 1:
            out["held_next"] = self.held_next
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TableState:
        settlement = d.get("last_settlement")
        last = event_from_dict(settlement) if settlement else None
        return cls(
            phase=Phase(d["phase"]),
            point=d["point"],
            hand=d["hand"],
            shooter=d["shooter"],
            points=tuple(d["points"]),
            bets={int(p): a for p, a in d["bets"].items()},
            betting_open=d["betting_open"],
            surrender_pending=d["surrender_pending"],
            settled=d["settled"],
            alert_raised=d["alert_raised"],
            surveillance_alert=d["surveillance_alert"],
            alert_hand=d.get("alert_hand"),
            confirmed_by=d.get("confirmed_by"),
            last_roll=(d["last_roll"][0], d["last_roll"][1]) if d["last_roll"] else None,
            rolls=d["rolls"],
            reader_seq=d["reader_seq"],
            reader_dice=(d["reader_dice"][0], d["reader_dice"][1])
            if d.get("reader_dice")
            else None,
            reader_conflict=d.get("reader_conflict"),
            hold_reader=bool(d.get("hold_reader", False)),
            held=tuple(HeldRoll.from_dict(h) for h in d.get("held", ())),
            held_next=d.get("held_next", 1),
            meters=Meters.from_dict(d["meters"]),
            undo=cls.from_dict(d["undo"]) if d.get("undo") else None,
            last_settlement=last if isinstance(last, Settlement) else None,
        )


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
    if s.result == "win":
        paid = dict(meters.paid)
        old = paid.get(s.tier, TierMeter())
        paid[s.tier] = TierMeter(old.count + len(s.wagers), old.amount + sum(s.payouts.values()))
        return _but(meters, paid=paid)
    return _but(
        meters, lost=TierMeter(meters.lost.count + len(s.wagers), meters.lost.amount + wagered)
    )


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


def _unchanged(f: Fields, e: Event) -> None:
    pass


def _betting_closed(f: Fields, e: BettingClosed) -> None:
    f["betting_open"] = False


def _new_point(f: Fields, e: NewDifferentPoint) -> None:
    f["points"] = (*f["points"], e.point)


def _alert(f: Fields, e: SurveillanceAlert) -> None:
    f["alert_raised"] = f["surveillance_alert"] = True
    f["alert_hand"] = e.hand
    f["confirmed_by"] = None


def _confirmed(f: Fields, e: SurveillanceConfirmed) -> None:
    # a void does not take a confirmation back (as it does not an acknowledgement)
    undo = f["undo"]
    if undo is not None and undo.alert_hand == e.hand:
        f["undo"] = _but(undo, confirmed_by=e.by)
    f["confirmed_by"] = e.by


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
        settled=False,
        alert_raised=False,
        meters=_but(m, hands=m.hands + 1),
    )


def _surrendered(f: Fields, e: Surrendered) -> None:
    keep = e.carries_points or not e.pending
    m = f["meters"]
    f.update(
        phase=Phase.NEW_SHOOTER,
        point=None,
        shooter=e.shooter,
        points=f["points"] if keep else (),
        alert_raised=f["alert_raised"] if keep else False,
        betting_open=not e.pending,
        surrender_pending=e.pending,
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
    "held",
    "held_next",
)


def _reader_restarted(f: Fields, e: ReaderRestarted) -> None:
    f["reader_seq"] = f["reader_dice"] = f["reader_conflict"] = None


def _seq_conflict(f: Fields, e: SeqConflict) -> None:
    f["reader_conflict"] = e.seq


def _roll_held(f: Fields, e: RollHeld) -> None:
    f["held"] = (*f["held"], HeldRoll(e.number, e.seq, e.d1, e.d2, e.at))
    f["held_next"] = e.number + 1
    if e.seq is not None:
        f["reader_seq"] = e.seq
        f["reader_dice"] = (e.d1, e.d2)


def _held_done(f: Fields, e: HeldRollApplied | HeldRollDiscarded) -> None:
    left = tuple(h for h in f["held"] if h.number != e.number)
    f["held"] = left
    f["hold_reader"] = bool(left)


def _fault(f: Fields, e: FaultRecorded) -> None:
    m = f["meters"]
    f["meters"] = _but(m, faults=m.faults + 1)


_RULES: dict[type[Event], Callable[[Fields, Any], None]] = {
    RollAccepted: _roll,
    Refused: _unchanged,
    DuplicateRoll: _unchanged,
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
    ReaderRestarted: _reader_restarted,
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
