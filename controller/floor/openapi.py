"""The console's HTTP API described for integrators: the OpenAPI document served at
``/openapi.json`` (issue 33).

One home: every route the console serves is an operation here, with what it answers;
``tests/unit/test_floor_openapi.py`` compares :data:`OPERATIONS` with the routes of the
app :func:`controller.floor.web.build_app` makes (a route added or removed without its
entry fails), and the keys of a real ``/api/tables`` answer with :data:`TABLE_KEYS`.
``make schemas`` also writes the document to ``controller/schemas/floor-openapi.json``
(shipped in the package) for those who read it offline.
"""

from __future__ import annotations

from typing import Any

from controller.core.table import Phase
from controller.floor.routes.common import COOKIE
from controller.floor.vocabulary import AlertKind, AlertStatus

OPENAPI = "3.1.0"
API_VERSION = "1"
"""The console API's version: a later release of the same version only adds paths and keys."""

_INT = {"type": "integer"}
_TEXT = {"type": "string"}
_MAYBE_INT = {"type": ["integer", "null"]}
_MAYBE_TEXT = {"type": ["string", "null"]}


def _key(schema: dict[str, Any], words: str) -> dict[str, Any]:
    return {**schema, "description": words}


TABLE_KEYS: dict[str, dict[str, Any]] = {
    "table": _key(_TEXT, "the table id ([table] id at the table)"),
    "online": _key(
        {"type": ["boolean", "null"]},
        "the table's online message: true, false (its will: the link was lost), null (never heard)",
    ),
    "mode": _key(
        _MAYBE_TEXT,
        "the mode in the table's newest state message (running, reader_fault, diagnostics, "
        "halted); null before one came",
    ),
    "phase": _key(
        {"type": "string", "enum": [p.value for p in Phase]},
        "the phase as the floor's own replay of the records has it",
    ),
    "point": _key(_MAYBE_INT, "the point, null on the come-out"),
    "hand": _key(_INT, "the fire-bet hand in play (1, 2, ...)"),
    "points": _key({"type": "array", "items": _INT}, "the different points made, in order"),
    "wagers": _key(_INT, "the fire bets riding on the hand, summed (whole units)"),
    "wagers_text": _key(_TEXT, 'the same as money ("$12"); empty when none ride'),
    "positions": _key(_INT, "how many positions have a fire bet riding"),
    "surveillance_alert": _key({"type": "boolean"}, "the table's surveillance lamp is on"),
    "alert_hand": _key(_MAYBE_INT, "the hand of the table's newest surveillance alert"),
    "confirmed_by": _key(_MAYBE_TEXT, "who in surveillance confirmed that hand (null: open)"),
    "table_alerts": _key(
        {
            "type": "array",
            "items": {
                "type": "array",
                "prefixItems": [_INT, _MAYBE_TEXT, _MAYBE_TEXT],
                "minItems": 3,
            },
        },
        "every hand whose alert the table keeps, oldest first, as [hand, confirmed_by, "
        "confirmed_at] (confirmed_at: the time of the table's record of the confirmation, "
        "ISO 8601; null while open)",
    ),
    "surveillance": _key(
        {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "status": {"type": "string", "enum": [s.value for s in AlertStatus]},
                        "by": _MAYBE_TEXT,
                        "at": _MAYBE_TEXT,
                    },
                    "required": ["status", "by", "at"],
                },
                {"type": "null"},
            ]
        },
        "the floor's newest surveillance alert of the hand in play: its status, who, and "
        "when it was confirmed (the table's record's time; null until then)",
    ),
    "alerts": _key(
        {
            "type": "object",
            "propertyNames": {"enum": [k.value for k in AlertKind]},
            "additionalProperties": _INT,
        },
        "the table's open alerts counted by kind",
    ),
    "waiting": _key(
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": _INT,
                    "hand": _MAYBE_INT,
                    "status": {"type": "string", "enum": [s.value for s in AlertStatus]},
                    "raised_at": _TEXT,
                },
                "required": ["id", "hand", "status", "raised_at"],
            },
        },
        "its newest open 5th-point alerts (the tile's, each with its Confirm)",
    ),
    "record": _key(_INT, "every record up to this one is stored (no gap below it)"),
    "head": _key(_INT, "the newest record the floor knows the table has"),
    "missing": _key(
        {
            "anyOf": [
                {"type": "array", "items": _INT, "minItems": 2, "maxItems": 2},
                {"type": "null"},
            ]
        },
        "the first run of missing record numbers [first, last], null when none",
    ),
    "resend_from": _key(_MAYBE_INT, "the record the floor asked the table to resend from"),
    "resends": _key(_INT, "resends asked of the table since the floor started"),
    "checked_hand": _key(_INT, "the second opinion checked every hand up to this one"),
    "folded_hand": _key(_INT, "the hand the floor's replay of the records has reached"),
    "unchecked_hands": _key(
        {"type": "array", "items": _INT}, "hands with a record the second opinion could not check"
    ),
    "unchecked_records": _key(_INT, "records the second opinion could not check"),
    "checked_record": _key(_INT, "every record up to this one was checked"),
    "rules_record": _key(_MAYBE_INT, "the record of the rules the table plays under"),
    "program": _key(_MAYBE_TEXT, "the program digest the table announced when it came online"),
    "bad": _key(_INT, "messages from the table counted bad (not stored), ever"),
    "last_bad": _key(_MAYBE_TEXT, "the newest bad message's reason"),
    "quarantined": _key(_MAYBE_TEXT, "why the table is quarantined (null: it is not)"),
}
"""Every key of one table in ``/api/tables`` (:func:`controller.floor.summary.table_summary`)."""

