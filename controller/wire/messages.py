"""The floor messages, the one definition both ends use (SPEC section 9, docs/floor.md).

Topics are ``<prefix>/<table>/<leaf>``; payloads are JSON. The table's link writes the
``event``, ``state`` and ``online`` payloads and reads the floor's ``command``s with the
functions here; the floor service reads the first three and writes the commands with
the same module, so the two ends cannot drift. Everything read from the other end is
checked here: a message that does not have the shape of the spec is a
:class:`BadMessage` (from a table) or a :class:`CommandError` (from the floor) with the
reason, never a crash. Pure: the MQTT clients do the sending and the taking.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Protocol

from controller.core.commands import Confirm
from controller.core.errors import FirebetError
from controller.core.table_id import is_table_id

LEAVES = ("event", "state", "online", "command")
MAX_COMMAND_BYTES = 4096
VERSION = 1  # the version of the floor messages every payload carries, under "v"
KNOWN_VERSIONS = frozenset({1})  # what either end reads; a message without "v" is version 1
OFFLINE = '{"online":false,"v":1}'  # a clean stop's message, and the broker's will
MAX_MESSAGE_BYTES = 256 * 1024  # a table's message (a record with its events, a status)
MAX_DEPTH = 32  # JSON nested deeper than this is not a table's message
MAX_NUMBER = 2**63 - 1  # every whole number fits the floor's store (SQLite INTEGER)
_COMPACT = json.JSONEncoder(separators=(",", ":"))
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
    snapshot: str | None = None  # the SHA-256 of the snapshot its seal covers (hex)

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
            "v": VERSION,
        }
        if self.snapshot is not None:
            body["snapshot"] = self.snapshot
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


def topics(prefix: str, table: str) -> dict[str, str]:
    """The four topics of ``table``: event, state, online, command."""
    return {leaf: topic(prefix, table, leaf) for leaf in LEAVES}


def subscriptions(prefix: str) -> list[str]:
    """The topic filters the floor subscribes to."""
    return [topic(prefix, "+", leaf) for leaf in ("event", "state", "online")]


def split_topic(prefix: str, name: str) -> tuple[str, str] | None:
    """``(table, leaf)`` of a topic under ``prefix``; None when it is not a table's topic."""
    head = prefix + "/"
    if not name.startswith(head):
        return None
    parts = name[len(head) :].split("/")
    if len(parts) != 2 or not parts[0] or parts[1] not in LEAVES:
        return None
    if not is_table_id(parts[0]):  # the floor keeps no table the table itself would refuse
        return None
    return parts[0], parts[1]


def _whole_number(text: str) -> int:
    value = int(text)  # Python refuses more than 4,300 digits (ValueError)
    if not -MAX_NUMBER <= value <= MAX_NUMBER:
        raise ValueError(f"a whole number of {len(text)} digits (at most 2^63 - 1 in size)")
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is not a finite number")
    return value


