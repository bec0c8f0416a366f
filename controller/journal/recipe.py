"""The journal's recipe: how a record is written down and sealed (formats 2 and 3: one seal).

Everything an auditor needs to re-check an export with the table's key is here,
and nothing here touches a file.

A record is ``(record, at, actor, kind, body, snap)``:

- ``record``: 1, 2, ... (never reused, also not after damage is set aside);
- ``at``: the journal's clock, stored as milliseconds since 1970-01-01 UTC and
  written (in exports, and in the seal) as ``2026-11-30T08:15:00.123+00:00``;
- ``actor``: who (no control characters); ``kind``: a :class:`RecordKind`;
- ``body``: canonical JSON. For a ``command`` record it is the command alone
  (:func:`encode_command`): the events are not stored, the rules engine gives
  them again from the state before the record (the journal is "commands in,
  state out"). Fields equal to the command's defaults are left out, ``actor`` is
  the record's actor and ``at`` is left out when it is the record's own time;
- ``snap``: 1 when the record carries a snapshot of the state after it.

The seal (chain hash) of record ``n``::

    mac(n) = HMAC-SHA256(key, mac(n-1) || "n\\nat\\nactor\\nkind\\nsnap\\n" || body
                               [|| "\\nsnapshot " || SHA-256(state text)  when snap = 1])
    mac(0) = 32 zero bytes (GENESIS)

(``mac(n-1)`` and the SHA-256 as raw bytes, the rest UTF-8 text; ``snap`` is ``0``
or ``1``; an export gives each record's ``at`` text, ``payload`` (the body) and
``snapshot`` (the hex SHA-256 of its state text, or null).)

so without the key nobody can write a record, a snapshot or a chain that
verifies. The head file seals the newest acknowledged record:
``HMAC-SHA256(key, "head\\n" || n || "\\n" || hex(mac(n)))``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from collections.abc import Callable
from enum import StrEnum
from functools import cache, lru_cache
from typing import Any

from controller.core.commands import COMMANDS, Command, Roll
from controller.core.times import iso as iso
from controller.core.times import to_ms as to_ms

FORMAT = 3  # 2: the keyed chain; 3: the same records, a reader roll's body stored packed
PACKED_FROM = 3  # the first format whose bodies may be stored as one integer (pack_body)
# formats read and written as they are: a format-2 journal (bodies all text) plays on, and
# `firebet journal migrate` packs it (controller/journal/legacy.py)
READABLE_FORMATS = ("2", "3")
GENESIS = bytes(32)
KEY_BYTES = 32


class RecordKind(StrEnum):
    """What a record is (its ``kind``): what it means is :mod:`controller.journal.replay`."""

    START = "start"  # the journal's genesis, and each start of the service
    COMMAND = "command"  # a command, decided under the rules in force
    RULES = "rules"  # the rules a start plays under (and what changed)
    MODE = "mode"  # diagnostics on or off, the end of a storage fault
    HALT = "halt"  # damage found: the table stopped taking game records
    CLEAR_HALT = "clear_halt"  # a technician resumed from the state the chain proves


KINDS: tuple[RecordKind, ...] = tuple(RecordKind)
SYSTEM_KINDS = (RecordKind.START, RecordKind.RULES, RecordKind.MODE)
_CONTROL = {c: "?" for c in range(32)} | {127: "?"}

# what a record's body may fail to be read with: its text is not JSON, a field is
# missing, of the wrong type or out of range
DECODE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, RecursionError)


class RecordError(ValueError):
    """A record whose meaning cannot be read (the message says what is wrong with it)."""


def canonical(value: Any) -> str:
    """The canonical JSON text of ``value``: sorted keys, no spaces, ASCII only."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def clean_actor(actor: str) -> str:
    """``actor`` as it is recorded: control characters become ``?`` (the seal splits on lines)."""
    return actor.translate(_CONTROL) or "?"


def seal(
    key: bytes, prev: bytes, record: int, at: int, actor: str, kind: str, body: str | int,
    snapshot: str | None = None,
) -> bytes:  # fmt: skip
    """The chain MAC of one record (see the module docstring); ``snapshot`` is its state text.
    ``body`` is the text, or a body as format 3 stores it (:func:`pack_body`): the seal is
    always over the text."""
    if type(body) is not str:
        body = body_text(body)
    snap = 0 if snapshot is None else 1
    message = b"%b%d\n%b\n%b\n%b\n%d\n%b" % (
        prev, record, iso(at).encode(), actor.encode(), kind.encode(), snap, body.encode()
    )  # fmt: skip
    if snapshot is not None:
        message += b"\nsnapshot " + hashlib.sha256(snapshot.encode()).digest()
    return _keyed(key)(message)


_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))


def sealer(key: bytes) -> Callable[[bytes], bytes]:
    """HMAC-SHA256 under ``key`` as a function of the message, for a walk along the chain.

    The same MAC as ``hmac.digest(key, message, "sha256")`` (RFC 2104), with the two
    padded key blocks hashed once: a copy of each hash state a record, instead of
    OpenSSL's whole HMAC set-up (five times the cost of a record's own hashing)."""
    block = hashlib.sha256(key).digest() if len(key) > 64 else key
    block = block.ljust(64, b"\0")
    inner_pad = hashlib.sha256(block.translate(_IPAD))
    outer_pad = hashlib.sha256(block.translate(_OPAD))

    def mac(message: bytes) -> bytes:
        inner = inner_pad.copy()
        inner.update(message)
        outer = outer_pad.copy()
        outer.update(inner.digest())
        return outer.digest()

    return mac


@lru_cache(maxsize=8)
def _keyed(key: bytes) -> Callable[[bytes], bytes]:
    """:func:`sealer` of ``key``, kept for the next record: the writer seals every record
    and its head with one key (``hmac.digest`` set up OpenSSL's HMAC anew each time, about
    70 us a call on the development machine, two a roll; this is a few us)."""
    return sealer(key)


