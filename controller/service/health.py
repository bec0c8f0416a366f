"""The journal's and the disk's health while the table plays.

At start the service checks the disk; after ready it verifies the whole journal in a
process of its own (recovery read only the tail); while idle it watches the journal's
files; in a storage fault it probes until the journal can be written again. What each
finds reaches the engine thread as a halt or a storage fault. See ``docs/journal.md``
(halts and faults) and ``docs/runbook.md``.
"""

from __future__ import annotations

import logging
import shutil
from typing import TYPE_CHECKING

from controller.journal import JournalWriteError, ReadOnly
from controller.service.jobs import Halt
from controller.service.recall import verify_apart

if TYPE_CHECKING:
    from controller.service.controller import Controller

log = logging.getLogger("firebet.service")

MIN_FREE_BYTES = 16 * 1024 * 1024  # below this the self-check warns: rolls may soon be refused


def recover(table: Controller) -> int:
    """At start: recover the opened journal into the engine; a read-only file system is a
    storage fault (a damaged journal halts by itself). The first record this run decides."""
    assert table.journal is not None
    recovered = table.journal.recover(table.engine)
    if recovered.halted is not None:
        log.error("journal halted: %s", recovered.halted.describe())
    elif table.journal.read_only is ReadOnly.FILE_SYSTEM:
        table.storage_fault = table.journal.read_only_reason()
        log.error("storage fault: %s; rolls are refused until it is writable", table.storage_fault)
    return recovered.last_record + 1


def check_whole_journal(table: Controller) -> None:
    """After ready: verify every record from genesis (recovery read only the tail).

    Runs in a process of its own (:func:`controller.service.recall.verify_apart`), on its
    own read-only connection, so the table plays on meanwhile and its engine thread never
    waits for the walk; damage found goes to the engine thread as a halt.
    """
    assert table.journal is not None
    table.full_check = "running"
    outcome, record, reason = verify_apart(table.journal, table.config.firebet)
    if outcome == "error":
        table.full_check = f"could not run: {reason}"
        return
    if outcome == "ok":
        table.full_check = "ok"
        return
    table.full_check = f"record {record}: {reason}"
    table.queue.put(Halt(record, reason))


def self_check(table: Controller) -> None:
    """At start: a storage fault if the state directory cannot be read, a warning if it is
    nearly full."""
    try:
        free = shutil.disk_usage(table.state_dir).free
    except OSError as exc:
        table.storage_fault = f"state directory {table.state_dir}: {exc.strerror or exc}"
        return
    if free < MIN_FREE_BYTES:
        log.warning("only %d bytes free in %s", free, table.state_dir)


def probe_storage(table: Controller) -> None:
    """In a storage fault: can the journal be written again? Then play resumes by itself.

    The probe is a journal record of its own (``mode``, the fault that ended), so the
    end of the fault is on record too.
    """
    journal = table.journal
    if journal is None or journal.halted is not None or table.storage_fault is None:
        return
    if journal.read_only is ReadOnly.FILE_SYSTEM:
        if not journal.writable_again():
            return
        journal.recover(table.engine)  # open it again for writing (nothing was written)
        if journal.halted is not None or journal.read_only is ReadOnly.FILE_SYSTEM:
            table.refresh()
            return
    was = table.storage_fault
    try:
        journal.append_system("mode", actor="service", payload={"storage_fault": None, "was": was})
    except JournalWriteError as exc:
        table.storage_fault = exc.reason
        return
    table.storage_fault = None
    log.warning("storage fault over (%s): the journal is written again, play resumes", was)
    table.refresh()


def watch_journal(table: Controller) -> None:
    """While idle: halt when a journal file was removed or replaced under the table."""
    if table.journal is None or table.journal.halted is not None:
        return
    if table.journal.watch() is not None:
        log.error("journal halted: %s", table.journal.halted)
        table.refresh()
