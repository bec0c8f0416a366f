"""What the engine thread publishes, and the ``status --json`` report made from it.

The engine thread publishes a :class:`Published` snapshot after every change; status
readers on other threads (the control socket's ``status`` lane, the floor link, sd_notify)
read that snapshot, never the live state. The report's keys are the command-line contract
(``docs/runbook.md`` shows them; ``firebet status --json``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.commands import ReaderFaultCode
from controller.core.events import Event, RollVoided, Settlement
from controller.core.lamps import LightsView, Mode, Outputs, marker_report
from controller.core.state import TableState

SEQ_CONFLICT = ReaderFaultCode.SEQ_CONFLICT


@dataclass(frozen=True)
class Published:
    """What the engine thread last published for readers on other threads."""

    state: TableState
    mode: Mode
    outputs: Outputs
    view: LightsView
    halted: str | None
    storage_fault: str | None
    last_settlement: dict[str, Any] | None
    rules: dict[str, Any] | None = None  # the rules record in force: when, what changed
    proof: dict[str, Any] | None = None  # halted: what the shown figures rest on (below)
    # the record of the HELLO that named the reader's model and firmware, and whether the
    # service heard it since this start (:func:`reader_identity`)
    hello_record: int | None = None
    hello_heard: bool = False


def reader_identity(
    s: TableState, reader: dict[str, Any], *, record: int | None, heard: bool
) -> dict[str, Any]:
    """``status --json`` ``reader.model``, ``firmware``, ``firmware_seen``, ``firmware_record``:
    what the reader's last journaled HELLO said (in ``s``; ``record``: that HELLO's record)
    and how the service knows it is the reader's now (``docs/reader-protocol.md``, "HELLO:
    model and firmware"): ``"this_run"`` it heard that HELLO since this start (``heard``);
    ``"session"`` (protocol 3) frames of the session that HELLO opened came since this start
    (``reader`` says so), so the reader has not restarted since; ``"journal"`` neither: only
    the journal's word, the reader may have restarted unheard since (protocols 1 and 2)
    with other firmware. None: no HELLO named them."""
    seen: str | None = None
    if s.reader_model or s.reader_firmware:
        seen = "journal"
        if heard:
            seen = "this_run"
        elif s.reader_session and reader.get("session") == s.reader_session:
            seen = "session" if reader.get("session_heard") else seen
    return {
        "model": s.reader_model or None,
        "firmware": s.reader_firmware or None,
        "firmware_seen": seen,
        "firmware_record": record if seen else None,
    }


def verified_state(state: TableState, record: int) -> dict[str, Any]:
    """``status --json`` ``last_verified``: the table's figures after ``record``, the last
    record the halted journal proves."""
    return {
        "record": record,
        "hand": state.hand,
        "phase": state.phase.value,
        "point": state.point,
        "points": list(state.points),
        "unique_points": state.unique_points,
        "bets": {str(pos): amount for pos, amount in sorted(state.bets.items())},
        "rolls": state.rolls,
        "meters": state.meters.to_dict(state.rolls),
    }


class ShownSettlement:
    """The settlement ``status`` shows last, and the one before it: a void that reverses the
    last seven-out puts its hand back in play, so the one before is shown again."""

    def __init__(self) -> None:
        self.last: dict[str, Any] | None = None
        self._before: dict[str, Any] | None = None

    def note(self, events: Sequence[Event]) -> None:
        """Take in what a recorded command's events settled or reversed."""
        for event in events:
            if isinstance(event, Settlement):
                self._before = self.last
                self.last = event.report() | {
                    "immediate": event.immediate,
                    "wagers": {str(p): a for p, a in sorted(event.wagers.items())},
                }
            elif isinstance(event, RollVoided) and event.reversed_settlement is not None:
                self.last, self._before = self._before, None


def status_line(p: Published) -> str:
    """The one line systemd shows for the service (sd_notify STATUS)."""
    s = p.state
    point = f"point {s.point}" if s.point else s.phase.value.replace("_", " ")
    return f"{p.mode}: hand {s.hand}, {point}, {s.unique_points} different points, {s.rolls} rolls"


def status_report(
    p: Published,
    *,
    table: str,
    ready: bool,
    reader: dict[str, Any],
    journal_check: str | None,
    program: dict[str, Any] | None,
    floor: dict[str, Any],
    at: str,
) -> dict[str, Any]:
    """``status --json``: the published snapshot with what the caller reads now, ``at``
    the time it was read (ISO 8601 UTC, milliseconds: the service's clock)."""
    s = p.state
    if s.reader_conflict is not None and not reader.get("fault"):
        reader["fault"] = SEQ_CONFLICT
        reader["reason"] = (
            f"ROLL seq {s.reader_conflict} came again with other dice; the reader's rolls "
            "are refused until it restarts (HELLO)"
        )
    return {
        "table": table,
        "at": at,
        "mode": p.mode,
        "ready": ready,
        "phase": s.phase.value,
        "point": s.point,
        "hand": s.hand,
        "shooter": s.shooter,
        "points": list(s.points),
        "unique_points": s.unique_points,
        "betting_open": s.betting_open,
        "bets": {str(pos): amount for pos, amount in sorted(s.bets.items())},
        "surrender_pending": s.surrender_pending,
        "last_roll": list(s.last_roll) if s.last_roll else None,
        "rolls": s.rolls,
        "surveillance_alert": s.surveillance_alert,
        "alert_hand": s.alert_hand,
        "surveillance_confirmed": (
            {"hand": s.alert_hand, "by": s.confirmed_by} if s.confirmed_by is not None else None
        ),
        # every hand's alert the table keeps, oldest first: who confirmed it (None: open)
        "surveillance_alerts": [{"hand": h, "confirmed_by": by} for h, by in s.alerts()],
        "held_rolls": [h.to_dict() for h in s.held],
        # a void armed a correction: the dice it voided (None: no correction waits)
        "correction_pending": list(s.correcting) if s.correcting is not None else None,
        "holding_reader_rolls": s.hold_reader or s.reader_faulted,
        "markers": marker_report(p.view, p.outputs),
        "reader": reader | reader_identity(s, reader, record=p.hello_record, heard=p.hello_heard),
        "meters": s.meters.to_dict(s.rolls),
        "halted": p.halted,
        "storage_fault": p.storage_fault,
        "last_settlement": p.last_settlement,
        "journal_check": journal_check,
        "program": program,
        "floor": floor,
        "rules": p.rules,
        # halted: whether every figure above rests on records before the break, and the
        # last verified figures when not (docs/journal.md, "What a halted table shows")
        **(p.proof or {"verified": True, "break": None, "last_verified": None}),
    }
