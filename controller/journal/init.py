"""``firebet journal init``: a technician's new journal over a damaged one.

The damaged files move, whole, into ``journal-aside-<time>/`` in the state
directory (nothing is deleted); the new journal's first record says who did it,
why, and where the old files went. Refused while a service holds the journal,
and over a journal that is not damaged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from controller.clock import now_ms
from controller.core.config import FireBetRules
from controller.core.errors import FirebetError, UsageError
from controller.journal import files as F
from controller.journal import store
from controller.journal.journal import Journal
from controller.journal.key import make_key, read_key
from controller.journal.opening import writer_lock
from controller.journal.recipe import FORMAT, canonical, clean_actor
from controller.journal.recovery import recover, verify

log = logging.getLogger("firebet.journal")


@dataclass(frozen=True)
class Initialised:
    """What ``journal init`` did."""

    aside: Path | None  # where the old files went (None: there were none)
    moved: tuple[str, ...]
    key_made: bool


def damage_of(journal: Journal, rules: FireBetRules) -> str | None:
    """Why ``journal`` needs a new one (None: it is healthy and must be kept)."""
    if not journal.path.exists() and not journal.files.traces():
        return None
    recovered = recover(journal, rules)
    if recovered.halted is not None:
        return recovered.halted.describe()
    report = verify(journal, rules)
    if not report.ok:
        record, reason = report.problems[0]
        return f"record {record}: {reason}" if record is not None else reason
    return None


def init_journal(journal: Journal, rules: FireBetRules, actor: str, reason: str) -> Initialised:
    """Move the damaged journal aside and start a new one, recorded with who and why."""
    if not reason.strip():
        raise UsageError("journal init needs --reason: what happened to the old journal")
    with journal:
        if journal.path.exists() or journal.files.traces():
            damage = damage_of(journal, rules)
            if damage is None:
                raise FirebetError(
                    f"the journal {journal.path} is healthy (firebet journal verify says OK): "
                    "journal init replaces only a damaged journal"
                )
        else:
            damage = None
    files = journal.files
    files.db.parent.mkdir(parents=True, exist_ok=True)
    lock = writer_lock.take(files.lock)
    try:
        moved = tuple(
            p.name for p in (files.db, files.wal, files.shm, files.head, files.marker) if p.exists()
        )
        aside = files.move_aside(F.stamp_now()) if moved else None
        key_made = not journal.key_file.exists()
        key = make_key(journal.key_file) if key_made else read_key(journal.key_file)
        body = {
            "format": FORMAT,
            "init": {
                "reason": reason,
                "damage": damage,
                "aside": aside.name if aside is not None else None,
                "moved": list(moved),
                "key": "made" if key_made else "kept",
            },
        }
        mac = store.create(files.db, key, now_ms(), clean_actor(actor), canonical(body))
        F.write_head_new(files.head, key, 1, mac)
    finally:
        if lock is not None:
            writer_lock.release(lock)
    log.warning("journal init by %s: %s (old files in %s)", actor, reason, aside)
    return Initialised(aside, moved, key_made)
