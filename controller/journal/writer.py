"""Opening and recovery of one table's journal (docs/journal.md).

:meth:`JournalWriter.recover` opens the journal, checks that none of its files
is missing, emptied or truncated, walks the tail from the newest snapshot and
compares the newest record with the sealed head. Anything wrong halts the
table (journaled, survives restarts) until a technician's ``clear-halt``.
Appending and halting are :mod:`controller.journal.appending`, the key
:mod:`controller.journal.key`, the walk :mod:`controller.journal.walk`.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from controller.core.config import Config
from controller.core.engine import Engine
from controller.core.errors import JournalIntegrityError, JournalKeyUnreadable
from controller.core.state import TableState
from controller.journal import files as F
from controller.journal import store
from controller.journal.appending import JournalAppender, ReadOnly
from controller.journal.clock import now_iso, now_ms
from controller.journal.halt import Halt
from controller.journal.key import key_for_new
from controller.journal.opening import Damage, check_head, open_file, writer_lock
from controller.journal.recipe import FORMAT, GENESIS, canonical, clean_actor
from controller.journal.walk import Problem, Walk

__all__ = ["JournalWriter", "Recovered", "now_iso", "now_ms"]


@dataclass(frozen=True)
class Recovered:
    """The outcome of :meth:`Journal.recover`."""

    state: TableState
    last_record: int
    halted: Halt | None


class JournalWriter(JournalAppender):
    """Opening and recovery of one journal, on top of appending (see :class:`Journal`)."""

    @classmethod
    def open(cls, state_dir: str | Path, config: Config, *, read_only: bool = False) -> Self:
        """The journal of ``config`` in ``state_dir`` (not yet recovered); a relative
        ``key_file`` is taken from the state directory."""
        key_file = Path(config.journal.key_file)
        return cls(
            Path(state_dir) / config.journal.path,
            key_file=key_file if key_file.is_absolute() else Path(state_dir) / key_file,
            snapshot_every=config.journal.snapshot_every,
            read_only=read_only,
        )

    # recovery --------------------------------------------------------------------------
    def recover(self, engine: Engine) -> Recovered:
        """Open the journal (a fresh one only in a state directory that never held one),
        check its files, fold the tail from the newest snapshot and check the head."""
        with self._mutex:
            self.close()
            self._engine = engine
            self._state, self._last, self._last_mac = TableState(), 0, GENESIS
            self._halted = self._damage = None
            self._tail_sealed = False
            marker = F.read_marker(self.marker)
            if self.read_only is not ReadOnly.OPENED:
                on_read_only_fs = self.files.db.exists() and not os.access(
                    self.path.parent, os.W_OK
                )
                self.read_only = ReadOnly.FILE_SYSTEM if on_read_only_fs else None
            try:
                self._open()
                self._damage = self._read_tail()
            except sqlite3.DatabaseError as exc:
                self._damage = (None, f"{self.path.name} cannot be read: {exc}")
            except Damage as exc:
                self._damage = exc.problem
            except JournalKeyUnreadable:
                if self.read_only is ReadOnly.OPENED:
                    self.close()
                    raise
                self._damage = (None, f"the journal key {self.key_file} is not readable")
            except JournalIntegrityError as exc:
                self._damage = (exc.record, exc.reason)
            if self._damage is not None:  # journaled only where the chain's end is intact
                self._halted = self._persist_halt(*self._damage, journaled=self._tail_sealed)
            elif marker is not None:
                self._halted = Halt(*marker)
            elif self._halted is None and self._db is not None:
                self._halted = self._journaled_halt(self._db)
            if self._db is not None and not self._no_writes and self._damage is None:
                self._start_writer()
            return Recovered(self._state, self._last, self._halted)

    def _open(self) -> None:
        """Open the file (or make the first one in a never-used state directory)."""
        fresh = not self._no_writes and not self.files.traces()
        if fresh:  # the key first: a table that cannot make one leaves no trace behind
            self._key = key_for_new(self.key_file)
        if self._lock_fd is None and not self._no_writes:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_fd = writer_lock.take(self.files.lock)
        if fresh:
            self._create("journal", {"format": FORMAT})
        self._db, self._key, self._wal_found = open_file(
            self.files, self.key_file, read_only=self._no_writes, durable=self.durable
        )

    def _create(self, actor: str, body: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._lock_fd is None:
            self._lock_fd = writer_lock.take(self.files.lock)
        mac = store.create(self.path, self._key, now_ms(), clean_actor(actor), canonical(body))
        F.write_head_new(self.files.head, self._key, 1, mac)

    def _read_tail(self) -> Problem | None:
        db = self._require_db()
        db.execute("BEGIN")  # one consistent view, even while a service appends
        try:
            walk, problem = self._anchor(db)
            if problem is None:
                walk.run(
                    store.raw_rows(db, walk.expect),
                    store.snapshots(db, after=walk.expect - 1),
                    stop_at_damage=True,
                )
                problem = walk.problems[0] if walk.problems else None
            self._state = walk.state
            last = store.last_row(db)
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")
        if last is None:
            return None, f"{self.path.name} holds no records (emptied)"
        self._last, self._last_mac = last.record, last.mac
        # after the walk's view: the head may be newer, never older
        head = check_head(self.files, self._key, db, last, self._wal_found)
        if isinstance(head, tuple):  # a halt record may follow only a tail that lost no number
            sealed = F.read_head(self.files.head, self._key)
            self._tail_sealed = (
                isinstance(sealed, F.Head) and sealed.sealed and sealed.record <= last.record
            )
            return problem or head
        self._tail_sealed = True
        return problem

    def _anchor(self, db: sqlite3.Connection) -> tuple[Walk, Problem | None]:
        """Where folding starts: the newest snapshot, checked against its seal (a clear-halt's
        predecessor is the stored record before it, past what it set aside)."""
        for number in store.anchors(db):
            row = store.row(db, number)
            if row is None:
                break
            before = store.before(db, number)
            prev = before.mac if before is not None else GENESIS
            return Walk.from_anchor(self._key, self._engine, row, prev, store.snapshot(db, number))
        return Walk(self._key, self._engine), None
