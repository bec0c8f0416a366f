"""Domain events: what the rules engine decided, in the language of the table.

Events are facts. :func:`controller.core.state.evolve` folds them into the table
state, so the journal, recovery, void and replay all use the same code.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from controller.core.errors import Refusal


class RollOutcome(StrEnum):
    """What the hand machine did: what an accepted roll did to the hand, or a surrender
    (``docs/state-machine.md``)."""

    NATURAL = "natural"
    CRAPS = "craps"
    POINT_ESTABLISHED = "point_established"
    POINT_MADE = "point_made"
    SEVEN_OUT = "seven_out"
    NO_DECISION = "no_decision"
    SURRENDER = "surrender"  # the shooter gave up the dice (never a roll's)


_OUTCOMES: dict[str, RollOutcome] = {o.value: o for o in RollOutcome}


class HandResult(StrEnum):
    """What a hand's settlement was for its fire bets (``replay --json`` ``result``)."""

    WIN = "win"
    LOSE = "lose"


@dataclass(frozen=True)
class Event:
    """Base of every event; ``name`` names it in JSON (under ``"event"``)."""

    name: ClassVar[str] = "event"
    journaled: ClassVar[bool] = True  # False: a decision that changes nothing, never kept

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the event's name under ``"event"``."""
        return {"event": self.name, **asdict(self)}


@dataclass(frozen=True)
class Refused(Event):
    """A command was not applied; ``reason`` says why in a dealer's words, ``code`` as a
    stable :class:`~controller.core.errors.Refusal` code."""

    name: ClassVar[str] = "refused"
    command: str
    reason: str
    code: str = Refusal.FAILED


@dataclass(frozen=True)
class DuplicateRoll(Event):
    """A copy of a roll already applied (same reader seq): ACK it again, change nothing.

    ``stale``: not the last roll's seq but one behind it (a copy that came late, or a
    reordered one: SPEC section 4). Never journaled: the original is.
    """

    name: ClassVar[str] = "duplicate_roll"
    journaled: ClassVar[bool] = False  # the ACK again is all it does: never a record's event
    seq: int
    stale: bool = False


@dataclass(frozen=True)
class ReaderRestarted(Event):
    """The reader said HELLO: the next frame numbers are new; ``model`` and ``firmware``
    are what it said it is (empty from a record written before they were kept).
    Protocol 3: ``session`` is the session it opened, ``applied`` what its WELCOME says
    of the roll the HELLO carried over (empty and 0 under protocols 1 and 2)."""

    name: ClassVar[str] = "reader_restarted"
    seq: int
    model: str = ""
    firmware: str = ""
    session: str = ""
    applied: int = 0


@dataclass(frozen=True)
class ReaderAdvanced(Event):
    """Replayed from records written before issue 29 only (a guess no driver makes any
    more): the reader's heartbeats had run far past the last roll applied, and ``seq``
    became the reference a roll had to be newer than."""

    name: ClassVar[str] = "reader_advanced"
    seq: int


@dataclass(frozen=True, init=False)
class RollAccepted(Event):
    """A roll counted. ``outcome`` names what it did; ``phase`` and ``point`` are after it."""

    name: ClassVar[str] = "roll"
    d1: int
    d2: int
    total: int
    outcome: RollOutcome
    phase: str
    point: int | None
    source: str = "reader"
    seq: int | None = None
    actor: str = "dealer"
    at: str = ""

    def __init__(  # written out: the generated frozen __init__ is 3x slower
        self,
        d1: int,
        d2: int,
        total: int,
        outcome: str,
        phase: str,
        point: int | None,
        source: str = "reader",
        seq: int | None = None,
        actor: str = "dealer",
        at: str = "",
    ) -> None:
        self.__dict__.update(
            d1=d1, d2=d2, total=total, outcome=_OUTCOMES[outcome], phase=phase, point=point,
            source=source, seq=seq, actor=actor, at=at,
        )  # fmt: skip


@dataclass(frozen=True)
class BettingClosed(Event):
    """No more fire bets on this hand."""

    name: ClassVar[str] = "betting_closed"
    reason: str


@dataclass(frozen=True)
class NewDifferentPoint(Event):
    """The shooter made a point not made before this hand: its marker shows ``ordinal``."""

    name: ClassVar[str] = "new_point"
    point: int
    ordinal: int


