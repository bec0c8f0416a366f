"""The journal's and the disk's health, checked off the game's path.

At start the service checks the disk; after ready it verifies the whole journal in a
process of its own (recovery read only the tail) and hands what it found to the engine
thread as a queue item (:class:`~controller.service.jobs.Checked`), so only the engine
thread ever changes the table's mode. See ``docs/journal.md`` (halts and faults) and
``docs/runbook.md``.
"""

from __future__ import annotations

import logging
import math
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from controller.core.config import FireBetRules
from controller.core.errors import JournalIntegrityError
from controller.journal import Journal, ReadOnly
from controller.journal.walk import Problem, damage_at, screen_seals
from controller.service.jobs import Checked, Halt
from controller.service.recall import own_quota, verify_apart

if TYPE_CHECKING:
    from controller.service.table import Table

log = logging.getLogger("firebet.service")

MIN_FREE_BYTES = 16 * 1024 * 1024  # below this the self-check warns: rolls may soon be refused

WATCH_S = 5.0  # a tick of the running table's watch (docs/journal.md, "The watch")
WATCH_TAIL = 32  # the newest records screened at the first tick (then each record once new)
WATCH_SWEEP_S = 90.0  # a sweep of 1,000 records or fewer ([journal] watch_sweep_s)
WATCH_CHUNK = 64  # records screened between two yields of the interpreter lock
WATCH_CATCH_UP_S = 4 * WATCH_S  # a late tick screens at most this much of the sweep's time
WATCH_BURST_S = 0.004  # CPU seconds of chunks between two sleeps (no CPU quota)
WATCH_YIELD_S = 0.0001  # between two chunks of a burst: the interpreter lock left long
# enough for a roll's thread, woken meanwhile, to take it (``sleep(0)`` may take it back
# before that thread runs; a sleep this short costs no more CPU: caches stay warm)
WATCH_BURST_OF_QUOTA = 0.025  # with a quota of q cores: q x 25 ms (a quarter of q's share
# of systemd's 100 ms period), so a burst never spends the quota a roll needs in a period


def burst_seconds(quota: float | None) -> float:
    """The CPU seconds the watch screens for between two sleeps. Each sleep's wake-up
    costs more than the chunk it precedes (0.5 ms of CPU here after 0.2 s asleep: caches
    gone cold), so chunks run back to back, yielding the interpreter lock between them,
    until a burst's CPU is spent; under a CPU quota a burst is small enough to leave
    each period's quota to the rolls."""
    if quota is None:
        return WATCH_BURST_S
    return min(WATCH_BURST_S, quota * WATCH_BURST_OF_QUOTA)


def sweep_seconds(records: int, per_thousand: float = WATCH_SWEEP_S) -> float:
    """The watch's bound: every one of ``records`` records is screened again within this
    many seconds, whatever the table does meanwhile. It grows as the square root of the
    journal's length, ``per_thousand`` for 1,000 records or fewer: with the default 90 s,
    10,000 records in under 5 minutes, 100,000 in 15, 1,000,000 in 47 (the sweep's rate,
    and its CPU, grow as the square root too: 11, 35, 111, 351 records a second)."""
    return per_thousand * math.sqrt(max(records, 1000) / 1000)


