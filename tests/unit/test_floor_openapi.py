"""The console's OpenAPI document (``/openapi.json``, issue 33) against the console itself:
its paths and methods are the app's routes, and a real ``/api/tables`` and ``/api/alerts``
answer has exactly the keys it documents. Before #33 ``/openapi.json`` was a 404 and 11 of
``/api/tables``' keys were documented nowhere."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from controller.floor import openapi
from controller.floor.ingest import Ingest, Message
from controller.floor.settings import FloorSettings
from controller.floor.store import SqliteStore
from controller.floor.web import build_app
from tests.floor_support import TableJournal, event_bytes, make_points


def _get(app: Starlette, path: str, query: str = "") -> tuple[int, Any]:
    """One GET through the app's ASGI interface (the middleware included): status, JSON."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": query.encode(), "headers": [(b"host", b"floor.test")],
        "client": ("127.0.0.1", 5000), "server": ("floor.test", 80),
    }  # fmt: skip
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(body)


@pytest.fixture
def console(tmp_path: Path) -> Any:
    """The console's app on a real store and ingest that heard a table to its 5th point."""
    table = TableJournal(tmp_path / "table.db")
    table.do("bet 1 5", "bet 2 2", *make_points(4, 5, 6, 8, 9))
    store = SqliteStore(tmp_path / "floor.db")
    ingest = Ingest(store, "firebet", lambda _t, _p: None)
    presence = {"online": True, "program": "test-program", "record": len(table.records())}
    ingest.handle(
        [
            Message("firebet/T1/online", json.dumps(presence).encode()),
            Message("firebet/T1/state", json.dumps({"mode": "running"}).encode()),
            *(Message("firebet/T1/event", event_bytes(r), qos=1) for r in table.records()),
        ]
    )
    service = SimpleNamespace(
        settings=FloorSettings(), ingest=ingest, store=store,
        listen=lambda _fn: None, metrics=SimpleNamespace(watch=lambda *_a: None),
    )  # fmt: skip
    app = build_app(service, {})  # type: ignore[arg-type]
    yield app
    app.state.console.close()
    store.close()


def test_the_document_has_every_route_of_the_app_and_no_other(console: Starlette) -> None:
    served: dict[str, set[str]] = {}
    for route in console.routes:
        assert isinstance(route, Route), route
        served.setdefault(route.path, set()).update(
            m.lower() for m in (route.methods or {"GET"}) if m != "HEAD"
        )
    documented = {path: set(ops) for path, ops in openapi.document()["paths"].items()}
    assert documented == served


def test_openapi_json_is_served_and_its_references_resolve(console: Starlette) -> None:
    status, document = _get(console, "/openapi.json")
    assert status == 200 and document == json.loads(json.dumps(openapi.document()))
    assert document["openapi"].startswith("3.1")
    text = json.dumps(document)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "')[1:]}:
        node: Any = document
        for step in ref.removeprefix("#/").split("/"):
            node = node[step]  # a dangling reference fails here
    for schema in document["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)


def test_every_key_of_api_tables_is_documented_and_nothing_more(console: Starlette) -> None:
    status, tables = _get(console, "/api/tables")
    assert status == 200 and [t["table"] for t in tables] == ["T1"]
    (shown,) = tables
    assert shown["waiting"] and shown["surveillance_alert"] is True  # the 5th point is up
    table_schema = openapi.document()["components"]["schemas"]["Table"]
    assert set(shown) == set(table_schema["properties"]) == set(openapi.TABLE_KEYS)
    jsonschema.Draft202012Validator(table_schema).validate(shown)
    for key, described in openapi.TABLE_KEYS.items():
        assert described.get("description"), f"/api/tables key {key} has no description"


def test_every_key_of_api_alerts_is_documented(console: Starlette) -> None:
    alert_schema = openapi.document()["components"]["schemas"]["Alert"]
    for query in ("", "all=1"):
        status, alerts = _get(console, "/api/alerts", query)
        assert status == 200 and alerts, query
        for alert in alerts:
            assert set(alert) - {"flood"} == set(openapi.ALERT_KEYS)
            jsonschema.Draft202012Validator(alert_schema).validate(alert)
