"""The SQLite store of the journal: schema, connections, rows in and out, checkpoints.

One file in WAL mode, ``synchronous=FULL``: a commit is durable when
:func:`insert` returns. Automatic checkpoints are off on the writer's
connection; :class:`Checkpointer` copies the WAL into the database from a
thread of its own when the table is idle or the WAL has grown, so no roll
waits for a checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

from controller.core.commands import parse_request_tag
from controller.journal.files import fsync_dir, fsync_file
from controller.journal.recipe import (
    BODY_SQL,
    FORMAT,
    GENESIS,
    PACKED_FROM,
    body_text,
    key_id,
    pack_body,
    seal,
)

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE records (
    record INTEGER PRIMARY KEY,
    at INTEGER NOT NULL,
    actor TEXT NOT NULL,
    kind TEXT NOT NULL,
    body NOT NULL,
    snap INTEGER NOT NULL,
    mac BLOB NOT NULL
);
CREATE INDEX records_halts ON records (record) WHERE kind IN ('halt', 'clear_halt');
CREATE INDEX records_rules ON records (record) WHERE kind = 'rules';
CREATE TABLE snapshots (record INTEGER PRIMARY KEY, hand INTEGER NOT NULL, state TEXT NOT NULL);
"""
# ``body`` has no type (format 3): a body is its text, or a reader roll's one integer
# (recipe.pack_body). RAW_COLUMNS read it as stored (the walk's fast path takes the
# integer as it is); COLUMNS read every body as its text, for everyone else.
RAW_COLUMNS = "record, at, actor, kind, body, snap, mac"
COLUMNS = f"record, at, actor, kind, {BODY_SQL}, snap, mac"
INSERT_RECORD = f"INSERT INTO records ({RAW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
# every control-socket request the journal holds, by who asked and its id (the JSON text
# of the id): written in the transaction of its command record, so a retry of any of them,
# however old, is answered from its record and never done again (docs/cli.md)
REQUESTS = """CREATE TABLE requests (
    uid INTEGER NOT NULL,
    id TEXT NOT NULL,
    digest TEXT NOT NULL,
    record INTEGER NOT NULL,
    PRIMARY KEY (uid, id)
) WITHOUT ROWID"""
INSERT_REQUEST = "INSERT OR IGNORE INTO requests VALUES (?, ?, ?, ?)"
CHECKPOINT_PAGES = 2000  # about 8 MB of WAL: checkpoint even while the table is busy
IDLE_S = 1.0  # the table has been quiet this long: checkpoint what there is


class Row(NamedTuple):
    """One record as stored."""

    record: int
    at: int
    actor: str
    kind: str
    body: str
    snap: int
    mac: bytes


def connect(path: Path, *, read_only: bool, durable: bool = True) -> sqlite3.Connection:
    """A connection to the journal file (the writer's: WAL, FULL sync, no auto-checkpoint)."""
    wal = path.with_name(path.name + "-wal")
    if read_only and not os.access(path.parent, os.W_OK) and not wal.exists():
        # a folder nobody can write (a read-only file system) and a clean journal (its WAL
        # folded in, so no writer has it open): SQLite cannot make the WAL index, so it
        # opens the file as immutable, which it is, for now
        db = sqlite3.connect(
            f"file:{quote(str(path.resolve()))}?immutable=1",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
        )
    elif read_only:
        db = sqlite3.connect(
            f"file:{quote(str(path.resolve()))}?mode=ro",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
        )
    else:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA busy_timeout = 2000")
        if not read_only:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute(f"PRAGMA synchronous = {'FULL' if durable else 'OFF'}")
            db.execute("PRAGMA wal_autocheckpoint = 0")
    except BaseException:
        db.close()
        raise
    return db


def add_indexes(db: sqlite3.Connection) -> None:
    """The indexes a journal made by an older version lacks (the rules records, so the
    rules in force at an anchor are one lookup; the control-socket requests, filled from
    the command records it holds): made once, on the writer's connection."""
    db.execute("CREATE INDEX IF NOT EXISTS records_rules ON records (record) WHERE kind = 'rules'")
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'requests'").fetchone():
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(REQUESTS)
        found = db.execute(
            "SELECT record, body FROM records WHERE kind = 'command' "
            "AND instr(body, '\"request\":') > 0 ORDER BY record"
        )
        db.executemany(INSERT_REQUEST, _requests_in(found))
        db.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise


def _requests_in(found: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str, str, int]]:
    """The index rows of the command records ``found`` (``(record, body)``) that carry a
    request's tag (a body that cannot be read is the walk's to name: skipped here)."""
    for number, body in found:
        try:
            tag = json.loads(body).get("request")
        except (ValueError, AttributeError, RecursionError):
            continue
        request = parse_request_tag(tag) if isinstance(tag, str) else None
        if request is not None:
            uid, digest, rid = request
            yield uid, json.dumps(rid), digest, number


