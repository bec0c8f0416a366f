"""The journal's files in the state directory, and what their absence means.

``journal.db`` (SQLite, WAL mode) with ``journal.db-wal`` and ``-shm``;
``journal.db.head`` (the newest acknowledged record, sealed with the key:
written after every commit and synced by its own thread, so a deleted or truncated
WAL cannot take acknowledged records away unnoticed); ``journal.db.lock`` (the writer's
lock); ``journal.db.halt`` (a halt that could not be written into the journal).
Any of them, or a folder of damaged files set aside by ``firebet journal init``,
means the state directory has held a journal: it never starts a fresh one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from controller.journal.recipe import canonical, head_seal

log = logging.getLogger("firebet.journal")

ASIDE_PREFIX = "journal-aside-"
_HEAD_SIZE = 256  # one sector: rewritten in place
HEAD_SYNC_S = 0.1  # appends in a burst: the head file is synced at least this often


@dataclass(frozen=True)
class JournalFiles:
    """The paths of one journal's files."""

    db: Path

    @property
    def wal(self) -> Path:
        """The write-ahead log: committed records not yet checkpointed into ``db``."""
        return self.db.with_name(self.db.name + "-wal")

    @property
    def shm(self) -> Path:
        """SQLite's shared-memory index of the WAL."""
        return self.db.with_name(self.db.name + "-shm")

    @property
    def head(self) -> Path:
        """The sealed head: the newest acknowledged record."""
        return self.db.with_name(self.db.name + ".head")

    @property
    def lock(self) -> Path:
        """The writer's lock file."""
        return self.db.with_name(self.db.name + ".lock")

    @property
    def marker(self) -> Path:
        """The halt marker, for a halt that could not be journaled."""
        return self.db.with_name(self.db.name + ".halt")

    def traces(self) -> list[Path]:
        """What is left of a journal in the state directory (empty: it never held one)."""
        found = [p for p in (self.db, self.wal, self.head, self.lock, self.marker) if p.exists()]
        with contextlib.suppress(OSError):
            found += sorted(self.db.parent.glob(ASIDE_PREFIX + "*"))
        return found

    def move_aside(self, stamp: str) -> Path:
        """Move every journal file into a new folder ``journal-aside-<stamp>``; the folder."""
        folder = self.db.parent / f"{ASIDE_PREFIX}{stamp}"
        folder.mkdir(mode=0o750)
        for path in (self.db, self.wal, self.shm, self.head, self.marker):
            if path.exists():
                os.replace(path, folder / path.name)
        fsync_dir(folder)
        fsync_dir(self.db.parent)
        return folder


@dataclass(frozen=True)
class Head:
    """What the head file says: record ``record`` with chain MAC ``mac`` was acknowledged."""

    record: int
    mac: bytes
    sealed: bool  # the seal matched the key


def head_text(key: bytes, record: int, mac: bytes) -> bytes:
    """The head file's contents, padded to a fixed size so it is rewritten in place."""
    text = f"firebet-head 2\n{record}\n{mac.hex()}\n{head_seal(key, record, mac).hex()}\n"
    return text.encode().ljust(_HEAD_SIZE, b" ")


def read_head(path: Path, key: bytes) -> Head | str:
    """The head in ``path``, or what is wrong with it (missing, emptied, damaged).

    Read again when it does not parse or seal: a reader beside the running service
    may catch the file in the middle of its rewrite."""
    for _ in range(3):
        found = _read_head(path, key)
        if isinstance(found, Head) and found.sealed:
            return found
    return found


def _read_head(path: Path, key: bytes) -> Head | str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return f"the head file {path.name} is missing"
    except OSError as exc:
        return f"the head file {path.name} cannot be read: {exc}"
    if not data.strip():
        return f"the head file {path.name} is empty"
    try:
        magic, record, mac, sealed = data.decode("ascii").split("\n")[:4]
        number, mac_bytes, seal_bytes = int(record), bytes.fromhex(mac), bytes.fromhex(sealed)
    except ValueError:
        return f"the head file {path.name} is damaged"
    if magic != "firebet-head 2":
        return f"the head file {path.name} is damaged"
    return Head(number, mac_bytes, seal_bytes == head_seal(key, number, mac_bytes))


