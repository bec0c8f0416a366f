"""The journal of one table: it stores records and reads them back; it decides nothing.

:class:`Journal` holds one open journal (its database, key, newest record, head file and
halt) and writes to it: :meth:`~Journal.append` seals and commits a record durably (and
seals the head file) before it returns, so the service appends *before* any output
changes and before the reader is ACKed (write-ahead). What a record means, and so the
table's state, is the replay's (:mod:`controller.journal.replay`); opening with the tail
walk, the full check and clear-halt are :mod:`controller.journal.recovery`, which walks
the records this class reads (:meth:`~Journal.reopen`, :meth:`~Journal.check` and
:meth:`~Journal.resume` take the walk as a function, so the files, the head and the
halt are handled here, in one place, under one lock). The recipe is
:mod:`controller.journal.recipe`; docs/journal.md tells the story.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from controller.clock import now_ms
from controller.core.commands import Command, parse_request_tag
from controller.core.config import Config, FireBetRules
from controller.core.errors import (
    JournalHalted,
    JournalIntegrityError,
    JournalKeyUnreadable,
    JournalWriteError,
)
from controller.core.state import TableState
from controller.core.times import to_ms
from controller.journal import files as F
from controller.journal import store
from controller.journal.halt import Halt
from controller.journal.key import key_file_for, key_for_new
from controller.journal.opening import Damage, check_head, check_present, open_file, writer_lock
from controller.journal.recipe import (
    FORMAT,
    GENESIS,
    READABLE_FORMATS,
    SYSTEM_KINDS,
    RecordKind,
    canonical,
    clean_actor,
    encode_command,
    iso,
    seal,
)
from controller.journal.record import Record, parse_time
from controller.journal.replay import RecordError, Replay
from controller.journal.walk import Problem

log = logging.getLogger("firebet.journal")

# a walk over an open view of the journal: (the connection, inside a read transaction,
# and the key) -> what it found
Tail = Callable[[sqlite3.Connection, bytes], tuple[Any, Problem | None]]


class ReadOnly(StrEnum):
    """Why a journal takes no writes (its one read-only mode, with the reason)."""

    OPENED = "opened"  # asked for when it was made (the tools that only read)
    # the state directory is not writable (a read-only file system): read, recover and
    # serve, but every write is a JournalWriteError (a storage fault, not a halt); found
    # again by every recovery
    FILE_SYSTEM = "file system"


@dataclass(frozen=True)
class Opened:
    """What :meth:`Journal.reopen` found: the tail walk's result, the newest record and
    the halt in force (None: the table may play)."""

    tail: Any
    last_record: int
    halted: Halt | None


class Journal:
    """The journal of one table. Thread-safe: every call takes one lock."""

    def __init__(
        self,
        path: str | Path,
        *,
        key_file: str | Path | None = None,
        snapshot_every: int = 1000,
        read_only: bool = False,
        durable: bool = True,
    ) -> None:
        """Nothing is opened until :meth:`reopen` (or :meth:`attach`). ``key_file``
        defaults to ``journal.key`` beside the journal (tests, bench); ``durable=False``
        only for tests."""
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
        self.clears = 0  # clear-halts journaled through this object (the watch's cue)
        self._lock_fd: int | None = None
        self._head: F.HeadWriter | None = None
        self._checkpointer: store.Checkpointer | None = None
        self._identities: dict[Path, tuple[int, int] | None] = {}
        self._mutex = threading.RLock()
        self._last = 0
        self._last_mac = GENESIS
        self._halted: Halt | None = None
        self._damage: Problem | None = None  # what recovery found wrong with the files
        self._wal_found = True
        self._tail_sealed = False  # no record number the head file sealed is gone
        self._packs = False  # bodies stored as format 3 does (store.packs)

    @classmethod
    def open(cls, state_dir: str | Path, config: Config, *, read_only: bool = False) -> Self:
        """The journal of ``config`` in ``state_dir`` (not yet recovered), with the key
        :func:`~controller.journal.key.key_file_for` names."""
        key_file, _why = key_file_for(config.journal.key_file, state_dir)
        return cls(
            Path(state_dir) / config.journal.path,
            key_file=key_file,
            snapshot_every=config.journal.snapshot_every,
            read_only=read_only,
        )

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
    def last_record(self) -> int:
        """The number of the newest record."""
        return self._last

    @property
    def halted(self) -> Halt | None:
        """Why the journal is halted (None: it is not)."""
        return self._halted

    @property
    def damage(self) -> Problem | None:
        """What the last :meth:`reopen` found wrong (None: nothing)."""
        return self._damage

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

    # opening and recovery --------------------------------------------------------------
    def reopen(self, tail: Tail) -> Opened:
        """Open the journal (a fresh one only in a state directory that never held one),
        check its files, walk its tail (``tail``, on one consistent view: what it found
        and the first problem) and check the head. Damage halts (journaled where the
        chain's end is intact, else in the marker file)."""
        with self._mutex:
            self.close()
            self._last, self._last_mac = 0, GENESIS
            self._halted = self._damage = None
            self._tail_sealed = False
            marker = F.read_marker(self.marker)
            if self.read_only is not ReadOnly.OPENED:
                on_read_only_fs = self.files.db.exists() and not os.access(
                    self.path.parent, os.W_OK
                )
                self.read_only = ReadOnly.FILE_SYSTEM if on_read_only_fs else None
            found: Any = None
            try:
                self._open()
                found, self._damage = self._read_tail(tail)
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
            return Opened(found, self._last, self._halted)

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
        self._packs = store.packs(self._db)
        if not self._no_writes:
            store.add_indexes(self._db)

    def _create(self, actor: str, body: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._lock_fd is None:
            self._lock_fd = writer_lock.take(self.files.lock)
        mac = store.create(self.path, self._key, now_ms(), clean_actor(actor), canonical(body))
        F.write_head_new(self.files.head, self._key, 1, mac)

    def _read_tail(self, tail: Tail) -> tuple[Any, Problem | None]:
        db = self._require_db()
        db.execute("BEGIN")  # one consistent view, even while a service appends
        try:
            found, problem = tail(db, self._key)
            last = store.last_row(db)
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")
        if last is None:
            return found, (None, f"{self.path.name} holds no records (emptied)")
        self._last, self._last_mac = last.record, last.mac
        # after the walk's view: the head may be newer, never older
        head = check_head(self.files, self._key, db, last, self._wal_found)
        if isinstance(head, tuple):  # a halt record may follow only a tail that lost no number
            sealed = F.read_head(self.files.head, self._key)
            self._tail_sealed = (
                isinstance(sealed, F.Head) and sealed.sealed and sealed.record <= last.record
            )
            return found, problem or head
        self._tail_sealed = True
        return found, problem

    def attach(self) -> None:
        """Open the file to read raw records, without the key or recovery (export of any
        journal, damaged ones too)."""
        with self._mutex:
            if self._db is not None:
                return
            try:
                check_present(self.files)
                db = store.connect(self.path, read_only=True)
            except Damage as exc:
                raise JournalIntegrityError(*exc.problem) from exc
            except sqlite3.Error as exc:
                raise JournalIntegrityError(
                    None, f"{self.path.name} cannot be read: {exc}"
                ) from exc
            try:
                found = store.meta(db).get("format")
            except sqlite3.Error:
                found = None
            if found not in READABLE_FORMATS:
                db.close()
                raise JournalIntegrityError(
                    None,
                    f"{self.path.name} is not a format-{FORMAT} journal (format {found}): "
                    "firebet journal migrate moves a format-1 journal forward",
                )
            self._db = db

    # the full check and clear-halt -------------------------------------------------------
    def check(self, walk: Tail) -> tuple[Any, list[Problem]]:
        """The full check: ``walk`` over one consistent view (what it found; its first
        problem is ignored here: the walk keeps its own list), then the emptied journal and
        the head: what it found and the problems that are not the walk's, in order (the
        files' damage at opening is :attr:`damage`)."""
        problems: list[Problem] = []
        found: Any = None
        with self._mutex:
            if self._db is None:
                problems.append(self._damage or (None, "the journal is not open"))
                return None, problems
            db = self._db
            try:
                db.execute("BEGIN")
                found, _ = walk(db, self._key)
                last = store.last_row(db)
                db.execute("ROLLBACK")
                if last is None:
                    problems.append((None, f"{self.path.name} holds no records (emptied)"))
                else:  # after the walk's view: the head may be newer, never older
                    head = check_head(self.files, self._key, db, last, self._wal_found)
                    if isinstance(head, tuple):
                        problems.append(head)
            except sqlite3.DatabaseError as exc:
                problems.append((None, f"{self.path.name} cannot be read: {exc}"))
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")
        return found, problems

    def resume(
        self,
        actor: str,
        prove: Callable[[sqlite3.Connection, bytes, Halt, int], tuple[Any, dict[str, Any]]],
        *,
        write: bool = True,
    ) -> tuple[Any, Record | None] | None:
        """Lift ``halted`` (journaled with who): the files opened again, ``prove`` (over one
        consistent view, with the halt and the highest record number ever written, stored
        or lost) gives what it proved and the ``clear_halt`` record's body, which is
        journaled with a snapshot of its ``resume_state``. None when the journal was not
        halted. ``write=False``: the same, but nothing is journaled and the halt stays (what
        a clear-halt would do, shown before it is done; no record: None)."""
        with self._mutex:
            if self._halted is None:
                return None
            if write and self.read_only is ReadOnly.OPENED:
                raise JournalWriteError(self.path, "opened read-only")
            halt = self._halted
            self._close_files()
            self._damage = None
            try:
                self._open()
            except (Damage, sqlite3.DatabaseError, JournalIntegrityError) as exc:
                self._close_files()
                reason = exc.problem[1] if isinstance(exc, Damage) else str(exc)
                raise JournalIntegrityError(
                    None,
                    f"cannot resume: {reason}. firebet journal init moves the damaged files "
                    "aside and starts a new journal (see docs/runbook.md)",
                ) from exc
            db = self._require_db()
            db.execute("BEGIN")
            try:
                last = store.last_row(db)
                stored = last.record if last is not None else 0
                if last is not None:
                    self._last_mac = last.mac
                head = F.read_head(self.files.head, self._key)
                lost = head.record if isinstance(head, F.Head) and head.sealed else 0
                proved, body = prove(db, self._key, halt, max(stored, lost))
            finally:
                db.execute("ROLLBACK")
            if not write:
                return proved, None
            self._last = max(stored, lost, int(body["resume_from"]))
            resume = TableState.from_dict(body["resume_state"])
            written = self._write(RecordKind.CLEAR_HALT, actor, body, resume, True)
            self._halted = None
            self.clears += 1
            self.marker.unlink(missing_ok=True)
            F.fsync_dir(self.path.parent)
            self._start_writer()
            self._head_write(written.record, bytes.fromhex(written.hash))
            return proved, written

    # appending -------------------------------------------------------------------------
    def _start_writer(self) -> None:
        if self.durable and self._db is not None:
            try:
                store.prefill_wal(self._db, self.files.wal)
            except OSError as exc:  # a full disk: the commits make the WAL longer as they go
                log.warning("cannot write the WAL out ahead (%s): %s", self.files.wal, exc)
        self._head = F.HeadWriter(self.files.head)
        self._checkpointer = store.Checkpointer(self.path, durable=self.durable)
        self._identities = {p: F.identity(p) for p in (self.path, self.files.wal, self.files.head)}

    def append(self, command: Command, state: TableState) -> Record:
        """Record ``command`` durably before returning; ``state`` is the state after it (kept
        as the record's snapshot when one is due). Raises :class:`JournalHalted` while
        halted, :class:`JournalWriteError` when nothing could be recorded."""
        with self._mutex:
            if self._halted is not None or self.watch() is not None:
                assert self._halted is not None
                raise JournalHalted(self._halted.record, self._halted.reason)
            at = to_ms(command.at) if command.at else None
            if at is None or iso(at) != command.at:
                at = now_ms()
            body = encode_command(command, at)
            request = parse_request_tag(command.request) if command.request else None
            return self._write(
                RecordKind.COMMAND, command.actor, body, state, at=at, request=request
            )

    def append_system(
        self,
        kind: RecordKind,
        *,
        actor: str,
        state: TableState,
        payload: dict[str, Any] | None = None,
    ) -> Record:
        """A ``start``, ``rules`` or ``mode`` record (allowed while halted; changes no game
        state: ``state`` is the state it leaves, kept when a snapshot is due)."""
        if kind not in SYSTEM_KINDS:
            raise ValueError(f"system record kinds are {SYSTEM_KINDS}, not {kind!r}")
        with self._mutex:
            return self._write(kind, actor, payload or {}, state)

    def _write(
        self,
        kind: RecordKind,
        actor: str,
        body: dict[str, Any] | str,
        state: TableState | None,
        snapshot: bool = False,
        *,
        at: int | None = None,
        request: tuple[int, str, str | int] | None = None,
    ) -> Record:
        reason = self.read_only_reason()
        if reason is not None:
            raise JournalWriteError(self.path, reason)
        db = self._require_db()
        number, prev = self._last + 1, self._last_mac
        at = at if at is not None else now_ms()
        actor = clean_actor(actor)
        text = body if isinstance(body, str) else canonical(json.loads(json.dumps(body)))
        snap = state is not None and (
            snapshot or (number % self.snapshot_every == 0 and self._halted is None)
        )
        state_text = canonical(state.to_dict()) if snap and state is not None else None
        mac = seal(self._key, prev, number, at, actor, kind, text, state_text)
        row = store.Row(number, at, actor, kind, text, int(snap), mac)
        hand = state.hand if state is not None else 0
        try:
            store.insert(
                db,
                row,
                (hand, state_text) if state_text is not None else None,
                request,
                packed=self._packs,
            )
        except sqlite3.Error as exc:
            code = getattr(exc, "sqlite_errorcode", 0)
            if code & 0xFF == sqlite3.SQLITE_READONLY and self.read_only is None:
                # the file or SQLite's index of its WAL is open read-only in this process
                # (a reader's connection made while the file system was read-only): the
                # storage probe opens the journal again once the folder is writable
                self.read_only = ReadOnly.FILE_SYSTEM
            raise JournalWriteError(self.path, str(exc)) from exc
        self._last, self._last_mac = number, mac
        self._head_write(number, mac)
        if self._checkpointer is not None:
            self._checkpointer.wrote()
        return Record.from_row(row, prev, state_text)

    def settle(self) -> None:
        """The outputs of the last append are out (the ACK is sent): let the head file's
        sync run now, off the roll path (:class:`~controller.journal.files.HeadWriter`),
        and the checkpoint's quiet be timed from now (:class:`store.Checkpointer`)."""
        head = self._head
        if head is not None:
            head.settle()
        checkpointer = self._checkpointer
        if checkpointer is not None:
            checkpointer.settle()

    def _head_write(self, number: int, mac: bytes) -> None:
        if self._head is None:
            return
        try:
            self._head.write(self._key, number, mac)
        except OSError as exc:  # the record is durable; the next append writes the head again
            log.warning("cannot write the head file %s: %s", self.files.head, exc)

    # halting and watching ---------------------------------------------------------------
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
                body = {"record": record, "reason": reason}
                written = self._write(RecordKind.HALT, actor, body, None)
                return Halt(record, reason, written.at, written.record)
            except (JournalWriteError, JournalIntegrityError):
                pass
        if not self._no_writes:
            F.write_marker(self.marker, record, reason, halt.at)
        return halt

    def recorded_halt(self) -> Halt | None:
        """The halt the files record (the marker, else the newest ``halt`` record with no
        ``clear_halt`` after it), read without the key: what a reader that cannot check
        the chain (an ``export`` by a user without the key) can still mark."""
        with self._mutex:
            marker = F.read_marker(self.marker)
            if marker is not None:
                return Halt(*marker)
            if self._db is None:
                return None
            try:
                return self._journaled_halt(self._db)
            except (sqlite3.Error, ValueError, AttributeError):
                return None

    def _journaled_halt(self, db: sqlite3.Connection) -> Halt | None:
        row = store.last_halt(db)
        if row is None or row.kind != RecordKind.HALT:
            return None
        data = json.loads(row.body)
        return Halt(data.get("record"), data.get("reason", "?"), iso(row.at), row.record)

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

    # reading ---------------------------------------------------------------------------
    def records(self, since: str | None = None) -> Iterator[Record]:
        """Every record in order (from time ``since``, ISO 8601, when given)."""
        return (record for record, _ in self.records_decided(since))

    def records_decided(self, since: str | None = None) -> Iterator[tuple[Record, int | None]]:
        """Every record in order (from time ``since``) with the number of the ``rules``
        record it was decided under: the newest one at or before it (None: before any),
        except while a hand keeps the rules it opened under (a ``rules`` record journaled
        while its wagers rode: ``holds_for_hand``), whose records are decided under the
        rules record before.

        A record means what it meant when it was journaled; this says under which rules.
        Without a held hand it decides nothing, so a damaged journal reads this way too;
        with one the records are replayed to tell when the held hand ended (a record that
        cannot be replayed is given the newest rules record)."""
        with self._mutex:
            db = self._require_db()
            snaps = store.snapshots(db)
            rows = store.rows(db)
            holds = store.rules_held(db)
        cutoff = to_ms(parse_time(since).isoformat()) if since else None
        replay = Replay(FireBetRules()) if holds else None
        prev, in_force = GENESIS, None
        for row in rows:
            if row.kind == RecordKind.RULES:
                in_force = row.record
            decided = in_force
            if replay is not None:
                if row.kind == RecordKind.COMMAND:
                    decided = replay.rules_record
                try:
                    replay.step(row.record, row.at, row.actor, row.kind, row.body)
                except RecordError:
                    decided = in_force
            if cutoff is None or row.at >= cutoff:
                record = Record.from_row(row, prev, snaps.get(row.record) if row.snap else None)
                yield record, decided
            prev = row.mac

    def batch(self, after: int, limit: int) -> list[Record]:
        """At most ``limit`` records numbered above ``after``, in order (a bounded read)."""
        with self._mutex:
            db = self._require_db()
            rows = db.execute(
                f"SELECT {store.COLUMNS} FROM records WHERE record > ? ORDER BY record LIMIT ?",
                (after, limit),
            ).fetchall()
            if not rows:
                return []
            before = store.before(db, rows[0][0])
            snaps = store.snapshots(db, after=after) if any(r[5] for r in rows) else {}
        out, prev = [], before.mac if before is not None else GENESIS
        for raw in rows:
            row = store.Row(*raw)
            out.append(Record.from_row(row, prev, snaps.get(row.record) if row.snap else None))
            prev = row.mac
        return out

    def requests(self) -> RequestIndex:
        """The index of the control-socket requests this journal holds, read on a
        connection of its own (the caller closes it): it never waits for this journal's
        lock, so the socket's thread may ask it while the engine thread appends (nor does
        it take that lock to ask whether the journal is open: one attribute read)."""
        self._require_db()
        return RequestIndex(self.path)

    def checker_view(self) -> tuple[sqlite3.Connection, bytes]:
        """A read-only connection of its own to the journal file, and the chain's key: for
        a checking thread, which must never hold the engine thread's connection or lock
        (the caller closes it)."""
        with self._mutex:
            self._require_db()
            key = self._key
        return store.connect(self.path, read_only=True), key

    @contextlib.contextmanager
    def view(self) -> Iterator[sqlite3.Connection]:
        """The journal's connection, under the journal's lock (a replay's reads:
        ``with journal.view() as db: ...``; no transaction is begun)."""
        with self._mutex:
            yield self._require_db()

    def last_hello(self, model: str, firmware: str) -> int | None:
        """The record of the newest HELLO naming ``model`` and ``firmware`` (None when
        neither is named, or no such record is kept)."""
        if not model and not firmware:
            return None
        with self._mutex:
            return store.last_hello(self._require_db(), model, firmware)

    def last(self) -> Record | None:
        """The newest record (None in an empty file)."""
        with self._mutex:
            db = self._require_db()
            row = store.last_row(db)
            if row is None:
                return None
            before = store.before(db, row.record)
        return Record.from_row(row, before.mac if before is not None else GENESIS)

    def _require_db(self) -> sqlite3.Connection:
        if self._db is None:
            raise JournalIntegrityError(
                None, "the journal is not open (unreadable or not recovered yet)"
            )
        return self._db


class RequestIndex:
    """Which control-socket request ids a journal holds (its ``requests`` table, written
    in the transaction of each command record that a request with an id asked for), on a
    read-only connection of its own. Every id the journal holds is found, however old:
    a retry of one is answered from its record and never done again (docs/cli.md)."""

    def __init__(self, path: Path) -> None:
        self._db = store.connect(path, read_only=True)

    def find(self, uid: int, rid: str | int) -> tuple[str, int] | None:
        """``(digest, record)`` of request ``rid`` of ``uid`` (None: the journal holds no
        such request; a journal no writer has indexed yet holds none it could take).
        Raises :class:`sqlite3.Error` when the journal cannot be read."""
        try:
            return store.decided_request(self._db, uid, rid)
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # read-only, never opened by this version
                return None
            raise

    def close(self) -> None:
        """Close the connection."""
        self._db.close()
