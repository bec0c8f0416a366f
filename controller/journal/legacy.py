"""The older formats and moving them forward (``firebet journal migrate``).

**Format 1** (plain SHA-256, events stored, before the keyed chain): migrate checks the
whole format-1 chain with its own recipe, refuses a journal that does not verify
(``firebet journal init`` sets such a one aside instead), and writes every record again
under the table's key: same numbers, times, actors and kinds; a command record keeps its
command (the rules give its events again, and must give the very events format 1
stored, else the migration is refused). The old files move, whole, into
``journal-aside-<time>/``; the new genesis record names them, the old chain head and who
migrated.

**Format 2** (the keyed chain, every body stored as text): format 3 is the very same
records and seals, a reader roll's body stored as one integer (recipe.pack_body), so
migrate copies every record, snapshot and request into a new file with the bodies
packed, checks the new file from genesis with the key (every seal is over the text the
packed bodies give back, so the check proves the copy), and only then moves the old files
aside and the new one into place; then it journals a ``start`` record naming the
migration, who did it and where the old files went. A format-2 journal that does not
verify is refused (the new file is removed, the old one left as it was). A table may
also play on a format-2 journal: it is read and written as it is (bodies as text).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from controller.core.commands import command_from_dict
from controller.core.config import FireBetRules
from controller.core.errors import FirebetError, JournalIntegrityError
from controller.core.state import TableState
from controller.journal import files as F
from controller.journal import store
from controller.journal.key import make_key, read_key
from controller.journal.opening import writer_lock
from controller.journal.recipe import (
    FORMAT,
    GENESIS,
    RecordKind,
    canonical,
    clean_actor,
    encode_command,
    pack_body,
    seal,
    to_ms,
)
from controller.journal.replay import engine_for

OLD_GENESIS = "0" * 64


def old_hash(prev: str, record: int, at: str, actor: str, kind: str, payload: str) -> str:
    """The format-1 chain hash (docs/journal.md, "Format 1")."""
    header = canonical({"record": record, "at": at, "actor": actor, "kind": kind})
    return hashlib.sha256(f"{prev}\n{header}\n{payload}".encode()).hexdigest()


def is_format_1(path: Path) -> bool:
    """Whether ``path`` is a format-1 journal."""
    return format_of(path) == "1"


@dataclass(frozen=True)
class Migrated:
    """What ``journal migrate`` did."""

    records: int
    old_head: str
    aside: Path
    from_format: int = 1


def format_of(path: Path) -> str | None:
    """The ``format`` a journal file's header names (None: none can be read)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
    except sqlite3.Error:
        return None
    finally:
        db.close()
    return str(row[0]) if row is not None else None


def _refusal(number: int) -> Callable[[str], JournalIntegrityError]:
    def refuse(why: str) -> JournalIntegrityError:
        return JournalIntegrityError(
            number, f"{why}; firebet journal init sets the old journal aside instead"
        )

    return refuse


def _convert(
    rows: list[tuple[int, str, str, str, str, str, str]],
    rules: FireBetRules,
    key: bytes,
    genesis: dict[str, object],
    snapshot_every: int,
) -> tuple[list[store.Row], list[tuple[int, int, str]]]:
    """The new rows (and snapshots) of the checked format-1 rows (format 1 had no
    ``rules`` records: every command is decided under ``rules``)."""
    engine = engine_for(rules)
    out: list[store.Row] = []
    snaps: list[tuple[int, int, str]] = []
    prev_old, prev_mac, state = OLD_GENESIS, GENESIS, TableState()
    for number, at_text, actor, kind, payload, prev_hash, hash_ in rows:
        problem = _refusal(number)
        if number != len(out) + 1 or prev_hash != prev_old:
            raise problem("the format-1 chain is broken here")
        if old_hash(prev_old, number, at_text, actor, kind, payload) != hash_:
            raise problem("the format-1 record does not match its hash")
        at = to_ms(at_text)
        if at is None:
            raise problem("the format-1 record has no readable time")
        data = json.loads(payload)
        if number == 1:
            body = canonical(genesis)
        elif kind == "command":
            command = command_from_dict(data["command"])
            outcome = engine.apply(state, command)
            if canonical([e.to_dict() for e in outcome.events]) != canonical(data["events"]):
                raise problem("the rules give other events than format 1 stored")
            state = outcome.state
            body = encode_command(command, at)
        elif kind in ("start", "mode", "halt"):
            body = payload
        else:
            raise problem(f"a format-1 {kind} record cannot be moved forward")
        actor = clean_actor(actor)
        snap = canonical(state.to_dict()) if number % snapshot_every == 0 else None
        mac = seal(key, prev_mac, number, at, actor, kind, body, snap)
        out.append(store.Row(number, at, actor, kind, body, int(snap is not None), mac))
        if snap is not None:
            snaps.append((number, state.hand, snap))
        prev_old, prev_mac = hash_, mac
    return out, snaps


