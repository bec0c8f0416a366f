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

The journal keeps commands, not events (docs/journal.md): each record is replayed
(:mod:`controller.journal.replay`: under the rules in force when it was journaled), which
gives the very events the table decided, and the hands are the one projection of them
(:mod:`controller.journal.handlog`), the floor's too. What a clear-halt set aside comes
off again: it was never part of the game.

Voided rolls come off again (a voided seven-out gives the hand back, and its
settlement is withdrawn), so ``rolls`` are the rolls that stood. A request is
bounded: at most :data:`MAX_HANDS` hands, :data:`MAX_RECORDS` records read, and
its deadline.
"""

from __future__ import annotations

import copy
import json
import math
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from controller.core.config import FireBetRules
from controller.core.errors import FirebetError, UsageError
from controller.core.events import NewHand, RollVoided
from controller.core.state import TableState
from controller.journal import store
from controller.journal.handlog import Hand, HandLog, history_line
from controller.journal.proof import Break, mark
from controller.journal.recipe import BODY_SQL, RecordKind
from controller.journal.replay import RecordError, Replay
from controller.journal.walk import replay_at

MAX_HANDS = 1000  # hands one request may ask for
MAX_RECORDS = 200_000  # records one request may read
_BATCH = 256
Rows = Iterable[tuple[int, int, str, str, str]]


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
class _Budget:
    """What one request may still read, and until when."""

    hands: int
    deadline: float
    records: int = 0
    pace: Callable[[], None] | None = None  # looked at between batches (it may sleep)

    def spend(self, n: int) -> None:
        if self.pace is not None:
            self.pace()
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


class Recall:
    """The game recall of one journal, kept up to date request by request.

    Use it from one thread; give it the same database each time (its own
    connection). Nothing here writes.
    """

    def __init__(self, rules: FireBetRules) -> None:
        """``rules``: in force before the journal's first ``rules`` record."""
        self._rules = rules
        self._replay: Replay | None = None  # after record ``_seen``
        self._seen = 0
        # hand -> (the record that began it, the replay after that record)
        self._starts: dict[int, tuple[int, Replay]] = {}

    @property
    def state(self) -> TableState | None:
        """The table state after the last record folded (None before the first request)."""
        return self._replay.state if self._replay is not None else None

    def history(
        self,
        db: sqlite3.Connection,
        hands: int,
        deadline: float = math.inf,
        *,
        detail: bool = False,
        halted_at: Break | None = None,
        pace: Callable[[], None] | None = None,
    ) -> list[dict[str, Any]]:
        """The last ``hands`` hands, oldest first; the hand in play last (``result`` null).
        Each has the keys of ``history --json``; ``detail`` adds its ``roll_log`` (each
        roll's record, time, source and seq: what the text of ``history`` shows).
        ``halted_at``: the journal is halted there; each hand is marked verified or not,
        with its last verified figures (:mod:`controller.journal.proof`). ``pace`` is
        called between batches of records read (the recall process's CPU pace)."""
        if not 1 <= hands <= MAX_HANDS:
            raise UsageError(f"hands must be from 1 to {MAX_HANDS}, not {hands}")
        budget = _Budget(hands, deadline, pace=pace)
        db.execute("BEGIN")  # one consistent view while the service appends
        try:
            replay = self._catch_up(db, budget)
            first = replay.state.hand - hands + 1
            origin = self._starts.get(first)
            if origin is None:
                origin = self._origin(db, first)
            return self._lines(db, origin, hands, budget, detail, halted_at)
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")

    # following the journal ----------------------------------------------------------
    def _catch_up(self, db: sqlite3.Connection, budget: _Budget) -> Replay:
        if self._replay is None:
            anchor = next(store.anchors(db), 0)
            self._replay, self._seen = self._at(db, anchor), anchor
        self._fold(self._rows(db, self._seen, None, budget), self._replay, None, follow=True)
        return self._replay

    def _at(self, db: sqlite3.Connection, anchor: int) -> Replay:
        """A replay standing after the snapshot at record ``anchor`` (0: genesis)."""
        if not anchor:
            return Replay(self._rules)
        replay, _ = replay_at(db, anchor, self._rules)  # a damaged rules record: `verify` says
        text = store.snapshot(db, anchor)
        if text is not None:
            replay.resume(TableState.from_dict(json.loads(text)))
        return replay

    def _rows(self, db: sqlite3.Connection, after: int, upto: int | None, budget: _Budget) -> Rows:
        query = f"SELECT record, at, actor, kind, {BODY_SQL} FROM records WHERE record > ?"
        params: tuple[int, ...] = (after,)
        if upto is not None:
            query += " AND record <= ?"
            params = (after, upto)
        n = 0
        for row in db.execute(query + " ORDER BY record", params):
            n += 1
            if n % _BATCH == 0:
                budget.spend(_BATCH)
            yield row
        budget.spend(n % _BATCH)

    def _fold(self, rows: Rows, replay: Replay, log: HandLog | None, *, follow: bool) -> None:
        """Replay ``rows`` from where ``replay`` stands, noting where hands began (and, into
        ``log``, what they did)."""
        for number, at, actor, kind, body in rows:
            if follow:
                self._seen = number
            try:
                step = replay.step(number, at, actor, kind, body)
            except RecordError:
                continue  # a damaged record: `journal verify` reports it
            if log is not None:
                log.take(step)
            if kind == RecordKind.CLEAR_HALT:
                self._forget(step.after.hand, number)
                continue
            began = False
            state = step.before
            for e in step.events:
                if isinstance(e, NewHand):
                    began = True
                elif isinstance(e, RollVoided) and step.after.hand < state.hand:
                    self._forget(step.after.hand, number)
            if began:
                self._note(replay.state.hand, number, replay.copy())

    def _note(self, hand: int, record: int, replay: Replay) -> None:
        known = self._starts.get(hand)
        if known is None or known[0] < record:  # the later start of a hand wins
            self._starts[hand] = (record, replay)
        if len(self._starts) > 2 * MAX_HANDS:
            for old in sorted(self._starts)[: len(self._starts) - MAX_HANDS]:
                del self._starts[old]

    def _forget(self, hand: int, record: int) -> None:
        """Record ``record`` took the table back to ``hand``: later hands begun before it
        were undone."""
        for h in [h for h, (r, _) in self._starts.items() if h > hand and r < record]:
            del self._starts[h]

    # the hands asked for ------------------------------------------------------------
    def _origin(self, db: sqlite3.Connection, first: int) -> tuple[int, Replay]:
        """Where to fold from when ``first`` began before anything noted: the newest
        snapshot taken before it began (genesis for the first hand)."""
        record = store.anchor_for_hand(db, first) if first > 1 else 0
        return record, self._at(db, record)

    def _lines(
        self,
        db: sqlite3.Connection,
        origin: tuple[int, Replay],
        hands: int,
        budget: _Budget,
        detail: bool = False,
        halted_at: Break | None = None,
    ) -> list[dict[str, Any]]:
        record, start = origin
        replay = start.copy()
        log = HandLog()
        log.begin(replay.state, record)
        before: dict[int, Hand] = {}  # the hands as the records before the break left them
        if halted_at is not None and record <= halted_at.verified_through:
            upto = min(halted_at.verified_through, self._seen)
            self._fold(self._rows(db, record, upto, budget), replay, log, follow=False)
            log.begin(replay.state, upto)
            before = copy.deepcopy(log.hands)
            record = upto
        self._fold(self._rows(db, record, self._seen, budget), replay, log, follow=False)
        log.begin(replay.state, self._seen)
        ordered = [log.hands[n] for n in sorted(log.hands)]
        if halted_at is not None:
            ordered = [mark(h, halted_at, before.get(h["hand"])) for h in ordered]
        extra = ("roll_log", "wagers") if detail else ()
        return [history_line(h) | {k: h[k] for k in extra} for h in ordered[-hands:]]


def history(
    db: sqlite3.Connection,
    rules: FireBetRules,
    hands: int,
    *,
    detail: bool = False,
    halted_at: Break | None = None,
) -> list[dict[str, Any]]:
    """The last ``hands`` hands of the journal on ``db`` (a one-off :class:`Recall`)."""
    return Recall(rules).history(db, hands, detail=detail, halted_at=halted_at)
