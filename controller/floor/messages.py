"""The floor link's messages as the table writes and reads them (SPEC section 9, docs/floor.md).

The four topics of a table, the ``event`` payload of one journal record, and the
floor's commands (``confirm``, ``resend``) parsed and checked. Pure: the
:class:`controller.floor.link.FloorLink` thread does the sending and the taking.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from controller.core.commands import Confirm
from controller.core.errors import FirebetError
from controller.journal import Record

MAX_COMMAND_BYTES = 4096
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def topics(prefix: str, table: str) -> dict[str, str]:
    """The four topics of ``table``: event, state, online, command."""
    return {leaf: f"{prefix}/{table}/{leaf}" for leaf in ("event", "state", "online", "command")}


def event_message(table: str, record: Record, events: list[dict[str, Any]] | None = None) -> str:
    """The ``event`` payload of one journal record (SPEC section 9):
    ``{"table", "record", "at", "kind", "actor", "payload", "chain"}``, and ``"events"``
    (what the table's engine decided, each :meth:`Event.to_dict`) when given.

    The stored payload is already canonical JSON and goes in as it is (its seal still
    checks with the table's key); the events are beside it, not in it.
    """
    dumps = json.dumps
    text = (
        f'{{"table":{dumps(table)},"record":{record.record},"at":{dumps(record.at)},'
        f'"kind":{dumps(record.kind)},"actor":{dumps(record.actor)},'
        f'"payload":{record.payload},"chain":{dumps(record.hash)}'
    )
    if events is None:
        return text + "}"
    return f'{text},"events":{_COMPACT.encode(events)}}}'


class CommandError(FirebetError, ValueError):
    """A floor command that cannot be taken (not JSON, unknown op, bad field)."""


@dataclass(frozen=True)
class Resend:
    """The floor asks for the records from ``start`` on again (it saw a gap)."""

    start: int


def parse_command(payload: bytes, *, at: str = "") -> Confirm | Resend:
    """A ``<p>/<t>/command`` message as a :class:`Confirm` command or a :class:`Resend`.

    Raises :class:`CommandError` with the reason when the message is not one of
    ``{"op": "confirm", "hand": n, "by": user, "id": uuid}`` or
    ``{"op": "resend", "from": record}``.
    """
    if len(payload) > MAX_COMMAND_BYTES:
        raise CommandError(f"a command of {len(payload)} bytes (at most {MAX_COMMAND_BYTES})")
    try:
        data = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CommandError(f"a command that is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CommandError("a command must be a JSON object")
    op = data.get("op")
    if op == "confirm":
        hand, by, ident = data.get("hand"), data.get("by"), data.get("id", "")
        if isinstance(hand, bool) or not isinstance(hand, int) or hand < 1:
            raise CommandError(f"confirm: hand must be a hand number, not {hand!r}")
        if not isinstance(by, str) or not by.strip() or len(by) > 64:
            raise CommandError("confirm: by must name the surveillance user (1 to 64 characters)")
        if not isinstance(ident, str) or len(ident) > 64:
            raise CommandError("confirm: id must be a string of at most 64 characters")
        return Confirm(hand, by.strip(), ident, actor=f"floor:{by.strip()}", at=at)
    if op == "resend":
        start = data.get("from")
        if isinstance(start, bool) or not isinstance(start, int) or start < 1:
            raise CommandError(f"resend: from must be a record number, not {start!r}")
        return Resend(start)
    raise CommandError(f"unknown command op {op!r} (known: confirm, resend)")
