"""The hands as the records made them: the one projection of the journal into hand logs.

The table's game recall (``firebet history``, :mod:`controller.journal.history`) and the
floor's hand view (:mod:`controller.floor.audit`) both feed each replayed record
(:class:`~controller.journal.replay.Step`) to a :class:`HandLog`, so the two show the same
hand the same way. A hand's log (:func:`new_hand`) has the keys of ``history --json``
(``hand``, ``points``, ``unique_points``, ``result``, ``odds_to_one``, ``payouts``,
``rolls``, ``actions``) and what a floor or a technician wants beside them: the wagers
riding (or settled), each roll with its record, time, source and seq (``roll_log``), the
records the hand spans, the record of its surveillance alert and of its settlement.

Actions say who did what and when (the event's actor and time, else the record's):
``bet``, ``cancel``, ``surrender``, ``ack``, ``manual_roll``, ``held_apply``,
``held_discard``, ``held`` (a reader roll held for the dealer after manual entry),
``reader_fault`` (the reader's fault, with its code), ``void``, ``refused``,
``surveillance_confirmed``, ``rules`` (a change of rules, with what changed) and
``clear_halt``. A void takes its roll off again (a voided
seven-out gives the hand back and withdraws its settlement); a ``clear_halt`` that set
records aside takes what they did off again (they were never part of the game).
Pure: steps in, hand logs out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from controller.core.commands import RollSource
from controller.core.events import (
    Acknowledged,
    BetAccepted,
    BetCancelled,
    CorrectionArmed,
    Event,
    FaultRecorded,
    HeldRollApplied,
    HeldRollDiscarded,
    Refused,
    RollAccepted,
    RollCorrected,
    RollHeld,
    RollVoided,
    Settlement,
    Surrendered,
    SurveillanceAlert,
    SurveillanceConfirmed,
)
from controller.core.state import TableState, evolve
from controller.journal.recipe import RecordKind
from controller.journal.replay import Step

Hand = dict[str, Any]

HISTORY_KEYS = (
    "hand",
    "points",
    "unique_points",
    "result",
    "odds_to_one",
    "payouts",
    "rolls",
    "actions",
    "decided_under",
)
"""The keys of one ``history --json`` line (docs/cli.md), in order."""

PROOF_KEYS = ("verified", "break", "last_verified")
"""The keys a ``history --json`` line adds on a halted journal (:mod:`.proof`)."""


def new_hand(number: int, record: int) -> Hand:
    """An empty hand log, begun at ``record``."""
    return {
        "hand": number,
        "points": [],
        "unique_points": 0,
        "result": None,
        "odds_to_one": None,
        "payouts": {},
        "rolls": [],
        "actions": [],
        "wagers": {},
        "roll_log": [],
        "first_record": record,
        "last_record": record,
        "alert_record": None,
        "settled_record": None,
        "decided_under": None,
    }


def history_line(hand: Hand) -> dict[str, Any]:
    """The ``history --json`` line of a hand log: its :data:`HISTORY_KEYS`, and its
    :data:`PROOF_KEYS` when a halted journal's reader marked it (:mod:`.proof`)."""
    line = {key: hand.get(key) for key in HISTORY_KEYS}
    return line | {key: hand[key] for key in PROOF_KEYS if key in hand}


def _wagers(bets: dict[int, int]) -> dict[str, int]:
    return {str(p): a for p, a in sorted(bets.items())}


@dataclass
class Touched:
    """What one step changed: the hands it touched and the hands it dropped."""

    hands: set[int] = field(default_factory=set)
    dropped: set[int] = field(default_factory=set)


