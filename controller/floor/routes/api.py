"""The console's JSON answers, the floor's health and the icon."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from controller.floor.openapi import document
from controller.floor.queue import queue_page
from controller.floor.routes.common import console_of, page_number
from controller.floor.store import Alert

FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<rect width="32" height="32" rx="6" fill="#18402b"/>'
    '<rect x="7" y="7" width="18" height="18" rx="3" fill="#fff"/>'
    '<circle cx="12" cy="12" r="2" fill="#c00"/><circle cx="16" cy="16" r="2" fill="#c00"/>'
    '<circle cx="20" cy="20" r="2" fill="#c00"/></svg>'
)
"""The console's icon: a die showing three on the felt's green (its own, no file)."""


def alert_json(a: Alert) -> dict[str, Any]:
    """An alert as ``/api/alerts`` gives it."""
    return {
        "id": a.id, "table": a.table, "kind": a.kind, "hand": a.hand,
        "record": a.record, "raised_at": a.raised_at, "status": a.status,
        "status_by": a.status_by, "detail": a.detail,
    }  # fmt: skip


def api_tables(request: Request) -> Response:
    return JSONResponse(console_of(request).summaries())


API_SHOWN = 1000
"""Items on one page of ``/api/alerts``."""


def api_alerts(request: Request) -> Response:
    """The open queue in its order (a flood: its newest alert, with ``flood``), a page of
    :data:`API_SHOWN` items (``?page=N``; the headers ``X-Total-Items`` and ``X-Pages``
    say how many there are), or with ``?all=1`` the newest 200 alerts of every status."""
    store = console_of(request).service.store
    if request.query_params.get("all") == "1":
        return JSONResponse([alert_json(a) for a in store.alerts(open_only=False)])
    number = page_number(request)
    if isinstance(number, Response):
        return number
    found = queue_page(store, page=number, size=API_SHOWN)
    out = []
    for item in found.items:
        entry = alert_json(item.alert)
        if item.flood:
            entry["flood"] = {
                "count": item.count, "first_record": item.first_record,
                "last_record": item.last_record, "whats": item.whats,
            }  # fmt: skip
        out.append(entry)
    headers = {"X-Total-Items": str(found.total), "X-Pages": str(found.pages)}
    return JSONResponse(out, headers=headers)


def health(request: Request) -> Response:
    """``/healthz``: 200 while this service serves (a table's problems in the body's
    ``ok`` and ``problems``), 503 when it cannot (the broker lost, the store stuck)."""
    said = console_of(request).service.health()
    return JSONResponse(said, status_code=200 if said["serving"] else 503)


def metrics(request: Request) -> Response:
    """The floor's Prometheus metrics (controller.floor.metrics: docs/floor.md, Metrics)."""
    body, kind = console_of(request).service.metrics.text()
    return Response(body, headers={"Content-Type": kind})


def openapi(request: Request) -> Response:
    """The console's OpenAPI document (controller/floor/openapi.py)."""
    return JSONResponse(document())


def favicon(request: Request) -> Response:
    return Response(FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})


def routes() -> list[Route]:
    return [
        Route("/api/tables", api_tables),
        Route("/api/alerts", api_alerts),
        Route("/healthz", health),
        Route("/metrics", metrics),
        Route("/favicon.ico", favicon),
        Route("/favicon.svg", favicon),
        Route("/openapi.json", openapi),
    ]
