"""The journal: the table's durable, append-only, keyed hash chain (docs/journal.md).

Modules: :mod:`.recipe` (how a record is written and sealed, the record kinds),
:mod:`.key` (the table's secret), :mod:`.files` (the files in the state directory),
:mod:`.store` (SQLite), :mod:`.opening` (the checks when a journal is opened),
:mod:`.journal` (the :class:`Journal`: it stores and reads records), :mod:`.replay` (what
the records mean: the one replay every reader of the journal uses), :mod:`.walk` (the
replay along the chain, seals checked), :mod:`.recovery` (recovery, the full check,
clear-halt), :mod:`.parallel` (the full check on every core), :mod:`.halt`,
:mod:`.handlog` (the hands as a recall shows them), :mod:`.history` (game recall),
:mod:`.init` (a new journal by a technician) and :mod:`.legacy` (format 1).
"""

from controller.clock import now_iso, now_ms
from controller.core.errors import (
    JournalHalted,
    JournalIntegrityError,
    JournalKeyUnreadable,
    JournalWriteError,
)
from controller.journal.halt import Halt, describe_clear
from controller.journal.journal import Journal, ReadOnly, RequestIndex
from controller.journal.recipe import RecordKind, canonical, iso
from controller.journal.record import Record, parse_time
from controller.journal.recovery import (
    Recovered,
    SetAside,
    VerifyReport,
    clear_halt,
    preview_clear_halt,
    recover,
    verify,
)
from controller.journal.replay import Replay, Step

__all__ = [
    "Halt",
    "Journal",
    "JournalHalted",
    "JournalIntegrityError",
    "JournalKeyUnreadable",
    "JournalWriteError",
    "ReadOnly",
    "Record",
    "RecordKind",
    "Recovered",
    "Replay",
    "RequestIndex",
    "SetAside",
    "Step",
    "VerifyReport",
    "canonical",
    "clear_halt",
    "describe_clear",
    "iso",
    "now_iso",
    "now_ms",
    "parse_time",
    "preview_clear_halt",
    "recover",
    "verify",
]