def _constant(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON number")


def _depth(value: Any) -> int:
    """How deeply ``value`` nests (iteratively: never recursion)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level)
            if level > MAX_DEPTH:
                return level
            todo.extend((child, level + 1) for child in item)
    return deepest


def _json(data: bytes) -> Any:
    """A table's message as JSON, judged on its own: at most :data:`MAX_MESSAGE_BYTES`,
    UTF-8, nested at most :data:`MAX_DEPTH` deep, whole numbers within ±(2^63 - 1), no
    NaN or infinity; a :class:`BadMessage` naming what is wrong otherwise."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise BadMessage(f"a message of {len(data)} bytes (at most {MAX_MESSAGE_BYTES})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadMessage(f"not UTF-8: {exc}") from None
    try:
        body = json.loads(
            text, parse_int=_whole_number, parse_float=_finite, parse_constant=_constant
        )
    except RecursionError:
        raise BadMessage(f"not JSON: nested more than {MAX_DEPTH} deep") from None
    except ValueError as exc:
        raise BadMessage(f"not JSON: {str(exc)[:200]}") from None
    if _depth(body) > MAX_DEPTH:
        raise BadMessage(f"not JSON: nested more than {MAX_DEPTH} deep")
    return body


def _shown(value: Any) -> str:
    """``repr(value)``, cut short: a reason never carries a whole message."""
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def version_problem(body: dict[str, Any], what: str) -> str | None:
    """Why ``body`` (a message's JSON object) is of no version this end reads; None when
    it is one (no ``"v"`` at all: version 1, as every table sent before versions)."""
    version = body.get("v", 1)
    if _whole(version) and version in KNOWN_VERSIONS:
        return None
    known = ", ".join(map(str, sorted(KNOWN_VERSIONS)))
    return (
        f"{what} of version {version!r}: this end reads version {known} (docs/floor.md, Versions)"
    )


def _known(body: dict[str, Any], what: str) -> None:
    problem = version_problem(body, what)
    if problem is not None:
        raise BadMessage(problem)


def parse_event(table: str, data: bytes) -> FloorRecord:
    """The record carried by an ``event`` message sent on ``table``'s topic (``events``,
    what the table's engine decided, is kept as sent: the second opinion judges it)."""
    body = _json(data)
    if not isinstance(body, dict):
        raise BadMessage("an event is a JSON object")
    _known(body, "an event")
    missing = [
        k for k in ("table", "record", "at", "kind", "actor", "payload", "chain") if k not in body
    ]
    if missing:
        raise BadMessage(f"an event needs {', '.join(missing)}")
    if body["table"] != table:
        raise BadMessage(f"table {_shown(body['table'])} published on the topic of table {table!r}")
    number = body["record"]
    if not _whole(number) or number < 1:
        raise BadMessage(f"record {_shown(number)} is not a record number (1, 2, ...)")
    for key in ("at", "kind", "actor"):
        if not isinstance(body[key], str):
            raise BadMessage(f"{key} must be a string, not {_shown(body[key])}")
    chain = body["chain"]
    if not isinstance(chain, str) or not _CHAIN.fullmatch(chain):
        raise BadMessage(f"chain {_shown(chain)} is not a chain hash (64 hex digits)")
    snapshot = body.get("snapshot")
    if snapshot is not None and (not isinstance(snapshot, str) or not _CHAIN.fullmatch(snapshot)):
        raise BadMessage(f"snapshot {_shown(snapshot)} is not a SHA-256 (64 hex digits)")
    return FloorRecord(
        table, number, body["at"], body["kind"], body["actor"], body["payload"], chain,
        body.get("events"), snapshot,
    )  # fmt: skip


def parse_online(data: bytes) -> Online:
    """The presence announced on ``<p>/<t>/online`` (the will says offline)."""
    body = _json(data)
    if not isinstance(body, dict) or not isinstance(body.get("online"), bool):
        raise BadMessage('an online message is {"online": true|false, ...}')
    _known(body, "an online message")
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
    _known(body, "a state message")
    body.pop("v", None)  # the table's status, as firebet status --json gives it
    return body


def confirm_command(hand: int, by: str, command_id: str) -> bytes:
    """The ``confirm`` command for ``hand``, from surveillance user ``by``."""
    return json.dumps(
        {"op": "confirm", "hand": hand, "by": by, "id": command_id, "v": VERSION}
    ).encode()


def resend_command(first: int) -> bytes:
    """The ``resend`` command: publish again from record ``first``."""
    return json.dumps({"op": "resend", "from": first, "v": VERSION}).encode()


# the table's side ------------------------------------------------------------------------
class JournalRecord(Protocol):
    """What :func:`event_message` reads of a journal record (``controller.journal.Record``)."""

    @property
    def record(self) -> int: ...
    @property
    def at(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def actor(self) -> str: ...
    @property
    def payload(self) -> str: ...
    @property
    def hash(self) -> str: ...
    @property
    def snapshot(self) -> str | None: ...


def online_message(program: str, record: int) -> str:
    """The ``online`` payload at connect: the program's digest and the newest record."""
    return json.dumps({"online": True, "program": program, "record": record, "v": VERSION})


def state_message(status: dict[str, Any]) -> str:
    """The ``state`` payload: the ``status --json`` object with the version beside it."""
    return json.dumps({**status, "v": VERSION}, separators=(",", ":"))


def event_message(
    table: str, record: JournalRecord, events: list[dict[str, Any]] | None = None
) -> str:
    """The ``event`` payload of one journal record (SPEC section 9):
    ``{"table", "record", "at", "kind", "actor", "payload", "chain", "v"}``, ``"snapshot"`` (the
    hex SHA-256 of the state text the record's seal covers) when the record carries a
    snapshot, and ``"events"`` (what the table decided, each :meth:`Event.to_dict`) when
    given.

    The stored payload is already canonical JSON and goes in as it is (its seal still
    checks with the table's key, docs/floor.md); the events are beside it, not in it.
    """
    dumps = json.dumps
    text = (
        f'{{"table":{dumps(table)},"record":{record.record},"at":{dumps(record.at)},'
        f'"kind":{dumps(record.kind)},"actor":{dumps(record.actor)},'
        f'"payload":{record.payload},"chain":{dumps(record.hash)},"v":{VERSION}'
    )
    if record.snapshot is not None:
        text += f',"snapshot":{dumps(record.snapshot)}'

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
    problem = version_problem(data, "a command")
    if problem is not None:
        raise CommandError(problem)
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
