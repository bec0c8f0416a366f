"""Game recall from the journal: the last hands with their rolls, points, actions and result.

The walker finds the record that started the oldest hand asked for, folds the
records from the snapshot before it, and sorts what each event did into its
hand. Voided rolls come off again (a voided seven-out gives the hand back,
and its settlement is withdrawn), so ``rolls`` are the rolls that stood.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from controller.core.events import (
    Acknowledged,
    BetAccepted,
    BetCancelled,
    Event,
    RollAccepted,
    RollVoided,
    Settlement,
    Surrendered,
    event_from_dict,
)
from controller.core.state import TableState, evolve

_BATCH = 256


@dataclass
class _Hand:
    number: int
    rolls: list[list[int]] = field(default_factory=list)
    points: list[int] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    settlement: dict[str, Any] | None = None

    def line(self) -> dict[str, Any]:
        if self.settlement is not None:
            return {**self.settlement, "rolls": self.rolls, "actions": self.actions}
        return {
            "hand": self.number,
            "points": self.points,
            "unique_points": len(self.points),
            "result": None,
            "odds_to_one": None,
            "payouts": {},
            "rolls": self.rolls,
            "actions": self.actions,
        }


class _Recall:
    """Sorts folded events into hands."""

    def __init__(self) -> None:
        self.hands: dict[int, _Hand] = {}

    def hand(self, number: int) -> _Hand:
        if number not in self.hands:
            self.hands[number] = _Hand(number)
        return self.hands[number]

    def action(
        self, hand: int, what: str, record: int, at: str, event: Event, **detail: Any
    ) -> None:
        who = getattr(event, "actor", "")
        when = getattr(event, "at", "") or at
        self.hand(hand).actions.append(
            {"action": what, **detail, "actor": who, "at": when, "record": record}
        )

    def event(self, before: TableState, e: Event, after: TableState, record: int, at: str) -> None:
        if isinstance(e, RollAccepted):
            self.hand(before.hand).rolls.append([e.d1, e.d2])
        elif isinstance(e, Settlement):
            self.hand(e.hand).settlement = e.report()
        elif isinstance(e, RollVoided):
            if before.hand != after.hand and before.hand in self.hands:
                gone = self.hands.pop(before.hand)  # the voided seven-out's successor hand
                self.hand(after.hand).actions.extend(gone.actions)
            rolls = self.hand(after.hand).rolls
            if rolls:
                rolls.pop()
            if e.reversed_settlement is not None:
                self.hand(e.reversed_settlement.hand).settlement = None
            self.action(after.hand, "void", record, at, e, dice=[e.d1, e.d2])
        elif isinstance(e, BetAccepted):
            self.action(before.hand, "bet", record, at, e, position=e.position, amount=e.amount)
        elif isinstance(e, BetCancelled):
            self.action(before.hand, "cancel", record, at, e, position=e.position, amount=e.amount)
        elif isinstance(e, Surrendered):
            self.action(
                before.hand, "surrender", record, at, e, kind=e.surrender, pending=e.pending
            )
        elif isinstance(e, Acknowledged):
            self.action(before.hand, "ack", record, at, e)
        self.hand(after.hand).points = list(after.points)


def _starts_hand(payload: str, hand: int) -> bool:
    if '"new_hand"' not in payload:
        return False
    try:
        events = json.loads(payload)["events"]
    except (ValueError, KeyError, TypeError):
        return False
    return any(e.get("event") == "new_hand" and e.get("hand") == hand for e in events)


def _start_record(db: sqlite3.Connection, first_hand: int) -> int:
    """The record that began ``first_hand`` (or a clear-halt anchor); 0 for genesis."""
    if first_hand <= 1:
        return 0
    upper = db.execute("SELECT COALESCE(MAX(record), 0) + 1 FROM records").fetchone()[0]
    while upper > 1:
        rows = db.execute(
            "SELECT record, kind, payload FROM records WHERE record < ? "
            "ORDER BY record DESC LIMIT ?",
            (upper, _BATCH),
        ).fetchall()
        if not rows:
            break
        for number, kind, payload in rows:
            if kind == "clear_halt" or (kind == "command" and _starts_hand(payload, first_hand)):
                return int(number)
        upper = rows[-1][0]
    return 0


def history(db: sqlite3.Connection, current: TableState, hands: int) -> list[dict[str, Any]]:
    """The last ``hands`` hands, oldest first; the hand in play last (``result`` null)."""
    hands = max(1, hands)
    start = _start_record(db, current.hand - hands + 1)
    snap = db.execute(
        "SELECT record, state FROM snapshots WHERE record < ? ORDER BY record DESC LIMIT 1",
        (start,),
    ).fetchone()
    state = TableState.from_dict(json.loads(snap[1])) if snap else TableState()
    recall = _Recall()
    recall.hand(state.hand)
    rows = db.execute(
        "SELECT record, at, kind, payload FROM records WHERE record > ? ORDER BY record",
        (snap[0] if snap else 0,),
    )
    for number, at, kind, payload in rows:
        try:
            data = json.loads(payload)
            if kind == "clear_halt":
                state = TableState.from_dict(data["resume_state"])
                recall.hand(state.hand)
                continue
            if kind != "command":
                continue
            events = [event_from_dict(e) for e in data["events"]]
        except (ValueError, KeyError, TypeError):
            continue  # a damaged record: `journal verify` reports it
        for e in events:
            after = evolve(state, e)
            recall.event(state, e, after, number, at)
            state = after
    recall.hand(state.hand)
    ordered = [recall.hands[n] for n in sorted(recall.hands)]
    return [h.line() for h in ordered[-hands:]]
