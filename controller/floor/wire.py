"""The floor link's messages as the floor reads and writes them (SPEC section 9).

Topics are ``<prefix>/<table>/<leaf>``; payloads are JSON. Everything a table
sends is checked here before the floor stores it: a message that does not have
the shape of the spec is a :class:`BadMessage` with the reason, never a crash.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

LEAVES = ("event", "state", "online", "command")
_CHAIN = re.compile(r"[0-9a-f]{64}")


class BadMessage(ValueError):
    """A message from a table that does not have the shape SPEC section 9 gives it."""


@dataclass(frozen=True)
class FloorRecord:
    """One journal record of one table, as published on ``<p>/<t>/event``."""

    table: str
    record: int
    at: str
    kind: str
    actor: str
    payload: Any
    chain: str
    events: Any = None  # what the table's engine decided (command records); None: not sent

    def message(self) -> dict[str, Any]:
        """The event message's JSON object."""
        body = {
            "table": self.table,
            "record": self.record,
            "at": self.at,
            "kind": self.kind,
            "actor": self.actor,
            "payload": self.payload,
            "chain": self.chain,
        }
        if self.events is not None:
            body["events"] = self.events
        return body


@dataclass(frozen=True)
class Online:
    """A table's presence: ``{"online": true, "program", "record"}`` or the will."""

    online: bool
    program: str | None = None
    record: int | None = None


def topic(prefix: str, table: str, leaf: str) -> str:
    """The topic of ``leaf`` for ``table``."""
    return f"{prefix}/{table}/{leaf}"


def subscriptions(prefix: str) -> list[str]:
    """The topic filters the floor subscribes to."""
    return [f"{prefix}/+/{leaf}" for leaf in ("event", "state", "online")]


def split_topic(prefix: str, name: str) -> tuple[str, str] | None:
    """``(table, leaf)`` of a topic under ``prefix``; None when it is not a table's topic."""
    head = prefix + "/"
    if not name.startswith(head):
        return None
    parts = name[len(head) :].split("/")
    if len(parts) != 2 or not parts[0] or parts[1] not in LEAVES:
        return None
    return parts[0], parts[1]


def _json(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadMessage(f"not JSON: {exc}") from None


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_event(table: str, data: bytes) -> FloorRecord:
    """The record carried by an ``event`` message sent on ``table``'s topic (``events``,
    what the table's engine decided, is kept as sent: the second opinion judges it)."""
    body = _json(data)
    if not isinstance(body, dict):
        raise BadMessage("an event is a JSON object")
    missing = [
        k for k in ("table", "record", "at", "kind", "actor", "payload", "chain") if k not in body
    ]
    if missing:
        raise BadMessage(f"an event needs {', '.join(missing)}")
    if body["table"] != table:
        raise BadMessage(f"table {body['table']!r} published on the topic of table {table!r}")
    number = body["record"]
    if not _whole(number) or number < 1:
        raise BadMessage(f"record {number!r} is not a record number (1, 2, ...)")
    for key in ("at", "kind", "actor"):
        if not isinstance(body[key], str):
            raise BadMessage(f"{key} must be a string, not {body[key]!r}")
    chain = body["chain"]
    if not isinstance(chain, str) or not _CHAIN.fullmatch(chain):
        raise BadMessage(f"chain {chain!r} is not a chain hash (64 hex digits)")
    return FloorRecord(
        table, number, body["at"], body["kind"], body["actor"], body["payload"], chain,
        body.get("events"),
    )  # fmt: skip


def parse_online(data: bytes) -> Online:
    """The presence announced on ``<p>/<t>/online`` (the will says offline)."""
    body = _json(data)
    if not isinstance(body, dict) or not isinstance(body.get("online"), bool):
        raise BadMessage('an online message is {"online": true|false, ...}')
    program = body.get("program")
    record = body.get("record")
    return Online(
        body["online"],
        program if isinstance(program, str) else None,
        record if isinstance(record, int) and _whole(record) and record >= 0 else None,
    )


def parse_state(data: bytes) -> dict[str, Any]:
    """The table's ``status --json`` object from ``<p>/<t>/state``."""
    body = _json(data)
    if not isinstance(body, dict):
        raise BadMessage("a state message is the status JSON object")
    return body


def confirm_command(hand: int, by: str, command_id: str) -> bytes:
    """The ``confirm`` command for ``hand``, from surveillance user ``by``."""
    return json.dumps({"op": "confirm", "hand": hand, "by": by, "id": command_id}).encode()


def resend_command(first: int) -> bytes:
    """The ``resend`` command: publish again from record ``first``."""
    return json.dumps({"op": "resend", "from": first}).encode()
