"""Appending to an open journal: the record sealed and committed, the head file, halting.

:class:`JournalAppender` holds the state of one open journal (its database, key,
newest record and halt) and writes to it: :meth:`~JournalAppender.append` commits
a record durably (and seals the head file) before it returns, so the service
appends *before* any output changes and before the reader is ACKed
(write-ahead). Opening and recovery are :mod:`controller.journal.writer`; the
recipe is :mod:`controller.journal.recipe`, and docs/journal.md tells the story.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from controller.core.commands import Command
from controller.core.engine import Engine, Outcome
from controller.core.errors import JournalHalted, JournalIntegrityError, JournalWriteError
from controller.core.events import DuplicateRoll
from controller.core.state import TableState
from controller.journal import files as F
from controller.journal import store
from controller.journal.clock import now_ms
from controller.journal.halt import Halt
from controller.journal.opening import writer_lock
from controller.journal.recipe import (
    GENESIS,
    SYSTEM_KINDS,
    canonical,
    clean_actor,
    encode_command,
    iso,
    seal,
    to_ms,
)
from controller.journal.record import Record
from controller.journal.walk import Problem

log = logging.getLogger("firebet.journal")


class ReadOnly(StrEnum):
    """Why a journal takes no writes (its one read-only mode, with the reason)."""

    OPENED = "opened"  # asked for when it was made (the tools that only read)
    # the state directory is not writable (a read-only file system): read, recover and
    # serve, but every write is a JournalWriteError (a storage fault, not a halt); found
    # again by every recovery
    FILE_SYSTEM = "file system"


class JournalAppender:
    """The state of one open journal, appending and halting (see :class:`Journal`)."""

    def __init__(
        self,
        path: str | Path,
        *,
        key_file: str | Path | None = None,
        snapshot_every: int = 1000,
        read_only: bool = False,
        durable: bool = True,
    ) -> None:
        """Nothing is opened until :meth:`recover`. ``key_file`` defaults to ``journal.key``
        beside the journal (tests, bench); ``durable=False`` only for tests."""
        if snapshot_every < 1:
            raise ValueError("snapshot_every must be at least 1")
        self.files = F.JournalFiles(Path(path))
        self.path = self.files.db
        self.marker = self.files.marker
        self.key_file = Path(key_file) if key_file else self.path.with_name("journal.key")
        self.snapshot_every = snapshot_every
        self.read_only: ReadOnly | None = ReadOnly.OPENED if read_only else None
        self.durable = durable
        self._db: sqlite3.Connection | None = None
        self._key = b""
        self._lock_fd: int | None = None
        self._head: F.HeadWriter | None = None
        self._checkpointer: store.Checkpointer | None = None
        self._identities: dict[Path, tuple[int, int] | None] = {}
        self._mutex = threading.RLock()
        self._engine: Engine = Engine()
        self._state = TableState()
        self._last = 0
        self._last_mac = GENESIS
        self._halted: Halt | None = None
        self._damage: Problem | None = None  # what recovery found wrong with the files
        self._wal_found = True
        self._tail_sealed = False  # no record number the head file sealed is gone

    # life cycle ------------------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the database, the head file and the writer's lock."""
        with self._mutex:
            self._close_files()
            if self._lock_fd is not None:
                writer_lock.release(self._lock_fd)
                self._lock_fd = None

    def _close_files(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
            self._checkpointer = None
        if self._head is not None:
            self._head.close()
            self._head = None
        if self._db is not None:
            self._db.close()
            self._db = None

    @property
    def state(self) -> TableState:
        """The table state after the last record."""
        return self._state

    @property
    def last_record(self) -> int:
        """The number of the newest record."""
        return self._last

    @property
    def halted(self) -> Halt | None:
        """Why the journal is halted (None: it is not)."""
        return self._halted

    @property
    def checkpoints(self) -> int:
        """Checkpoints the background thread ran (for the benchmark)."""
        return self._checkpointer.checkpoints if self._checkpointer is not None else 0

    @property
    def _no_writes(self) -> bool:
        """Opened read-only, or on a read-only file system."""
        return self.read_only is not None

    def read_only_reason(self) -> str | None:
        """Why every write is refused, as the error says it (None: writes are taken)."""
        if self.read_only is ReadOnly.OPENED:
            return "the journal was opened read-only"
        if self.read_only is ReadOnly.FILE_SYSTEM:
            return f"{self.path.parent} is on a read-only file system"
        return None

    def writable_again(self) -> bool:
        """Opened on a read-only file system that is now writable (remounted)."""
        return self.read_only is ReadOnly.FILE_SYSTEM and os.access(self.path.parent, os.W_OK)

    # appending to an open journal --------------------------------------------------
    def _start_writer(self) -> None:
        if self.durable and self._db is not None:
            try:
                store.prefill_wal(self._db, self.files.wal)
            except OSError as exc:  # a full disk: the commits make the WAL longer as they go
                log.warning("cannot write the WAL out ahead (%s): %s", self.files.wal, exc)
        self._head = F.HeadWriter(self.files.head)
        self._checkpointer = store.Checkpointer(self.path, durable=self.durable)
        self._identities = {p: F.identity(p) for p in (self.path, self.files.wal, self.files.head)}

    def _journaled_halt(self, db: sqlite3.Connection) -> Halt | None:
        row = store.last_halt(db)
        if row is None or row.kind != "halt":
            return None
        data = json.loads(row.body)
        return Halt(data.get("record"), data.get("reason", "?"), iso(row.at), row.record)

    # watching the files ----------------------------------------------------------------
    def watch(self) -> Halt | None:
        """Halt when a journal file was removed or replaced under the running table.

        Called before every append and by the service when it is idle; a few stat calls.
        """
        with self._mutex:
            if self._halted is not None or not self._identities:
                return self._halted
            for path, known in self._identities.items():
                now = F.identity(path)
                if now != known:
                    what = "removed" if now is None else "replaced"
                    reason = f"{path.name} was {what} while the table was running"
                    self._halted = self._persist_halt(None, reason, journaled=False)
                    log.error("journal halted: %s", reason)
                    return self._halted
            return None

    # halting ---------------------------------------------------------------------------
    def halt(self, record: int | None, reason: str, *, actor: str = "journal") -> Halt:
        """Put the journal in ``halted`` (journaled, or in the marker file when it cannot be)."""
        with self._mutex:
            self._halted = self._persist_halt(record, reason, actor=actor)
            return self._halted

    def _persist_halt(
        self, record: int | None, reason: str, *, actor: str = "journal", journaled: bool = True
    ) -> Halt:
        if self._db is not None and journaled:
            try:
                known = self._journaled_halt(self._db)
            except (sqlite3.Error, ValueError):
                known = None
            if known is not None and (known.record, known.reason) == (record, reason):
                return known
        halt = Halt(record, reason, iso(now_ms()))
        if self._db is not None and not self._no_writes and journaled:
            try:
                written = self._write("halt", actor, {"record": record, "reason": reason}, None)
                return Halt(record, reason, written.at, written.record)
            except (JournalWriteError, JournalIntegrityError):
                pass
        if not self._no_writes:
            F.write_marker(self.marker, record, reason, halt.at)
        return halt

    # appending -------------------------------------------------------------------------
    def append(self, command: Command, outcome: Outcome) -> Record | None:
        """Record ``command`` durably before returning (its events are the rules' answer
        and are not stored). None for an outcome made only of duplicate rolls (a reader
        retransmission: the original is durable, ACK again). Raises :class:`JournalHalted`
        while halted, :class:`JournalWriteError` when nothing could be recorded."""
        events = outcome.events
        if events and all(isinstance(e, DuplicateRoll) for e in events):
            return None
        with self._mutex:
            if self._halted is not None or self.watch() is not None:
                assert self._halted is not None
                raise JournalHalted(self._halted.record, self._halted.reason)
            at = to_ms(command.at) if command.at else None
            if at is None or iso(at) != command.at:
                at = now_ms()
            body = encode_command(command, at)
            written = self._write("command", command.actor, body, outcome.state, at=at)
            self._state = outcome.state
            return written

    def apply(self, engine: Engine, command: Command) -> tuple[Outcome, Record | None]:
        """Decide ``command`` on the journal's state and record it (for tools and tests)."""
        with self._mutex:
            outcome = engine.apply(self._state, command)
            return outcome, self.append(command, outcome)

    def append_system(
        self, kind: str, *, actor: str, payload: dict[str, Any] | None = None
    ) -> Record:
        """A ``start`` or ``mode`` record (allowed while halted; changes no game state)."""
        if kind not in SYSTEM_KINDS:
            raise ValueError(f"system record kinds are {SYSTEM_KINDS}, not {kind!r}")
        with self._mutex:
            return self._write(kind, actor, payload or {}, None)

    def _write(
        self,
        kind: str,
        actor: str,
        body: dict[str, Any] | str,
        state: TableState | None,
        *,
        snapshot: bool = False,
        at: int | None = None,
    ) -> Record:
        reason = self.read_only_reason()
        if reason is not None:
            raise JournalWriteError(self.path, reason)
        db = self._require_db()
        number, prev = self._last + 1, self._last_mac
        at = at if at is not None else now_ms()
        actor = clean_actor(actor)
        text = body if isinstance(body, str) else canonical(json.loads(json.dumps(body)))
        take = state if state is not None else self._state
        snap = snapshot or (
            kind != "halt" and number % self.snapshot_every == 0 and self._halted is None
        )
        state_text = canonical(take.to_dict()) if snap else None
        mac = seal(self._key, prev, number, at, actor, kind, text, state_text)
        row = store.Row(number, at, actor, kind, text, int(snap), mac)
        try:
            store.insert(db, row, (take.hand, state_text) if state_text is not None else None)
        except sqlite3.Error as exc:
            raise JournalWriteError(self.path, str(exc)) from exc
        self._last, self._last_mac = number, mac
        self._head_write(number, mac)
        if self._checkpointer is not None:
            self._checkpointer.wrote()
        return Record(number, iso(at), actor, kind, text, prev.hex(), mac.hex())

    def settle(self) -> None:
        """The outputs of the last append are out (the ACK is sent): let the head file's
        sync run now, off the roll path (:class:`~controller.journal.files.HeadWriter`)."""
        head = self._head
        if head is not None:
            head.settle()

    def _head_write(self, number: int, mac: bytes) -> None:
        if self._head is None:
            return
        try:
            self._head.write(self._key, number, mac)
        except OSError as exc:  # the record is durable; the next append writes the head again
            log.warning("cannot write the head file %s: %s", self.files.head, exc)

    def _require_db(self) -> sqlite3.Connection:
        if self._db is None:
            raise JournalIntegrityError(
                None, "the journal is not open (unreadable or not recovered yet)"
            )
        return self._db
