"""The second opinion: the floor folds each table's records through the same rules engine.

A table journals every dealer and reader command (the command only: the journal
is "commands in, state out"), and its floor link publishes each command record
with the events the table's own engine decided (``events``, see
:mod:`controller.floor.fold`). The floor takes the rules the table journaled at
its last start, asks the pure engine of ``controller.core`` what the command
gives in the state the records have built so far, and compares: a settlement, a
different-point count, a marker or an alert that differs is a
:class:`Discrepancy`. The floor then follows what the table decided, so each
difference is reported once, at the record where it happened.

A command record that comes without the table's events (the table could not
derive them: a damaged journal) is folded with the rules' answer and marked *not
checked*: :attr:`TableAudit.checked_hand` does not pass its hand, and
:attr:`TableAudit.unchecked_hands` names it. The first such record of a hand is
also a :class:`Discrepancy` (``unchecked``): a table that stopped sending its
events (or was made to) raises an alert, not only a quieter console.

The same walk sorts the records into hands (rolls, points in order, wagers,
settlement, who did what) for the console, in the shape of ``history --json``.
Pure: records in, findings out; the caller stores them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.core.config import FireBetRules, rules_from_settings
from controller.core.engine import Engine
from controller.core.events import (
    Acknowledged,
    BetAccepted,
    BetCancelled,
    Event,
    NewDifferentPoint,
    Refused,
    RollAccepted,
    RollVoided,
    Settlement,
    Surrendered,
    SurveillanceAlert,
    SurveillanceConfirmed,
    event_from_dict,
)
from controller.core.state import TableState, evolve, fold
from controller.floor.wire import FloorRecord
from controller.journal.recipe import decode_command, to_ms

_ENGINES: dict[str, Engine] = {}
UNCHECKED_KEPT = 20  # the newest hands not checked, named on the console
NOT_SENT = "not checked: the table sent no events for it (it could not derive them)"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def rules_to_dict(rules: FireBetRules) -> dict[str, Any]:
    """The rules as JSON (pay table keys as strings)."""
    return {
        "positions": rules.positions,
        "pays": {str(k): v for k, v in sorted(rules.pay_table().items())},
        "min_wager": rules.min_wager,
        "max_wager": rules.max_wager,
        "wager_increment": rules.wager_increment,
        "pay_six_immediately": rules.pay_six_immediately,
        "surrender_carries_points": rules.surrender_carries_points,
        "surveillance_at": rules.surveillance_at,
        "betting_closes": rules.betting_closes,
    }


def rules_from_dict(data: Mapping[str, Any]) -> FireBetRules:
    """Rules from :func:`rules_to_dict` output (or the ``[firebet]`` settings as journaled)."""
    pays = data.get("pays")
    return FireBetRules(
        positions=int(data.get("positions", 16)),
        pays={int(k): int(v) for k, v in pays.items()} if isinstance(pays, dict) else None,
        min_wager=int(data.get("min_wager", 1)),
        max_wager=int(data.get("max_wager", 5)),
        wager_increment=int(data.get("wager_increment", 1)),
        pay_six_immediately=bool(data.get("pay_six_immediately", False)),
        surrender_carries_points=bool(data.get("surrender_carries_points", True)),
        surveillance_at=int(data.get("surveillance_at", 5)),
        betting_closes=str(data.get("betting_closes", "first_roll")),
    )


def rules_from_record(payload: Any) -> tuple[FireBetRules, str | None]:
    """The rules (and program digest) a ``rules`` record journaled at a start (SPEC section 9).

    Raises ValueError (or KeyError, TypeError) when the payload is not such a record.
    """
    if not isinstance(payload, dict):
        raise ValueError("a rules record is a JSON object")
    program = payload.get("program")
    return rules_from_settings(payload), program if isinstance(program, str) else None


def engine_for(rules: FireBetRules) -> Engine:
    """One engine per distinct set of rules (building one reads the whole hand machine)."""
    key = _canonical(rules_to_dict(rules))
    engine = _ENGINES.get(key)
    if engine is None:
        engine = _ENGINES[key] = Engine(rules)
    return engine


def money(amount: int) -> str:
    return f"${amount:,}"


def _settlement_text(settlements: list[Settlement]) -> str:
    if not settlements:
        return "no settlement"
    parts = []
    for s in settlements:
        pays = ", ".join(f"position {p} {money(a)}" for p, a in sorted(s.payouts.items()))
        head = f"hand {s.hand}: {s.unique_points} points, {s.result}"
        if s.odds_to_one:
            head += f" {s.odds_to_one} to 1"
        parts.append(head + (f" ({pays})" if pays else ""))
    return "; ".join(parts)


def _points_text(points: list[tuple[int, int]]) -> str:
    return ", ".join(f"{p} as point {n}" for p, n in points) or "no new point"


def _alerts_text(alerts: list[SurveillanceAlert]) -> str:
    return ", ".join(f"at {a.unique_points} points" for a in alerts) or "no alert"


def describe(expected: list[Event], recorded: list[Event]) -> list[tuple[str, str]]:
    """What differs between the events the rules give and those the table recorded.

    ``(what, words)`` pairs; ``what`` is settlement, markers, alert or events.
    """
    found: list[tuple[str, str]] = []
    es = [e for e in expected if isinstance(e, Settlement)]
    rs = [e for e in recorded if isinstance(e, Settlement)]
    if [_canonical(e.to_dict()) for e in es] != [_canonical(e.to_dict()) for e in rs]:
        found.append(
            ("settlement", f"the table settled {_settlement_text(rs)}; "
             f"the rules give {_settlement_text(es)}")
        )  # fmt: skip
    ep = [(e.point, e.ordinal) for e in expected if isinstance(e, NewDifferentPoint)]
    rp = [(e.point, e.ordinal) for e in recorded if isinstance(e, NewDifferentPoint)]
    if ep != rp:
        found.append(
            ("markers", f"the table marked {_points_text(rp)}; the rules give {_points_text(ep)}")
        )
    ea = [e for e in expected if isinstance(e, SurveillanceAlert)]
    ra = [e for e in recorded if isinstance(e, SurveillanceAlert)]
    if [e.to_dict() for e in ea] != [e.to_dict() for e in ra]:
        found.append(
            ("alert", f"the table raised {_alerts_text(ra)}; the rules give {_alerts_text(ea)}")
        )
    if not found:
        found.append(
            ("events", "the table recorded "
             + (", ".join(e.name for e in recorded) or "nothing")
             + "; the rules give " + (", ".join(e.name for e in expected) or "nothing"))
        )  # fmt: skip
    return found


@dataclass(frozen=True)
class Discrepancy:
    """The table recorded something the rules do not give (or a record it could not have)."""

    record: int
    hand: int
    what: str  # settlement, markers, alert, events, unreadable, unchecked
    detail: str


@dataclass(frozen=True)
class AlertRaised:
    """The table's surveillance alert (the 5th different point, by default) for ``hand``."""

    record: int
    hand: int
    at: str
    unique_points: int