@dataclass(frozen=True)
class SurveillanceAlert(Event):
    """The alert count of different points was reached: surveillance must confirm.

    ``keep``: how many hands' alerts the table keeps confirmable under the rules that
    raised it (:attr:`~controller.core.config.FireBetRules.confirmable_alerts`; 1, only
    the newest, is how every table decided before issue 32, and is not written).
    """

    name: ClassVar[str] = "surveillance_alert"
    optional_keys: ClassVar[tuple[str, ...]] = ("keep",)  # written only when not 1
    hand: int
    unique_points: int
    keep: int = 1

    def to_dict(self) -> dict[str, Any]:
        """As :meth:`Event.to_dict`, ``keep`` only when it is not 1 (older records read
        as they did)."""
        out = super().to_dict()
        if self.keep == 1:
            del out["keep"]
        return out


@dataclass(frozen=True)
class Acknowledged(Event):
    """The surveillance alert was acknowledged."""

    name: ClassVar[str] = "acknowledged"
    actor: str = "dealer"
    at: str = ""


@dataclass(frozen=True)
class SurveillanceConfirmed(Event):
    """Surveillance confirmed the fire bets and payouts of alerted ``hand`` (``by`` whom)."""

    name: ClassVar[str] = "surveillance_confirmed"
    hand: int
    by: str
    id: str = ""
    actor: str = "floor"
    at: str = ""


@dataclass(frozen=True, init=False)
class Settlement(Event):
    """The fire bets of ``hand`` were settled (at the loser 7, or at the 6th point)."""

    name: ClassVar[str] = "settlement"
    hand: int
    points: tuple[int, ...]
    unique_points: int
    result: str  # a HandResult: win or lose
    odds_to_one: int
    tier: int
    payouts: dict[int, int] = field(default_factory=dict)
    wagers: dict[int, int] = field(default_factory=dict)
    immediate: bool = False

    def __init__(  # written out: the generated frozen __init__ is the seven-out's slowest step
        self,
        hand: int,
        points: tuple[int, ...],
        unique_points: int,
        result: str,
        odds_to_one: int,
        tier: int,
        payouts: dict[int, int] | None = None,
        wagers: dict[int, int] | None = None,
        immediate: bool = False,
    ) -> None:
        self.__dict__.update(
            hand=hand, points=points, unique_points=unique_points, result=result,
            odds_to_one=odds_to_one, tier=tier, payouts={} if payouts is None else payouts,
            wagers={} if wagers is None else wagers, immediate=immediate,
        )  # fmt: skip

    def report(self) -> dict[str, Any]:
        """The ``replay --json`` line for this settlement (``docs/cli.md``)."""
        return {
            "hand": self.hand,
            "points": list(self.points),
            "unique_points": self.unique_points,
            "result": self.result,
            "odds_to_one": self.odds_to_one,
            "payouts": {str(p): a for p, a in sorted(self.payouts.items())},
        }


@dataclass(frozen=True)
class NewHand(Event):
    """After the loser 7 a new shooter starts a new fire-bet hand."""

    name: ClassVar[str] = "new_hand"
    hand: int
    shooter: int


@dataclass(frozen=True)
class Surrendered(Event):
    """The shooter gave up the dice; ``pending`` when the fire bets wait for the successor."""

    name: ClassVar[str] = "surrendered"
    surrender: str  # voluntary or compulsory
    shooter: int  # the successor shooter's number
    pending: bool
    carries_points: bool
    actor: str = "dealer"
    at: str = ""


@dataclass(frozen=True)
class BetAccepted(Event):
    """A wager was taken on ``position``; ``total`` is what now rides there."""

    name: ClassVar[str] = "bet"
    position: int
    amount: int
    total: int
    actor: str = "dealer"
    at: str = ""


@dataclass(frozen=True)
class BetCancelled(Event):
    """The wager on ``position`` was taken back before betting closed."""

    name: ClassVar[str] = "cancel"
    position: int
    amount: int
    actor: str = "dealer"
    at: str = ""


@dataclass(frozen=True)
class RollVoided(Event):
    """The last roll was voided; the state is as before it (settlement reversed too).

    ``d1``, ``d2``: the roll it undid; ``record``: that roll's journal record, filled in
    by whoever knows the records (the service, the floor link); None from the engine alone."""

    name: ClassVar[str] = "void"
    d1: int
    d2: int
    reversed_settlement: Settlement | None = None
    actor: str = "dealer"
    at: str = ""
    record: int | None = None


@dataclass(frozen=True)
class CorrectionArmed(Event):
    """A void that waits for the true dice of the roll it undid (``d1``, ``d2``: the
    misread): the reader's rolls are held and wagers wait until a correction gives them."""

    name: ClassVar[str] = "correction_armed"
    d1: int
    d2: int
    actor: str = "dealer"
    at: str = ""


