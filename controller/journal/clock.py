"""The journal's clock: the time a record is stamped with (UTC, milliseconds)."""

from __future__ import annotations

import time

from controller.journal.recipe import iso


def now_ms() -> int:
    """The journal's clock: milliseconds since the epoch, UTC."""
    return time.time_ns() // 1_000_000


def now_iso() -> str:
    """The journal's clock as ISO 8601 text (UTC, milliseconds)."""
    return iso(now_ms())
