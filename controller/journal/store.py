"""The durable journal: an append-only, hash-chained record of everything the table did.

One SQLite file (WAL mode, ``synchronous=FULL``), one transaction per record,
committed before :meth:`Journal.append` returns: the service appends *before*
any output changes and before the reader is ACKed (SPEC §3 write-ahead).

Records
    ``record`` (1, 2, ...), ``at`` (UTC ISO 8601, the journal's clock),
    ``actor`` (who), ``kind`` and a JSON ``payload``:

    - ``start``: the journal was created (``{"format": 1}``); also a service start.
    - ``command``: ``{"command": Command.to_dict(), "events": [Event.to_dict(), ...]}``
      (refusals included, so a refused dealer action is in the audit trail).
    - ``rules``: at each service start, the rules it plays under:
      ``{"table": {...}, "firebet": {...}, "program": digest}`` (the effective settings,
      :func:`controller.core.config.rules_settings`), so the floor can re-check every
      settlement from the records alone.
    - ``mode``: a service mode change (``{"mode": "diagnostics", ...}``).
    - ``halt``: ``{"record": N or null, "reason": "..."}`` - integrity failure.
    - ``clear_halt``: ``{"cleared": {"record", "reason"}, "skipped": [N, ...],
      "resume_state": TableState.to_dict()}`` - a technician lifted the halt.

Hash recipe (for auditors re-verifying an export)::

    canonical(x) = json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    header       = canonical({"record": n, "at": at, "actor": actor, "kind": kind})
    hash(n)      = sha256_hex(prev_hash + "\\n" + header + "\\n" + canonical(payload))
    prev_hash(1) = GENESIS = "0" * 64;   prev_hash(n) = hash(n - 1)

(all strings ASCII, so UTF-8 = ASCII). ``payload`` is stored exactly as
``canonical(payload)``.

Snapshots
    Every ``snapshot_every`` records, in the same transaction, the full
    ``TableState.to_dict()`` goes to the ``snapshots`` table with the chain
    hash at that record and ``sha256_hex("snapshot\\n" + chain_hash + "\\n" + state)``.
    Recovery starts from the newest snapshot (checked against its record) and
    folds only the tail, so start-up does not grow with the journal.
    A ``clear_halt`` record always carries a snapshot (it is a new anchor).

Integrity
    A broken chain, a missing, edited or torn record, a snapshot that
    disagrees, recorded events the rules would not give, or an unreadable file
    puts the journal in ``halted``. The halt is journaled (a ``halt`` record)
    or, when the file cannot be written, kept in a marker file
    ``<journal>.halt`` beside it; either way it survives restarts until
    :meth:`Journal.clear_halt`. A damaged or missing journal is never
    replaced by a fresh one silently.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

from controller.core.commands import Command, command_from_dict
from controller.core.config import Config
from controller.core.engine import Engine, Outcome
from controller.core.errors import FirebetError, JournalIntegrityError
from controller.core.events import DuplicateRoll, Event, event_from_dict
from controller.core.state import TableState, fold

FORMAT = 1
GENESIS = "0" * 64
GAME_KINDS = ("command",)
SYSTEM_KINDS = ("start", "rules", "mode")
KINDS = (*GAME_KINDS, *SYSTEM_KINDS, "halt", "clear_halt")

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE records (
    record INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    actor TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX records_halts ON records (record) WHERE kind IN ('halt', 'clear_halt');
CREATE TABLE snapshots (
    record INTEGER PRIMARY KEY,
    chain_hash TEXT NOT NULL,
    state TEXT NOT NULL,
    hash TEXT NOT NULL
);
"""
_COLUMNS = "record, at, actor, kind, payload, prev_hash, hash"


class JournalWriteError(FirebetError, OSError):
    """The journal cannot be written (disk full, read-only, I/O error): nothing was recorded."""

    exit_code = 1

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"cannot write the journal {path}: {reason}")


class JournalHalted(JournalIntegrityError):
    """A game command was refused because the journal is halted (exit 4)."""

    def __init__(self, halt: Halt) -> None:
        self.halt = halt
        super().__init__(
            halt.record, f"halted, nothing is recorded until clear-halt: {halt.reason}"
        )