def request_row(request: tuple[int, str, str | int], record: int) -> tuple[int, str, str, int]:
    """The index row of the request ``(uid, digest, id)`` journaled at ``record``."""
    uid, digest, rid = request
    return uid, json.dumps(rid), digest, record


def decided_request(db: sqlite3.Connection, uid: int, rid: str | int) -> tuple[str, int] | None:
    """``(digest, record)`` of the request ``rid`` of ``uid`` the journal holds (None: it
    holds none; the first one journaled when there were several)."""
    found = db.execute(
        "SELECT digest, record FROM requests WHERE uid = ? AND id = ?", (uid, json.dumps(rid))
    ).fetchone()
    return (str(found[0]), int(found[1])) if found else None


def meta(db: sqlite3.Connection) -> dict[str, str]:
    """The journal's header (``format``, ``key_id``, ...); empty when there is none."""
    try:
        return dict(db.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return {}
        raise


def create(path: Path, key: bytes, at: int, actor: str, body: str) -> bytes:
    """A new journal with its ``start`` record, built beside ``path`` and renamed into place
    (atomic); the start record's MAC."""
    tmp = path.with_name(path.name + ".new")
    for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-journal")):
        leftover.unlink(missing_ok=True)
    mac = seal(key, GENESIS, 1, at, actor, "start", body)
    db = sqlite3.connect(tmp, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.executescript("BEGIN;" + SCHEMA)  # executescript commits what came before
        db.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("format", str(FORMAT)), ("key_id", key_id(key))],
        )
        db.execute(
            f"INSERT INTO records ({RAW_COLUMNS}) VALUES (1, ?, ?, 'start', ?, 0, ?)",
            (at, actor, body, mac),
        )
        db.execute("COMMIT")
    finally:
        db.close()
    fsync_file(tmp)
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return mac


def packs(db: sqlite3.Connection) -> bool:
    """Whether the journal stores a reader roll's body packed (format 3 on; a format-2
    journal's ``body`` column is TEXT, which would turn the integer into digits)."""
    found = meta(db).get("format", "")
    return found.isdigit() and int(found) >= PACKED_FROM


def stored(row: Row) -> tuple[int, int, str, str, str | int, int, bytes]:
    """``row`` as format 3 stores it (its body packed when it can be: recipe.pack_body)."""
    return row.record, row.at, row.actor, row.kind, pack_body(row.body), row.snap, row.mac


def insert(
    db: sqlite3.Connection,
    row: Row,
    snapshot: tuple[int, str] | None,
    request: tuple[int, str, str | int] | None = None,
    *,
    packed: bool = False,
) -> None:
    """Commit one record (and its snapshot: ``(hand, state text)``; the request
    ``(uid, digest, id)`` that asked for it, into the index) in one transaction.
    ``packed``: its body stored as format 3 does (:func:`stored`; False for a format-2
    journal).

    A record alone is one statement, which SQLite commits as its own transaction: one
    call into SQLite on the roll path instead of three (BEGIN, INSERT, COMMIT). A
    connection already inside a transaction takes the long way, where BEGIN refuses.
    """
    values = stored(row) if packed else row
    if snapshot is None and request is None and not db.in_transaction:
        db.execute(INSERT_RECORD, values)
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(INSERT_RECORD, values)
        if request is not None:
            db.execute(INSERT_REQUEST, request_row(request, row.record))
        if snapshot is not None:
            db.execute("INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?)", (row.record, *snapshot))
        db.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise


def rows(db: sqlite3.Connection, first: int = 1, last: int | None = None) -> Iterator[Row]:
    """Records ``first``.. (``last``) in order."""
    if last is None:
        cursor = db.execute(
            f"SELECT {COLUMNS} FROM records WHERE record >= ? ORDER BY record", (first,)
        )
    else:
        cursor = db.execute(
            f"SELECT {COLUMNS} FROM records WHERE record BETWEEN ? AND ? ORDER BY record",
            (first, last),
        )
    return (Row(*r) for r in cursor)


def raw_rows(db: sqlite3.Connection, first: int = 1) -> sqlite3.Cursor:
    """Records ``first``.. in order as plain tuples, each body as stored (the walk's fast
    path: no Row objects, a packed roll's integer as it is; :func:`as_row` for a Row)."""
    return db.execute(
        f"SELECT {RAW_COLUMNS} FROM records WHERE record >= ? ORDER BY record", (first,)
    )