@dataclass(frozen=True)
class Confirmed:
    """The table journaled surveillance's confirmation of ``hand``."""

    record: int
    hand: int
    by: str
    command_id: str | None


@dataclass(frozen=True)
class ConfirmRefused:
    """The table refused surveillance's ``confirm`` of ``hand`` (the reason in its words)."""

    record: int
    hand: int | None
    reason: str
    command_id: str | None


@dataclass
class Findings:
    """What one or more records gave: differences, alerts, confirmations, hands touched."""

    discrepancies: list[Discrepancy] = field(default_factory=list)
    alerts: list[AlertRaised] = field(default_factory=list)
    confirmations: list[Confirmed] = field(default_factory=list)
    refusals: list[ConfirmRefused] = field(default_factory=list)
    hands: dict[int, dict[str, Any]] = field(default_factory=dict)
    dropped_hands: set[int] = field(default_factory=set)

    def merge(self, other: Findings) -> None:
        self.discrepancies += other.discrepancies
        self.alerts += other.alerts
        self.confirmations += other.confirmations
        self.refusals += other.refusals
        for number in other.dropped_hands:
            self.hands.pop(number, None)
        self.dropped_hands |= other.dropped_hands
        for number, hand in other.hands.items():
            self.hands[number] = hand
            self.dropped_hands.discard(number)


def new_hand(number: int, record: int) -> dict[str, Any]:
    """An empty hand log (the keys of ``history --json`` and what the floor adds)."""
    return {
        "hand": number,
        "points": [],
        "unique_points": 0,
        "result": None,
        "odds_to_one": None,
        "payouts": {},
        "wagers": {},
        "rolls": [],
        "actions": [],
        "first_record": record,
        "last_record": record,
        "alert_record": None,
        "problems": [],
    }