class HeadWriter:
    """The head file, rewritten in place after every commit and synced by its own thread.

    :meth:`write` puts the new head in the file (the page cache: it survives the
    process being killed, ``kill -9`` included) and returns. The syncer thread makes it
    durable (``fdatasync``) once the roll is done: the service calls :meth:`settle`
    after the ACK, when its queue is empty, so neither the sync nor the thread's
    wake-up falls between a roll's commit and its ACK. A roll more than
    :data:`HEAD_SYNC_S` after the last sync is synced at once; rolls that come faster
    (back to back, a burst, a tool, the bench) share one sync at most every
    :data:`HEAD_SYNC_S`, the syncer waiting out the rest of that time after it is
    asked, so a second (and every later) roll inside it costs no sync and no wake-up.
    What this costs: after a power cut the head file may name an older record than
    the newest one committed, by at most :data:`HEAD_SYNC_S` (and the sync's own
    time), and those records are protected by the journal's own commit and chain but
    not by the head file (docs/journal.md, "The head file").
    :meth:`close` syncs what is left; :meth:`wait_synced` does not wait out the rest.
    """

    def __init__(self, path: Path, clock: Callable[[], float] = time.monotonic) -> None:
        """``clock`` is injectable for tests."""
        self.path = path
        self._clock = clock
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
        self.error: OSError | None = None  # the syncer's last failure (None: synced)
        self._due = threading.Condition()
        self._written = 0  # writes made, and the count the syncer has synced
        self._synced = 0
        self._asked = False  # settle() (or a burst) asked the syncer to sync
        self._hurry = False  # wait_synced() asked: no waiting out the rest of HEAD_SYNC_S
        self._unsynced_since: float | None = None  # when the oldest unsynced write was made
        self._synced_at: float | None = None  # when the last sync ended
        self._cooling = False  # the syncer is waiting out the rest of HEAD_SYNC_S
        self._closing = False
        self._thread = threading.Thread(target=self._sync_loop, name="journal head", daemon=True)
        self._thread.start()

    def write(self, key: bytes, record: int, mac: bytes) -> None:
        """Seal ``record`` as the newest acknowledged one (durable once settled)."""
        os.pwrite(self._fd, head_text(key, record, mac), 0)
        now = self._clock()
        with self._due:
            self._written += 1
            if self._unsynced_since is None:
                self._unsynced_since = now
            elif now - self._unsynced_since >= HEAD_SYNC_S and not self._asked:
                self._asked = True  # a burst: do not wait for it to end
                self._due.notify()

    def settle(self) -> None:
        """The roll is done (its ACK is out): sync what was written (wakes the syncer)."""
        with self._due:
            if self._written > self._synced and not self._asked:
                self._asked = True
                self._due.notify()

    def wait_synced(self, timeout: float = 5.0) -> bool:
        """Sync every write so far and wait until it is durable (tests, a clean stop)."""
        self.settle()
        with self._due:
            goal = self._written
            if self._synced < goal:
                self._hurry = True
                self._due.notify_all()
            done = self._due.wait_for(lambda: self._synced >= goal or self._closing, timeout)
        return done and self.error is None

    def close(self) -> None:
        """Sync what is left, stop the syncer and close the file."""
        with self._due:
            self._closing = True
            self._due.notify_all()
        self._thread.join(timeout=10)
        with contextlib.suppress(OSError):
            os.fdatasync(self._fd)
        os.close(self._fd)

    def _sync_loop(self) -> None:
        while True:
            with self._due:
                self._due.wait_for(lambda: self._asked or self._closing)
                rest = self._cool_down_left()
                if rest > 0 and not self._hurry and not self._closing:
                    # asked again within HEAD_SYNC_S of the last sync: the rolls of the
                    # rest of that time are synced with this one (waited out once, on
                    # the real clock, whatever the injected one says)
                    self._cooling = True
                    self._due.wait_for(lambda: self._hurry or self._closing, rest)
                    self._cooling = False
                if self._closing:
                    return  # close() syncs what is left
                goal, self._asked, self._unsynced_since = self._written, False, None
                self._hurry = False
            try:
                os.fdatasync(self._fd)
                self.error = None
            except OSError as exc:  # the next write tries again; the journal commit stands
                if self.error is None:
                    log.warning("cannot sync the head file %s: %s", self.path, exc)
                self.error = exc
            with self._due:
                self._synced = goal
                self._synced_at = self._clock()
                self._due.notify_all()

    def _cool_down_left(self) -> float:
        """Seconds until HEAD_SYNC_S has passed since the last sync ended (0: sync now)."""
        if self._synced_at is None:
            return 0.0
        return max(0.0, min(HEAD_SYNC_S, self._synced_at + HEAD_SYNC_S - self._clock()))


def write_head_new(path: Path, key: bytes, record: int, mac: bytes) -> None:
    """A head file made whole beside ``path`` and renamed into place."""
    tmp = path.with_name(path.name + ".new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
    try:
        os.write(fd, head_text(key, record, mac))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


# identity: files removed or replaced under a running service -------------------------------
def identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of ``path``; None when it is not there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


# the halt marker ---------------------------------------------------------------------------
def read_marker(path: Path) -> tuple[int | None, str, str] | None:
    """(record, reason, at) from the halt marker; None when there is none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        return None, f"the halt marker {path} cannot be read: {exc}", ""
    try:
        data = json.loads(text)
        return data.get("record"), str(data["reason"]), str(data.get("at", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, f"the halt marker {path} is damaged", ""


def write_marker(path: Path, record: int | None, reason: str, at: str) -> None:
    """Keep a halt in the marker file (best effort: nothing writable means the damage is
    found again at the next start)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(canonical({"record": record, "reason": reason, "at": at}))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError:
        pass


def fsync_file(path: Path) -> None:
    """Flush ``path`` to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries (a rename or a new file) to the disk."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def stamp_now() -> str:
    """A timestamp for a folder name: ``20261130T081500Z``."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
