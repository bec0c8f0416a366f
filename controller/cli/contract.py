"""The machine-readable contracts outsiders build on (issue 33): JSON Schemas of the floor
messages and of the command line's JSON outputs, made from the code's own definitions.

The files under ``controller/schemas/`` (shipped in the package, listed in docs/floor.md
and docs/cli.md) are what :func:`schemas` gives, written by ``python -m
controller.cli.contract``; ``tests/unit/test_contract_schemas.py`` fails when a file and
the code disagree, so the two cannot drift. Each event type's schema comes from its
dataclass (:data:`controller.core.events.PUBLISHED`), the refusal codes from
:class:`~controller.core.errors.Refusal`, the record kinds from the journal's, the
``history`` and ``export`` keys from the journal's own lists.

The schemas are exact for this release: every key the code writes today, and no other
(``additionalProperties: false``). Later releases of the same contract version only add
keys (docs/cli.md, "Version and compatibility"): a consumer checking a newer table's
messages with older schemas ignores the keys it does not know.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from enum import StrEnum
from pathlib import Path
from typing import Any

from controller import __version__
from controller.core.errors import Refusal
from controller.core.events import PUBLISHED, Settlement
from controller.core.lamps import Mode
from controller.core.table import Phase
from controller.core.table_id import TABLE_ID
from controller.journal.handlog import HISTORY_KEYS, PROOF_KEYS
from controller.journal.recipe import KINDS
from controller.wire import messages

CONTRACT = 2
"""The command line's contract version (docs/cli.md, "Version and compatibility"; 2: the
CSV export has plain columns only, no ``payload``)."""

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
_HEX64 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_WHOLE = {"type": "integer"}
_TEXT = {"type": "string"}
_UTC = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}\+00:00$"
_POSITIONS = {"type": "object", "propertyNames": {"pattern": "^[0-9]+$"}}


def versions() -> dict[str, Any]:
    """``firebet --contract-version``: the release, the command line's contract version,
    the floor messages' version, and where the schemas are."""
    return {
        "version": __version__,
        "contract": CONTRACT,
        "floor_messages": messages.VERSION,
        "schemas": str(SCHEMA_DIR),
    }


def _type(hint: Any) -> dict[str, Any]:
    """The JSON Schema of one dataclass field's type hint, as ``to_dict`` writes it."""
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        options = [_type(a) for a in typing.get_args(hint)]
        return {"anyOf": options}
    if hint is type(None):
        return {"type": "null"}
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        return {"type": "string", "enum": [m.value for m in hint]}
    if hint is bool:
        return {"type": "boolean"}
    if hint is int:
        return dict(_WHOLE)
    if hint is str:
        return dict(_TEXT)
    if hint is Settlement:
        return {"$ref": "#/$defs/settlement_body"}
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _type(args[0])}
        return {
            "type": "array",
            "prefixItems": [_type(a) for a in args],
            "minItems": len(args),
            "maxItems": len(args),
        }
    if origin is dict:
        key, value = typing.get_args(hint)
        if key is not int:
            raise TypeError(f"no JSON Schema for a dict keyed by {key!r}")
        return {**_POSITIONS, "additionalProperties": _type(value)}
    raise TypeError(f"no JSON Schema for the type {hint!r}: add it to controller/cli/contract.py")


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