def as_row(raw: tuple[Any, ...]) -> Row:
    """The :class:`Row` of a plain tuple (body as stored or as text)."""
    body = raw[4]
    return Row(raw[0], raw[1], raw[2], raw[3], body if type(body) is str else body_text(body),
               raw[5], raw[6])  # fmt: skip


def row(db: sqlite3.Connection, number: int) -> Row | None:
    """Record ``number``, if it is there."""
    found = db.execute(f"SELECT {COLUMNS} FROM records WHERE record = ?", (number,)).fetchone()
    return Row(*found) if found else None


def before(db: sqlite3.Connection, number: int) -> Row | None:
    """The stored record just before record ``number``."""
    found = db.execute(
        f"SELECT {COLUMNS} FROM records WHERE record < ? ORDER BY record DESC LIMIT 1", (number,)
    ).fetchone()
    return Row(*found) if found else None


def last_row(db: sqlite3.Connection) -> Row | None:
    """The newest record."""
    found = db.execute(f"SELECT {COLUMNS} FROM records ORDER BY record DESC LIMIT 1").fetchone()
    return Row(*found) if found else None


HELLO_LOOK_BACK = 50_000  # records a start reads back for the reader's last HELLO


def last_hello(
    db: sqlite3.Connection, model: str, firmware: str, within: int = HELLO_LOOK_BACK
) -> int | None:
    """The newest ``reader_hello`` record naming ``model`` and ``firmware`` among the
    newest ``within`` records (None: none there). Read backwards from the newest record,
    once at a start: the reader's last HELLO. Bounded, so a start's cost does not grow
    with a journal whose reader has not restarted for months (about 25 ms here)."""
    found = db.execute(
        "SELECT record FROM records WHERE kind = 'command'"
        " AND record > (SELECT ifnull(max(record), 0) FROM records) - ?"
        " AND instr(body, '\"reader_hello\"') > 0"
        " AND json_extract(body, '$.command') = 'reader_hello'"
        " AND ifnull(json_extract(body, '$.model'), '') = ?"
        " AND ifnull(json_extract(body, '$.firmware'), '') = ?"
        " ORDER BY record DESC LIMIT 1",
        (within, model, firmware),
    ).fetchone()
    return int(found[0]) if found else None


def snapshot(db: sqlite3.Connection, number: int) -> str | None:
    """The state text of the snapshot at record ``number``."""
    found = db.execute("SELECT state FROM snapshots WHERE record = ?", (number,)).fetchone()
    return str(found[0]) if found else None


def snapshots(db: sqlite3.Connection, after: int = 0) -> dict[int, str]:
    """Every snapshot's state text by record (of the records after ``after``)."""
    return {
        int(n): str(s)
        for n, s in db.execute("SELECT record, state FROM snapshots WHERE record > ?", (after,))
    }


def anchors(db: sqlite3.Connection, before: int | None = None) -> Iterator[int]:
    """Records carrying a snapshot a replay may start from, newest first (below ``before``
    when given): not one a clear-halt set aside."""
    limit = before if before is not None else 1 << 62
    aside = set_aside_snapshots(db)
    for (number,) in db.execute(
        "SELECT record FROM records WHERE snap = 1 AND record < ? ORDER BY record DESC", (limit,)
    ):
        if number not in aside:
            yield int(number)


def anchor_for_hand(db: sqlite3.Connection, hand: int) -> int:
    """The newest snapshot a replay may start from taken before hand ``hand`` began (0:
    none, start from genesis)."""
    aside = set_aside_snapshots(db)
    for (number,) in db.execute(
        "SELECT record FROM snapshots WHERE hand < ? ORDER BY record DESC", (hand,)
    ):
        if number not in aside:
            return int(number)
    return 0


def set_aside_snapshots(db: sqlite3.Connection) -> set[int]:
    """The snapshots clear-halts set aside (not what the records give: never adopted)."""
    aside: set[int] = set()
    for (body,) in db.execute(
        "SELECT body FROM records WHERE kind IN ('halt', 'clear_halt') AND kind = 'clear_halt'"
    ):
        try:
            aside.update(int(n) for n in json.loads(body)["set_aside"]["snapshots"])
        except (ValueError, KeyError, TypeError):
            continue  # a damaged clear-halt record: the walk names it
    return aside


def rules_row(db: sqlite3.Connection, number: int) -> Row | None:
    """The newest ``rules`` record at or before record ``number`` (None: there is none)."""
    found = db.execute(
        f"SELECT {COLUMNS} FROM records WHERE kind = 'rules' AND record <= ? "
        "ORDER BY record DESC LIMIT 1",
        (number,),
    ).fetchone()
    return Row(*found) if found else None


def rules_held(db: sqlite3.Connection) -> bool:
    """Whether a ``rules`` record waited for a hand in play (``holds_for_hand``)."""
    found = db.execute(
        "SELECT 1 FROM records WHERE kind = 'rules' AND body LIKE '%\"holds_for_hand\"%' LIMIT 1"
    ).fetchone()
    return found is not None


