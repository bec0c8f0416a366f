"""The second opinion: the floor folds each table's records through the same rules engine.

A table journals every dealer and reader command (the command only: the journal
is "commands in, state out"), and its floor link publishes each command record
with the events the table's own engine decided (``events``, see
:mod:`controller.link.fold`). The floor takes the rules the table journaled at
its last start, asks the pure engine of ``controller.core`` what the command
gives in the state the records have built so far, and compares: a settlement, a
different-point count, a marker or an alert that differs is a
:class:`~controller.floor.findings.Discrepancy` (worded by
:mod:`controller.floor.findings`). The floor then follows what the table decided, so each
difference is reported once, at the record where it happened.

A command record that comes without the table's events (the table could not
derive them: a damaged journal) is folded with the rules' answer and marked *not
checked*: :attr:`TableAudit.checked_hand` does not pass its hand, and
:attr:`TableAudit.unchecked_hands` names it. The first such record of a hand is
also a :class:`Discrepancy` (``unchecked``): a table that stopped sending its
events (or was made to) raises an alert, not only a quieter console.

The same walk sorts the records into hands (rolls, points in order, wagers,
settlement, who did what) for the console, in the shape of ``history --json``
(:mod:`controller.floor.hands`). Pure: records in, findings out; the caller stores them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from controller.core.config import FireBetRules, rules_from_settings
from controller.core.engine import Engine
from controller.core.events import Event, Refused, event_from_dict
from controller.core.state import TableState, evolve, fold
from controller.floor.findings import Discrepancy, Findings, describe
from controller.floor.hands import sort_event, touch
from controller.journal.recipe import decode_command, to_ms
from controller.wire.messages import FloorRecord

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
        touch(self.hands, hand, record, found)["problems"].append(f"record {record}: {why}")

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
            touch(self.hands, self.state.hand, rec.record, found)
        elif rec.kind == "command":
            self._command(rec, found)
        keep = self.state.hand - 1
        for number in [n for n in self.hands if n < keep]:
            del self.hands[number]
        return found

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
                touch(self.hands, state.hand, rec.record, found)["problems"].append(
                    f"record {rec.record}: {words}"
                )
        if recorded is None:  # nothing from the table to follow: the rules' answer
            recorded = expected
            after = fold(recorded, state)
        for event in recorded:
            nxt = evolve(state, event)
            sort_event(self.hands, rec, command.actor, state, event, nxt, found)
            state = nxt
        self.state = after
