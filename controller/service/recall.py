"""Game recall for the control socket's ``history``: off the engine thread, never waited for.

The recall answers on the socket's reading lane (one thread), from the journal on a
read-only connection of its own: it never waits for the engine and the engine never
waits for it (WAL readers do not block the writer). It remembers where each hand began,
so a request reads the new records and the hands asked, never the whole journal. See
``docs/architecture.md`` (the control socket) and ``docs/journal.md``.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from controller.control.protocol import Request
from controller.core.config import FireBetRules
from controller.core.engine import Engine
from controller.core.errors import FirebetError, UsageError
from controller.journal import Journal
from controller.journal.history import MAX_HANDS, Recall, connect_read_only
from controller.service.requests import int_arg


class HistoryRecall:
    """The last hands of the journal, on the reading lane's own connection."""

    def __init__(self, rules: FireBetRules, default_hands: int) -> None:
        self.rules = rules
        self.default_hands = default_hands
        self._recall = Recall(Engine(rules))
        self._conn: sqlite3.Connection | None = None
        self._inode: tuple[int, int] | None = None
        # the last answer, by (last record, hands): asked again with nothing new, it stands
        self._cache: tuple[tuple[int, int], list[dict[str, Any]]] | None = None

    def history(self, journal: Journal, request: Request) -> dict[str, Any]:
        """The reply to ``history``: ``{"ok": true, "hands": [...]}``, newest hand last."""
        hands = int_arg(request.args, "hands", self.default_hands)
        if not 1 <= hands <= MAX_HANDS:
            raise UsageError(f"hands must be from 1 to {MAX_HANDS}, not {hands}")
        key = (journal.last_record, hands)
        cached = self._cache
        if cached is not None and cached[0] == key:  # nothing new: the same answer, no reading
            return {"ok": True, "hands": cached[1]}
        try:
            db = self._db(journal)
            lines = self._recall.history(db, hands, request.deadline)
            self._cache = (key, lines)
            return {"ok": True, "hands": lines}
        except sqlite3.Error as exc:
            self.close()
            raise FirebetError(f"the journal cannot be read for history: {exc}") from exc

    def _db(self, journal: Journal) -> sqlite3.Connection:
        """The recall's connection, reopened when the journal file was replaced."""
        st = os.stat(journal.path)
        if self._conn is None or self._inode != (st.st_dev, st.st_ino):
            self.close()
            self._conn = connect_read_only(journal.path)
            self._inode = (st.st_dev, st.st_ino)
        return self._conn

    def close(self) -> None:
        """Close the connection and forget what the recall knew (a fresh start next time)."""
        if self._conn is not None:
            self._conn.close()
        self._conn, self._inode = None, None
        self._recall = Recall(Engine(self.rules))
        self._cache = None
