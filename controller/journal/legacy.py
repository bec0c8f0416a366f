"""Format 1 (plain SHA-256, events stored, before the keyed chain) and moving it forward.

``firebet journal migrate`` checks the whole format-1 chain with its own recipe,
refuses a journal that does not verify (``firebet journal init`` sets such a one
aside instead), and writes every record again in format 2 under the table's
key: same numbers, times, actors and kinds; a command record keeps its command
(the rules give its events again, and must give the very events format 1
stored, else the migration is refused). The old files move, whole, into
``journal-aside-<time>/``; the new genesis record names them, the old chain head
and who migrated.
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
    canonical,
    clean_actor,
    encode_command,
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
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
    except sqlite3.Error:
        return False
    finally:
        db.close()
    return row is not None and row[0] == "1"


@dataclass(frozen=True)
class Migrated:
    """What ``journal migrate`` did."""

    records: int
    old_head: str
    aside: Path


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
    """The format-2 rows (and snapshots) of the checked format-1 rows (format 1 had no
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
    """Move the format-1 journal at ``path`` to format 2 (see the module docstring)."""
    files = F.JournalFiles(path)
    if not is_format_1(path):
        raise FirebetError(f"{path} is not a format-1 journal: nothing to migrate")
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
            db.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", new_rows)
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
