"""The second opinion: the floor replays each table's records with the table's own rules.

A table journals every dealer and reader command (the command only: the journal is
"commands in, state out"), and its floor link publishes each command record with the
events the table decided (``events``, see :mod:`controller.link.fold`). The floor
replays the records through the same replay of the journal
(:class:`~controller.journal.replay.Replay`: a ``rules`` record puts its rules in force
for every record after it), asks the pure engine what each command gives in the state
the records have built so far, and compares: a settlement, a different-point count, a
marker or an alert that differs is a :class:`~controller.floor.findings.Discrepancy`
(worded by :mod:`controller.floor.findings`). The floor then follows what the table
decided, so each difference is reported once, at the record where it happened. A
``rules`` record that changes the rules is a finding of its own (``rules``), naming what
changed.

A command record that comes without the table's events (the table could not
derive them: a damaged journal) is folded with the rules' answer and marked *not
checked*: :attr:`TableAudit.checked_hand` does not pass its hand, and
:attr:`TableAudit.unchecked_hands` names it. The first such record of a hand is
also a :class:`Discrepancy` (``unchecked``): a table that stopped sending its
events (or was made to) raises an alert, not only a quieter console.

The hands are the one projection of the records that the table's own recall uses
(:class:`~controller.journal.handlog.HandLog`), fed the events the table decided.
Pure: records in, findings out; the caller stores them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.core.config import BOOKKEEPING_RULES, FireBetRules
from controller.core.events import (
    Event,
    Refused,
    RollVoided,
    Settlement,
    SurveillanceAlert,
    SurveillanceConfirmed,
    event_from_dict,
)
from controller.core.state import TableState, fold
from controller.core.times import to_ms
from controller.floor.findings import (
    AlertRaised,
    Confirmed,
    ConfirmRefused,
    Discrepancy,
    Findings,
    describe,
    money,
)
from controller.floor.vocabulary import Finding
from controller.journal.handlog import Hand, HandLog, Touched
from controller.journal.recipe import RecordKind, canonical, decode_command
from controller.journal.replay import (
    DECODE_ERRORS,
    Held,
    RecordError,
    Replay,
    Step,
    engine_for,
    resume_state_of,
)
from controller.journal.system import read_rules
from controller.wire.messages import FloorRecord

UNCHECKED_KEPT = 20  # the newest hands not checked, named on the console
RECENT_STATES = 64  # the states after this many newest records are kept (for clear_halt)
NOT_SENT = "not checked: the table sent no events for it (it could not derive them)"


@dataclass(frozen=True)
class ApprovedRules:
    """The rules a table is approved for (``[approved.NAME]`` in ``floor.toml``)."""

    name: str
    rules: FireBetRules


StateAt = Callable[[int], "TableState | None"]  # the floor's fold after record n (None:
# not to be had: too far back, or asked too often)


def approval_changes(approved: FireBetRules, rules: FireBetRules) -> dict[str, dict[str, Any]]:
    """Each rule that differs from the approved ones: ``{"was": approved, "now": rules}``."""
    a, r = approved.to_dict(), rules.to_dict()
    return {
        k: {"was": a[k], "now": r[k]} for k in a if a[k] != r.get(k) and k not in BOOKKEEPING_RULES
    }


def _paid(events: list[Event]) -> int | None:
    """What the settlements among ``events`` pay in all (None: there is none)."""
    found = [e for e in events if isinstance(e, Settlement)]
    return sum(sum(s.payouts.values()) for s in found) if found else None


def rules_words(changed: Mapping[str, Any]) -> str:
    """What changed between two rules records, in a surveillance officer's words."""
    return "; ".join(
        f"{key} was {v.get('was')!r}, now {v.get('now')!r}" for key, v in changed.items()
    )


@dataclass(frozen=True)
class Checkpoint:
    """The floor's own fold of a table after one record: what a fold from there needs."""

    record: int
    rules: FireBetRules
    rules_record: int | None
    settings: Mapping[str, Any] | None
    state: TableState
    held: Held | None = None  # a hand that keeps older rules (issue 30)