class TableAudit:
    """One table's second opinion: its rules, the state its records built, its open hands."""

    def __init__(
        self,
        rules: FireBetRules | None = None,
        *,
        rules_record: int | None = None,
        program: str | None = None,
        state: TableState | None = None,
        record: int = 0,
        hands: dict[int, dict[str, Any]] | None = None,
        first_unchecked: int | None = None,
        unchecked_hands: list[int] | None = None,
        unchecked_records: int = 0,
    ) -> None:
        self.rules = rules if rules is not None else FireBetRules()
        self.engine = engine_for(self.rules)
        self.rules_record = rules_record  # the start record that journaled them (None: defaults)
        self.program = program
        self.state = state if state is not None else TableState()
        self.record = record  # every record up to this one was checked
        self.hands = hands if hands is not None else {}
        self.first_unchecked = first_unchecked  # the first hand with a record not checked
        self.unchecked_hands = unchecked_hands if unchecked_hands is not None else []
        self.unchecked_records = unchecked_records

    @property
    def folded_hand(self) -> int:
        """Every hand before the one in play has been folded."""
        return self.state.hand - 1

    @property
    def checked_hand(self) -> int:
        """Every hand up to this one has been checked against the table's events (it does
        not pass a hand with a record the table sent no events for)."""
        if self.first_unchecked is None:
            return self.folded_hand
        return min(self.folded_hand, self.first_unchecked - 1)

    def _not_checked(self, hand: int, record: int, found: Findings, why: str) -> None:
        self.unchecked_records += 1
        if self.first_unchecked is None or hand < self.first_unchecked:
            self.first_unchecked = hand
        if hand not in self.unchecked_hands:
            self.unchecked_hands = sorted([*self.unchecked_hands, hand])[-UNCHECKED_KEPT:]
            if why == NOT_SENT:  # one alert a hand: the hand cannot be vouched for
                words = (
                    f"hand {hand} is not checked: record {record} came without the table's events"
                )
                found.discrepancies.append(Discrepancy(record, hand, "unchecked", words))
        self._hand(hand, record, found)["problems"].append(f"record {record}: {why}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for the floor's store; :meth:`from_dict` gives it back."""
        return {
            "rules": rules_to_dict(self.rules),
            "rules_record": self.rules_record,
            "program": self.program,
            "state": self.state.to_dict(),
            "record": self.record,
            "hands": {str(k): v for k, v in self.hands.items()},
            "first_unchecked": self.first_unchecked,
            "unchecked_hands": self.unchecked_hands,
            "unchecked_records": self.unchecked_records,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TableAudit:
        return cls(
            rules_from_dict(data["rules"]),
            rules_record=data.get("rules_record"),
            program=data.get("program"),
            state=TableState.from_dict(data["state"]),
            record=int(data["record"]),
            hands={int(k): v for k, v in data.get("hands", {}).items()},
            first_unchecked=data.get("first_unchecked"),
            unchecked_hands=[int(h) for h in data.get("unchecked_hands", [])],
            unchecked_records=int(data.get("unchecked_records", 0)),
        )

    # the walk ---------------------------------------------------------------------
    def step(self, rec: FloorRecord) -> Findings:
        """Check and fold the next record (``rec.record`` must be ``self.record + 1``)."""
        if rec.record != self.record + 1:
            raise ValueError(f"record {rec.record} out of order: expected {self.record + 1}")
        found = Findings()
        self.record = rec.record
        if rec.kind == "rules":
            try:
                self.rules, program = rules_from_record(rec.payload)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                found.discrepancies.append(
                    Discrepancy(
                        rec.record, self.state.hand, "unreadable",
                        f"the rules record cannot be read, the rules before it stay: {exc!r}",
                    )
                )  # fmt: skip
            else:
                self.engine = engine_for(self.rules)
                self.rules_record = rec.record
                self.program = program or self.program
        elif rec.kind == "clear_halt":
            try:
                resume = rec.payload["resume_state"]
                self.state = TableState.from_dict(resume)
            except (KeyError, TypeError, ValueError) as exc:
                found.discrepancies.append(
                    Discrepancy(rec.record, self.state.hand, "unreadable", f"clear_halt: {exc!r}")
                )
            self._hand(self.state.hand, rec.record, found)
        elif rec.kind == "command":
            self._command(rec, found)
        keep = self.state.hand - 1
        for number in [n for n in self.hands if n < keep]:
            del self.hands[number]
        return found

    def _hand(self, number: int, record: int, found: Findings) -> dict[str, Any]:
        hand = self.hands.get(number)
        if hand is None:
            hand = self.hands[number] = new_hand(number, record)
        hand["last_record"] = record
        found.hands[number] = hand
        found.dropped_hands.discard(number)
        return hand

    def _command(self, rec: FloorRecord, found: Findings) -> None:
        state = self.state
        try:
            at = to_ms(rec.at)
            if at is None:
                raise ValueError(f"no readable time {rec.at!r}")
            command = decode_command(rec.payload, rec.actor, at)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            found.discrepancies.append(
                Discrepancy(
                    rec.record, state.hand, "unreadable", f"cannot read the record: {exc!r}"
                )
            )
            return
        try:
            expected = self.engine.decide(state, command)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            expected = [Refused(command.name, f"the rules cannot apply it: {exc!r}")]
        recorded: list[Event] | None = None
        if rec.events is None:  # the table could not derive them: fold on, not checked
            self._not_checked(state.hand, rec.record, found, NOT_SENT)
        else:
            try:
                if not isinstance(rec.events, list):
                    raise TypeError(f"events must be a list, not {type(rec.events).__name__}")
                recorded = [event_from_dict(e) for e in rec.events]
                after = fold(recorded, state)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                words = f"the table's events for the record cannot be read: {exc!r}"
                found.discrepancies.append(Discrepancy(rec.record, state.hand, "unreadable", words))
                self._not_checked(state.hand, rec.record, found, words)
                recorded = None
        if recorded is not None and expected != recorded:  # as values: every field, in order
            for what, words in describe(expected, recorded):
                found.discrepancies.append(Discrepancy(rec.record, state.hand, what, words))
                self._hand(state.hand, rec.record, found)["problems"].append(
                    f"record {rec.record}: {words}"
                )
        if recorded is None:  # nothing from the table to follow: the rules' answer
            recorded = expected
            after = fold(recorded, state)
        for event in recorded:
            nxt = evolve(state, event)
            self._sort(rec, command.actor, state, event, nxt, found)
            state = nxt
        self.state = after

    def _action(
        self, hand: int, what: str, rec: FloorRecord, actor: str, found: Findings, **detail: Any
    ) -> None:
        self._hand(hand, rec.record, found)["actions"].append(
            {"action": what, **detail, "actor": actor, "at": rec.at, "record": rec.record}
        )

    def _sort(
        self,
        rec: FloorRecord,
        actor: str,
        before: TableState,
        e: Event,
        after: TableState,
        found: Findings,
    ) -> None:
        """Put one recorded event into its hand's log."""
        who = str(getattr(e, "actor", actor))
        if isinstance(e, RollAccepted):
            self._hand(before.hand, rec.record, found)["rolls"].append([e.d1, e.d2])
        elif isinstance(e, Settlement):
            hand = self._hand(e.hand, rec.record, found)
            hand.update(e.report())
            hand["wagers"] = {str(p): a for p, a in sorted(e.wagers.items())}
        elif isinstance(e, RollVoided):
            if before.hand != after.hand and before.hand in self.hands:
                gone = self.hands.pop(before.hand)  # the voided seven-out's successor hand
                found.hands.pop(before.hand, None)
                found.dropped_hands.add(before.hand)
                self._hand(after.hand, rec.record, found)["actions"].extend(gone["actions"])
            hand = self._hand(after.hand, rec.record, found)
            if hand["rolls"]:
                hand["rolls"].pop()
            if e.reversed_settlement is not None:
                hand.update(result=None, odds_to_one=None, payouts={})
            hand["wagers"] = {str(p): a for p, a in sorted(after.bets.items())}
            self._action(after.hand, "void", rec, who, found, dice=[e.d1, e.d2])
        elif isinstance(e, BetAccepted | BetCancelled):
            what = "bet" if isinstance(e, BetAccepted) else "cancel"
            self._action(before.hand, what, rec, who, found, position=e.position, amount=e.amount)
            self._hand(before.hand, rec.record, found)["wagers"] = {
                str(p): a for p, a in sorted(after.bets.items())
            }
        elif isinstance(e, Surrendered):
            self._action(before.hand, "surrender", rec, who, found, kind=e.surrender,
                         pending=e.pending)  # fmt: skip
        elif isinstance(e, Acknowledged):
            self._action(before.hand, "ack", rec, who, found)
        elif isinstance(e, SurveillanceAlert):
            self._hand(e.hand, rec.record, found)["alert_record"] = rec.record
            found.alerts.append(AlertRaised(rec.record, e.hand, rec.at, e.unique_points))
        elif isinstance(e, Refused) and e.command == "confirm":
            asked = rec.payload
            hand = asked.get("hand")
            ident = asked.get("id")
            found.refusals.append(
                ConfirmRefused(
                    rec.record, hand if isinstance(hand, int) else None, e.reason,
                    ident if isinstance(ident, str) else None,
                )
            )  # fmt: skip
            self._action(before.hand, "refused", rec, actor, found, command=e.command,
                         reason=e.reason)  # fmt: skip
        elif isinstance(e, Refused):
            self._action(before.hand, "refused", rec, actor, found, command=e.command,
                         reason=e.reason)  # fmt: skip
        elif isinstance(e, SurveillanceConfirmed):
            found.confirmations.append(Confirmed(rec.record, e.hand, e.by, e.id or None))
            self._action(e.hand, "surveillance_confirmed", rec, e.by, found)
        hand = self._hand(after.hand, rec.record, found)
        hand["points"] = list(after.points)
        if hand["result"] is None:
            hand["unique_points"] = len(after.points)
