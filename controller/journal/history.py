"""Game recall from the journal: the last hands with their rolls, points, actions and result.

:class:`Recall` follows the journal on a connection of its own (read-only in the
service, so a reading client never touches the engine's connection or thread).
Each request first folds the records appended since the last one, noting where
each hand began (the record and the state after it); then it folds only the
records of the hands asked for, from where the oldest of them began. So a
request costs what it asks for, not the journal's length: the last 10 hands of a
million-record journal read about a hundred records. After a restart the first
request for hands older than the newest snapshot starts from the newest snapshot
taken before the oldest of them (at most one snapshot interval more), and notes
where they began for the next ones.

The journal keeps commands, not events (docs/journal.md): each command is folded
through the rules engine again, which gives the very events the table decided.
Records a clear-halt set aside are skipped: they were never part of the game.

Voided rolls come off again (a voided seven-out gives the hand back, and its
settlement is withdrawn), so ``rolls`` are the rolls that stood. A request is
bounded: at most :data:`MAX_HANDS` hands, :data:`MAX_RECORDS` records read, and
its deadline.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from controller.core.engine import Engine
from controller.core.errors import FirebetError, UsageError
from controller.core.events import (
    Acknowledged,
    BetAccepted,
    BetCancelled,
    Event,
    NewHand,
    RollAccepted,
    RollVoided,
    Settlement,
    Surrendered,
    SurveillanceConfirmed,
)
from controller.core.state import TableState, evolve
from controller.journal import store
from controller.journal.recipe import decode_body, iso

MAX_HANDS = 1000  # hands one request may ask for
MAX_RECORDS = 200_000  # records one request may read
_BATCH = 256


class HistoryTooLong(FirebetError):
    """A history request would read more than it may (records or time)."""


def connect_read_only(path: Path | str) -> sqlite3.Connection:
    """A read-only connection to the journal file (WAL: it never blocks the writer)."""
    db = sqlite3.connect(
        f"file:{quote(str(Path(path).resolve()))}?mode=ro",
        uri=True,
        isolation_level=None,
        check_same_thread=False,
    )
    db.execute("PRAGMA busy_timeout = 2000")
    return db


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

    def cleared(self, hand: int, record: int, at: str, actor: str, payload: str) -> None:
        """A technician's clear-halt, on the hand it resumed, with who and why."""
        detail: dict[str, Any] = {}
        try:
            body = json.loads(payload)
            detail = {"was": body["cleared"]["reason"], "note": body.get("note", "")}
        except (ValueError, KeyError, TypeError):
            pass
        self.hand(hand).actions.append(
            {"action": "clear_halt", **detail, "actor": actor, "at": at, "record": record}
        )

    def event(self, before: TableState, e: Event, after: TableState, record: int, at: str) -> None:
        if isinstance(e, RollAccepted):
            self.hand(before.hand).rolls.append([e.d1, e.d2])
            if e.source == "manual":  # entered by a dealer while the reader was down: who
                self.action(before.hand, "manual_roll", record, at, e, dice=[e.d1, e.d2])
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
        elif isinstance(e, SurveillanceConfirmed):
            hand = e.hand if e.hand in self.hands else before.hand
            self.action(hand, "surveillance_confirmed", record, at, e, by=e.by, id=e.id)
        self.hand(after.hand).points = list(after.points)


@dataclass
class _Budget:
    """What one request may still read, and until when."""

    hands: int
    deadline: float
    records: int = 0

    def spend(self, n: int) -> None:
        self.records += n
        if self.records > MAX_RECORDS:
            raise HistoryTooLong(
                f"the last {self.hands} hands span more than {MAX_RECORDS} journal records: "
                "ask for fewer hands (--hands N)"
            )
        if time.monotonic() > self.deadline:
            raise HistoryTooLong(
                f"the last {self.hands} hands took longer than the request's deadline to "
                "read: ask for fewer hands (--hands N)"
            )


def _set_aside(db: sqlite3.Connection, after: int) -> list[tuple[int, int]]:
    """Record ranges clear-halts after record ``after`` set aside (never part of the game)."""
    ranges = []
    for (body,) in db.execute(
        "SELECT body FROM records WHERE kind = 'clear_halt' AND record > ?", (after,)
    ):
        try:
            first, last = json.loads(body)["set_aside"]["records"]
            ranges.append((int(first), int(last)))
        except (ValueError, KeyError, TypeError):
            continue  # nothing set aside, or a damaged record: `journal verify` reports it
    return ranges


