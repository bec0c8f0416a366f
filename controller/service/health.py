"""The journal's and the disk's health, checked off the game's path.

At start the service checks the disk; after ready it verifies the whole journal in a
process of its own (recovery read only the tail) and hands what it found to the engine
thread as a queue item (:class:`~controller.service.jobs.Checked`), so only the engine
thread ever changes the table's mode. See ``docs/journal.md`` (halts and faults) and
``docs/runbook.md``.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from controller.core.config import FireBetRules
from controller.core.errors import JournalIntegrityError
from controller.journal import Journal
from controller.journal.walk import Problem, damage_at, screen_seals
from controller.service.jobs import Checked, Halt
from controller.service.recall import verify_apart

if TYPE_CHECKING:
    from controller.service.table import Table

log = logging.getLogger("firebet.service")

MIN_FREE_BYTES = 16 * 1024 * 1024  # below this the self-check warns: rolls may soon be refused

WATCH_S = 2.0  # how often the running table's records are screened (docs/journal.md)
WATCH_TAIL = 256  # the newest records screened every time
WATCH_ROUND = 256  # older records screened every time, in rounds from the oldest
WATCH_CHUNK = 64  # records screened between two yields of the interpreter lock


def check_whole_journal(
    journal: Journal, rules: FireBetRules, post: Callable[[Checked], None]
) -> None:
    """After ready (on a thread of its own): verify every record from genesis.

    Runs in a process of its own (:func:`controller.service.recall.verify_apart`), on its
    own read-only connection, so the table plays on meanwhile and its engine thread never
    waits for the walk; what it found goes to the engine thread (``post``).
    """
    outcome, record, reason = verify_apart(journal, rules)
    post(Checked(outcome, record, reason))


def self_check(table: Table, state_dir: Path) -> None:
    """At start: a storage fault if the state directory cannot be read, a warning if it is
    nearly full."""
    try:
        free = shutil.disk_usage(state_dir).free
    except OSError as exc:
        table.storage_fault = f"state directory {state_dir}: {exc.strerror or exc}"
        return
    if free < MIN_FREE_BYTES:
        log.warning("only %d bytes free in %s", free, state_dir)


class RecordWatch:
    """While the table runs (a thread of its own): in every :data:`WATCH_S` seconds, screen
    the seals of the records journaled since the last time (the newest :data:`WATCH_TAIL`
    the first time) and of the next :data:`WATCH_ROUND` older ones (a round over the whole
    journal, after its newest clear-halt), on a read-only connection of its own; a record
    changed, missing or resealed without the key halts the table with the words recovery
    uses at start. A record is screened once when it is new and again each round, never
    at every tick (an idle table's watch costs its round, SPEC section 7).

    It only reads and posts: the halt goes to the engine thread as a
    :class:`~controller.service.jobs.Halt` on the one queue, so nothing slow ever runs on
    the engine thread, and its work comes in chunks of :data:`WATCH_CHUNK` records spread
    over the interval, so a roll never waits behind a burst of it. Nothing is screened
    while the table is halted.
    """

    def __init__(
        self,
        journal: Journal,
        rules: FireBetRules,
        post: Callable[[Halt], None],
        stopping: threading.Event,
    ) -> None:
        self.journal = journal
        self.rules = rules
        self.post = post
        self.stopping = stopping
        self.floor: int | None = None  # the newest clear-halt (None: not read yet)
        self.clears = journal.clears  # the journal's clear-halts when the floor was read
        self.round_at = 0  # the last record the round screened
        self.new_at: int | None = None  # the newest record screened (None: none yet)
        self.screened = 0  # records screened since start (for the tests)
        self.trouble = ""  # why the journal could not be read, last time it could not

    def run(self) -> None:
        """The thread: screen (spread over :data:`WATCH_S`), again, until the service stops."""
        db: sqlite3.Connection | None = None
        try:
            while not self.stopping.is_set():
                if self.journal.halted is not None:
                    self.stopping.wait(WATCH_S)
                    continue
                if self.journal.clears != self.clears:  # a clear-halt: the floor moved
                    self.clears, self.floor = self.journal.clears, None
                try:
                    if db is None:
                        db, key = self.journal.checker_view()
                    problem = self.tick(db, key, spread_s=WATCH_S)
                except (sqlite3.Error, JournalIntegrityError) as exc:
                    if str(exc) != self.trouble:  # once a cause, not every 2 s
                        log.warning("the journal watch could not read the journal: %s", exc)
                    self.trouble = str(exc)
                    if db is not None:
                        db.close()
                    db = None
                    self.stopping.wait(WATCH_S)
                    continue
                if problem is not None:
                    self.post(Halt(*problem))
                    self.stopping.wait(WATCH_S)  # the engine thread halts meanwhile
        finally:
            if db is not None:
                db.close()

    def _plan(self, db: sqlite3.Connection, key: bytes) -> tuple[list[range], Problem | None]:
        """What to screen this time (chunks of records) or the newest records gone."""
        known = self.journal.last_record  # before the view: the view may only be newer
        db.execute("BEGIN")
        try:
            if self.floor is None:
                (floor,) = db.execute(  # (the kind IN ... lets SQLite use records_halts)
                    "SELECT coalesce(max(record), 0) FROM records "
                    "WHERE kind IN ('halt', 'clear_halt') AND kind = 'clear_halt'"
                ).fetchone()
                self.floor = self.round_at = int(floor)
                self.new_at = None
            (last,) = db.execute("SELECT coalesce(max(record), 0) FROM records").fetchone()
            if last < known:  # newest records deleted under the table
                gone = damage_at(db, key, self.rules, known) or (last + 1, _gone(last, known))
                return [], gone
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")
        newest = last - WATCH_TAIL if self.new_at is None else min(self.new_at, last)
        tail = max(self.floor + 1, newest + 1)  # the records new since the last time
        self.new_at = last
        older = tail - 1  # the round's records: all before the new ones
        left = min(WATCH_ROUND, older - self.floor)  # each at most once a time
        rounds: list[tuple[int, int]] = []
        while left > 0:
            if self.round_at >= older:
                self.round_at = self.floor  # the round is done: from the oldest again
            end = min(older, self.round_at + left)
            rounds.append((self.round_at + 1, end))
            left -= end - self.round_at
            self.round_at = end
        ranges = rounds + ([(tail, last)] if tail <= last else [])
        chunks = [
            range(start, min(upto, start + WATCH_CHUNK - 1) + 1)
            for first, upto in ranges
            for start in range(first, upto + 1, WATCH_CHUNK)
        ]
        return chunks, None

    def tick(self, db: sqlite3.Connection, key: bytes, spread_s: float = 0.0) -> Problem | None:
        """One screening on ``db``: the damage found, or None. Each chunk of
        :data:`WATCH_CHUNK` records is screened on a view of its own, the chunks spread over
        ``spread_s`` seconds (so no burst of work ever stands in a roll's way)."""
        chunks, gone = self._plan(db, key)
        if gone is not None:
            return gone
        gap = spread_s / len(chunks) if chunks else spread_s
        if not chunks and gap:
            self.stopping.wait(gap)
        for chunk in chunks:
            db.execute("BEGIN")
            try:
                bad = screen_seals(db, key, chunk.start, chunk.stop - 1)
                self.screened += len(chunk)
                problem = damage_at(db, key, self.rules, bad) if bad is not None else None
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")
            if problem is not None:
                return problem
            if gap:
                if self.stopping.wait(gap):
                    return None
            else:
                time.sleep(0)  # let the engine thread have the interpreter lock
        return None


def _gone(last: int, known: int) -> str:
    first = last + 1
    if first == known:
        return f"record {first} is missing"
    return f"records {first}..{known} are missing"