@dataclass(frozen=True)
class RollCorrected(Event):
    """A misread roll corrected (journaled with who): ``was`` the dice read, ``now`` the
    dice as they lay; the roll's own events follow (its source ``corrected``), after the
    :class:`RollVoided` that undid the misread one (or the armed void before it)."""

    name: ClassVar[str] = "correction"
    was: tuple[int, int]
    now: tuple[int, int]
    actor: str = "dealer"
    at: str = ""


@dataclass(frozen=True)
class SeqConflict(Event):
    """A ROLL with the seq of the last reader roll but other dice: not applied, not ACKed.

    The reader is in fault (``SEQ_CONFLICT``) until it says HELLO; both dice are kept.
    """

    name: ClassVar[str] = "seq_conflict"
    seq: int
    recorded_d1: int
    recorded_d2: int
    d1: int
    d2: int
    at: str = ""


@dataclass(frozen=True)
class RollHeld(Event):
    """A reader roll recorded (and ACKed) but held for the dealer: after manual entry, in
    the reader's own FAULT, or (protocols 1 and 2) a roll whose seq is not newer than the
    last one applied and is not one of the rolls the table remembers applying (``reason``
    says so: the table cannot prove it a copy, so the dealer decides).

    ``number`` names it for ``firebet held apply N`` / ``discard N``.
    """

    name: ClassVar[str] = "roll_held"
    number: int
    seq: int | None
    d1: int
    d2: int
    at: str = ""
    reason: str = ""


@dataclass(frozen=True)
class HeldRollApplied(Event):
    """The dealer applied held roll ``number``: the roll events that follow are its."""

    name: ClassVar[str] = "held_applied"
    number: int
    seq: int | None
    d1: int
    d2: int
    actor: str = "dealer"
    at: str = ""


@dataclass(frozen=True)
class HeldRollDiscarded(Event):
    """The dealer discarded held roll ``number`` (a throw already entered by hand)."""

    name: ClassVar[str] = "held_discarded"
    number: int
    seq: int | None
    d1: int
    d2: int
    actor: str = "dealer"
    at: str = ""


@dataclass(frozen=True)
class FaultRecorded(Event):
    """A fault was counted on the meters."""

    name: ClassVar[str] = "fault"
    code: str


@dataclass(frozen=True)
class ReaderFaultHolds(Event):
    """The reader itself reports FAULT: its rolls are held for the dealer until it says OK
    (or HELLO), as after a roll keyed by hand (SPEC section 4)."""

    name: ClassVar[str] = "reader_fault_holds"
    code: str


@dataclass(frozen=True)
class ReaderFaultOver(Event):
    """The reader's own FAULT ended (OK): its next rolls count again (rolls held in the
    fault stay held until the dealer has dealt with them)."""

    name: ClassVar[str] = "reader_fault_over"
    at: str = ""


EVENTS: dict[str, type[Event]] = {
    e.name: e
    for e in (
        Refused,
        DuplicateRoll,
        ReaderRestarted,
        ReaderAdvanced,
        RollAccepted,
        BettingClosed,
        NewDifferentPoint,
        SurveillanceAlert,
        Acknowledged,
        SurveillanceConfirmed,
        Settlement,
        NewHand,
        Surrendered,
        BetAccepted,
        BetCancelled,
        RollVoided,
        CorrectionArmed,
        RollCorrected,
        FaultRecorded,
        ReaderFaultHolds,
        ReaderFaultOver,
        SeqConflict,
        RollHeld,
        HeldRollApplied,
        HeldRollDiscarded,
    )
}


def _settlement_from_dict(body: dict[str, Any]) -> Settlement:
    body = dict(body)
    body.pop("event", None)
    body["points"] = tuple(body["points"])
    body["payouts"] = {int(k): v for k, v in body.get("payouts", {}).items()}
    body["wagers"] = {int(k): v for k, v in body.get("wagers", {}).items()}
    return Settlement(**body)


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild an event from :meth:`Event.to_dict` output after a JSON round trip."""
    body = dict(data)
    name = body.pop("event", None)
    cls = EVENTS.get(str(name))
    if cls is None:
        raise ValueError(f"unknown event {name!r}")
    if cls is Settlement:
        return _settlement_from_dict(body)
    if cls is RollVoided and body.get("reversed_settlement") is not None:
        body["reversed_settlement"] = _settlement_from_dict(body["reversed_settlement"])
    if cls is RollCorrected:
        body["was"], body["now"] = tuple(body["was"]), tuple(body["now"])
    return cls(**body)


PUBLISHED: dict[str, type[Event]] = {n: e for n, e in EVENTS.items() if e.journaled}
"""The event types a journal record can carry: what the floor's ``event`` messages and a
dealer action's reply hold (docs/floor.md, "The `events` schema"; controller/schemas/
floor-event.schema.json). A command whose events are all of the others is not journaled."""