ALERT_KEYS: dict[str, dict[str, Any]] = {
    "id": _key(_INT, "the alert's number (the one in /alerts/{alert}/confirm)"),
    "table": _key(_TEXT, "the table it is about"),
    "kind": _key({"type": "string", "enum": [k.value for k in AlertKind]}, "what it is about"),
    "hand": _key(_MAYBE_INT, "the hand, when it is about one"),
    "record": _key(_MAYBE_INT, "the record that raised it"),
    "raised_at": _key(_TEXT, "when the floor raised it (UTC, ISO 8601)"),
    "status": _key({"type": "string", "enum": [s.value for s in AlertStatus]}, "what became of it"),
    "status_by": _key(_MAYBE_TEXT, "who confirmed or cleared it"),
    "detail": _key({"type": "object"}, 'what was found, by kind ("what" in words)'),
}
"""Every key of one alert in ``/api/alerts`` (:func:`controller.floor.routes.api.alert_json`)."""

FLOOD = {
    "type": "object",
    "description": "a flood of one table's alerts of one kind, shown as its newest",
    "properties": {
        "count": _INT,
        "first_record": _MAYBE_INT,
        "last_record": _MAYBE_INT,
        "whats": {"type": "object", "additionalProperties": _INT},
    },
    "required": ["count", "first_record", "last_record", "whats"],
    "additionalProperties": False,
}


def _object(keys: dict[str, dict[str, Any]], **more: Any) -> dict[str, Any]:
    props = {**keys, **more}
    return {
        "type": "object",
        "properties": props,
        "required": list(keys),
        "additionalProperties": False,
    }


SCHEMAS: dict[str, dict[str, Any]] = {
    "Table": _object(TABLE_KEYS),
    "Alert": _object(ALERT_KEYS, flood=FLOOD),
    "Health": {
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "serving": {"type": "boolean"},
            "problems": {"type": "array", "items": _TEXT},
            "broker": {"type": "boolean"},
            "last_error": _MAYBE_TEXT,
            "tables": _INT,
            "ingested": _INT,
            "unacknowledged": _INT,
            "oldest_unacknowledged_s": {"type": "number"},
            "behind": {"type": "array", "items": {"type": "object"}},
            "quarantined": {"type": "array", "items": {"type": "object"}},
            "bad_topics": _INT,
            "after_s": {"type": "number"},
        },
        "required": ["ok", "serving", "problems", "broker"],
    },
}


