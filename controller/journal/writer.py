"""The durable journal of one table: append-only, keyed hash chain, SQLite underneath.

:meth:`Journal.append` commits a record durably (and seals the head file)
before it returns: the service appends *before* any output changes and before
the reader is ACKed (write-ahead). :meth:`Journal.recover` opens the journal,
checks that none of its files is missing, emptied or truncated, walks the tail
from the newest snapshot and compares the newest record with the sealed head.
Anything wrong halts the table (journaled, survives restarts) until a
technician's ``clear-halt``. The recipe is in :mod:`controller.journal.recipe`,
the walk in :mod:`controller.journal.walk`, and docs/journal.md tells the story.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from controller.core.commands import Command
from controller.core.config import Config
from controller.core.engine import Engine, Outcome
from controller.core.errors import (
    FirebetError,
    JournalHalted,
    JournalIntegrityError,
    JournalKeyUnreadable,
    JournalWriteError,
)
from controller.core.events import DuplicateRoll
from controller.core.state import TableState
from controller.journal import files as F
from controller.journal import store
from controller.journal.halt import Halt
from controller.journal.key import make_key, read_key
from controller.journal.opening import Damage, check_head, open_file, writer_lock
from controller.journal.recipe import (
    FORMAT,
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
from controller.journal.walk import Problem, Walk

log = logging.getLogger("firebet.journal")


def now_ms() -> int:
    """The journal's clock: milliseconds since the epoch, UTC."""
    return time.time_ns() // 1_000_000


def now_iso() -> str:
    """The journal's clock as ISO 8601 text (UTC, milliseconds)."""
    return iso(now_ms())


@dataclass(frozen=True)
class Recovered:
    """The outcome of :meth:`Journal.recover`."""

    state: TableState
    last_record: int
    halted: Halt | None


class JournalWriter:
    """Opening, recovery, appending and halting of one journal (see :class:`Journal`)."""

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
        self.read_only = read_only
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
            try:
                self._open()
                self._damage = self._read_tail()
            except sqlite3.DatabaseError as exc:
                self._damage = (None, f"{self.path.name} cannot be read: {exc}")
            except Damage as exc:
                self._damage = exc.problem
            except JournalKeyUnreadable:
                if self.read_only:
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
            if self._db is not None and not self.read_only and self._damage is None:
                self._start_writer()
            return Recovered(self._state, self._last, self._halted)

    def _open(self) -> None:
        """Open the file (or make the first one in a never-used state directory)."""
        fresh = not self.read_only and not self.files.traces()
        if fresh:  # the key first: a table that cannot make one leaves no trace behind
            self._key = self._key_for_new()
        if self._lock_fd is None and not self.read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_fd = writer_lock.take(self.files.lock)
        if fresh:
            self._create("journal", {"format": FORMAT})
        self._db, self._key, self._wal_found = open_file(
            self.files, self.key_file, read_only=self.read_only, durable=self.durable
        )

    def _key_for_new(self) -> bytes:
        if self.key_file.exists():
            return read_key(self.key_file)
        log.warning("no journal key at %s: making one (a new table)", self.key_file)
        try:
            return make_key(self.key_file)
        except OSError as exc:
            raise FirebetError(
                f"cannot make the journal key {self.key_file}: {exc.strerror or exc} "
                "(systemd/install.sh makes it; [journal] key_file names it)",
            ) from exc

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

    def _start_writer(self) -> None:
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
        if self._db is not None and not self.read_only and journaled:
            try:
                written = self._write("halt", actor, {"record": record, "reason": reason}, None)
                return Halt(record, reason, written.at, written.record)
            except (JournalWriteError, JournalIntegrityError):
                pass
        if not self.read_only:
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
        if self.read_only:
            raise JournalWriteError(self.path, "the journal was opened read-only")
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