class HandLog:
    """Hand logs by hand number, kept up to date step by step."""

    def __init__(self, hands: dict[int, Hand] | None = None) -> None:
        self.hands: dict[int, Hand] = hands if hands is not None else {}

    def hand(self, number: int, record: int, touched: Touched | None = None) -> Hand:
        """Hand ``number``'s log (a new one when it has none), as touched by ``record``."""
        hand = self.hands.get(number)
        if hand is None:
            hand = self.hands[number] = new_hand(number, record)
        hand["last_record"] = max(hand["last_record"], record)
        if touched is not None:
            touched.hands.add(number)
            touched.dropped.discard(number)
        return hand

    def begin(self, state: TableState, record: int) -> Hand:
        """The log of the hand in play in ``state`` (after ``record``), its points and
        wagers as that state has them when the log has nothing of it yet."""
        known = state.hand in self.hands
        hand = self.hand(state.hand, record)
        if not known:
            hand["wagers"] = _wagers(state.bets)
            hand["points"] = list(state.points)
            hand["unique_points"] = len(state.points)
        return hand

    def take(self, step: Step) -> Touched:
        """Put one replayed record into the hand logs."""
        touched = Touched()
        if step.kind == RecordKind.CLEAR_HALT:
            self._cleared(step, touched)
        elif step.kind == RecordKind.RULES:
            if step.changed:
                self._action(step, touched, step.before.hand, "rules", None, changed=step.changed)
        elif step.kind == RecordKind.COMMAND:
            state = step.before
            for event in step.events:
                after = evolve(state, event)
                self._event(step, touched, state, event, after)
                state = after
            self.hand(step.after.hand, step.record, touched)
            self._points(step.after, step.record, touched)
            decided = self.hands.get(step.before.hand)
            if decided is not None:  # the rules record this hand is decided under
                decided["decided_under"] = step.decided_under
        return touched

    def takes(self, steps: Iterable[Step]) -> Touched:
        """:meth:`take` each step; everything they touched and dropped."""
        out = Touched()
        for step in steps:
            t = self.take(step)
            out.dropped -= t.hands
            out.hands = (out.hands - t.dropped) | t.hands
            out.dropped |= t.dropped
        return out

    # one event ---------------------------------------------------------------------
    def _action(
        self,
        step: Step,
        touched: Touched,
        hand_number: int,
        what: str,
        event: Event | None,
        **detail: Any,
    ) -> None:
        command = step.command  # a refusal has no actor or time: its command's
        actor = getattr(event, "actor", "") or (command.actor if command else "") or step.actor
        at = getattr(event, "at", "") or (command.at if command else "") or step.at
        self.hand(hand_number, step.record, touched)["actions"].append(
            {"action": what, **detail, "actor": actor, "at": at, "record": step.record}
        )

    def _event(
        self, step: Step, touched: Touched, before: TableState, e: Event, after: TableState
    ) -> None:
        record = step.record
        if isinstance(e, RollAccepted):
            hand = self.hand(before.hand, record, touched)
            hand["rolls"].append([e.d1, e.d2])
            hand["roll_log"].append(
                {"record": record, "at": e.at or step.at, "dice": [e.d1, e.d2],
                 "source": e.source, "seq": e.seq}
            )  # fmt: skip
            if e.source == RollSource.MANUAL:  # entered by a dealer while the reader was down
                self._action(step, touched, before.hand, "manual_roll", e, dice=[e.d1, e.d2])
        elif isinstance(e, Settlement):
            hand = self.hand(e.hand, record, touched)
            hand.update(e.report())
            hand["wagers"] = _wagers(e.wagers)
            hand["settled_record"] = record
        elif isinstance(e, RollVoided):
            if before.hand != after.hand and before.hand in self.hands:
                gone = self.hands.pop(before.hand)  # the voided seven-out's successor hand
                touched.hands.discard(before.hand)
                touched.dropped.add(before.hand)
                self.hand(after.hand, record, touched)["actions"].extend(gone["actions"])
            hand = self.hand(after.hand, record, touched)
            if hand["rolls"]:
                hand["rolls"].pop()
                hand["roll_log"].pop()
            if e.reversed_settlement is not None:
                hand.update(result=None, odds_to_one=None, payouts={}, settled_record=None)
            hand["wagers"] = _wagers(after.bets)
            self._action(step, touched, after.hand, "void", e, dice=[e.d1, e.d2])
        elif isinstance(e, CorrectionArmed):
            self._action(step, touched, after.hand, "correction_armed", e, dice=[e.d1, e.d2])
        elif isinstance(e, RollCorrected):
            was, now = list(e.was), list(e.now)
            self._action(step, touched, after.hand, "correction", e, was=was, now=now)
        elif isinstance(e, BetAccepted | BetCancelled):
            what = "bet" if isinstance(e, BetAccepted) else "cancel"
            self._action(step, touched, before.hand, what, e, position=e.position, amount=e.amount)
            self.hand(before.hand, record, touched)["wagers"] = _wagers(after.bets)
        elif isinstance(e, Surrendered):
            self._action(
                step, touched, before.hand, "surrender", e, kind=e.surrender, pending=e.pending
            )
        elif isinstance(e, Acknowledged):
            self._action(step, touched, before.hand, "ack", e)
        elif isinstance(e, SurveillanceAlert):
            self.hand(e.hand, record, touched)["alert_record"] = record
        elif isinstance(e, SurveillanceConfirmed):
            number = e.hand if e.hand in self.hands else before.hand
            self._action(step, touched, number, "surveillance_confirmed", e, by=e.by, id=e.id)
        elif isinstance(e, HeldRollApplied | HeldRollDiscarded):
            what = "held_apply" if isinstance(e, HeldRollApplied) else "held_discard"
            self._action(
                step, touched, before.hand, what, e, number=e.number, seq=e.seq, dice=[e.d1, e.d2]
            )
        elif isinstance(e, RollHeld):  # a reader roll after manual entry, for the dealer
            self._action(
                step, touched, before.hand, "held", e, number=e.number, seq=e.seq,
                dice=[e.d1, e.d2],
            )  # fmt: skip
        elif isinstance(e, FaultRecorded):
            self._action(step, touched, before.hand, "reader_fault", None, code=e.code)
        elif isinstance(e, Refused):
            self._action(
                step, touched, before.hand, "refused", None, command=e.command, reason=e.reason
            )

    def _points(self, state: TableState, record: int, touched: Touched) -> None:
        hand = self.hand(state.hand, record, touched)
        hand["points"] = list(state.points)
        if hand["result"] is None:
            hand["unique_points"] = len(state.points)

    # a technician's clear-halt -------------------------------------------------------
    def _cleared(self, step: Step, touched: Touched) -> None:
        """The game resumes on the clear-halt's state: what the records it set aside did
        comes off again, and the resumed hand has the points and wagers of that state."""
        resume = step.after
        body = step.body if isinstance(step.body, dict) else {}
        aside = (body.get("set_aside") or {}).get("records")
        if isinstance(aside, list) and len(aside) == 2 and all(isinstance(n, int) for n in aside):
            self._retract(aside[0], aside[1], resume, touched)
        cleared = body.get("cleared")
        cleared = cleared if isinstance(cleared, dict) else {}
        self._action(
            step, touched, resume.hand, "clear_halt", None,
            was=cleared.get("reason"), note=body.get("note", ""),
        )  # fmt: skip
        hand = self.hand(resume.hand, step.record, touched)
        hand["wagers"] = _wagers(resume.bets)
        self._points(resume, step.record, touched)

    def _retract(self, first: int, last: int, resume: TableState, touched: Touched) -> None:
        def kept(entry: dict[str, Any]) -> bool:
            return not first <= entry["record"] <= last

        for number in [n for n in self.hands if n > resume.hand]:
            del self.hands[number]  # begun by records set aside
            touched.hands.discard(number)
            touched.dropped.add(number)
        for number, hand in self.hands.items():
            if hand["last_record"] < first:
                continue
            hand["actions"] = [a for a in hand["actions"] if kept(a)]
            hand["roll_log"] = [r for r in hand["roll_log"] if kept(r)]
            hand["rolls"] = [r["dice"] for r in hand["roll_log"]]
            settled = hand["settled_record"]
            if settled is not None and first <= settled <= last:
                hand.update(result=None, odds_to_one=None, payouts={}, settled_record=None)
            if hand["alert_record"] is not None and first <= hand["alert_record"] <= last:
                hand["alert_record"] = None
            touched.hands.add(number)