def _json(ref_or_schema: dict[str, Any], words: str) -> dict[str, Any]:
    return {"description": words, "content": {"application/json": {"schema": ref_or_schema}}}


def _text(words: str, media: str = "text/plain") -> dict[str, Any]:
    return {"description": words, "content": {media: {"schema": {"type": "string"}}}}


_HTML = "text/html"
_PAGE_PARAM = {
    "name": "page",
    "in": "query",
    "required": False,
    "schema": {"type": "integer", "minimum": 1, "maximum": 999_999},
    "description": "the page (1 when none); anything else is answered 400 naming it",
}
_ALERT_PARAM = {
    "name": "alert",
    "in": "path",
    "required": True,
    "schema": {"type": "integer", "minimum": 1},
}
_FORM_BODY = {
    "required": False,
    "content": {
        "application/x-www-form-urlencoded": {
            "schema": {
                "type": "object",
                "properties": {
                    "back": {"type": "string", "description": "the console path to go back to"},
                    "note": {"type": "string", "maxLength": 500},
                    "flood": {"type": "string", "enum": ["1"]},
                },
            }
        }
    },
}
_ACTION_ANSWERS = {
    "303": {"description": "done; back to the page it came from"},
    "400": _text("the alert id is no alert number"),
    "401": _text("surveillance login needed"),
    "403": _text("cross-site request refused"),
    "404": _text("no such alert"),
    "409": _text("the table would refuse it: why, and nothing was sent"),
}
_FIGURES_QUERY = [
    {"name": n, "in": "query", "required": False, "schema": {"type": "string"}, "description": d}
    for n, d in (
        ("date", "the day the shift began (YYYY-MM-DD, the floor's zone)"),
        ("shift", "a shift named in floor.toml [shifts]"),
        ("table", "one table (none: the floor)"),
    )
]