def check_whole_journal(
    journal: Journal,
    rules: FireBetRules,
    post: Callable[[Checked], None],
    clears: int = 0,
    cancel: threading.Event | None = None,
) -> None:
    """After ready, and again after each clear-halt (on a thread of its own): verify every
    record from genesis.

    Runs in a process of its own (:func:`controller.service.recall.verify_apart`), on its
    own read-only connection, so the table plays on meanwhile and its engine thread never
    waits for the walk; what it found goes to the engine thread (``post``), with
    ``clears``, the table's count of clear-halts when it began. ``cancel`` (the service's
    stop) ends the check's process early: nothing is posted then.
    """
    outcome, record, reason = verify_apart(journal, rules, cancel)
    if cancel is not None and cancel.is_set():
        return  # the service stopped: no engine thread is left to take the answer
    post(Checked(outcome, record, reason, clears))


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
    """While the table runs (a thread of its own): the journal's records screened again
    and again (their seals checked, nothing replayed), on a read-only connection of its
    own; a record changed, missing or resealed without the key halts the table with the
    words recovery uses at start.

    Each tick (:data:`WATCH_S`) screens the records journaled since the last one (the
    newest :data:`WATCH_TAIL` at first), once, and the next slice of the **sweep**, which
    goes through every record after the newest clear-halt,
    oldest first, to the newest record when it began (records that come meanwhile wait for
    the next sweep: it never chases the table), and starts again. The slice is the time
    since the last tick times the sweep's rate, ``n / sweep_seconds(n)`` records a second
    for a journal of ``n``, so a sweep takes :func:`sweep_seconds` (the bound,
    docs/journal.md) however many rolls come meanwhile. Its cost is what the bound asks:
    about 4 us of CPU a record screened here (``bench/watch.py``; 9 us when it slept
    after every chunk).

    It only reads and posts: the halt goes to the engine thread as a
    :class:`~controller.service.jobs.Halt` on the one queue, so nothing slow ever runs on
    the engine thread, and its work comes in chunks of :data:`WATCH_CHUNK` records, the
    interpreter lock yielded after each (a roll never waits behind more than one), in
    bursts of at most :func:`burst_seconds` of CPU spread over the tick (a sleep between
    two: each wake-up costs more than a chunk). Nothing is screened while the table is
    halted.
    """

    def __init__(
        self,
        journal: Journal,
        rules: FireBetRules,
        post: Callable[[Halt], None],
        stopping: threading.Event,
        sweep_s: float = WATCH_SWEEP_S,
    ) -> None:
        """``sweep_s``: the sweep of 1,000 records or fewer (:func:`sweep_seconds`)."""
        self.journal = journal
        self.rules = rules
        self.post = post
        self.stopping = stopping
        self.sweep_s = sweep_s  # [journal] watch_sweep_s
        self.floor: int | None = None  # the newest clear-halt (None: not read yet)
        self.clears = journal.clears  # the journal's clear-halts when the floor was read
        self.sweep_at = 0  # the last record the sweep screened
        self.sweep_end = 0  # the newest record when this sweep began: where it ends
        self.owed = 0.0  # records the sweep owes: the time passed times its rate
        self.new_at: int | None = None  # the newest record screened (None: none yet)
        self.sweeps = 0  # whole sweeps finished since start
        self.screened = 0  # records screened since start
        self.cpu_s = 0.0  # this thread's CPU time screening (time.thread_time)
        self.bound_s = sweep_s  # the bound for the journal's length at the last tick
        self._ticked: float | None = None  # when the last tick was planned (monotonic)
        self.burst_s = burst_seconds(own_quota())  # CPU screened between two sleeps
        self.trouble = ""  # why the journal could not be read, last time it could not

    def report(self) -> dict[str, object]:
        """``status --json`` ``journal_watch``: the bound now and what it has done."""
        return {
            "sweep_s": round(self.bound_s, 1),
            "sweeps": self.sweeps,
            "at": self.sweep_at,
            "screened": self.screened,
            "cpu_s": round(self.cpu_s, 3),
        }

    def run(self) -> None:
        """The thread: screen (spread over :data:`WATCH_S`), again, until the service stops."""
        db: sqlite3.Connection | None = None
        try:
            while not self.stopping.is_set():
                if self.journal.halted is not None:
                    self._ticked = None
                    self.stopping.wait(WATCH_S)
                    continue
                if self.journal.read_only is ReadOnly.FILE_SYSTEM:
                    # nothing can change a journal on a read-only file system, and a
                    # connection made now keeps SQLite's index of the WAL read-only for
                    # this process: the writer reopened when it is writable again would
                    # share it and never write (a storage fault that never ends)
                    if db is not None:
                        db.close()
                    db = None
                    self.stopping.wait(WATCH_S)
                    continue
                if self.journal.clears != self.clears:  # a clear-halt: the floor moved
                    self.clears, self.floor = self.journal.clears, None
                try:
                    if db is None:
                        db, key = self.journal.checker_view()
                    problem = self.tick(db, key, spread_s=WATCH_S)
                except (sqlite3.Error, JournalIntegrityError) as exc:
                    if str(exc) != self.trouble:  # once a cause, not every tick
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

    def _plan(
        self, db: sqlite3.Connection, key: bytes, elapsed: float | None
    ) -> tuple[list[range], Problem | None]:
        """What to screen this tick (chunks of records) or the newest records gone.
        ``elapsed``: the sweep's time since the last tick (None: the clock's)."""
        known = self.journal.last_record  # before the view: the view may only be newer
        db.execute("BEGIN")
        try:
            if self.floor is None:
                (floor,) = db.execute(  # (the kind IN ... lets SQLite use records_halts)
                    "SELECT coalesce(max(record), 0) FROM records "
                    "WHERE kind IN ('halt', 'clear_halt') AND kind = 'clear_halt'"
                ).fetchone()
                self.floor = self.sweep_at = self.sweep_end = int(floor)
                self.owed, self.new_at = 0.0, None
            (last,) = db.execute("SELECT coalesce(max(record), 0) FROM records").fetchone()
            if last < known:  # newest records deleted under the table
                gone = damage_at(db, key, self.rules, known) or (last + 1, _gone(last, known))
                return [], gone
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")
        now = time.monotonic()
        if elapsed is None:
            elapsed = WATCH_S if self._ticked is None else now - self._ticked
        self._ticked = now
        records = last - self.floor
        self.bound_s = sweep_seconds(records, self.sweep_s)
        if records:
            self.owed += records / self.bound_s * min(elapsed, WATCH_CATCH_UP_S)
        due = min(int(self.owed), records)
        self.owed -= due
        ranges: list[tuple[int, int]] = []
        while due > 0:
            if self.sweep_at >= self.sweep_end:  # a whole sweep done: from the oldest again,
                # to the newest now (what comes meanwhile waits for the next: never a chase)
                if self.sweep_end > self.floor:
                    self.sweeps += 1
                self.sweep_at, self.sweep_end = self.floor, last
            end = min(self.sweep_end, self.sweep_at + due)
            ranges.append((self.sweep_at + 1, end))
            due -= end - self.sweep_at
            self.sweep_at = end
        # the records journaled since the last tick, once (the newest WATCH_TAIL at first)
        newest = last - WATCH_TAIL if self.new_at is None else min(self.new_at, last)
        if newest < last:
            ranges.append((max(self.floor + 1, newest + 1), last))
        self.new_at = last
        chunks = [
            range(start, min(upto, start + WATCH_CHUNK - 1) + 1)
            for first, upto in ranges
            for start in range(first, upto + 1, WATCH_CHUNK)
        ]
        return chunks, None

    def tick(
        self,
        db: sqlite3.Connection,
        key: bytes,
        spread_s: float = 0.0,
        elapsed: float | None = None,
    ) -> Problem | None:
        """One screening on ``db``: the damage found, or None. Each chunk of
        :data:`WATCH_CHUNK` records is screened on a view of its own, the interpreter lock
        yielded after it; the chunks come in bursts of :attr:`burst_s` of CPU, spread
        over ``spread_s`` seconds (so no burst of work ever stands in a roll's way).
        ``elapsed``: the seconds of sweep this tick owes (None: since the last tick)."""
        started = time.thread_time()
        try:
            chunks, gone = self._plan(db, key, elapsed)
        finally:
            self.cpu_s += time.thread_time() - started
        if gone is not None:
            return gone
        gap = spread_s / len(chunks) if chunks else spread_s
        if not chunks and gap:
            self.stopping.wait(gap)
        owed = 0.0  # seconds of the spread not slept yet: slept after a burst
        burst = time.thread_time()
        for chunk in chunks:
            started = time.thread_time()
            db.execute("BEGIN")
            try:
                bad = screen_seals(db, key, chunk.start, chunk.stop - 1)
                self.screened += len(chunk)
                problem = damage_at(db, key, self.rules, bad) if bad is not None else None
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                now = time.thread_time()
                self.cpu_s += now - started
            if problem is not None:
                return problem
            owed += gap
            if gap and now - burst >= self.burst_s:
                if self.stopping.wait(owed):
                    return None
                owed, burst = 0.0, time.thread_time()
            else:
                time.sleep(WATCH_YIELD_S)  # let the engine thread have the interpreter lock
        if owed:
            self.stopping.wait(owed)
        return None


def _gone(last: int, known: int) -> str:
    first = last + 1
    if first == known:
        return f"record {first} is missing"
    return f"records {first}..{known} are missing"
