"""The floor link's outbox bookkeeping: where in the journal to start, and the window.

The journal is the outbox (docs/floor.md). The link starts after the durable
cursor when the journal still holds the record it names with the same chain hash
(:func:`checked_cursor`), keeps at most ``size`` records published and not yet
acknowledged (:class:`Window`), and moves the cursor over the front of the window
only, so a record is never passed over before every record ahead of it arrived.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

from paho.mqtt.reasoncodes import ReasonCode

from controller.journal import Journal
from controller.link.cursor import Cursor, CursorError, CursorFile


def head(reader: Journal) -> int:
    """The number of the journal's last record (0 when it has none)."""
    last = reader.last()
    return last.record if last is not None else 0


def checked_cursor(cursor_file: CursorFile, reader: Journal) -> tuple[Cursor, str | None]:
    """The saved cursor when ``reader``'s journal holds its record with its chain hash;
    else the cursor before record 1, with the reason."""
    try:
        cursor = cursor_file.load()
    except CursorError as exc:
        return Cursor(), f"{exc}; publishing from record 1 again"
    if cursor.record == 0:
        return cursor, None
    found = reader.batch(cursor.record - 1, 1)
    if not found or found[0].record != cursor.record or found[0].hash != cursor.chain:
        return Cursor(), (
            f"the journal has no record {cursor.record} with the chain hash the floor "
            "cursor remembers (a new journal?): publishing from record 1 again"
        )
    return cursor, None


@dataclass
class _InFlight:
    mid: int
    record: int
    chain: str
    acked: bool = False


class Window:
    """The records published and not yet acknowledged, in record order."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("window must be at least 1")
        self.size = size
        self._order: collections.deque[_InFlight] = collections.deque()
        self._by_mid: dict[int, _InFlight] = {}

    def __len__(self) -> int:
        return len(self._order)

    def room(self) -> int:
        """How many more records may be published now."""
        return self.size - len(self._order)

    def add(self, mid: int, record: int, chain: str) -> None:
        """Record ``record`` (chain hash ``chain``) went out as message ``mid``."""
        entry = _InFlight(mid, record, chain)
        self._order.append(entry)
        self._by_mid[mid] = entry

    def ack(self, mid: int, reason: ReasonCode) -> int | None:
        """Take the broker's answer to message ``mid``: the record it refused, else None.

        A mid that is not in the window (the online message, a record given up after a
        refusal) is ignored.
        """
        entry = self._by_mid.pop(mid, None)
        if entry is None:
            return None
        if reason.is_failure:
            return entry.record
        entry.acked = True
        return None

    def advance(self, cursor: Cursor) -> Cursor | None:
        """Drop the acknowledged records at the front: the cursor after them, or None
        when it does not move past ``cursor``."""
        moved: Cursor | None = None
        while self._order and self._order[0].acked:
            entry = self._order.popleft()
            if entry.record > (moved or cursor).record:
                moved = Cursor(entry.record, entry.chain)
        return moved

    def clear(self) -> None:
        """Give up every record in the window (they go again from the cursor)."""
        self._order.clear()
        self._by_mid.clear()
