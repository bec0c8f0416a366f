"""The table state's values: the phase, the meters, a held roll and the state itself.

:class:`TableState` is a plain value, serialised to JSON and back; how each event
changes it (the fold) is :mod:`controller.core.state`, which also re-exports these
names, so ``from controller.core.state import TableState`` stays the usual import.

Equality compares the game (phase, point, hand, points, wagers, alert, rolls).
The meters, the void buffer, the reader's last sequence number and dice, a
sequence conflict, and the reader rolls held after manual entry are bookkeeping
carried along with it; they are kept and serialised but a void does not wind
them back, so equality ignores them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from controller.core.events import Settlement, event_from_dict

READER_WINDOW = 64
"""How many of the reader's last applied (or held) rolls the state remembers with their
dice: a stale copy of one of them with other dice is a ``SEQ_CONFLICT``."""
SEQ_MODULO = 65536  # the reader's seq is 0..65535, wrapping
SEQ_BEHIND = SEQ_MODULO // 2  # the 32,768 seqs at or behind the last one are "not newer"
SEQ_ADVANCE = 8192
"""Kept for replaying records written before issue 29 only: a ``reader_sync`` record of
that time moved the reference up once the reader's frames stood this far past the last
roll (``reader_advanced``). No driver sends ``reader_sync`` any more."""
SESSIONS_KEPT = 1024
"""How many of the reader's past protocol-3 sessions the state remembers (with the number
of the last roll applied in each): a replayed HELLO of one of them starts nothing, and a
HELLO that carries a roll over from one of them is told how far it was applied. Past this
many the table cannot tell an old session's HELLO from a new one, so a bridge that
replays a HELLO and its ROLLs from more than 1,024 reader sessions ago has them applied
again (a documented limit, ``docs/reader-protocol.md``; it was 16, and the reader model's
soak found the replay after 22 restarts). About 23 kB in a snapshot when full."""


class Order(StrEnum):
    """Where a reader roll's seq stands against the last one applied (:func:`order`)."""

    NEW = "new"  # the next roll: apply it (or hold it)
    COPY = "copy"  # the last roll again, or an older one: ACK, never apply
    GAP = "gap"  # protocol 3: numbered past the next one: never applied, never ACKed


def order(seq: int, last: int | None, session: str | None) -> Order:
    """Where ``seq`` stands against ``last``, the seq of the last reader roll applied: the
    one home of the reader's sequence arithmetic (``docs/reader-protocol.md``).

    Protocol 3 (``session`` is the table's current session): a session numbers its rolls
    1, 2, 3, ... and nothing else, so the next roll is ``last + 1``, a copy is at or below
    ``last`` and anything above ``last + 1`` is a gap. Protocols 1 and 2 (``session`` is
    None): every frame takes a seq, modulo 65536; a seq 1 to 32,767 ahead of ``last`` is
    new, ``last`` itself and the 32,768 behind it are copies.
    """
    if session is not None:
        top = last or 0
        if seq == top + 1:
            return Order.NEW
        return Order.COPY if seq <= top else Order.GAP
    if last is None:
        return Order.NEW
    behind = (seq - last) % SEQ_MODULO
    return Order.COPY if behind == 0 or behind >= SEQ_BEHIND else Order.NEW


def not_newer(seq: int, last: int | None) -> bool:
    """Protocols 1 and 2: whether ``seq`` is not newer than ``last`` (:func:`order`)."""
    return order(seq, last, None) is Order.COPY


def legacy_sync(seq: int, last: int | None) -> str | None:
    """What a ``reader_sync`` record written before issue 29 did when replayed: "restart"
    (its seq stood behind the last roll), "advance" (8,192 or more past it) or None. A
    guess from seq arithmetic, kept only so old journals fold to the states they hold."""
    if seq != last and not_newer(seq, last):
        return "restart"
    if last is not None and (seq - last) % SEQ_MODULO >= SEQ_ADVANCE:
        return "advance"
    return None