def migrate(
    path: Path, key_file: Path, rules: FireBetRules, actor: str, snapshot_every: int
) -> Migrated:
    """Move the format-1 or format-2 journal at ``path`` to format 3 (see the module
    docstring)."""
    found = format_of(path)
    if found == "2":
        return _pack(path, key_file, rules, actor)
    files = F.JournalFiles(path)
    if not is_format_1(path):
        raise FirebetError(
            f"{path} is not a format-1 or format-2 journal (format {found}): nothing to migrate"
        )
    lock = writer_lock.take(files.lock)
    try:
        db = sqlite3.connect(path, isolation_level=None)
        try:
            rows = db.execute(
                "SELECT record, at, actor, kind, payload, prev_hash, hash FROM records "
                "ORDER BY record"
            ).fetchall()
        finally:
            db.close()
        if not rows:
            raise JournalIntegrityError(None, f"{path} holds no records")
        key = read_key(key_file) if key_file.exists() else make_key(key_file)
        stamp = F.stamp_now()
        old_head = str(rows[-1][6])
        genesis = {
            "format": FORMAT,
            "migrated": {
                "from_format": 1,
                "records": len(rows),
                "old_chain_head": old_head,
                "aside": f"{F.ASIDE_PREFIX}{stamp}",
                "by": actor,
            },
        }
        new_rows, snaps = _convert(rows, rules, key, genesis, snapshot_every)
        new = path.with_name(path.name + ".migrating")
        store.create(new, key, new_rows[0].at, new_rows[0].actor, new_rows[0].body)
        db = sqlite3.connect(new, isolation_level=None)
        try:
            db.execute("BEGIN")
            db.execute("DELETE FROM records")
            db.executemany(store.INSERT_RECORD, [store.stored(row) for row in new_rows])
            db.executemany("INSERT INTO snapshots VALUES (?, ?, ?)", snaps)
            db.execute("COMMIT")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            db.close()
        F.fsync_file(new)
        aside = files.move_aside(stamp)
        new.replace(path)
        F.write_head_new(files.head, key, new_rows[-1].record, new_rows[-1].mac)
    finally:
        if lock is not None:
            writer_lock.release(lock)
    return Migrated(len(rows), old_head, aside)


def _pack(path: Path, key_file: Path, rules: FireBetRules, actor: str) -> Migrated:
    """Format 2 to 3: the records copied with their bodies packed, the copy checked from
    genesis with the key, then put in place and the move journaled."""
    from controller.journal.journal import Journal  # here: journal imports this module's kin
    from controller.journal.parallel import workers
    from controller.journal.recovery import recover, verify

    files = F.JournalFiles(path)
    new = path.with_name(path.name + ".migrating")
    new_files = F.JournalFiles(new)
    lock = writer_lock.take(files.lock)
    try:
        key = read_key(key_file)
        for leftover in (new, new_files.wal, new_files.shm, new_files.head, new_files.lock):
            leftover.unlink(missing_ok=True)
        last = _copy_packed(path, new)
        if last is None:
            raise JournalIntegrityError(None, f"{path} holds no records")
        records, mac = last
        F.write_head_new(new_files.head, key, records, mac)
        try:
            with Journal(new, key_file=key_file, read_only=True) as copy:
                recovered = recover(copy, rules)
                report = verify(copy, rules, processes=workers())
            problem = (
                (None, recovered.halted.describe())
                if recovered.halted is not None
                else (report.problems[0] if not report.ok else None)
            )
            if problem is not None:
                raise JournalIntegrityError(
                    problem[0],
                    f"{problem[1]}; the format-2 journal does not verify, so it was not "
                    "migrated (firebet journal verify names the damage)",
                )
        except BaseException:
            for made in (new, new_files.wal, new_files.shm, new_files.head, new_files.lock):
                made.unlink(missing_ok=True)
            raise
        for made in (new_files.wal, new_files.shm, new_files.head, new_files.lock):
            made.unlink(missing_ok=True)
        stamp = F.stamp_now()
        aside = files.move_aside(stamp)
        new.replace(path)
        F.fsync_dir(path.parent)
        F.write_head_new(files.head, key, records, mac)
    finally:
        if lock is not None:
            writer_lock.release(lock)
    with Journal(path, key_file=key_file) as journal:
        state = recover(journal, rules).state
        journal.append_system(
            RecordKind.START,
            actor=clean_actor(actor),
            state=state,
            payload={
                "format": FORMAT,
                "migrated": {
                    "from_format": 2,
                    "records": report.records,
                    "chain_head": mac.hex(),
                    "aside": aside.name,
                    "by": actor,
                },
            },
        )
    return Migrated(report.records, mac.hex(), aside, from_format=2)


def _copy_packed(path: Path, new: Path) -> tuple[int, bytes] | None:
    """Every record, snapshot and request of the format-2 journal ``path`` into a new
    format-3 file ``new``, each body packed (recipe.pack_body); the last record's number
    and MAC (None: it holds none)."""
    db = sqlite3.connect(new, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.create_function("pack_body", 1, pack_body, deterministic=True)
        db.execute("ATTACH DATABASE ? AS old", (str(path),))
        db.executescript("BEGIN;" + store.SCHEMA + store.REQUESTS + ";")
        db.execute("INSERT INTO meta SELECT key, value FROM old.meta")
        db.execute("UPDATE meta SET value = ? WHERE key = 'format'", (str(FORMAT),))
        db.execute(
            f"INSERT INTO records ({store.RAW_COLUMNS}) SELECT record, at, actor, kind, "
            "pack_body(body), snap, mac FROM old.records ORDER BY record"
        )
        db.execute("INSERT INTO snapshots SELECT record, hand, state FROM old.snapshots")
        if db.execute("SELECT 1 FROM old.sqlite_master WHERE name = 'requests'").fetchone():
            db.execute("INSERT INTO requests SELECT uid, id, digest, record FROM old.requests")
        else:  # made from the records, as a writer opening it would
            db.execute("DROP TABLE requests")
        db.execute("COMMIT")
        db.execute("DETACH DATABASE old")
        last = db.execute("SELECT record, mac FROM records ORDER BY record DESC LIMIT 1").fetchone()
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    F.fsync_file(new)
    return (int(last[0]), bytes(last[1])) if last is not None else None
