"""The journal: the table's durable, append-only, keyed hash chain (docs/journal.md).

Modules: :mod:`.recipe` (how a record is written and sealed), :mod:`.key`
(the table's secret), :mod:`.files` (the files in the state directory),
:mod:`.store` (SQLite), :mod:`.opening` (the checks when a journal is
opened), :mod:`.walk` (recovery and verify), :mod:`.clock`, :mod:`.appending`
(sealing and committing a record, halting), :mod:`.writer` (opening and
recovery), :mod:`.halt`, :mod:`.history`, :mod:`.journal` (the
:class:`Journal` the service uses), :mod:`.init` (a new journal by a
technician) and :mod:`.legacy` (format 1).
"""

from controller.core.errors import (
    JournalHalted,
    JournalIntegrityError,
    JournalKeyUnreadable,
    JournalWriteError,
)
from controller.journal.appending import ReadOnly
from controller.journal.halt import Halt, describe_clear
from controller.journal.journal import Journal, VerifyReport
from controller.journal.recipe import canonical, iso
from controller.journal.record import Record, parse_time
from controller.journal.writer import Recovered, now_iso, now_ms

__all__ = [
    "Halt",
    "Journal",
    "JournalHalted",
    "JournalIntegrityError",
    "JournalKeyUnreadable",
    "JournalWriteError",
    "ReadOnly",
    "Record",
    "Recovered",
    "VerifyReport",
    "canonical",
    "describe_clear",
    "iso",
    "now_iso",
    "now_ms",
    "parse_time",
]
