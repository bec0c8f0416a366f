"""What the floor's ingest keeps of each table in memory, and what a batch changed.

Owned by the ingest thread (:class:`controller.floor.ingest.Ingest`);
:class:`Changes` goes to the console's live updates.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from controller.core.state import TableState
from controller.floor.audit import Checkpoint, TableAudit
from controller.floor.store import TableRow
from controller.wire.messages import FloorRecord

QUARANTINE_AFTER = 10  # bad messages ...
QUARANTINE_WITHIN_S = 60.0  # ... this close together quarantine a table
CHECKPOINT_EVERY = 1000
"""The floor keeps its own fold of a table after every this many records, so a
``clear_halt`` resuming from any record is checked by folding at most this many."""
CHECKPOINTS_KEPT = 4096
"""Checkpoints kept a table (the oldest go first; before them a fold runs apart)."""
BACKLOG_AFTER = 10
"""Open 5th-point alerts at one table that make a backlog alert: the table raises them
faster than surveillance confirms them (a reader or a table to look at, or an attack)."""


@dataclass
class Changes:
    """What a batch changed, for the console's live updates."""

    tables: set[str] = field(default_factory=set)
    alerts: bool = False
    hands: dict[str, set[int]] = field(default_factory=dict)
    records: dict[str, int] = field(default_factory=dict)  # table -> newest contiguous record

    def merge(self, other: Changes) -> None:
        self.tables |= other.tables
        self.alerts = self.alerts or other.alerts
        for table, hands in other.hands.items():
            self.hands.setdefault(table, set()).update(hands)
        self.records.update(other.records)

    def __bool__(self) -> bool:
        return bool(self.tables or self.alerts or self.hands)


@dataclass
class TableLive:
    """One table as the ingest thread keeps it in memory."""

    row: TableRow
    audit: TableAudit
    above: set[int] = field(default_factory=set)  # stored numbers past the first gap
    fresh: dict[int, FloorRecord] = field(default_factory=dict)  # stored in this batch
    highest: int = 0
    gap_since: float | None = None
    gap_at: int = 0  # contiguous when the gap was first seen
    resend_from: int | None = None
    resend_at: float = 0.0
    resends: int = 0
    repeats: int = 0
    bad_times: deque[float] = field(default_factory=lambda: deque(maxlen=QUARANTINE_AFTER))
    behind_since: float | None = None  # when the floor first saw it behind its head
    checkpoints: dict[int, Checkpoint] = field(default_factory=dict)  # every CHECKPOINT_EVERY
    folds: dict[int, TableState | None] = field(default_factory=dict)  # folded apart, by record
    folding: int | None = None  # the record a fold apart is under way to (its audit waits)

    @property
    def head(self) -> int:
        """The newest record the floor knows the table has."""
        return max(self.highest, self.row.announced or 0, self.row.contiguous)

    @property
    def missing(self) -> tuple[int, int] | None:
        """The first run of missing record numbers, when there is one."""
        first = self.row.contiguous + 1
        if self.head < first:
            return None
        later = [n for n in self.above if n > first]
        return first, (min(later) - 1 if later else self.head)
