"""The table state: a plain value, folded from events, serialised to JSON and back.

Equality compares the game (phase, point, hand, points, wagers, alert, rolls).
The meters, the void buffer, the reader's last sequence number and dice, a
sequence conflict, and the reader rolls held after manual entry are bookkeeping
carried along with it; they are kept and serialised but a void does not wind
them back, so equality ignores them.
"""

from __future__ import annotations

from collections.abc import Iterable
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


def evolve(state: TableState, event: Event) -> TableState:
    """Apply one event to the state. The only place the state changes."""
    m = state.meters
    if type(event) is RollAccepted:  # the hot path: checked first, by exact type
        fields = state.__dict__
        before = fields.copy()
        before["undo"] = before["last_settlement"] = None
        after = fields.copy()
        after["phase"] = _PHASE[event.phase]
        after["point"] = event.point
        after["last_roll"] = (event.d1, event.d2)
        after["rolls"] = fields["rolls"] + 1
        if event.seq is not None:
            after["reader_seq"] = event.seq
            after["reader_dice"] = (event.d1, event.d2)
        if event.source == "manual":  # from now on the reader's rolls wait for the dealer
            after["hold_reader"] = True
        if event.outcome == "point_made":
            after["meters"] = _but(m, points_made=m.points_made + 1)
        after["undo"] = _value(TableState, before)
        after["last_settlement"] = None
        return _value(TableState, after)
    if isinstance(event, Refused | DuplicateRoll):
        return state
    if isinstance(event, BettingClosed):
        return _but(state, betting_open=False)
    if isinstance(event, NewDifferentPoint):
        return _but(state, points=(*state.points, event.point))
    if isinstance(event, SurveillanceAlert):
        return _but(
            state,
            alert_raised=True,
            surveillance_alert=True,
            alert_hand=event.hand,
            confirmed_by=None,
        )
    if isinstance(event, SurveillanceConfirmed):
        # a void does not take a confirmation back (as it does not an acknowledgement)
        undo = state.undo
        if undo is not None and undo.alert_hand == event.hand:
            undo = _but(undo, confirmed_by=event.by)
        return _but(state, confirmed_by=event.by, undo=undo)
    if isinstance(event, Acknowledged):
        undo = _but(state.undo, surveillance_alert=False) if state.undo is not None else None
        return _but(state, surveillance_alert=False, undo=undo)
    if isinstance(event, Settlement):
        return _but(
            state,
            bets={},
            settled=state.settled or event.immediate,
            meters=_meter_settlement(m, event),
            last_settlement=event,
        )
    if isinstance(event, NewHand):
        return _but(
            state,
            phase=Phase.NEW_SHOOTER,
            point=None,
            hand=event.hand,
            shooter=event.shooter,
            points=(),
            bets={},
            betting_open=True,
            surrender_pending=False,
            settled=False,
            alert_raised=False,
            meters=_but(m, hands=m.hands + 1),
        )
    if isinstance(event, Surrendered):
        keep = event.carries_points or not event.pending
        return _but(
            state,
            phase=Phase.NEW_SHOOTER,
            point=None,
            shooter=event.shooter,
            points=state.points if keep else (),
            alert_raised=state.alert_raised if keep else False,
            betting_open=not event.pending,
            surrender_pending=event.pending,
            meters=_but(m, surrenders=m.surrenders + 1),
            undo=None,
            last_settlement=None,
        )
    if isinstance(event, BetAccepted):
        return _but(
            state,
            bets={**state.bets, event.position: event.total},
            meters=_but(m, bets_taken=m.bets_taken + 1, bets_amount=m.bets_amount + event.amount),
            undo=None,
            last_settlement=None,
        )
    if isinstance(event, BetCancelled):
        bets = {p: a for p, a in state.bets.items() if p != event.position}
        return _but(
            state,
            bets=bets,
            meters=_but(
                m,
                bets_cancelled=m.bets_cancelled + 1,
                cancelled_amount=m.cancelled_amount + event.amount,
            ),
            undo=None,
            last_settlement=None,
        )
    if isinstance(event, RollVoided):
        if state.undo is None:  # pragma: no cover - the engine never emits this
            raise ValueError("a void with nothing to void")
        # the meters go back with the roll (it never counted), but the void is metered,
        # and so is a reversed settlement; faults seen since the roll stay counted
        meters = _but(state.undo.meters, voids=m.voids + 1, faults=m.faults)
        if event.reversed_settlement is not None:
            meters = _meter_settlement(meters, event.reversed_settlement, sign=-1)
        return _but(
            state.undo,
            meters=meters,
            reader_seq=state.reader_seq,
            reader_dice=state.reader_dice,
            reader_conflict=state.reader_conflict,
            hold_reader=state.hold_reader,
            held=state.held,
            held_next=state.held_next,
            undo=None,
            last_settlement=None,
        )
    if isinstance(event, ReaderRestarted):
        return _but(state, reader_seq=None, reader_dice=None, reader_conflict=None)
    if isinstance(event, SeqConflict):
        return _but(state, reader_conflict=event.seq)
    if isinstance(event, RollHeld):
        held = HeldRoll(event.number, event.seq, event.d1, event.d2, event.at)
        return _but(
            state,
            held=(*state.held, held),
            held_next=event.number + 1,
            reader_seq=event.seq if event.seq is not None else state.reader_seq,
            reader_dice=(event.d1, event.d2) if event.seq is not None else state.reader_dice,
        )
    if isinstance(event, HeldRollApplied | HeldRollDiscarded):
        left = tuple(h for h in state.held if h.number != event.number)
        return _but(state, held=left, hold_reader=bool(left))
    if isinstance(event, FaultRecorded):
        return _but(state, meters=_but(m, faults=m.faults + 1))
    raise TypeError(f"no rule to fold {event!r}")  # pragma: no cover


def fold(events: Iterable[Event], state: TableState | None = None) -> TableState:
    """Fold events into a state, starting from ``state`` (a fresh table by default)."""
    current = state if state is not None else TableState()
    for event in events:
        current = evolve(current, event)
    return current
