"""One journal record as tools see it: export, history, doctor, the floor link."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controller.core.commands import Command
from controller.journal.recipe import decode_command, iso, to_ms
from controller.journal.store import Row


@dataclass(frozen=True)
class Record:
    """One record: ``payload`` is the stored body (canonical JSON), the hashes are hex."""

    record: int
    at: str
    actor: str
    kind: str
    payload: str
    prev_hash: str
    hash: str
    snapshot: str | None = None  # hex SHA-256 of the snapshot's state text, when it has one

    @classmethod
    def from_row(cls, row: Row, prev: bytes, state_text: str | None = None) -> Record:
        """The record of a stored row whose predecessor's MAC is ``prev``."""
        digest = hashlib.sha256(state_text.encode()).hexdigest() if state_text else None
        return cls(
            row.record, iso(row.at), row.actor, row.kind, row.body, prev.hex(), row.mac.hex(),
            digest,
        )  # fmt: skip

    def data(self) -> Any:
        """The body, parsed."""
        return json.loads(self.payload)

    def command(self) -> Command:
        """The command of a ``command`` record (raises ValueError for other kinds)."""
        if self.kind != "command":
            raise ValueError(f"record {self.record} is a {self.kind} record, not a command")
        at = to_ms(self.at)
        if at is None:
            raise ValueError(f"record {self.record} has no readable time")
        return decode_command(self.data(), self.actor, at)

    def to_dict(self) -> dict[str, Any]:
        """The export form: the body as JSON (as stored text if unreadable)."""
        try:
            payload = self.data()
        except ValueError:
            payload = self.payload
        return {
            "record": self.record,
            "at": self.at,
            "actor": self.actor,
            "kind": self.kind,
            "payload": payload,
            "snapshot": self.snapshot,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


def parse_time(text: str) -> datetime:
    """An ISO 8601 time; a time without a zone is taken as UTC."""
    value = datetime.fromisoformat(text)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