_COUNTED = _object({"count": _WHOLE, "amount": _WHOLE})
_HELD_ROLL = _object(
    {
        "number": _WHOLE,
        "seq": {"type": ["integer", "null"]},
        "dice": {"type": "array", "items": _WHOLE, "minItems": 2, "maxItems": 2},
        "at": _TEXT,
        "reason": _TEXT,
    },
    required=["number", "seq", "dice", "at"],
)
"""A reader roll held for the dealer (``HeldRoll.to_dict``; ``reason`` only when set)."""
_MARKER = _object({"lit": {"type": "boolean"}, "ordinal": {"type": ["integer", "null"]}})
"""One point's marker lamp (``marker_report``)."""
_METERS = _object(
    {
        "hands": _WHOLE,
        "rolls": _WHOLE,
        "points_made": _WHOLE,
        "bets_taken": _COUNTED,
        "bets_cancelled": _COUNTED,
        "paid": {**_POSITIONS, "additionalProperties": _COUNTED},
        "lost": _COUNTED,
        "reversed": _COUNTED,
        "voids": _WHOLE,
        "surrenders": _WHOLE,
        "faults": _WHOLE,
        "corrections": _WHOLE,
    },
    required=[
        "hands",
        "rolls",
        "points_made",
        "bets_taken",
        "bets_cancelled",
        "paid",
        "lost",
        "reversed",
        "voids",
        "surrenders",
        "faults",
    ],
)
"""The table's meters (``Meters.to_dict``; ``corrections`` once there is one)."""


def _event(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    fields = {f.name: _type(hints[f.name]) for f in dataclasses.fields(cls)}
    body = {"event": {"const": cls.name}, **fields}  # type: ignore[attr-defined]
    optional = getattr(cls, "optional_keys", ())  # written only when not at the default
    return _object(body, required=[k for k in body if k not in optional])


def event_defs() -> dict[str, Any]:
    """Each event type's schema by name (docs/floor.md, "The `events` schema")."""
    defs = {name: _event(cls) for name, cls in sorted(PUBLISHED.items())}
    body = dict(defs["settlement"])
    body["properties"] = {k: v for k, v in body["properties"].items() if k != "event"}
    body["required"] = [k for k in body["required"] if k != "event"]
    defs["settlement_body"] = body  # a void's reversed_settlement: without "event"
    return defs


def _events_list() -> dict[str, Any]:
    names = sorted(PUBLISHED)
    return {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["event"],
            "properties": {"event": {"enum": names}},
            "allOf": [
                {"if": {"properties": {"event": {"const": n}}}, "then": {"$ref": f"#/$defs/{n}"}}
                for n in names
            ],
        },
    }


def _doc(name: str, title: str, body: dict[str, Any], **defs: Any) -> dict[str, Any]:
    schema = {"$schema": DIALECT, "$id": f"{name}.schema.json", "title": title, **body}
    if defs:
        schema["$defs"] = defs
    return schema


def _reader() -> dict[str, Any]:
    """``status`` ``reader``: the keys of the reader's identity (docs/reader-protocol.md,
    "HELLO: model and firmware"); its counters and fault beside them are open."""
    text = {"type": ["string", "null"]}
    return {
        "type": "object",
        "properties": {
            "model": text,
            "firmware": text,
            # how the service knows them now: their HELLO heard since this start, its
            # session's frames since this start (protocol 3), or only the journal's word
            # (the reader may have restarted unheard since); null: none named
            "firmware_seen": {"enum": ["this_run", "session", "journal", None]},
            "session_heard": {"type": "boolean"},
            "firmware_record": {"type": ["integer", "null"], "minimum": 1},
        },
        "required": ["model", "firmware", "firmware_seen", "firmware_record"],
    }