def remember(
    recent: tuple[tuple[int, int, int], ...], seq: int, d1: int, d2: int
) -> tuple[tuple[int, int, int], ...]:
    """``recent`` with the roll at ``seq`` added, at most :data:`READER_WINDOW` kept."""
    if len(recent) >= READER_WINDOW:
        return (*recent[1 - READER_WINDOW :], (seq, d1, d2))
    return (*recent, (seq, d1, d2))


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
    corrections: int = 0  # misread rolls corrected (each also counts as a void)

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
            # only once there is one, so snapshots written before it still match
            **({"corrections": self.corrections} if self.corrections else {}),
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
            corrections=d.get("corrections", 0),
        )


@dataclass(frozen=True)
class HeldRoll:
    """A reader roll held for the dealer (``docs/rules.md``); ``reason``, when the hold is
    not the usual one after manual entry or in the reader's FAULT, says why in the
    dealer's words (a roll the table cannot prove a copy, ``docs/reader-protocol.md``)."""

    number: int
    seq: int | None
    d1: int
    d2: int
    at: str = ""
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """``status --json`` ``held_rolls`` item (``reason`` only when the hold has one, so
        a state journaled before it had one reads back the same)."""
        out: dict[str, Any] = {
            "number": self.number,
            "seq": self.seq,
            "dice": [self.d1, self.d2],
            "at": self.at,
        }
        if self.reason:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HeldRoll:
        return cls(
            d["number"], d["seq"], d["dice"][0], d["dice"][1], d.get("at", ""), d.get("reason", "")
        )


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
    # the successor throws for the point a shooter surrendered with no fire bet riding: the
    # next fire-bet hand (betting open) starts when that point is decided (SPEC section 2)
    finishing_point: bool = False
    settled: bool = False  # this hand's bets were already paid at the 6th point
    alert_raised: bool = False  # the surveillance alert was raised this hand
    surveillance_alert: bool = False  # raised and not yet acknowledged
    alert_hand: int | None = None  # the hand whose alert was raised last
    confirmed_by: str | None = None  # who in surveillance confirmed that hand (the floor)
    # the alerts of hands before alert_hand the table keeps confirmable, oldest first, as
    # (hand, who confirmed it or None while open): at most the rules' confirmable_alerts
    # less one (the newest is alert_hand's); empty under rules from before issue 32
    earlier_alerts: tuple[tuple[int, str | None], ...] = ()
    last_roll: tuple[int, int] | None = None
    rolls: int = 0  # accepted rolls, all hands
    # a void armed a correction: the dice it voided, until a correction gives the true
    # ones (the reader's rolls are held and wagers wait meanwhile)
    correcting: tuple[int, int] | None = None
    reader_seq: int | None = field(default=None, compare=False)
    reader_dice: tuple[int, int] | None = field(default=None, compare=False)
    reader_conflict: int | None = field(default=None, compare=False)  # seq, until HELLO
    hold_reader: bool = field(default=False, compare=False)  # a roll was keyed by hand
    # the reader itself reports FAULT (journaled): its rolls are held until it says OK
    reader_faulted: bool = field(default=False, compare=False)
    reader_model: str = field(default="", compare=False)  # what its last HELLO said
    reader_firmware: str = field(default="", compare=False)
    # protocol 3: the session the table holds (from the HELLO it journaled and WELCOMEd),
    # what its WELCOME answered, and the past sessions with the last roll applied in each
    reader_session: str | None = field(default=None, compare=False)
    reader_welcome: int = field(default=0, compare=False)
    reader_past: tuple[tuple[str, int], ...] = field(default=(), compare=False)
    # the reader's last READER_WINDOW applied or held rolls, oldest first, as (seq, d1, d2):
    # how a stale copy's dice are compared (rebuilt from the records a recovery replays,
    # never in a snapshot: the last seq and its dice are, above)
    reader_recent: tuple[tuple[int, int, int], ...] = field(default=(), compare=False, repr=False)
    held: tuple[HeldRoll, ...] = field(default=(), compare=False)
    held_next: int = field(default=1, compare=False)
    meters: Meters = field(default_factory=Meters, compare=False)
    undo: TableState | None = field(default=None, compare=False, repr=False)
    last_settlement: Settlement | None = field(default=None, compare=False, repr=False)

    @property
    def unique_points(self) -> int:
        return len(self.points)

    def alerts(self) -> tuple[tuple[int, str | None], ...]:
        """Every hand whose 5th-point alert the table keeps, oldest first, with who in
        surveillance confirmed it (None: open, waiting for surveillance)."""
        newest = () if self.alert_hand is None else ((self.alert_hand, self.confirmed_by),)
        return (*self.earlier_alerts, *newest)

    def open_alerts(self) -> tuple[int, ...]:
        """The hands whose alert the table keeps and surveillance has not confirmed."""
        return tuple(hand for hand, by in self.alerts() if by is None)

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
            # only when set, so snapshots written before it existed read as before
            **({"finishing_point": True} if self.finishing_point else {}),
            "settled": self.settled,
            "alert_raised": self.alert_raised,
            "surveillance_alert": self.surveillance_alert,
            # only when set, so snapshots of tables that never had an alert read as before
            **({"alert_hand": self.alert_hand} if self.alert_hand is not None else {}),
            **({"confirmed_by": self.confirmed_by} if self.confirmed_by is not None else {}),
            # only when some are kept, so snapshots written before issue 32 read as before
            **(
                {"earlier_alerts": [[hand, by] for hand, by in self.earlier_alerts]}
                if self.earlier_alerts
                else {}
            ),
            "last_roll": list(self.last_roll) if self.last_roll else None,
            "rolls": self.rolls,
            **({"correcting": list(self.correcting)} if self.correcting else {}),
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
        if self.reader_faulted:
            out["reader_faulted"] = True
        if self.reader_model or self.reader_firmware:
            out["reader_model"] = self.reader_model
            out["reader_firmware"] = self.reader_firmware
        if self.reader_session is not None:
            out["reader_session"] = self.reader_session
            out["reader_welcome"] = self.reader_welcome
        if self.reader_past:
            out["reader_past"] = [[session, last] for session, last in self.reader_past]
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
            finishing_point=bool(d.get("finishing_point", False)),
            settled=d["settled"],
            alert_raised=d["alert_raised"],
            surveillance_alert=d["surveillance_alert"],
            alert_hand=d.get("alert_hand"),
            confirmed_by=d.get("confirmed_by"),
            earlier_alerts=tuple((int(h), by) for h, by in d.get("earlier_alerts", ())),
            last_roll=(d["last_roll"][0], d["last_roll"][1]) if d["last_roll"] else None,
            rolls=d["rolls"],
            correcting=(d["correcting"][0], d["correcting"][1]) if d.get("correcting") else None,
            reader_seq=d["reader_seq"],
            reader_dice=(d["reader_dice"][0], d["reader_dice"][1])
            if d.get("reader_dice")
            else None,
            reader_conflict=d.get("reader_conflict"),
            hold_reader=bool(d.get("hold_reader", False)),
            reader_faulted=bool(d.get("reader_faulted", False)),
            reader_model=str(d.get("reader_model", "")),
            reader_firmware=str(d.get("reader_firmware", "")),
            reader_session=d.get("reader_session"),
            reader_welcome=int(d.get("reader_welcome", 0)),
            reader_past=tuple((str(p[0]), int(p[1])) for p in d.get("reader_past", ())),
            held=tuple(HeldRoll.from_dict(h) for h in d.get("held", ())),
            held_next=d.get("held_next", 1),
            meters=Meters.from_dict(d["meters"]),
            undo=cls.from_dict(d["undo"]) if d.get("undo") else None,
            last_settlement=last if isinstance(last, Settlement) else None,
        )