class TableAudit:
    """One table's second opinion: its rules, the state its records built, its open hands."""

    def __init__(
        self,
        rules: FireBetRules | None = None,
        *,
        rules_record: int | None = None,
        settings: Mapping[str, Any] | None = None,
        program: str | None = None,
        state: TableState | None = None,
        record: int = 0,
        hands: dict[int, dict[str, Any]] | None = None,
        first_unchecked: int | None = None,
        unchecked_hands: list[int] | None = None,
        unchecked_records: int = 0,
        held: Held | None = None,
    ) -> None:
        self.replay = Replay(
            rules if rules is not None else FireBetRules(),
            state,
            rules_record=rules_record,
            settings=settings,
            held=held,
        )
        self.program = program
        self.record = record  # every record up to this one was checked
        self.log = HandLog(hands)
        self.first_unchecked = first_unchecked  # the first hand with a record not checked
        self.unchecked_hands = unchecked_hands if unchecked_hands is not None else []
        self.unchecked_records = unchecked_records
        self.approved: ApprovedRules | None = None  # from the floor's config, not stored
        self.state_at: StateAt | None = None  # the floor's fold after a record (for clear_halt)
        self.recent: dict[int, TableState] = {}  # the states after the newest records

    def checkpoint(self) -> Checkpoint:
        """Where this fold stands (a value: the state is immutable)."""
        replay = self.replay  # the newest rules record's, and the hand's own when held
        return Checkpoint(
            self.record, replay.latest_rules, replay.latest_record, replay.settings,
            self.state, replay.held,
        )  # fmt: skip

    @classmethod
    def resumed(cls, at: Checkpoint) -> TableAudit:
        """A fold going on from ``at`` (to fold further records, not to audit hands)."""
        return cls(
            at.rules, rules_record=at.rules_record, settings=at.settings, state=at.state,
            record=at.record, held=at.held,
        )  # fmt: skip

    @property
    def rules(self) -> FireBetRules:
        """The rules in force after the last record."""
        return self.replay.rules

    @property
    def rules_record(self) -> int | None:
        """The ``rules`` record that put them in force (None: the defaults)."""
        return self.replay.rules_record

    @property
    def state(self) -> TableState:
        """The state the records built."""
        return self.replay.state

    @property
    def hands(self) -> dict[int, Hand]:
        """The hand logs kept (the hand in play and the one before)."""
        return self.log.hands

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

    def _touch(self, number: int, record: int, found: Findings) -> Hand:
        hand = self.log.hand(number, record)
        hand.setdefault("problems", [])
        found.hands[number] = hand
        found.dropped_hands.discard(number)
        return hand

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
                found.discrepancies.append(Discrepancy(record, hand, Finding.UNCHECKED, words))
        self._touch(hand, record, found)["problems"].append(f"record {record}: {why}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for the floor's store; :meth:`from_dict` gives it back."""
        held = self.replay.held
        return {
            # the newest rules record's (a hand that keeps older ones: "held")
            "rules": self.replay.latest_rules.to_dict(),
            "rules_record": self.replay.latest_record,
            **({"held": held.to_dict()} if held is not None else {}),
            "settings": self.replay.settings,
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
            FireBetRules.from_dict(data["rules"]),
            rules_record=data.get("rules_record"),
            settings=data.get("settings"),
            program=data.get("program"),
            state=TableState.from_dict(data["state"]),
            record=int(data["record"]),
            hands={int(k): v for k, v in data.get("hands", {}).items()},
            held=Held.from_dict(data["held"]) if data.get("held") else None,
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
        at = to_ms(rec.at)
        if at is None:
            found.discrepancies.append(
                Discrepancy(rec.record, self.state.hand, Finding.UNREADABLE,
                            f"the record has no readable time {rec.at!r}")
            )  # fmt: skip
        elif rec.kind == RecordKind.COMMAND:
            self._command(rec, at, found)
        elif rec.kind in (RecordKind.RULES, RecordKind.CLEAR_HALT):
            self._system(rec, at, found)
        self.recent[rec.record] = self.state  # a value: kept without a copy
        self.recent.pop(rec.record - RECENT_STATES, None)
        keep = self.state.hand - 1
        for number in [n for n in self.hands if n < keep]:
            del self.hands[number]
        return found

    def _system(self, rec: FloorRecord, at: int, found: Findings) -> None:
        """A ``rules`` record (its rules in force from now on) or a ``clear_halt`` (the
        game resumes on its state), replayed as the table's recovery replays them."""
        if rec.kind == RecordKind.CLEAR_HALT and not self._resume_proven(rec, found):
            return
        try:
            step = self.replay.step(rec.record, at, rec.actor, rec.kind, _text(rec.payload))
        except RecordError as exc:
            what = "rules record" if rec.kind == RecordKind.RULES else "clear_halt"
            words = f"the {what} cannot be read ({exc}); the state before it stays"
            found.discrepancies.append(
                Discrepancy(rec.record, self.state.hand, Finding.UNREADABLE, words)
            )
            return
        if rec.kind == RecordKind.RULES:
            program = read_rules(step.body).program if step.body is not None else None
            self.program = program if program is not None else self.program
            if step.changed:
                words = f"the table's rules changed at record {rec.record}: " + rules_words(
                    step.changed
                )
                found.discrepancies.append(
                    Discrepancy(rec.record, self.state.hand, Finding.RULES, words)
                )
            approved = self.approved
            if approved is not None and step.rules is not None:
                changed = approval_changes(approved.rules, step.rules)
                if changed:
                    words = (
                        f"the table's rules at record {rec.record} are not the ones approved "
                        f"({approved.name}): "
                        + "; ".join(
                            f"{k} approved {v['was']!r}, the table's {v['now']!r}"
                            for k, v in changed.items()
                        )
                    )
                    found.discrepancies.append(
                        Discrepancy(rec.record, self.state.hand, Finding.UNAPPROVED, words,
                                    {"approved": approved.name, "changed": changed})
                    )  # fmt: skip
        self._take(step, found)

    def _resume_proven(self, rec: FloorRecord, found: Findings) -> bool:
        """Whether the ``clear_halt``'s resume state is the floor's own fold of the table's
        records up to its ``resume_from`` (as the table's walk checks it against the chain).
        When it is not, the state is not adopted: the fold goes on from its own state, the
        hand is marked not checked and an alert names it."""
        hand = self.state.hand
        try:
            body = rec.payload
            if not isinstance(body, dict):
                raise TypeError("a clear_halt record is a JSON object")
            resume_from = body["resume_from"]
            if isinstance(resume_from, bool) or not isinstance(resume_from, int):
                raise TypeError(f"resume_from {resume_from!r} is not a record number")
            claimed = resume_state_of(body)
        except (*DECODE_ERRORS, RecordError) as exc:
            why = f"the clear_halt cannot be read ({exc}); the state before it stays"
            found.discrepancies.append(Discrepancy(rec.record, hand, Finding.UNREADABLE, why))
            return False
        proven: TableState | None = None
        if resume_from == rec.record - 1:
            proven = self.state
        elif resume_from in self.recent:
            proven = self.recent[resume_from]
        elif 0 <= resume_from < rec.record - 1 and self.state_at is not None:
            proven = self.state_at(resume_from)
        if proven is not None and canonical(proven.to_dict()) == canonical(claimed.to_dict()):
            return True
        shown = (
            f"hand {claimed.hand}, {len(claimed.points)} points, "
            f"{money(sum(claimed.bets.values()))} on {len(claimed.bets)} positions"
        )
        given = (
            "a state the table's records do not give"
            if proven is not None
            else "a state the floor cannot check (the records it holds stop short of it)"
        )
        words = (
            f"the clear_halt at record {rec.record} resumes from record {resume_from} on "
            f"{given} ({shown}): not adopted; the floor goes on from its own fold, and "
            f"hand {hand} is not checked"
        )
        found.discrepancies.append(
            Discrepancy(rec.record, hand, Finding.RESUME, words,
                        {"resume_from": resume_from, "claimed": claimed.to_dict()})
        )  # fmt: skip
        self._not_checked(hand, rec.record, found, words)
        return False

    def _command(self, rec: FloorRecord, at: int, found: Findings) -> None:
        state = self.state
        decided_under = self.replay.rules_record  # the hand's rules record
        try:
            command = decode_command(rec.payload, rec.actor, at)
        except DECODE_ERRORS as exc:
            found.discrepancies.append(
                Discrepancy(
                    rec.record, state.hand, Finding.UNREADABLE, f"cannot read the record: {exc!r}"
                )
            )
            return
        try:
            expected = self.replay.engine.decide(state, command)
        except DECODE_ERRORS as exc:
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
            except DECODE_ERRORS as exc:
                words = f"the table's events for the record cannot be read: {exc!r}"
                found.discrepancies.append(
                    Discrepancy(rec.record, state.hand, Finding.UNREADABLE, words)
                )
                self._not_checked(state.hand, rec.record, found, words)
                recorded = None
        # as values: every field, in order (a void's record names the roll it undid: the
        # table's pointer, not a decision of the rules)
        if recorded is not None and expected != _unpointed(recorded):
            for what, words in describe(expected, recorded):
                found.discrepancies.append(Discrepancy(rec.record, state.hand, what, words))
                self._touch(state.hand, rec.record, found)["problems"].append(
                    f"record {rec.record}: {words}"
                )
        if recorded is not None:
            self._approval(rec, state, command, recorded, found)
        if recorded is None:  # nothing from the table to follow: the rules' answer
            recorded = expected
            after = fold(recorded, state)
        self.replay.resume(after)
        step = Step(
            rec.record, rec.kind, rec.actor, rec.at, state, after, tuple(recorded), command,
            decided_under=decided_under,
        )  # fmt: skip
        self._take(step, found)
        self._findings(rec, step, found)

    def _approval(
        self, rec: FloorRecord, state: TableState, command: Any, recorded: list[Event],
        found: Findings,
    ) -> None:  # fmt: skip
        """A settlement under rules not approved: what was paid beside what the approved
        rules pay for the same command in the same state."""
        approved = self.approved
        if approved is None or approved.rules.key() == self.rules.key():
            return
        paid = _paid(recorded)
        if paid is None:
            return
        try:
            would = _paid(engine_for(approved.rules).decide(state, command)) or 0
        except DECODE_ERRORS:
            would = 0
        if would == paid:
            return
        words = (
            f"hand {state.hand} was settled under rules not approved: the table paid "
            f"{money(paid)}; the approved rules ({approved.name}) pay {money(would)}"
        )
        found.discrepancies.append(
            Discrepancy(rec.record, state.hand, Finding.UNAPPROVED, words,
                        {"paid": paid, "approved_pays": would, "approved": approved.name})
        )  # fmt: skip
        self._touch(state.hand, rec.record, found)["problems"].append(
            f"record {rec.record}: {words}"
        )

    def _take(self, step: Step, found: Findings) -> None:
        """Put the step into the hand logs; what it touched and dropped into ``found``."""
        touched: Touched = self.log.take(step)
        for number in touched.dropped:
            found.hands.pop(number, None)
            found.dropped_hands.add(number)
        for number in touched.hands:
            self._touch(number, step.record, found)

    def _findings(self, rec: FloorRecord, step: Step, found: Findings) -> None:
        """The alerts, confirmations and refused confirmations among the step's events."""
        for e in step.events:
            if isinstance(e, SurveillanceAlert):
                found.alerts.append(AlertRaised(rec.record, e.hand, rec.at, e.unique_points))
            elif isinstance(e, SurveillanceConfirmed):
                found.confirmations.append(
                    Confirmed(rec.record, e.hand, e.by, e.id or None, rec.at)
                )
            elif isinstance(e, Refused) and e.command == "confirm":
                asked = rec.payload
                hand = asked.get("hand") if isinstance(asked, dict) else None
                ident = asked.get("id") if isinstance(asked, dict) else None
                found.refusals.append(
                    ConfirmRefused(
                        rec.record, hand if isinstance(hand, int) else None, e.reason,
                        ident if isinstance(ident, str) else None,
                    )
                )  # fmt: skip


def _unpointed(events: list[Event]) -> list[Event]:
    """``events`` with each void's ``record`` (what the link adds) left out."""
    return [dataclasses.replace(e, record=None) if isinstance(e, RollVoided) else e for e in events]


def _text(payload: Any) -> str:
    """A record's payload as the canonical text the table stored."""
    return canonical(payload)