def _status() -> dict[str, Any]:
    """``status --json`` (and the floor's ``state`` message without ``"v"``)."""
    anything: dict[str, Any] = {}
    maybe_object = {"type": ["object", "null"]}
    return _object(
        {
            "table": _TEXT,
            "at": {"type": "string", "pattern": _UTC},  # when it was read (the service's clock)
            "mode": {"type": "string", "enum": [m.value for m in Mode]},
            "ready": {"type": "boolean"},
            "phase": {"type": "string", "enum": [p.value for p in Phase]},
            "point": {"type": ["integer", "null"]},
            "hand": _WHOLE,
            "shooter": _WHOLE,
            "points": {"type": "array", "items": _WHOLE},
            "unique_points": _WHOLE,
            "betting_open": {"type": "boolean"},
            "bets": {**_POSITIONS, "additionalProperties": _WHOLE},
            "surrender_pending": {"type": "boolean"},
            "last_roll": {"type": ["array", "null"], "items": _WHOLE},
            "rolls": _WHOLE,
            "surveillance_alert": {"type": "boolean"},
            "alert_hand": {"type": ["integer", "null"]},
            "surveillance_confirmed": maybe_object,
            "surveillance_alerts": {
                "type": "array",
                "items": _object({"hand": _WHOLE, "confirmed_by": {"type": ["string", "null"]}}),
            },
            "held_rolls": {"type": "array", "items": _HELD_ROLL},
            "correction_pending": {"type": ["array", "null"], "items": _WHOLE},
            "holding_reader_rolls": {"type": "boolean"},
            "markers": {**_POSITIONS, "additionalProperties": _MARKER},
            "reader": _reader(),
            "meters": _METERS,
            "halted": {"type": ["string", "null"]},
            "storage_fault": {"type": ["string", "null"]},
            "last_settlement": maybe_object,
            "journal_check": anything,
            "program": maybe_object,
            "floor": {"type": "object"},
            "rules": maybe_object,
            # halted: whether the figures rest on records before the break (docs/journal.md)
            "verified": {"type": "boolean"},
            "break": {"type": ["integer", "null"]},
            "last_verified": maybe_object,
            "journal_watch": maybe_object,
        }
    )


def _refusal() -> dict[str, Any]:
    body = _object(
        {
            "ok": {"const": False},
            "code": {"type": "string", "enum": [r.value for r in Refusal]},
            "error": _TEXT,
            "exit": {"type": "integer", "minimum": 1, "maximum": 4},
        }
    )
    body["additionalProperties"] = True  # a command may add its own (verify: record, reason)
    return body


def _export_line() -> dict[str, Any]:
    keys: dict[str, Any] = {
        "record": {"type": "integer", "minimum": 1},
        "at": _TEXT,
        "actor": _TEXT,
        "kind": {"type": "string", "enum": [str(k) for k in KINDS]},
        "payload": {},
        "snapshot": {"anyOf": [_HEX64, {"type": "null"}]},
        "prev_hash": _HEX64,
        "hash": _HEX64,
        "decided_under": {"type": ["integer", "null"]},
    }
    proof = {k: v for k, v in _proof().items() if k != "last_verified"}
    return _object(keys | proof, required=list(keys))  # proof: on a halted journal only


def _history_line() -> dict[str, Any]:
    keys: dict[str, Any] = {
        "hand": _WHOLE,
        "points": {"type": "array", "items": _WHOLE},
        "unique_points": _WHOLE,
        "result": {"enum": ["win", "lose", None]},
        "odds_to_one": {"type": ["integer", "null"]},
        "payouts": {**_POSITIONS, "additionalProperties": _WHOLE},
        "rolls": {
            "type": "array",
            "items": {"type": "array", "items": _WHOLE, "minItems": 2, "maxItems": 2},
        },
        "actions": {"type": "array", "items": {"type": "object"}},
        "decided_under": {"type": ["integer", "null"]},  # the rules record in force
    }
    if tuple(keys) != HISTORY_KEYS:
        raise AssertionError(f"history --json keys are {HISTORY_KEYS}, the schema's {tuple(keys)}")
    proof = _proof()
    if tuple(proof) != PROOF_KEYS:
        raise AssertionError(f"a halted hand's keys are {PROOF_KEYS}, the schema's {tuple(proof)}")
    return _object(keys | proof, required=list(keys))  # proof: on a halted journal only


def _proof() -> dict[str, Any]:
    """What a halted journal's lines add (docs/journal.md, "What a halted table shows")."""
    return {
        "verified": {"type": "boolean"},
        "break": {"type": ["integer", "null"]},
        "last_verified": {"type": ["object", "null"]},
    }


def _doctor_line() -> dict[str, Any]:
    from controller.cli.doctor import Check

    keys = list(Check("name", True, "detail").to_dict())
    kinds = {"check": _TEXT, "ok": {"type": "boolean"}, "detail": _TEXT, "fix": _TEXT}
    kinds["warning"] = {"type": "boolean"}
    return _object({k: kinds[k] for k in keys})


