"""The journal's and the disk's health, checked off the game's path.

At start the service checks the disk; after ready it verifies the whole journal in a
process of its own (recovery read only the tail) and hands what it found to the engine
thread as a queue item (:class:`~controller.service.jobs.Checked`), so only the engine
thread ever changes the table's mode. See ``docs/journal.md`` (halts and faults) and
``docs/runbook.md``.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from controller.core.config import FireBetRules
from controller.journal import Journal
from controller.service.jobs import Checked
from controller.service.recall import verify_apart

if TYPE_CHECKING:
    from controller.service.table import Table

log = logging.getLogger("firebet.service")

MIN_FREE_BYTES = 16 * 1024 * 1024  # below this the self-check warns: rolls may soon be refused


def check_whole_journal(
    journal: Journal, rules: FireBetRules, post: Callable[[Checked], None]
) -> None:
    """After ready (on a thread of its own): verify every record from genesis.

    Runs in a process of its own (:func:`controller.service.recall.verify_apart`), on its
    own read-only connection, so the table plays on meanwhile and its engine thread never
    waits for the walk; what it found goes to the engine thread (``post``).
    """
    outcome, record, reason = verify_apart(journal, rules)
    post(Checked(outcome, record, reason))


def self_check(table: Table, state_dir: Path) -> None:
    """At start: a storage fault if the state directory cannot be read, a warning if it is
    nearly full."""
    try:
        free = shutil.disk_usage(state_dir).free
    except OSError as exc:
        table.storage_fault = f"state directory {state_dir}: {exc.strerror or exc}"
        return
    if free < MIN_FREE_BYTES:
        log.warning("only %d bytes free in %s", free, state_dir)