def head_seal(key: bytes, record: int, mac: bytes) -> bytes:
    """The MAC of the head file: the newest acknowledged record and its chain MAC."""
    return _keyed(key)(b"head\n%d\n%b" % (record, mac.hex().encode()))


def key_id(key: bytes) -> str:
    """A short name of the key, kept in the journal, to tell a wrong key from damage."""
    return hmac.digest(key, b"firebet journal key id", "sha256").hex()[:16]


# command bodies -------------------------------------------------------------------------------
@cache
def _defaults(name: str) -> tuple[tuple[str, Any], ...]:
    cls = COMMANDS[name]
    out = []
    for f in dataclasses.fields(cls):
        if f.name in ("actor", "at"):
            continue
        default = f.default if f.default is not dataclasses.MISSING else dataclasses.MISSING
        out.append((f.name, default))
    return tuple(out)


def encode_command(command: Command, at: int) -> str:
    """The body of a ``command`` record (see the module docstring); the common reader roll
    (``{"command":"roll","d1":3,"d2":4,"seq":17}``, what :func:`decode_body` reads
    without the JSON parser) without the JSON encoder."""
    if type(command) is Roll:
        values = command.__dict__
        d1, d2, seq = values["d1"], values["d2"], values["seq"]
        if (
            values["source"] == "reader"
            and type(d1) is int
            and type(d2) is int
            and type(seq) is int
            and 1 <= d1 <= 6
            and 1 <= d2 <= 6
            and seq >= 0
            and not values["request"]
            and values["at"] == iso(at)
        ):
            return f'{_ROLL}{d1},"d2":{d2},"seq":{seq}}}'
    body: dict[str, Any] = {"command": command.name}
    values = command.__dict__
    for name, default in _defaults(command.name):
        value = values[name]
        if value != default or default is dataclasses.MISSING:
            body[name] = value
    if command.at != iso(at):
        body["at"] = command.at
    return canonical(body)


_ROLL = '{"command":"roll","d1":'
ROLL_TEXT = _ROLL
"""How the common reader roll's text begins (a packed body's text: :func:`body_text`)."""
_DIE = {"1": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6}


# the body as stored (format 3) -----------------------------------------------------------------
def pack_body(body: str) -> str | int:
    """A record's body as format 3 stores it: the common reader roll
    ``{"command":"roll","d1":D1,"d2":D2,"seq":N}`` (dice 1 to 6, ``N`` a plain decimal)
    as the one integer ``N * 36 + (D1 - 1) * 6 + (D2 - 1)`` (3 or 4 bytes on disk instead
    of about 42); any other body as its text. Storage only: the seal, the export and every
    reader see the text (:func:`body_text`)."""
    if (
        body.startswith(_ROLL)
        and body[24:30] == ',"d2":'
        and body[31:38] == ',"seq":'
        and body[-1] == "}"
        and body[23] in _DIE
        and body[30] in _DIE
    ):
        seq = body[38:-1]
        if seq.isascii() and seq.isdigit() and (seq == "0" or seq[0] != "0"):
            return int(seq) * 36 + (_DIE[body[23]] - 1) * 6 + _DIE[body[30]] - 1
    return body


def body_text(stored: object) -> str:
    """The text of a body as stored: :func:`pack_body` undone (text is returned as is; any
    other value a damaged file may hold, as text, for the seal to refuse)."""
    if type(stored) is str:
        return stored
    if type(stored) is int:
        seq, dice = divmod(stored, 36)
        return f'{_ROLL}{dice // 6 + 1},"d2":{dice % 6 + 1},"seq":{seq}}}'
    if isinstance(stored, bytes):
        return stored.decode("utf-8", "replace")
    return str(stored)


# SQL giving a stored body's text (what body_text gives; non-negative integers are the only
# ones pack_body makes, and SQL's integer division agrees with Python's there)
BODY_SQL = (
    "CASE WHEN typeof(body) = 'integer' AND body >= 0 THEN "
    '\'{"command":"roll","d1":\' || (body % 36 / 6 + 1) || \',"d2":\' || '
    "(body % 6 + 1) || ',\"seq\":' || (body / 36) || '}' ELSE CAST(body AS TEXT) END"
)


def decode_body(body: str | int, actor: str, at: int, at_text: str) -> Command:
    """The command of a ``command`` record's body (text, or packed: :func:`pack_body`); the
    common reader roll (``{"command":"roll","d1":3,"d2":4,"seq":17}``) without the JSON
    parser."""
    if type(body) is int and body >= 0:
        seq, dice = divmod(body, 36)
        return Roll(dice // 6 + 1, dice % 6 + 1, "reader", seq, actor=actor, at=at_text)
    if type(body) is not str:
        body = body_text(body)
    if (
        body.startswith(_ROLL)
        and body[24:30] == ',"d2":'
        and body[31:38] == ',"seq":'
        and body[-1] == "}"
        and body[38:-1].isdigit()
        and body.isascii()
    ):
        return Roll(
            int(body[23]), int(body[30]), "reader", int(body[38:-1]), actor=actor, at=at_text
        )
    return decode_command(json.loads(body), actor, at)


def decode_command(body: dict[str, Any], actor: str, at: int) -> Command:
    """The command of a ``command`` record's parsed body (raises ValueError/TypeError/KeyError)."""
    fields = dict(body)
    cls = COMMANDS.get(str(fields.pop("command", None)))
    if cls is None:
        raise ValueError(f"unknown command {body.get('command')!r}")
    if "at" not in fields:
        fields["at"] = iso(at)
    return cls(**fields, actor=actor)
