"""Halted: why the journal stopped taking game records, and how a technician resumes.

A halt is journaled (a ``halt`` record) or, when the journal cannot be written
(its files are missing or removed), kept in the marker file beside it; either
way it survives restarts. ``clear-halt`` resumes from the longest prefix that
verifies from the genesis record: what comes after it (damaged, unproven or
lost records, and their snapshots) is set aside, named in the ``clear_halt``
record, and never folded into the game again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.core.state import TableState


@dataclass(frozen=True)
class Halt:
    """Why the journal is halted: the first bad ``record`` (None: the files themselves)."""

    record: int | None
    reason: str
    at: str = ""
    journaled: int | None = None  # the number of the ``halt`` record, when there is one

    def describe(self) -> str:
        """One line for a technician."""
        where = f"record {self.record}: " if self.record is not None else ""
        if self.reason.startswith(f"record {self.record} ") or self.reason.startswith(
            f"record {self.record}:"
        ):
            where = ""  # the reason names the record itself: never "record 13: record 13"
        return f"{where}{self.reason}"


@dataclass(frozen=True)
class Resumption:
    """What a clear-halt resumes from and what it sets aside."""

    resume_from: int  # the last record of the verified prefix
    state: TableState  # the state after it
    last_known: int  # the highest record number ever written (stored or lost)
    snapshots_aside: tuple[int, ...]  # snapshots past the prefix, never adopted

    @property
    def records_aside(self) -> tuple[int, int] | None:
        """The first and last record set aside (None: nothing)."""
        if self.last_known <= self.resume_from:
            return None
        return self.resume_from + 1, self.last_known

    def payload(self, halt: Halt, note: str) -> dict[str, Any]:
        """The body of the ``clear_halt`` record."""
        aside = self.records_aside
        return {
            "cleared": {"record": halt.record, "reason": halt.reason},
            "note": note,
            "resume_from": self.resume_from,
            "set_aside": {
                "records": list(aside) if aside else None,
                "snapshots": list(self.snapshots_aside),
            },
            "resume_state": self.state.to_dict(),
        }


def describe_clear(data: dict[str, Any]) -> str:
    """What a ``clear_halt`` record did, in a technician's words."""
    aside = data.get("set_aside") or {}
    records = aside.get("records")
    snaps = aside.get("snapshots") or []
    parts = [f"resumed from record {data.get('resume_from')}"]
    if records:
        first, last = records
        what = f"record {first}" if first == last else f"records {first}..{last}"
        parts.append(f"set aside {what} (kept in the file, never replayed)")
    else:
        parts.append("set aside no records")
    if snaps:
        parts.append("set aside the snapshot(s) at record " + ", ".join(str(s) for s in snaps))
    return "; ".join(parts)
