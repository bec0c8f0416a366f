"""What the floor link reports under ``floor`` in ``status --json`` (docs/floor.md)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from controller.clock import now_iso, now_ms
from controller.core.times import iso

log = logging.getLogger("firebet.floor")


@dataclass
class LinkReport:
    """The floor link's counters and its last error, kept by the publisher thread.

    ``status --json`` reads them without a lock: each is a single assignment.
    """

    broker: str = ""
    connected: bool = False
    published: int = 0
    underived: int = 0  # command records published without events (a damaged journal)
    commands_refused: int = 0
    last_error: str | None = None
    last_error_at: str | None = None
    retry_at: str | None = None  # the link stopped: when it starts again (None: it runs)

    def error(self, text: str) -> None:
        """Keep ``text`` as the last error; log it when it differs from the one before."""
        if text != self.last_error:
            log.warning("floor link: %s", text)
        self.last_error, self.last_error_at = text, now_iso()

    def retry_in(self, seconds: float, why: str | None) -> None:
        """The link stopped (``why``, or the last error when None): it starts again in
        ``seconds``, which ``last_error`` says."""
        base = why or self.last_error or "the floor link stopped"
        base = base.split("; trying again in ")[0]
        self.error(f"{base}; trying again in {seconds:g} s")
        self.retry_at = iso(now_ms() + round(seconds * 1000))

    def to_dict(
        self, *, cursor: int | None, backlog: int | None, enabled: bool = True
    ) -> dict[str, Any]:
        """``status --json`` ``floor``: connected, cursor, backlog, last error."""
        return {
            "enabled": enabled,
            "broker": self.broker,
            "connected": self.connected,
            "cursor": cursor,
            "backlog": backlog,
            "published": self.published,
            "underived": self.underived,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "retry_at": self.retry_at,
            "commands_refused": self.commands_refused,
        }


def disabled_status() -> dict[str, Any]:
    """``floor`` in ``status --json`` of a table without a floor link."""
    return LinkReport().to_dict(cursor=None, backlog=None, enabled=False)
