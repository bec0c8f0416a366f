"""The floor console: server-rendered pages and live updates by server-sent events.

Pages (Jinja2, rendered on the server, no front-end build): every table at a
glance with the alert queue (``/``), the whole alert list (``/alerts``) and one
table's recent hands (``/tables/<id>``). ``/events`` streams fragments of those
pages as the ingest thread stores new records; a few lines of inline script put
them in place. The pit reads without a login; confirming a surveillance alert or
clearing an integrity, audit or offline alert needs a surveillance login (users
and scrypt hashes in ``floor.toml``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from controller.core.odds import exact_distribution
from controller.floor import shiftpage
from controller.floor.figures import percent
from controller.floor.findings import money
from controller.floor.live import Changes
from controller.floor.passwords import Sessions, verify_password
from controller.floor.server import FloorService
from controller.floor.settings import local_zone, zone_name
from controller.floor.store import Alert
from controller.floor.summary import pays_at

log = logging.getLogger("firebet.floor")

COOKIE = "firebet_floor"
RECENT_HANDS = 10
KEEPALIVE_S = 15.0
SUBSCRIBER_BACKLOG = 2000


def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("controller.floor", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["money"] = money
    env.filters["ordinal"] = ordinal
    env.filters["percent"] = percent
    return env


FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<rect width="32" height="32" rx="6" fill="#18402b"/>'
    '<rect x="7" y="7" width="18" height="18" rx="3" fill="#fff"/>'
    '<circle cx="12" cy="12" r="2" fill="#c00"/><circle cx="16" cy="16" r="2" fill="#c00"/>'
    '<circle cx="20" cy="20" r="2" fill="#c00"/></svg>'
)
"""The console's icon: a die showing three on the felt's green (its own, no file)."""


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(eq=False)
class Subscriber:
    """One browser's event stream."""

    loop: asyncio.AbstractEventLoop
    table: str | None
    queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    dropped: bool = False


class Console:
    """Renders the console's pages and fragments and feeds the live streams."""

    def __init__(self, service: FloorService) -> None:
        self.service = service
        self.env = _env()
        self._subscribers: set[Subscriber] = set()
        self._lock = threading.Lock()
        self.closing = False

    # data for the templates ------------------------------------------------------------
    def summaries(self) -> list[dict[str, Any]]:
        current = self.service.ingest.summaries
        return [current[t] for t in sorted(current)]

    def alert_view(self, alert: Alert) -> dict[str, Any]:
        """An alert with what surveillance needs to judge it (the hand, its wagers, pays)."""
        view: dict[str, Any] = {"alert": alert, "hand": None, "pays_at": {}}
        if alert.hand is not None:
            hand = self.service.store.hand(alert.table, alert.hand)
            view["hand"] = hand
            if alert.kind == "surveillance" and hand is not None:
                view["pays_at"] = pays_at(alert.detail.get("pays", {}), hand.get("wagers", {}))
        return view

    def open_alerts(self) -> list[dict[str, Any]]:
        return [self.alert_view(a) for a in self.service.store.alerts(open_only=True)]

    # fragments -------------------------------------------------------------------------
    def table_row(self, summary: dict[str, Any]) -> str:
        return self.env.get_template("_table_row.html").render(t=summary)

    def alert_queue(self) -> str:
        return self.env.get_template("_alerts.html").render(alerts=self.open_alerts())

    def hands(self, table: str) -> str:
        return self.env.get_template("_hands.html").render(
            hands=self.service.store.recent_hands(table, RECENT_HANDS), table=table
        )

    def page(self, name: str, request: Request, **context: Any) -> HTMLResponse:
        user = current_user(request)
        html = self.env.get_template(name).render(user=user, **context)
        return HTMLResponse(html)

    # live updates ----------------------------------------------------------------------
    def subscribe(self, table: str | None) -> Subscriber:
        sub = Subscriber(asyncio.get_running_loop(), table)
        with self._lock:
            self._subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        with self._lock:
            self._subscribers.discard(sub)

    def snapshot(self, table: str | None) -> bytes:
        """Everything a page shows, as events: sent first on every new stream, so nothing
        that changed between the page's rendering and the stream's start is missed."""
        events = [
            sse("table", {"table": s["table"], "record": s["record"], "html": self.table_row(s)})
            for s in self.summaries()
        ]
        events.append(sse("alerts", {"html": self.alert_queue()}))
        if table is not None:
            events.append(sse("hands", {"table": table, "html": self.hands(table)}))
        return b"".join(events)

    def on_changes(self, changes: Changes) -> None:
        """Called on the ingest thread after each stored batch: render and fan out."""
        with self._lock:
            subscribers = list(self._subscribers)
        if not subscribers:
            return
        events: list[bytes] = []
        summaries = self.service.ingest.summaries
        for table in sorted(changes.tables):
            summary = summaries.get(table)
            if summary is not None:
                events.append(
                    sse("table", {"table": table, "record": summary["record"],
                                  "html": self.table_row(summary)})
                )  # fmt: skip
        if changes.alerts:
            events.append(sse("alerts", {"html": self.alert_queue()}))
        watched = {s.table for s in subscribers if s.table is not None}
        per_table = {
            t: sse("hands", {"table": t, "html": self.hands(t)})
            for t in watched
            if t in changes.hands
        }
        for sub in subscribers:
            items = events + ([per_table[sub.table]] if sub.table in per_table else [])
            if items:
                self._deliver(sub, b"".join(items))

    def _deliver(self, sub: Subscriber, data: bytes) -> None:
        def put() -> None:
            if sub.queue.qsize() >= SUBSCRIBER_BACKLOG:
                sub.dropped = True  # a browser that cannot keep up reloads instead
                sub.queue.put_nowait(None)
            elif not sub.dropped:
                sub.queue.put_nowait(data)

        try:
            sub.loop.call_soon_threadsafe(put)
        except RuntimeError:  # its loop is gone
            self.unsubscribe(sub)

    def close(self) -> None:
        self.closing = True
        with self._lock:
            subscribers = list(self._subscribers)
        for sub in subscribers:
            with contextlib.suppress(RuntimeError):  # its loop is gone already
                sub.loop.call_soon_threadsafe(sub.queue.put_nowait, None)