def _verify() -> dict[str, Any]:
    return _object(
        {
            "ok": {"const": True},
            "records": _WHOLE,
            "snapshots": _WHOLE,
            "chain_head": {"anyOf": [_HEX64, {"type": "null"}]},
            "set_aside": _WHOLE,
            "halted": {"type": ["string", "null"]},
            "summary": _TEXT,
        }
    )


def _journal_init() -> dict[str, Any]:
    return _object(
        {
            "ok": {"const": True},
            "journal": _TEXT,
            "aside": {"type": ["string", "null"]},
            "moved": {"type": "array", "items": _TEXT},
            "key_made": {"type": "boolean"},
            "actor": _TEXT,
        }
    )


def _journal_migrate() -> dict[str, Any]:
    return _object(
        {
            "ok": {"const": True},
            "records": _WHOLE,
            "old_head": _TEXT,
            "from_format": {"enum": [1, 2]},
            "aside": _TEXT,
            "actor": _TEXT,
        }
    )


def _clear_halt() -> dict[str, Any]:
    """``clear-halt --json`` when the halt is lifted (:func:`controller.cli.audit.cleared_json`)."""
    preview = _object(
        {
            "resume_from": _WHOLE,
            "set_aside": {"type": "object"},
            "hands": {"type": "array", "items": {"type": "object"}},
            "break": _WHOLE,
            "wagered": _WHOLE,
            "paid": _WHOLE,
            "unreadable": _WHOLE,
        }
    )
    return _object(
        {
            "ok": {"const": True},
            "through": {"enum": ["service", "offline"]},
            "cleared": _TEXT,
            "resumed": _TEXT,
            "preview": {"anyOf": [preview, {"type": "null"}]},
        }
    )


def _action() -> dict[str, Any]:
    """A dealer action done under ``--json`` (:func:`controller.cli.dealer._finish`): the
    words, the request's id, whether it was decided before, the events as the floor gets
    them (``$defs``, as in floor-event) and the status after it."""
    return _object(
        {
            "ok": {"const": True},
            "said": _TEXT,
            "request_id": {"type": ["string", "null"]},
            "repeated": {"type": ["string", "null"]},  # decided at record N ...; not done again
            "events": _events_list(),
            "status": {"anyOf": [_status(), {"type": "null"}]},
        }
    )


def _sim_reader() -> dict[str, Any]:
    """``sim-reader ACTION --json`` when done (:func:`controller.cli.sim_device.act`'s reply):
    ``said`` always; a throw adds its dice, seq and whether it was ACKed, held or kept."""
    return _object(
        {
            "ok": {"const": True},
            "said": _TEXT,
            "dice": {"type": "array", "items": _WHOLE, "minItems": 2, "maxItems": 2},
            "seq": {"type": ["integer", "null"]},
            "acked": {"type": "boolean"},
            "pending": {"type": "boolean"},
            "held": {"type": ["integer", "null"]},
        },
        required=["ok", "said"],
    )


def _floor_event() -> dict[str, Any]:
    keys: dict[str, Any] = {
        "table": {"type": "string", "pattern": f"^{TABLE_ID.pattern}$"},
        "record": {"type": "integer", "minimum": 1},
        "at": _TEXT,
        "kind": {"type": "string", "enum": [str(k) for k in KINDS]},
        "actor": _TEXT,
        "payload": {},
        "chain": _HEX64,
        "v": {"enum": sorted(messages.KNOWN_VERSIONS)},
        "snapshot": _HEX64,
        "events": _events_list(),
    }
    return _object(keys, required=[k for k in keys if k not in ("snapshot", "events", "v")])


def _online() -> dict[str, Any]:
    return {
        "oneOf": [
            _object(
                {
                    "online": {"const": True},
                    "program": _TEXT,
                    "record": {"type": "integer", "minimum": 0},
                    "v": {"enum": sorted(messages.KNOWN_VERSIONS)},
                },
                required=["online", "program", "record"],
            ),
            _object(
                {"online": {"const": False}, "v": {"enum": sorted(messages.KNOWN_VERSIONS)}},
                required=["online"],
            ),
        ]
    }


