"""Opening a journal: every file where it must be, whole, with this table's key.

Each check names what is missing: the database, its contents, the write-ahead
log's acknowledged records (against the sealed head file), the key. A state
directory that ever held a journal never gets a fresh one from here.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from pathlib import Path

from controller.core.errors import FirebetError
from controller.journal import files as F
from controller.journal import store
from controller.journal.key import read_key
from controller.journal.recipe import READABLE_FORMATS, key_id
from controller.journal.walk import Problem

_SQLITE_MAGIC = b"SQLite format 3\x00"


class Damage(Exception):
    """A journal file is missing, emptied, truncated, of another format or key."""

    def __init__(self, record: int | None, reason: str) -> None:
        super().__init__(reason)
        self.problem: Problem = (record, reason)


class writer_lock:
    """The writer's lock file: one process writes a journal at a time."""

    @staticmethod
    def take(path: Path) -> int | None:
        """Hold the lock (None in a directory that cannot be written: writes fail later,
        with a clear error). Raises when another process holds it."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise FirebetError(
                f"the journal {path.with_suffix('')} is in use by another process (the service?)"
            ) from exc
        return fd

    @staticmethod
    def release(fd: int) -> None:
        """Let the lock go."""
        os.close(fd)


def _names(paths: list[Path]) -> str:
    return ", ".join(p.name for p in paths)


def check_present(files: F.JournalFiles) -> bool:
    """Raise :class:`Damage` naming what is missing, emptied or truncated; whether the
    write-ahead log was there (opening the database makes a new, empty one)."""
    db = files.db
    # the log first: a checkpoint needs one, so with none at this look the file is whole
    in_log = _holds_frames(files.wal)
    if not db.exists():
        traces = files.traces()
        if traces:
            raise Damage(
                None,
                f"the journal file {db.name} is missing, but this state directory held a "
                f"journal (found: {_names(traces)})",
            )
        raise Damage(None, f"there is no journal at {db}")
    size = db.stat().st_size
    if size == 0:
        raise Damage(None, f"the journal file {db.name} is empty (emptied)")
    with open(db, "rb") as f:
        header = f.read(100)
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        raise Damage(None, f"the journal file {db.name} is not a journal (damaged or truncated)")
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(header[28:32], "big")
    if page and size < page * pages and not in_log:
        raise Damage(
            None,
            f"the journal file {db.name} is truncated ({size} of {page * pages} bytes)",
        )
    return files.wal.exists()


def _holds_frames(wal: Path) -> bool:
    """Whether the write-ahead log has room for frames past its header.

    While it does, the database file's size says nothing on its own: a checkpoint
    writes page 1 (with the new page count) before the pages after it, so a reader
    beside a running service, or a start after a crash inside a checkpoint, sees a
    file shorter than its header for a moment, with the pages still in the log.
    Records really lost are then found by the walk and the sealed head instead.
    """
    try:
        return wal.stat().st_size > store.WAL_HEADER
    except FileNotFoundError:
        return False


def open_file(
    files: F.JournalFiles, key_file: Path, *, read_only: bool, durable: bool
) -> tuple[sqlite3.Connection, bytes, bool]:
    """The open database, the key, and whether the write-ahead log was there."""
    wal = check_present(files)
    db = store.connect(files.db, read_only=read_only, durable=durable)
    try:
        header = store.meta(db)
        if not header:
            raise Damage(None, f"{files.db.name} has no journal header (emptied or replaced)")
        if header.get("format") == "1":
            raise Damage(
                None,
                f"{files.db.name} is a format-1 journal (plain SHA-256, before the keyed "
                "chain): move it to the keyed format with firebet journal migrate "
                "(docs/runbook.md)",
            )
        if header.get("format") not in READABLE_FORMATS:
            raise Damage(None, f"{files.db.name} has an unknown format {header.get('format')!r}")
        key = read_key(key_file)
        if header.get("key_id") != key_id(key):
            raise Damage(
                None,
                f"the key {key_file} is not the key this journal was made with "
                "(its records cannot be checked)",
            )
    except BaseException:
        db.close()
        raise
    return db, key, wal


def check_head(
    files: F.JournalFiles, key: bytes, db: sqlite3.Connection, last: store.Row, wal: bool = True
) -> F.Head | Problem:
    """The sealed head against the stored records: records acknowledged but gone (a deleted
    or truncated WAL, a truncated file) are a problem naming them. Read outside the walk's
    transaction, so a record a running service appended since is found."""
    head = F.read_head(files.head, key)
    if isinstance(head, str):
        return None, head
    if not head.sealed:
        return None, f"the head file {files.head.name} is not sealed with this table's key"
    sealed = store.row(db, head.record)
    if sealed is None and head.record > last.record:
        if not wal:
            where = f"{files.wal.name} is missing"
        else:
            where = f"{files.wal.name} or {files.db.name} was truncated or replaced"
        first = last.record + 1
        which = f"record {first}" if first == head.record else f"records {first}..{head.record}"
        return first, (
            f"{which} acknowledged but gone ({where}): the head file sealed record "
            f"{head.record}, the journal ends at record {last.record}"
        )
    if sealed is None or sealed.mac != head.mac:
        return head.record, (
            f"record {head.record} is not the record the head file sealed (the journal "
            "was rewritten)"
        )
    return head