def sse(event: str, data: dict[str, Any]) -> bytes:
    """One server-sent event."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def current_user(request: Request) -> str | None:
    sessions: Sessions = request.app.state.sessions
    return sessions.user(request.cookies.get(COOKIE))


def _same_origin(request: Request) -> bool:
    """A state-changing request must come from the console's own pages."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if not origin:
        return True  # not a browser (curl, tests); the session cookie still has to match
    return urlsplit(origin).netloc == request.headers.get("host", "")


async def _form(request: Request) -> dict[str, str]:
    body = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


def build_app(
    service: FloorService, users: dict[str, str], *, secure_cookie: bool = False
) -> Starlette:
    """The console's ASGI application."""
    console = Console(service)
    service.listen(console.on_changes)

    def index(request: Request) -> Response:
        return console.page(
            "index.html", request, tables=console.summaries(), alerts=console.open_alerts(),
            row=console.table_row, live=None,
        )  # fmt: skip

    def alerts(request: Request) -> Response:
        every = [console.alert_view(a) for a in service.store.alerts(open_only=False)]
        return console.page(
            "alerts.html", request, alerts=console.open_alerts(), history=every, live=None
        )

    def table(request: Request) -> Response:
        name = request.path_params["table"]
        summary = service.ingest.summaries.get(name)
        if summary is None:
            return PlainTextResponse(f"no table {name!r} on this floor", status_code=404)
        return console.page(
            "table.html", request, t=summary, row=console.table_row,
            hands=service.store.recent_hands(name, RECENT_HANDS), live=name,
        )  # fmt: skip

    def api_tables(request: Request) -> Response:
        return JSONResponse(console.summaries())

    def api_alerts(request: Request) -> Response:
        every = request.query_params.get("all") == "1"
        return JSONResponse(
            [
                {
                    "id": a.id, "table": a.table, "kind": a.kind, "hand": a.hand,
                    "record": a.record, "raised_at": a.raised_at, "status": a.status,
                    "status_by": a.status_by, "detail": a.detail,
                }
                for a in service.store.alerts(open_only=not every)
            ]
        )  # fmt: skip

    async def events(request: Request) -> Response:
        sub = console.subscribe(request.query_params.get("table") or None)

        async def stream() -> AsyncIterator[bytes]:
            try:
                yield b"retry: 1000\n\n" + await asyncio.to_thread(console.snapshot, sub.table)
                last = time.monotonic()
                while not console.closing:
                    try:
                        data = await asyncio.wait_for(sub.queue.get(), timeout=1.0)
                    except TimeoutError:
                        if await request.is_disconnected():
                            return
                        if time.monotonic() - last >= KEEPALIVE_S:
                            last = time.monotonic()
                            yield b": keepalive\n\n"
                        continue
                    if data is None:
                        return
                    last = time.monotonic()
                    yield data
            finally:
                console.unsubscribe(sub)

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    def login_page(request: Request) -> Response:
        return console.page("login.html", request, error=None, live=None)

    async def login(request: Request) -> Response:
        form = await _form(request)
        name, password = form.get("user", ""), form.get("password", "")
        encoded = users.get(name)
        ok = encoded is not None and await asyncio.to_thread(verify_password, password, encoded)
        if not ok or not _same_origin(request):
            log.warning("failed surveillance login for %r", name)
            refused = console.page("login.html", request, error="wrong user or password", live=None)
            refused.status_code = 401
            return refused
        token = request.app.state.sessions.open(name)
        log.info("surveillance user %s logged in", name)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=secure_cookie)
        return response

    async def logout(request: Request) -> Response:
        request.app.state.sessions.close(request.cookies.get(COOKIE))
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(COOKIE)
        return response

    async def act(request: Request, what: str) -> Response:
        user = current_user(request)
        if user is None:
            return PlainTextResponse("surveillance login needed", status_code=401)
        if not _same_origin(request):
            return PlainTextResponse("cross-site request refused", status_code=403)
        alert_id = int(request.path_params["alert"])
        form = await _form(request)
        if what == "confirm":
            future = service.call(lambda: service.ingest.confirm(alert_id, user, str(uuid.uuid4())))
        else:
            future = service.call(
                lambda: service.ingest.clear(alert_id, user, form.get("note", "")[:500])
            )
        try:
            await asyncio.wrap_future(future)
        except LookupError as exc:
            return PlainTextResponse(str(exc), status_code=404)
        back = form.get("back", "/")
        return RedirectResponse(back if back.startswith("/") and not back.startswith("//") else "/",
                                status_code=303)  # fmt: skip

    async def confirm(request: Request) -> Response:
        return await act(request, "confirm")

    async def clear(request: Request) -> Response:
        return await act(request, "clear")

    zone = local_zone()

    def figures_asked(request: Request) -> shiftpage.Asked:
        return shiftpage.parse_query(
            list(request.query_params.multi_items()), shifts=service.settings.shifts,
            zone=zone, tables=service.store.table_names(), now=datetime.now(UTC),
        )  # fmt: skip

    def figures_page(request: Request) -> Response:
        try:
            asked = figures_asked(request)
        except shiftpage.BadQuery as exc:
            return PlainTextResponse(f"bad figures query: {exc}", status_code=400)
        shown = shiftpage.load(service.store, asked)
        rows = shown.tables if asked.table is not None else [*shown.tables, shown.floor]
        scope = shown.scope
        query = {k: v for k, v in request.query_params.items() if k != "table"}
        return console.page(
            "figures.html", request, asked=asked, shifts=service.settings.shifts,
            tables=service.store.table_names(), rows=rows, scope=scope,
            shares=[Fraction(c, scope.hands) if scope.hands else None for c in scope.points],
            exact=exact_distribution(), charts=shiftpage.charts(shown),
            when=shiftpage.when(shown), zone=zone_name(zone),
            csv_url="/figures.csv?" + urlencode(request.query_params.multi_items()),
            table_url=lambda t: "/figures?" + urlencode({**query, "table": t}), live=None,
        )  # fmt: skip

    def figures_csv(request: Request) -> Response:
        try:
            asked = figures_asked(request)
        except shiftpage.BadQuery as exc:
            return PlainTextResponse(f"bad figures query: {exc}", status_code=400)
        shown = shiftpage.load(service.store, asked)
        return Response(
            shiftpage.csv_text(shown),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{shiftpage.csv_name(shown)}"'},
        )

    def favicon(request: Request) -> Response:
        return Response(
            FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"}
        )

    def health(request: Request) -> Response:
        return JSONResponse(
            {"broker": service.connected.is_set(), "last_error": service.last_error,
             "tables": len(service.ingest.summaries), "ingested": service.ingest.ingested}
        )  # fmt: skip

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/alerts", alerts),
            Route("/tables/{table}", table),
            Route("/events", events),
            Route("/api/tables", api_tables),
            Route("/api/alerts", api_alerts),
            Route("/healthz", health),
            Route("/figures", figures_page),
            Route("/figures.csv", figures_csv),
            Route("/favicon.ico", favicon),
            Route("/favicon.svg", favicon),
            Route("/login", login_page, methods=["GET"]),
            Route("/login", login, methods=["POST"]),
            Route("/logout", logout, methods=["POST"]),
            Route("/alerts/{alert:int}/confirm", confirm, methods=["POST"]),
            Route("/alerts/{alert:int}/clear", clear, methods=["POST"]),
        ],
    )
    app.state.sessions = Sessions()
    app.state.console = console
    return app