def _command() -> dict[str, Any]:
    v = {"enum": sorted(messages.KNOWN_VERSIONS)}
    return {
        "oneOf": [
            _object(
                {
                    "op": {"const": "confirm"},
                    "hand": {"type": "integer", "minimum": 1},
                    "by": {"type": "string", "minLength": 1, "maxLength": 64},
                    "id": {"type": "string", "maxLength": 64},
                    "v": v,
                },
                required=["op", "hand", "by"],
            ),
            _object(
                {"op": {"const": "resend"}, "from": {"type": "integer", "minimum": 1}, "v": v},
                required=["op", "from"],
            ),
        ]
    }


def _state() -> dict[str, Any]:
    """The ``state`` message: the status with ``"v"`` beside it (a message without
    ``"v"`` is version 1, as from a table before versions: docs/floor.md)."""
    body = _status()
    body["properties"] = {**body["properties"], "v": {"enum": sorted(messages.KNOWN_VERSIONS)}}
    return body


def schemas() -> dict[str, dict[str, Any]]:
    """Every schema by file stem: ``floor-*`` the MQTT payloads, ``cli-*`` the JSON a
    command prints (one object, or one object a line where docs/cli.md says so)."""
    made = {
        "floor-event": _doc("floor-event", "<prefix>/<table>/event", _floor_event()),
        "floor-state": _doc("floor-state", "<prefix>/<table>/state", _state()),
        "floor-online": _doc("floor-online", "<prefix>/<table>/online", _online()),
        "floor-command": _doc("floor-command", "<prefix>/<table>/command", _command()),
        "cli-status": _doc("cli-status", "firebet status --json", _status()),
        "cli-refusal": _doc("cli-refusal", "a refusal under --json", _refusal()),
        "cli-history": _doc("cli-history", "one line of firebet history --json", _history_line()),
        "cli-export": _doc("cli-export", "one line of firebet export (jsonl)", _export_line()),
        "cli-doctor": _doc("cli-doctor", "one line of firebet doctor --json", _doctor_line()),
        "cli-verify": _doc("cli-verify", "firebet journal verify --json (ok)", _verify()),
        "cli-journal-init": _doc(
            "cli-journal-init", "firebet journal init --json", _journal_init()
        ),
        "cli-journal-migrate": _doc(
            "cli-journal-migrate", "firebet journal migrate --json", _journal_migrate()
        ),
        "cli-clear-halt": _doc("cli-clear-halt", "firebet clear-halt --json (done)", _clear_halt()),
        "cli-sim-reader": _doc(
            "cli-sim-reader", "firebet sim-reader ACTION --json (done)", _sim_reader()
        ),
        "cli-action": _doc("cli-action", "a dealer action's --json when done", _action()),
        "cli-held": _doc(
            "cli-held",
            "firebet held --json (no action: the held reader rolls)",
            _object({"ok": {"const": True}, "held_rolls": {"type": "array", "items": _HELD_ROLL}}),
        ),
    }
    made["floor-event"]["$defs"] = event_defs()
    made["cli-action"]["$defs"] = event_defs()  # the same events, made by the same code
    return made


def rendered() -> dict[str, str]:
    """Each schema file's name and its text, as the package ships it (with the floor
    console's OpenAPI document, ``floor-openapi.json``)."""
    from controller.floor import openapi  # the console's routes: starlette, loaded here only

    made = {
        f"{stem}.schema.json": json.dumps(body, indent=2, sort_keys=False) + "\n"
        for stem, body in schemas().items()
    }
    made["floor-openapi.json"] = json.dumps(openapi.document(), indent=2) + "\n"
    return made


def write(folder: Path = SCHEMA_DIR) -> list[Path]:
    """Write every schema file into ``folder`` (``make schemas``); the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendered().items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write(Path(sys.argv[1]) if len(sys.argv) > 1 else SCHEMA_DIR):
        print(path)