class Recall:
    """The game recall of one journal, kept up to date request by request.

    Use it from one thread; give it the same database each time (its own
    connection). Nothing here writes.
    """

    def __init__(self, engine: Engine) -> None:
        """``engine`` folds the commands again (one of this recall's own: not thread-safe)."""
        self._engine = engine
        self._state: TableState | None = None  # after record ``_seen``
        self._seen = 0
        # hand -> (the record that began it, the state after that record)
        self._starts: dict[int, tuple[int, TableState]] = {}

    @property
    def state(self) -> TableState | None:
        """The table state after the last record folded (None before the first request)."""
        return self._state

    def history(
        self, db: sqlite3.Connection, hands: int, deadline: float = math.inf
    ) -> list[dict[str, Any]]:
        """The last ``hands`` hands, oldest first; the hand in play last (``result`` null)."""
        if not 1 <= hands <= MAX_HANDS:
            raise UsageError(f"hands must be from 1 to {MAX_HANDS}, not {hands}")
        budget = _Budget(hands, deadline)
        db.execute("BEGIN")  # one consistent view while the service appends
        try:
            self._catch_up(db, budget)
            assert self._state is not None
            first = self._state.hand - hands + 1
            origin = self._starts.get(first)
            if origin is None:
                origin = self._origin(db, first, budget)
            return self._lines(db, origin, hands, budget)
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")

    # following the journal ----------------------------------------------------------
    def _catch_up(self, db: sqlite3.Connection, budget: _Budget) -> None:
        if self._state is None:
            snap = db.execute(
                "SELECT record, state FROM snapshots ORDER BY record DESC LIMIT 1"
            ).fetchone()
            self._state, self._seen = TableState(), 0
            if snap is not None:
                self._state, self._seen = TableState.from_dict(json.loads(snap[1])), snap[0]
        self._state = self._fold(
            self._rows(db, self._seen, None, budget), self._state, None, follow=True
        )

    def _rows(
        self, db: sqlite3.Connection, after: int, upto: int | None, budget: _Budget
    ) -> Iterable[tuple[int, int, str, str, str]]:
        query = "SELECT record, at, actor, kind, body FROM records WHERE record > ?"
        params: tuple[int, ...] = (after,)
        if upto is not None:
            query += " AND record <= ?"
            params = (after, upto)
        aside = _set_aside(db, after)
        n = 0
        for row in db.execute(query + " ORDER BY record", params):
            n += 1
            if n % _BATCH == 0:
                budget.spend(_BATCH)
            if aside and any(first <= row[0] <= last for first, last in aside):
                continue
            yield row
        budget.spend(n % _BATCH)

    def _fold(
        self,
        rows: Iterable[tuple[int, int, str, str, str]],
        state: TableState,
        recall: _Recall | None,
        *,
        follow: bool = False,
    ) -> TableState:
        """Fold ``rows`` from ``state``, noting where hands began (and what they did)."""
        for number, at, actor, kind, body in rows:
            if follow:
                self._seen = number
            try:
                if kind == "clear_halt":
                    state = TableState.from_dict(json.loads(body)["resume_state"])
                    self._forget(state.hand, number)
                    if recall is not None:
                        recall.cleared(state.hand, number, iso(at), actor, body)
                    continue
                if kind != "command":
                    continue
                at_text = iso(at)
                events = self._engine.apply(state, decode_body(body, actor, at, at_text)).events
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a damaged record: `journal verify` reports it
            began = False
            for e in events:
                after = evolve(state, e)
                if recall is not None:
                    recall.event(state, e, after, number, at_text)
                if isinstance(e, NewHand):
                    began = True
                elif isinstance(e, RollVoided) and after.hand < state.hand:
                    self._forget(after.hand, number)
                state = after
            if began:
                self._note(state.hand, number, state)
        return state

    def _note(self, hand: int, record: int, state: TableState) -> None:
        known = self._starts.get(hand)
        if known is None or known[0] < record:  # the later start of a hand wins
            self._starts[hand] = (record, state)
        if len(self._starts) > 2 * MAX_HANDS:
            for old in sorted(self._starts)[: len(self._starts) - MAX_HANDS]:
                del self._starts[old]

    def _forget(self, hand: int, record: int) -> None:
        """Record ``record`` took the table back to ``hand``: later hands begun before it
        were undone."""
        for h in [h for h, (r, _) in self._starts.items() if h > hand and r < record]:
            del self._starts[h]

    # the hands asked for ------------------------------------------------------------
    def _origin(
        self, db: sqlite3.Connection, first: int, budget: _Budget
    ) -> tuple[int, TableState]:
        """Where to fold from when ``first`` began before anything noted: the newest
        snapshot taken before it began (genesis for the first hand)."""
        record = store.anchor_for_hand(db, first) if first > 1 else 0
        text = store.snapshot(db, record) if record else None
        if text is None:
            return 0, TableState()
        return record, TableState.from_dict(json.loads(text))

    def _lines(
        self, db: sqlite3.Connection, origin: tuple[int, TableState], hands: int, budget: _Budget
    ) -> list[dict[str, Any]]:
        record, state = origin
        recall = _Recall()
        recall.hand(state.hand)
        state = self._fold(self._rows(db, record, self._seen, budget), state, recall)
        recall.hand(state.hand)
        ordered = [recall.hands[n] for n in sorted(recall.hands)]
        return [h.line() for h in ordered[-hands:]]


def history(db: sqlite3.Connection, engine: Engine, hands: int) -> list[dict[str, Any]]:
    """The last ``hands`` hands of the journal on ``db`` (a one-off :class:`Recall`)."""
    return Recall(engine).history(db, hands)