OPERATIONS: dict[str, dict[str, dict[str, Any]]] = {
    "/": {
        "get": {
            "summary": "the floor map with the alert queue",
            "responses": {"200": _text("the page", _HTML)},
        }
    },
    "/alerts": {
        "get": {
            "summary": "the alert queue page by page and every alert ever raised",
            "parameters": [_PAGE_PARAM],
            "responses": {"200": _text("the page", _HTML), "400": _text("a bad page")},
        }
    },
    "/tables/{table}": {
        "get": {
            "summary": "one table's tile, recent hands and timeline",
            "parameters": [{"name": "table", "in": "path", "required": True, "schema": _TEXT}],
            "responses": {"200": _text("the page", _HTML), "404": _text("no such table")},
        }
    },
    "/events": {
        "get": {
            "summary": "a page's live updates (server-sent events of page fragments)",
            "parameters": [
                {
                    "name": "table",
                    "in": "query",
                    "required": False,
                    "schema": _TEXT,
                    "description": "only this table's updates (a table's page)",
                },
            ],
            "responses": {
                "200": _text("the stream", "text/event-stream"),
                "503": _text("the pit's live streams are all open (web.max_streams)"),
            },
        }
    },
    "/api/tables": {
        "get": {
            "summary": "every table the floor has heard, sorted by id",
            "responses": {
                "200": _json(
                    {"type": "array", "items": {"$ref": "#/components/schemas/Table"}}, "the tables"
                )
            },
        }
    },
    "/api/alerts": {
        "get": {
            "summary": "the open alert queue in its order, 1,000 a page "
            "(?all=1: the newest 200 of every status)",
            "parameters": [
                _PAGE_PARAM,
                {
                    "name": "all",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "enum": ["1"]},
                },
            ],
            "responses": {
                "200": {
                    **_json(
                        {"type": "array", "items": {"$ref": "#/components/schemas/Alert"}},
                        "the alerts",
                    ),
                    "headers": {
                        "X-Total-Items": {"schema": _INT, "description": "items in the queue"},
                        "X-Pages": {"schema": _INT, "description": "pages in the queue"},
                    },
                },
                "400": _text("a bad page"),
            },
        }
    },
    "/healthz": {
        "get": {
            "summary": "the floor's health for a load balancer (ok false: the problems in words)",
            "responses": {
                "200": _json({"$ref": "#/components/schemas/Health"}, "this service serves"),
                "503": _json(
                    {"$ref": "#/components/schemas/Health"},
                    "this service cannot serve: the broker lost or a message unacknowledged",
                ),
            },
        }
    },
    "/metrics": {
        "get": {
            "summary": "Prometheus metrics (docs/floor.md, Metrics)",
            "responses": {"200": _text("the Prometheus text format")},
        }
    },
    "/favicon.ico": {
        "get": {
            "summary": "the console's icon",
            "responses": {"200": _text("SVG", "image/svg+xml")},
        }
    },
    "/favicon.svg": {
        "get": {
            "summary": "the console's icon",
            "responses": {"200": _text("SVG", "image/svg+xml")},
        }
    },
    "/figures": {
        "get": {
            "summary": "the shift figures with charts",
            "parameters": _FIGURES_QUERY,
            "responses": {"200": _text("the page", _HTML), "400": _text("a bad figures query")},
        }
    },
    "/figures.csv": {
        "get": {
            "summary": "the shift figures as CSV",
            "parameters": _FIGURES_QUERY,
            "responses": {"200": _text("the CSV", "text/csv"), "400": _text("a bad figures query")},
        }
    },
    "/login": {
        "get": {
            "summary": "the surveillance login page",
            "responses": {"200": _text("the page", _HTML)},
        },
        "post": {
            "summary": "log in (scrypt hashes in floor.toml; throttled)",
            "requestBody": {
                "required": True,
                "content": {
                    "application/x-www-form-urlencoded": {
                        "schema": {
                            "type": "object",
                            "properties": {"user": _TEXT, "password": _TEXT},
                            "required": ["user", "password"],
                        }
                    }
                },
            },
            "responses": {
                "303": {"description": "logged in: the session cookie is set"},
                "401": _text("wrong user or password", _HTML),
                "429": _text("too many failed logins (Retry-After says when)", _HTML),
            },
        },
    },
    "/logout": {
        "post": {"summary": "log out", "responses": {"303": {"description": "logged out"}}}
    },
    "/alerts/{alert}/confirm": {
        "post": {
            "summary": "confirm a 5th-point alert: the table is sent a confirm command",
            "parameters": [_ALERT_PARAM],
            "security": [{"session": []}],
            "requestBody": _FORM_BODY,
            "responses": _ACTION_ANSWERS,
        }
    },
    "/alerts/{alert}/clear": {
        "post": {
            "summary": "clear an alert with a note (flood=1: the whole flood)",
            "parameters": [_ALERT_PARAM],
            "security": [{"session": []}],
            "requestBody": _FORM_BODY,
            "responses": _ACTION_ANSWERS,
        }
    },
    "/openapi.json": {
        "get": {
            "summary": "this document",
            "responses": {"200": _json({"type": "object"}, "the OpenAPI document")},
        }
    },
}
"""Every route of the console by path and method (lower case, as OpenAPI has them)."""


def document() -> dict[str, Any]:
    """The console's OpenAPI document (what ``/openapi.json`` answers)."""
    return {
        "openapi": OPENAPI,
        "info": {
            "title": "firebet floor console",
            "version": API_VERSION,
            "description": "The floor console's HTTP API (docs/floor.md, The console). The "
            "pages need no login; confirming or clearing an alert needs surveillance's "
            "session cookie (POST /login) and a same-origin request.",
        },
        "paths": OPERATIONS,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"session": {"type": "apiKey", "in": "cookie", "name": COOKIE}},
        },
    }