def last_halt(db: sqlite3.Connection) -> Row | None:
    """The newest ``halt`` or ``clear_halt`` record."""
    found = db.execute(
        f"SELECT {COLUMNS} FROM records WHERE kind IN ('halt', 'clear_halt') "
        "ORDER BY record DESC LIMIT 1"
    ).fetchone()
    return Row(*found) if found else None


PREFILL_SPARE = 64 << 20  # bytes the disk keeps free besides the WAL written out ahead
WAL_HEADER, FRAME_HEADER = 32, 24  # bytes (sqlite.org/fileformat.html, "WAL file format")


def prefill_wal(db: sqlite3.Connection, wal: Path, frames: int = CHECKPOINT_PAGES) -> int:
    """Make the WAL file ``frames`` frames long with written zeros; the bytes added.

    A commit that appends to the WAL past its end makes the file longer, and syncing a
    longer file is a file-system journal commit on top of the data: the slowest syncs of
    a busy table were those. With the WAL written out to where checkpoints keep it, a
    commit rewrites blocks that are already there. SQLite reads a WAL frame by frame and
    stops at the first whose salt and checksum do not match, so zeros past the last
    frame are never taken for records (and a reset WAL is rewritten from its start).
    """
    page = int(db.execute("PRAGMA page_size").fetchone()[0])
    size = WAL_HEADER + frames * (FRAME_HEADER + page)
    try:
        have = wal.stat().st_size
    except FileNotFoundError:
        return 0  # no WAL yet: SQLite makes it at the first commit
    if have >= size:
        return 0
    disk = os.statvfs(wal.parent)
    if disk.f_bavail * disk.f_frsize < size - have + PREFILL_SPARE:
        return 0
    fd = os.open(wal, os.O_WRONLY)
    try:
        chunk = bytes(1 << 20)
        at = have
        while at < size:
            at += os.pwrite(fd, chunk[: min(len(chunk), size - at)], at)
        os.fdatasync(fd)
    except OSError:
        os.ftruncate(fd, have)  # give the space back: nothing was written past ``have``
        raise
    finally:
        os.close(fd)
    return size - have


class Checkpointer:
    """Copies the WAL into the database from its own thread and connection.

    It checkpoints (PASSIVE: never waits for the writer or readers) once the table
    has been quiet for :data:`IDLE_S`, or when the WAL holds more than
    :data:`CHECKPOINT_PAGES` pages, so the roll path never runs a checkpoint. With nothing
    to copy it sleeps until :meth:`settle` (the service, after a roll's ACK) or a burst of
    commits wakes it; a writer that never settles has its WAL copied at the burst's size
    and when it closes.
    """

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        self.path = path
        self.durable = durable
        self.checkpoints = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pending = 0
        self._parked = False  # waiting for a commit, with no clock running
        self._last_write = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="journal checkpoint", daemon=True)
        self._thread.start()

    def wrote(self) -> None:
        """A commit happened (called by the writer, cheap)."""
        self._pending += 1
        self._last_write = time.monotonic()
        if self._pending >= CHECKPOINT_PAGES // 2:
            self._wake.set()

    def settle(self) -> None:
        """The writer's outputs are out (the ACK is sent): a thread parked with nothing to
        copy starts timing the quiet now (a wake-up after the roll, not in its path)."""
        if self._pending and self._parked:
            self._wake.set()

    def stop(self) -> None:
        """Stop the thread (the writer's close checkpoints what is left)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        db: sqlite3.Connection | None = None
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA busy_timeout = 0")
            db.execute(f"PRAGMA synchronous = {'FULL' if self.durable else 'OFF'}")
            while not self._stop.is_set():
                self._parked = True  # (before the look at _pending: settle() reads both)
                if self._pending:  # until the table has been quiet for IDLE_S
                    self._parked = False
                    self._wake.wait(max(0.0, self._last_write + IDLE_S - time.monotonic()))
                else:  # nothing to copy: parked until settle() (or a burst) wakes it, so an
                    self._wake.wait()  # idle table's thread never wakes for nothing (SPEC
                    self._parked = False  # section 7: the idle CPU budget)
                self._wake.clear()
                if self._stop.is_set() or self._pending == 0:
                    continue
                busy = time.monotonic() - self._last_write < IDLE_S
                if busy and self._pending < CHECKPOINT_PAGES // 2:
                    continue
                self._pending = 0
                with contextlib.suppress(sqlite3.Error):
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
        except sqlite3.Error:
            return  # the writer's close still checkpoints; nothing is lost
        finally:
            if db is not None:
                db.close()