def canonical(value: Any) -> str:
    """The canonical JSON text the hashes are taken over (see the module docstring)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def normalise(value: Any) -> Any:
    """``value`` as it comes back from JSON (tuples -> lists, int keys -> str keys)."""
    return json.loads(json.dumps(value))


def record_hash(prev_hash: str, record: int, at: str, actor: str, kind: str, payload: str) -> str:
    """The chain hash of one record; ``payload`` is the stored canonical payload text."""
    header = canonical({"record": record, "at": at, "actor": actor, "kind": kind})
    return hashlib.sha256(f"{prev_hash}\n{header}\n{payload}".encode()).hexdigest()


def snapshot_hash(chain_hash: str, state_text: str) -> str:
    """The hash sealing one snapshot to the chain hash of its record."""
    return hashlib.sha256(f"snapshot\n{chain_hash}\n{state_text}".encode()).hexdigest()


def now_iso() -> str:
    """The journal's clock: UTC, milliseconds."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class Record:
    """One journal record as stored."""

    record: int
    at: str
    actor: str
    kind: str
    payload: str  # canonical JSON text
    prev_hash: str
    hash: str

    def data(self) -> Any:
        """The payload, parsed."""
        return json.loads(self.payload)

    def to_dict(self) -> dict[str, Any]:
        """The export form: the payload as JSON (as stored text if unreadable)."""
        try:
            payload = self.data()
        except ValueError:
            payload = self.payload
        return {
            "record": self.record,
            "at": self.at,
            "actor": self.actor,
            "kind": self.kind,
            "payload": payload,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


@dataclass(frozen=True)
class Halt:
    """Why the journal is halted: the first bad ``record`` (None: the file itself)."""

    record: int | None
    reason: str
    at: str = ""
    journaled: int | None = None  # the number of the ``halt`` record, when there is one

    def describe(self) -> str:
        where = f"record {self.record}: " if self.record is not None else ""
        return f"{where}{self.reason}"


@dataclass(frozen=True)
class Recovered:
    """The outcome of :meth:`Journal.recover`."""

    state: TableState
    last_record: int
    halted: Halt | None


@dataclass
class VerifyReport:
    """The outcome of a full check from genesis (:meth:`Journal.verify`)."""

    records: int = 0
    last_hash: str = GENESIS
    snapshots: int = 0
    problems: list[tuple[int | None, str]] = field(default_factory=list)
    acknowledged: list[tuple[int | None, str, int]] = field(default_factory=list)
    halted: Halt | None = None

    @property
    def ok(self) -> bool:
        """True when no damage is left that a clear-halt did not acknowledge."""
        return not self.problems

    @property
    def first_bad(self) -> tuple[int | None, str] | None:
        return self.problems[0] if self.problems else None

    def summary(self) -> str:
        """One line for the technician."""
        if not self.ok:
            record, reason = self.problems[0]
            where = f"record {record}" if record is not None else "the file"
            more = f" (+{len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
            return f"journal DAMAGED at {where}: {reason}{more}"
        text = (
            f"journal OK: {self.records} records, {self.snapshots} snapshots, "
            f"chain head {self.last_hash[:16]}"
        )
        if self.acknowledged:
            text += f", {len(self.acknowledged)} earlier damage(s) acknowledged by clear-halt"
        if self.halted is not None:
            text += f"; HALTED: {self.halted.describe()}"
        return text


@dataclass
class _Walk:
    """Running state of a walk along the chain."""

    state: TableState
    prev_hash: str
    expect: int
    problems: list[tuple[int | None, str]] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    good: int = 0  # the last record folded


class Journal:
    """The journal file of one table. Not thread-hostile: every call takes one lock."""

    def __init__(
        self,
        path: str | Path,
        *,
        snapshot_every: int = 1000,
        read_only: bool = False,
        durable: bool = True,
    ) -> None:
        """Nothing is opened until :meth:`recover`; ``durable=False`` only for tests."""
        if snapshot_every < 1:
            raise ValueError("snapshot_every must be at least 1")
        self.path = Path(path)
        self.marker = self.path.with_name(self.path.name + ".halt")
        self.snapshot_every = snapshot_every
        self.read_only = read_only
        self.durable = durable
        # the state directory is not writable (a read-only file system): read, recover and
        # serve, but every write is a JournalWriteError (a storage fault, not a halt)
        self.fs_read_only = False
        self._db: sqlite3.Connection | None = None
        self._lock_fd: int | None = None
        self._mutex = threading.RLock()
        self._engine: Engine | None = None
        self._state = TableState()
        self._last = 0
        self._last_hash = GENESIS
        self._halted: Halt | None = None

    @classmethod
    def open(cls, state_dir: str | Path, config: Config, *, read_only: bool = False) -> Journal:
        """The journal of ``config`` in ``state_dir`` (not yet recovered)."""
        return cls(
            Path(state_dir) / config.journal.path,
            snapshot_every=config.journal.snapshot_every,
            read_only=read_only,
        )

    # life cycle -----------------------------------------------------------------
    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the database and release the writer lock."""
        with self._mutex:
            if self._db is not None:
                self._db.close()
                self._db = None
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    @property
    def state(self) -> TableState:
        """The table state after the last record."""
        return self._state

    @property
    def last_record(self) -> int:
        return self._last

    @property
    def halted(self) -> Halt | None:
        return self._halted

    def writable_again(self) -> bool:
        """Opened read-only for a read-only file system that is now writable (remounted)."""
        return self.fs_read_only and os.access(self.path.parent, os.W_OK)

    # recovery -------------------------------------------------------------------
    def recover(self, engine: Engine) -> Recovered:
        """Open the journal (creating a fresh one only in a brand-new state directory),
        verify the chain from the last snapshot and fold the tail to the exact state."""
        with self._mutex:
            self.close()
            self._engine = engine
            self._state, self._last, self._last_hash, self._halted = TableState(), 0, GENESIS, None
            marker = self._read_marker()
            self.fs_read_only = (
                not self.read_only
                and self.path.exists()
                and not os.access(self.path.parent, os.W_OK)
            )
            try:
                self._open_file(marker is not None)
                problem = self._recover_tail(engine)
            except sqlite3.DatabaseError as exc:
                problem = (None, f"the journal file cannot be read: {exc}")
            except _Missing as exc:
                problem = (None, str(exc))
            if problem is not None:
                self._halted = self._persist_halt(*problem)
            elif marker is not None:
                self._halted = marker
            return Recovered(self._state, self._last, self._halted)

    def _open_file(self, marked: bool) -> None:
        wal = self.path.with_name(self.path.name + "-wal")
        if not self.path.exists():
            if self.read_only:
                raise _Missing(f"there is no journal at {self.path}")
            if marked or wal.exists():
                raise _Missing(
                    f"the journal file {self.path} is missing"
                    + (f" but {wal.name} is there" if wal.exists() else "")
                )
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._take_lock()
            self._create()
        elif not self.read_only and not self.fs_read_only:
            self._take_lock()
        self._db = self._connect()
        row = self._db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if row is None or row[0] != str(FORMAT):
            raise _Missing(f"the journal file {self.path} has no format {FORMAT} header")

    def _take_lock(self) -> None:
        if self._lock_fd is not None:  # this journal holds it already (clear-halt after loss)
            return
        lock = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return  # a read-only directory: every write will fail anyway, with a clear error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise FirebetError(
                f"the journal {self.path} is in use by another process (the service?)"
            ) from exc
        self._lock_fd = fd

    def _connect(self) -> sqlite3.Connection:
        wal = self.path.with_name(self.path.name + "-wal")
        if (
            (self.read_only or self.fs_read_only)
            and not os.access(self.path.parent, os.W_OK)
            and not wal.exists()
        ):
            # a folder nobody can write (a read-only file system) and a clean journal (its
            # WAL folded in, so no writer has it open): SQLite cannot make the WAL index,
            # so it opens the file as immutable, which it is, for now
            return sqlite3.connect(
                f"file:{quote(str(self.path.resolve()))}?immutable=1",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
        if self.read_only or self.fs_read_only:
            db = sqlite3.connect(
                f"file:{quote(str(self.path.resolve()))}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
        else:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA busy_timeout = 2000")
            if not self.read_only and not self.fs_read_only:
                db.execute("PRAGMA journal_mode = WAL")
                db.execute(f"PRAGMA synchronous = {'FULL' if self.durable else 'OFF'}")
        except BaseException:
            db.close()
            raise
        return db

    def _create(self) -> None:
        """A fresh journal, built beside the target and renamed into place (atomic)."""
        tmp = self.path.with_name(self.path.name + ".new")
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            leftover.unlink(missing_ok=True)
        at = now_iso()
        payload = canonical({"format": FORMAT})
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.executescript("BEGIN;" + _SCHEMA)  # executescript commits what came before
            db.execute(
                "INSERT INTO meta VALUES ('format', ?), ('genesis', ?)", (str(FORMAT), GENESIS)
            )
            db.execute(
                f"INSERT INTO records ({_COLUMNS}) VALUES (1, ?, 'journal', 'start', ?, ?, ?)",
                (at, payload, GENESIS, record_hash(GENESIS, 1, at, "journal", "start", payload)),
            )
            db.execute("COMMIT")
        finally:
            db.close()
        _fsync_file(tmp)
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)

    def _recover_tail(self, engine: Engine) -> tuple[int | None, str] | None:
        db = self._require_db()
        db.execute("BEGIN")  # one consistent view, even while a service appends (read-only use)
        try:
            return self._fold_tail(db, engine)
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")

    def _fold_tail(self, db: sqlite3.Connection, engine: Engine) -> tuple[int | None, str] | None:
        walk, problem = self._anchor(db)
        if problem is None:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM records WHERE record > ? ORDER BY record",
                (walk.expect - 1,),
            )
            for row in rows:
                self._step(walk, row, engine)
                if walk.problems:
                    break
            if not walk.problems:
                self._check_cut(db, walk)
            problem = walk.problems[0] if walk.problems else None
        self._state = walk.state
        last = db.execute(
            "SELECT record, hash FROM records ORDER BY record DESC LIMIT 1"
        ).fetchone()
        seq = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'records'").fetchone()
        self._last = max(last[0] if last else 0, seq[0] if seq else 0)
        self._last_hash = last[1] if last else GENESIS
        if problem is None:
            self._halted = self._journaled_halt(db)
        return problem

    def _anchor(self, db: sqlite3.Connection) -> tuple[_Walk, tuple[int | None, str] | None]:
        """Where folding starts: the newest snapshot, checked against its record."""
        snap = db.execute(
            "SELECT record, chain_hash, state, hash FROM snapshots ORDER BY record DESC LIMIT 1"
        ).fetchone()
        walk = _Walk(TableState(), GENESIS, 1)
        if snap is None:
            return walk, None
        number, chain_hash, state_text, seal = snap
        row = db.execute(f"SELECT {_COLUMNS} FROM records WHERE record = ?", (number,)).fetchone()
        if row is None:
            return walk, (number, f"record {number} is missing (a snapshot refers to it)")
        record = Record(*row)
        if _own_hash(record) != record.hash:
            return walk, (number, "the record's hash does not match its contents (edited or torn)")
        if chain_hash != record.hash or snapshot_hash(chain_hash, state_text) != seal:
            return walk, (number, "the snapshot at this record disagrees with the chain")
        try:
            state = TableState.from_dict(json.loads(state_text))
        except (ValueError, KeyError, TypeError) as exc:
            return walk, (number, f"the snapshot at this record cannot be read: {exc}")
        return _Walk(state, record.hash, number + 1, good=number), None

    def _check_cut(self, db: sqlite3.Connection, walk: _Walk) -> None:
        seq = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'records'").fetchone()
        if seq is not None and seq[0] >= walk.expect:
            walk.problems.append((walk.expect, f"record {walk.expect} is missing"))

    def _step(self, walk: _Walk, row: Sequence[Any], engine: Engine | None) -> None:
        """Check one record against the chain and fold it (or note why not)."""
        record = Record(*row)
        number = record.record
        if number != walk.expect:
            walk.problems.append((walk.expect, f"record {walk.expect} is missing"))
        elif record.prev_hash != walk.prev_hash:
            walk.problems.append(
                (number, "prev_hash does not match the record before it (a record was changed)")
            )
        content = self._content_problem(walk.state, record, engine)
        walk.prev_hash, walk.expect = record.hash, number + 1
        if content is not None:
            walk.problems.append((number, content))
            walk.skipped.append(number)
            return
        walk.state = _apply(walk.state, record)
        walk.good = number

    def _content_problem(
        self, state: TableState, record: Record, engine: Engine | None
    ) -> str | None:
        if _own_hash(record) != record.hash:
            return "the record's hash does not match its contents (edited or torn)"
        try:
            data = record.data()
        except ValueError:
            return "the payload is not readable JSON (torn record)"
        if record.kind not in KINDS:
            return f"unknown record kind {record.kind!r}"
        try:
            if record.kind == "command":
                command = command_from_dict(data["command"])
                events = [event_from_dict(e) for e in data["events"]]
                fold(events, state)
                if engine is not None:
                    expected = [e.to_dict() for e in engine.decide(state, command)]
                    if canonical(normalise(expected)) != canonical(data["events"]):
                        return "the recorded events are not what the rules give for the command"
            elif record.kind == "clear_halt":
                TableState.from_dict(data["resume_state"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return f"the payload cannot be decoded: {exc!r}"
        return None

    def _journaled_halt(self, db: sqlite3.Connection) -> Halt | None:
        row = db.execute(
            f"SELECT {_COLUMNS} FROM records WHERE kind IN ('halt', 'clear_halt') "
            "ORDER BY record DESC LIMIT 1"
        ).fetchone()
        if row is None or row[3] != "halt":
            return None
        record = Record(*row)
        data = record.data()
        return Halt(data.get("record"), data.get("reason", "?"), record.at, record.record)

    # halting --------------------------------------------------------------------
    def halt(self, record: int | None, reason: str, *, actor: str = "journal") -> Halt:
        """Put the journal in ``halted`` (journaled, or in the marker file when it cannot be)."""
        with self._mutex:
            self._halted = self._persist_halt(record, reason, actor=actor)
            return self._halted

    def _persist_halt(self, record: int | None, reason: str, *, actor: str = "journal") -> Halt:
        if self._db is not None:
            try:
                known = self._journaled_halt(self._db)
            except (sqlite3.Error, ValueError):
                known = None
            if known is not None and (known.record, known.reason) == (record, reason):
                return known
        halt = Halt(record, reason, now_iso())
        if self._db is not None and not self.read_only:
            try:
                written = self._write("halt", actor, {"record": record, "reason": reason}, None)
                return Halt(record, reason, written.at, written.record)
            except JournalWriteError:
                pass
        if not self.read_only:
            self._write_marker(halt)
        return halt

    def clear_halt(self, actor: str, *, note: str = "") -> Record | None:
        """Lift ``halted`` (journaled with who); None when the journal was not halted.

        The game resumes from the newest anchor folded over every record that is
        itself intact (edited or unreadable records are skipped and listed).
        """
        with self._mutex:
            if self._halted is None:
                return None
            if self.read_only:
                raise JournalWriteError(self.path, "opened read-only")
            halt = self._halted
            if self._db is None:
                self._fresh_after_loss()
            db = self._require_db()
            walk, problem = self._anchor(db)
            if problem is not None:  # the newest snapshot itself is bad: fold from genesis
                walk = _Walk(TableState(), GENESIS, 1)
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM records WHERE record > ? ORDER BY record",
                (walk.expect - 1,),
            )
            for row in rows:
                self._step(walk, row, self._engine)
            payload = {
                "cleared": {"record": halt.record, "reason": halt.reason},
                "skipped": walk.skipped,
                "note": note,
                "resume_state": walk.state.to_dict(),
            }
            written = self._write("clear_halt", actor, payload, walk.state, snapshot=True)
            self._state = walk.state
            self._halted = None
            self.marker.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                _fsync_dir(self.path.parent)
            return written

    def _fresh_after_loss(self) -> None:
        """clear-halt over a journal file that is gone: a new file, the loss on record."""
        wal = self.path.with_name(self.path.name + "-wal")
        if self.path.exists():
            raise JournalIntegrityError(
                None, f"{self.path} still cannot be read: repair it or move it aside first"
            )
        if wal.exists():
            raise JournalIntegrityError(None, f"move {wal} aside before clearing the halt")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        self._create()
        self._db = self._connect()
        self._state, self._last = TableState(), 1
        self._last_hash = self._db.execute("SELECT hash FROM records WHERE record = 1").fetchone()[
            0
        ]

    def _read_marker(self) -> Halt | None:
        try:
            text = self.marker.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            return Halt(None, f"the halt marker {self.marker} cannot be read: {exc}")
        try:
            data = json.loads(text)
            return Halt(data.get("record"), str(data["reason"]), str(data.get("at", "")))
        except (ValueError, KeyError, TypeError, AttributeError):
            return Halt(None, f"the halt marker {self.marker} is damaged")

    def _write_marker(self, halt: Halt) -> None:
        tmp = self.marker.with_name(self.marker.name + ".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(canonical({"record": halt.record, "reason": halt.reason, "at": halt.at}))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.marker)
            _fsync_dir(self.path.parent)
        except OSError:
            pass  # nothing writable: the damage itself is found again at the next start

    # appending ------------------------------------------------------------------
    def append(self, command: Command, outcome: Outcome) -> Record | None:
        """Record ``command`` and the events it caused, durably, before returning.

        Returns the record, or None for an outcome made only of duplicate rolls
        (a reader retransmission: the original is already durable, ACK again).
        Raises :class:`JournalHalted` while halted, :class:`JournalWriteError`
        when the file cannot be written (nothing is recorded then).
        """
        events = outcome.events
        if events and all(isinstance(e, DuplicateRoll) for e in events):
            return None
        payload = {"command": command.to_dict(), "events": [e.to_dict() for e in events]}
        with self._mutex:
            if self._halted is not None:
                raise JournalHalted(self._halted)
            written = self._write("command", command.actor, payload, outcome.state)
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
        payload: dict[str, Any],
        state: TableState | None,
        *,
        snapshot: bool = False,
    ) -> Record:
        if self.read_only:
            raise JournalWriteError(self.path, "the journal was opened read-only")
        if self.fs_read_only:
            raise JournalWriteError(self.path, f"{self.path.parent} is on a read-only file system")
        db = self._require_db()
        number = self._last + 1
        at = now_iso()
        text = canonical(normalise(payload))
        record = Record(
            number, at, actor, kind, text, self._last_hash,
            record_hash(self._last_hash, number, at, actor, kind, text),
        )  # fmt: skip
        take = state if state is not None else self._state
        snap = snapshot or (
            kind != "halt" and number % self.snapshot_every == 0 and self._halted is None
        )
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute(
                f"INSERT INTO records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", _row(record)
            )
            if snap:
                state_text = canonical(take.to_dict())
                db.execute(
                    "INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?, ?)",
                    (number, record.hash, state_text, snapshot_hash(record.hash, state_text)),
                )
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise JournalWriteError(self.path, str(exc)) from exc
        self._last, self._last_hash = number, record.hash
        return record

    def _require_db(self) -> sqlite3.Connection:
        if self._db is None:
            raise JournalIntegrityError(
                None, "the journal is not open (unreadable or not recovered yet)"
            )
        return self._db

    # reading --------------------------------------------------------------------
    def attach(self) -> None:
        """Open the file for reading raw records without recovery (export of any journal)."""
        with self._mutex:
            if self._db is None:
                try:
                    self._db = self._connect()
                except sqlite3.Error as exc:
                    raise JournalIntegrityError(
                        None, f"the journal file cannot be read: {exc}"
                    ) from exc

    def records(self, since: str | None = None) -> Iterator[Record]:
        """Every record in order (from time ``since``, ISO 8601, when given)."""
        with self._mutex:
            rows = self._require_db().execute(f"SELECT {_COLUMNS} FROM records ORDER BY record")
        cutoff = parse_time(since) if since else None
        for row in rows:
            record = Record(*row)
            if cutoff is not None:
                try:
                    if parse_time(record.at) < cutoff:
                        continue
                except ValueError:
                    pass  # an unreadable time: show it, the auditor decides
            yield record

    def batch(self, after: int, limit: int) -> list[Record]:
        """At most ``limit`` records numbered above ``after``, in order (a bounded read)."""
        with self._mutex:
            rows = (
                self._require_db()
                .execute(
                    f"SELECT {_COLUMNS} FROM records WHERE record > ? ORDER BY record LIMIT ?",
                    (after, limit),
                )
                .fetchall()
            )
        return [Record(*row) for row in rows]

    def last(self) -> Record | None:
        """The newest record (None in an empty file)."""
        with self._mutex:
            row = (
                self._require_db()
                .execute(f"SELECT {_COLUMNS} FROM records ORDER BY record DESC LIMIT 1")
                .fetchone()
            )
        return Record(*row) if row else None

    def verify(self, engine: Engine | None = None) -> VerifyReport:
        """Check the whole journal from genesis: chain, records, snapshots, rules."""
        engine = engine or self._engine
        report = VerifyReport(halted=self._halted)
        with self._mutex:
            db = self._require_db()
            try:
                # one read transaction: every SELECT below sees the same file, even while
                # the service appends on its own connection (else a record appended between
                # the walk and the cut check looks "missing")
                db.execute("BEGIN")
                snaps = {
                    r[0]: r[1:]
                    for r in db.execute("SELECT record, chain_hash, state, hash FROM snapshots")
                }
                walk = _Walk(TableState(), GENESIS, 1)
                for row in db.execute(f"SELECT {_COLUMNS} FROM records ORDER BY record"):
                    before = len(walk.problems)
                    self._step(walk, row, engine)
                    number = row[0]
                    report.records += 1
                    if row[3] == "clear_halt" and len(walk.problems) == before:
                        report.acknowledged += [(r, why, number) for r, why in walk.problems]
                        walk.problems.clear()
                    if number in snaps:
                        report.snapshots += 1
                        problem = _snapshot_problem(walk, row[6], *snaps.pop(number))
                        if problem:
                            walk.problems.append((number, problem))
                self._check_cut(db, walk)
                for number in sorted(snaps):
                    walk.problems.append(
                        (number, f"record {number} is missing (a snapshot refers to it)")
                    )
                report.last_hash = walk.prev_hash
                report.problems = walk.problems
            except sqlite3.DatabaseError as exc:
                report.problems.append((None, f"the journal file cannot be read: {exc}"))
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")
        return report

    def history(self, hands: int) -> list[dict[str, Any]]:
        """The last ``hands`` hands (the one in play last), as ``history --json`` prints them."""
        from controller.journal.history import history  # the walker lives beside us

        with self._mutex:
            return history(self._require_db(), hands)


class _Missing(Exception):
    """The journal file is not where it must be, or not a firebet journal."""


def _own_hash(record: Record) -> str:
    return record_hash(
        record.prev_hash, record.record, record.at, record.actor, record.kind, record.payload
    )


def _row(record: Record) -> tuple[Any, ...]:
    return (
        record.record, record.at, record.actor, record.kind,
        record.payload, record.prev_hash, record.hash,
    )  # fmt: skip


def _apply(state: TableState, record: Record) -> TableState:
    """Fold one (already checked) record into the state."""
    if record.kind == "command":
        events: list[Event] = [event_from_dict(e) for e in record.data()["events"]]
        return fold(events, state)
    if record.kind == "clear_halt":
        return TableState.from_dict(record.data()["resume_state"])
    return state


def _snapshot_problem(walk: _Walk, chain: str, chain_hash: str, text: str, seal: str) -> str | None:
    if chain_hash != chain or snapshot_hash(chain_hash, text) != seal:
        return "the snapshot at this record does not match the chain"
    if text != canonical(walk.state.to_dict()):
        return "the snapshot at this record disagrees with the folded records"
    return None


def parse_time(text: str) -> datetime:
    """An ISO 8601 time; a time without a zone is taken as UTC."""
    value = datetime.fromisoformat(text)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
