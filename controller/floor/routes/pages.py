"""The console's pages: the floor map with the queue, the alert list, a table's page."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from controller.floor.console import RECENT_HANDS
from controller.floor.routes.common import console_of, page, page_number


def index(request: Request) -> Response:
    console = console_of(request)
    return page(
        request, "index.html", map_html=console.map_html(), q=console.queue_view(), live=None
    )


def alerts(request: Request) -> Response:
    console = console_of(request)
    number = page_number(request)
    if isinstance(number, Response):
        return number
    every = [console.alert_view(a) for a in console.service.store.alerts(open_only=False)]
    return page(request, "alerts.html", q=console.queue_view(page=number), history=every, live=None)


def table(request: Request) -> Response:
    console = console_of(request)
    name = request.path_params["table"]
    summary = console.service.ingest.summaries.get(name)
    if summary is None:
        shown = name if len(name) <= 64 else name[:64] + "..."
        return PlainTextResponse(f"no table {shown!r} on this floor", status_code=404)
    return page(
        request, "table.html", t=summary, tile=console.tile(summary),
        q=console.queue_view(name),
        hands=console.service.store.recent_hands(name, RECENT_HANDS), live=name, table=name,
    )  # fmt: skip


def routes() -> list[Route]:
    return [Route("/", index), Route("/alerts", alerts), Route("/tables/{table}", table)]
