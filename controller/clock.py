"""The program's one clock: the time a command, a record or a floor message is stamped
with (UTC, milliseconds). Drivers, the journal, the link and the floor all read it here;
the rules core never does (its import contract forbids ``time``)."""

from __future__ import annotations

import time

from controller.core.times import iso


def now_ms() -> int:
    """Milliseconds since the epoch, UTC."""
    return time.time_ns() // 1_000_000


def now_iso() -> str:
    """The time now as ISO 8601 text (UTC, milliseconds: ``2026-11-30T08:15:00.123+00:00``)."""
    return iso(now_ms())
