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
import math
import re
import secrets
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from fractions import Fraction
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
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
from controller.floor.guard import ABORT, STREAMING, BodyLimit, LoginThrottle
from controller.floor.layout import (
    FloorMap,
    boxes,
    clock,
    place,
    tile_alert,
    timeline,
    wagers_words,
)
from controller.floor.live import Changes
from controller.floor.passwords import Sessions, hash_password, verify_password
from controller.floor.queue import (
    KIND_WORDS,
    SHOWN,
    WHAT_WORDS,
    Item,
    confirm_problem,
    counts,
    queue,
)
from controller.floor.server import FloorService
from controller.floor.settings import WebSettings, zone_name
from controller.floor.store import Alert
from controller.floor.summary import pays_at

log = logging.getLogger("firebet.floor")
FRAME_S = 0.1  # the live stream's frame: one update per tile a frame, at most

COOKIE = "firebet_floor"
RECENT_HANDS = 10
KEEPALIVE_S = 15.0
ALERT_ID = re.compile(r"[1-9][0-9]{0,18}")
MAX_ID = 2**63 - 1
"""The largest alert id SQLite holds; anything else in its place is answered 400."""
HASHING_AT_ONCE = 2
"""Password hashes computed at once (scrypt takes 16 MB each)."""


def _env(zone: tzinfo) -> Environment:
    env = Environment(
        loader=PackageLoader("controller.floor", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["money"] = money
    env.filters["ordinal"] = ordinal
    env.filters["clock"] = lambda value: clock(value, zone)
    env.globals["KIND_WORDS"] = KIND_WORDS
    env.globals["WHAT_WORDS"] = WHAT_WORDS
    env.globals["timeline"] = timeline
    env.globals["zone_name"] = zone_name(zone)
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
    """One browser's event stream (``table``: a table's page, which hears only that table)."""

    loop: asyncio.AbstractEventLoop
    table: str | None
    user: str | None = None
    abort: Callable[[], None] | None = None
    queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    queued_bytes: int = 0
    dropped: bool = False


class Console:
    """Renders the console's pages and fragments and feeds the live streams."""

    def __init__(self, service: FloorService, web: WebSettings | None = None) -> None:
        self.service = service
        self.positions = service.settings.positions
        self.web = web or WebSettings()
        self.env = _env(service.settings.zone())
        self._subscribers: set[Subscriber] = set()
        self._lock = threading.Lock()
        self._mapped: frozenset[str] = frozenset()
        self.closing = False
        self.streams_dropped = 0
        self._frame_lock = threading.Lock()
        self._pending = Changes()  # what changed since the last frame
        self._frame_due = threading.Event()
        self._framer: threading.Thread | None = None

    # data for the templates ------------------------------------------------------------
    def summaries(self) -> list[dict[str, Any]]:
        current = self.service.ingest.summaries
        return [current[t] for t in sorted(current)]

    def floor_map(self) -> FloorMap:
        return place(self.service.ingest.summaries, self.positions)

    def alert_view(self, alert: Alert) -> dict[str, Any]:
        """An alert with what surveillance needs to judge it: the hand, its wagers, what
        they would be paid or (a settled hand) what was paid, and what can be done now."""
        view: dict[str, Any] = {
            "alert": alert, "hand": None, "pays_at": {}, "settled": False, "paid": 0,
            "problem": None, "can_confirm": False, "can_clear": alert.kind != "surveillance",
        }  # fmt: skip
        if alert.hand is not None:
            hand = self.service.store.hand(alert.table, alert.hand)
            view["hand"] = hand
            if alert.kind == "surveillance" and hand is not None:
                view["pays_at"] = pays_at(alert.detail.get("pays", {}), hand.get("wagers", {}))
                view["settled"] = hand.get("result") is not None
                view["paid"] = sum(int(v) for v in (hand.get("payouts") or {}).values())
        if alert.kind == "surveillance" and alert.status != "confirmed":
            problem = confirm_problem(alert, self.service.ingest.summaries.get(alert.table))
            view["problem"] = problem
            view["can_confirm"] = problem is None
            view["can_clear"] = problem is not None or alert.status == "refused"
        return view

    def item_view(self, item: Item) -> dict[str, Any]:
        return {**self.alert_view(item.alert), "item": item}

    def queue_view(self, table: str | None = None, page: int = 1) -> dict[str, Any]:
        """One page of the queue, with the counts of everything open."""
        items = queue(self.service.store, table=table)
        pages = max(1, -(-len(items) // SHOWN))
        page = min(max(page, 1), pages)
        shown = items[(page - 1) * SHOWN : page * SHOWN]
        by_kind = counts(items)
        return {
            "entries": [self.item_view(i) for i in shown], "counts": by_kind,
            "open": sum(by_kind.values()), "page": page, "pages": pages, "total": len(items),
            "table": table,
        }  # fmt: skip

    # fragments -------------------------------------------------------------------------
    def tile(self, summary: dict[str, Any], spot: tuple[int, int] | None = None) -> str:
        colour, words = tile_alert(summary)
        return self.env.get_template("_tile.html").render(
            t=summary, spot=spot, boxes=boxes(summary), colour=colour, words=words,
            wagers=wagers_words(summary),
        )  # fmt: skip

    def map_html(self) -> str:
        fm = self.floor_map()
        summaries = self.service.ingest.summaries
        tiles = [self.tile(summaries[t], fm.spots[t]) for t in sorted(summaries)]
        return self.env.get_template("_map.html").render(map=fm, tiles=tiles)

    def alert_queue(self, table: str | None = None) -> str:
        return self.env.get_template("_alerts.html").render(q=self.queue_view(table))

    def hands(self, table: str) -> str:
        return self.env.get_template("_hands.html").render(
            hands=self.service.store.recent_hands(table, RECENT_HANDS), table=table
        )

    def page(self, name: str, request: Request, **context: Any) -> HTMLResponse:
        user = current_user(request)
        html = self.env.get_template(name).render(user=user, **context)
        return HTMLResponse(html)

    # live updates ----------------------------------------------------------------------
    def subscribe(
        self, table: str | None, user: str | None = None, abort: Callable[[], None] | None = None
    ) -> Subscriber | None:
        """A new live stream; None when the pit's streams are all taken (``max_streams``;
        a logged-in surveillance user always gets one)."""
        sub = Subscriber(asyncio.get_running_loop(), table, user, abort)
        with self._lock:
            pit = sum(1 for s in self._subscribers if s.user is None)
            if user is None and pit >= self.web.max_streams:
                return None
            self._subscribers.add(sub)
        return sub

    def stream_counts(self) -> dict[str, int]:
        """The open live streams, by who holds them (``pit``, ``surveillance``)."""
        with self._lock:
            users = [s.user for s in self._subscribers]
        return {
            "pit": sum(u is None for u in users),
            "surveillance": sum(u is not None for u in users),
        }

    def unsubscribe(self, sub: Subscriber) -> None:
        with self._lock:
            self._subscribers.discard(sub)

    def _alerts_event(self, table: str | None) -> bytes:
        view = self.queue_view(table)
        html = self.env.get_template("_alerts.html").render(q=view)
        return sse("alerts", {"html": html, "open": view["open"]})

    def _tile_event(self, table: str, *, spot: bool) -> bytes | None:
        summary = self.service.ingest.summaries.get(table)
        if summary is None:
            return None
        where = self.floor_map().spots.get(table) if spot else None
        return sse(
            "table",
            {"table": table, "record": summary["record"], "html": self.tile(summary, where)},
        )

    def snapshot(self, table: str | None) -> bytes:
        """Everything a page shows, as events: sent first on every new stream, so nothing
        that changed between the page's rendering and the stream's start is missed. A
        table's page hears only that table."""
        if table is None:
            self._mapped = frozenset(self.service.ingest.summaries)
            return sse("map", {"html": self.map_html()}) + self._alerts_event(None)
        events = [self._tile_event(table, spot=False), self._alerts_event(table)]
        events.append(sse("hands", {"table": table, "html": self.hands(table)}))
        return b"".join(e for e in events if e is not None)

    def on_changes(self, changes: Changes) -> None:
        """Called on the ingest thread after each stored batch: kept for the next frame.
        A flood's many batches become one update per tile (and one alert queue) a frame,
        rendered on the console's own thread, never the ingest's."""
        with self._frame_lock:
            self._pending.merge(changes)
            if self._framer is None:
                self._framer = threading.Thread(target=self._frames, name="console-frames",
                                                daemon=True)  # fmt: skip
                self._framer.start()
        self._frame_due.set()

    def _frames(self) -> None:
        """Render what changed, at most once a :data:`FRAME_S`, until the console closes."""
        while not self.closing:
            self._frame_due.wait(timeout=1.0)
            self._frame_due.clear()
            with self._frame_lock:
                changes, self._pending = self._pending, Changes()
            if changes and not self.closing:
                try:
                    self.render(changes)
                except Exception:  # the next frame tries again with what changes then
                    log.exception("the console could not render a live update")
            time.sleep(FRAME_S)

    def render(self, changes: Changes) -> None:
        """Render one frame and fan it out, to each table's page only what is of that
        table."""
        with self._lock:
            subscribers = list(self._subscribers)
        if not subscribers:
            return
        alerts_changed = self._alerts_changed(changes)
        floor_events: list[bytes] = []
        if any(s.table is None for s in subscribers):
            names = frozenset(self.service.ingest.summaries)
            if names != self._mapped:  # a table new to the floor: the map is drawn again
                self._mapped = names
                floor_events.append(sse("map", {"html": self.map_html()}))
            else:
                for table in sorted(changes.tables):
                    event = self._tile_event(table, spot=True)
                    if event is not None:
                        floor_events.append(event)
            if alerts_changed:
                floor_events.append(self._alerts_event(None))
        per_table: dict[str, bytes] = {}
        for table in {s.table for s in subscribers if s.table is not None}:
            items: list[bytes] = []
            if table in changes.tables:
                event = self._tile_event(table, spot=False)
                if event is not None:
                    items.append(event)
            if alerts_changed:
                items.append(self._alerts_event(table))
            if table in changes.hands:
                items.append(sse("hands", {"table": table, "html": self.hands(table)}))
            per_table[table] = b"".join(items)
        for sub in subscribers:
            data = b"".join(floor_events) if sub.table is None else per_table[sub.table]
            if data:
                self._deliver(sub, data)

    def _alerts_changed(self, changes: Changes) -> bool:
        """Whether the queue shows something else now: an alert raised or moved on, or a
        hand with an open surveillance alert played on (settled: it shows what was paid)."""
        if changes.alerts:
            return True
        if not changes.hands:
            return False
        return any(
            a.hand in changes.hands.get(a.table, ()) for a in self.service.store.open_surveillance()
        )

    def _deliver(self, sub: Subscriber, data: bytes) -> None:
        def put() -> None:
            if sub.dropped:
                return
            if (
                sub.queue.qsize() >= self.web.stream_max_events
                or sub.queued_bytes + len(data) > self.web.stream_max_bytes
            ):
                self._drop(sub)
            else:
                sub.queued_bytes += len(data)
                sub.queue.put_nowait(data)

        try:
            sub.loop.call_soon_threadsafe(put)
        except RuntimeError:  # its loop is gone
            self.unsubscribe(sub)

    def _drop(self, sub: Subscriber) -> None:
        """A reader that fell behind: its queue is let go and its connection dropped; the
        page's EventSource reconnects and its new stream starts with everything shown."""
        log.info(
            "dropped a live stream %d events (%d bytes) behind (web.stream_max_events, "
            "web.stream_max_bytes); its page reconnects", sub.queue.qsize(), sub.queued_bytes,
        )  # fmt: skip
        sub.dropped = True
        while not sub.queue.empty():
            sub.queue.get_nowait()
        sub.queued_bytes = 0
        sub.queue.put_nowait(None)
        self.streams_dropped += 1
        self.unsubscribe(sub)
        if sub.abort is not None:
            sub.abort()

    def close(self) -> None:
        self.closing = True
        self._frame_due.set()
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


def alert_id(text: str) -> int | None:
    """The alert id in a URL (1 to 2^63-1, plain digits); None for anything else."""
    if not ALERT_ID.fullmatch(text):
        return None
    number = int(text)
    return number if number <= MAX_ID else None


def bad_alert_id(text: str) -> Response:
    shown = text if len(text) <= 40 else text[:40] + "..."
    return PlainTextResponse(
        f"alert id {shown!r} is not an alert number (1 to {MAX_ID})", status_code=400
    )


async def _form(request: Request) -> dict[str, str]:
    body = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


def build_app(
    service: FloorService, users: dict[str, str], web: WebSettings | None = None
) -> Starlette:
    """The console's ASGI application."""
    web = web or WebSettings()
    console = Console(service, web)
    service.listen(console.on_changes)
    throttle = LoginThrottle(set(users), web)
    hashing = asyncio.Semaphore(HASHING_AT_ONCE)
    stand_in = hash_password(secrets.token_urlsafe(16))  # an unknown user costs the same

    def secure(request: Request) -> bool:
        """The cookie is Secure behind a TLS proxy and whenever the console speaks https."""
        return web.behind_tls_proxy or request.url.scheme == "https"

    def index(request: Request) -> Response:
        return console.page(
            "index.html", request, map_html=console.map_html(), q=console.queue_view(),
            live=None,
        )  # fmt: skip

    def alerts(request: Request) -> Response:
        page = request.query_params.get("page", "1")
        number = int(page) if page.isascii() and page.isdigit() and len(page) < 7 else 1
        every = [console.alert_view(a) for a in service.store.alerts(open_only=False)]
        return console.page(
            "alerts.html", request, q=console.queue_view(page=number), history=every, live=None
        )

    def table(request: Request) -> Response:
        name = request.path_params["table"]
        summary = service.ingest.summaries.get(name)
        if summary is None:
            shown = name if len(name) <= 64 else name[:64] + "..."
            return PlainTextResponse(f"no table {shown!r} on this floor", status_code=404)
        return console.page(
            "table.html", request, t=summary, tile=console.tile(summary),
            q=console.queue_view(name), hands=service.store.recent_hands(name, RECENT_HANDS),
            live=name,
        )  # fmt: skip

    def api_tables(request: Request) -> Response:
        return JSONResponse(console.summaries())

    def alert_json(a: Alert) -> dict[str, Any]:
        return {
            "id": a.id, "table": a.table, "kind": a.kind, "hand": a.hand,
            "record": a.record, "raised_at": a.raised_at, "status": a.status,
            "status_by": a.status_by, "detail": a.detail,
        }  # fmt: skip

    def api_alerts(request: Request) -> Response:
        """The open queue in its order (a flood: its newest alert, with ``flood``), or with
        ``?all=1`` the newest 200 alerts of every status."""
        if request.query_params.get("all") == "1":
            return JSONResponse([alert_json(a) for a in service.store.alerts(open_only=False)])
        out = []
        for item in queue(service.store):
            entry = alert_json(item.alert)
            if item.flood:
                entry["flood"] = {
                    "count": item.count, "first_record": item.first_record,
                    "last_record": item.last_record, "whats": item.whats,
                }  # fmt: skip
            out.append(entry)
        return JSONResponse(out)

    async def events(request: Request) -> Response:
        sub = console.subscribe(
            (request.query_params.get("table") or "")[:64] or None,
            current_user(request),
            request.scope.get("extensions", {}).get(ABORT),
        )
        if sub is None:
            return PlainTextResponse(
                f"the pit's {web.max_streams} live streams are all open (web.max_streams); "
                "reload later, or log in", status_code=503, headers={"Retry-After": "30"},
            )  # fmt: skip
        streaming = request.scope.get("extensions", {}).get(STREAMING)
        if streaming is not None:
            streaming()

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
                    sub.queued_bytes -= len(data)
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
        name, password = form.get("user", "")[:200], form.get("password", "")[:1024]
        client = request.client.host if request.client else "?"
        wait = throttle.wait_s(client, name)
        if wait > 0:
            seconds = math.ceil(wait)
            refused = console.page(
                "login.html", request, live=None,
                error=f"too many failed logins: try again in {seconds} s",
            )  # fmt: skip
            refused.status_code = 429
            refused.headers["Retry-After"] = str(seconds)
            return refused
        encoded = users.get(name)
        async with hashing:  # the same work for a name that is no user
            matched = await asyncio.to_thread(verify_password, password, encoded or stand_in)
        ok = encoded is not None and matched
        if not ok or not _same_origin(request):
            throttle.failed(client, name)
            log.warning("failed surveillance login for %r from %s", name[:64], client)
            refused = console.page("login.html", request, error="wrong user or password", live=None)
            refused.status_code = 401
            return refused
        throttle.succeeded(name)
        token = request.app.state.sessions.open(name)
        log.info("surveillance user %s logged in", name)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=secure(request))
        return response

    async def logout(request: Request) -> Response:
        request.app.state.sessions.close(request.cookies.get(COOKIE))
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(COOKIE, httponly=True, samesite="strict", secure=secure(request))
        return response

    async def act(request: Request, what: str) -> Response:
        user = current_user(request)
        if user is None:
            return PlainTextResponse("surveillance login needed", status_code=401)
        if not _same_origin(request):
            return PlainTextResponse("cross-site request refused", status_code=403)
        number = alert_id(request.path_params["alert"])
        if number is None:
            return bad_alert_id(request.path_params["alert"])
        form = await _form(request)
        if what == "confirm":
            future = service.call(lambda: service.ingest.confirm(number, user, str(uuid.uuid4())))
        else:
            note, flood = form.get("note", "")[:500], form.get("flood") == "1"
            future = service.call(lambda: service.ingest.clear(number, user, note, flood=flood))
        try:
            await asyncio.wrap_future(future)
        except LookupError as exc:
            return PlainTextResponse(str(exc), status_code=404)
        except ValueError as exc:  # the table would refuse it: say why, send nothing
            return PlainTextResponse(str(exc), status_code=409)
        back = form.get("back", "/")
        return RedirectResponse(back if back.startswith("/") and not back.startswith("//") else "/",
                                status_code=303)  # fmt: skip

    async def confirm(request: Request) -> Response:
        return await act(request, "confirm")

    async def clear(request: Request) -> Response:
        return await act(request, "clear")

    zone = service.settings.zone()  # the console's clock and the shifts' days alike

    def figures_shown(request: Request) -> tuple[shiftpage.Shown, list[str]] | Response:
        """The figures a query asks for, with the tables it could name (one read of
        them); a 400 naming what is wrong in the query."""
        names = service.store.table_names()
        try:
            asked = shiftpage.parse_query(
                list(request.query_params.multi_items()), shifts=service.settings.shifts,
                zone=zone, tables=names, now=datetime.now(UTC),
            )  # fmt: skip
        except shiftpage.BadQuery as exc:
            return PlainTextResponse(f"bad figures query: {exc}", status_code=400)
        return shiftpage.load(service.store, asked), names

    def figures_page(request: Request) -> Response:
        found = figures_shown(request)
        if isinstance(found, Response):
            return found
        shown, names = found
        asked = shown.asked
        rows = shown.tables if asked.table is not None else [*shown.tables, shown.floor]
        scope = shown.scope
        query = {k: v for k, v in request.query_params.items() if k != "table"}
        return console.page(
            "figures.html", request, asked=asked, shifts=service.settings.shifts,
            tables=names, rows=rows, scope=scope,
            shares=[Fraction(c, scope.hands) if scope.hands else None for c in scope.points],
            exact=exact_distribution(), charts=shiftpage.charts(shown),
            when=shiftpage.when(shown), zone=zone_name(zone),
            csv_url="/figures.csv?" + urlencode(request.query_params.multi_items()),
            table_url=lambda t: "/figures?" + urlencode({**query, "table": t}), live=None,
        )  # fmt: skip

    def figures_csv(request: Request) -> Response:
        found = figures_shown(request)
        if isinstance(found, Response):
            return found
        shown, _ = found
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
        return JSONResponse(service.health())  # FloorService.health: what /healthz says

    service.metrics.watch(service, console.stream_counts)

    def metrics(request: Request) -> Response:
        body, kind = service.metrics.text()  # controller.floor.metrics: docs/floor.md, Metrics
        return Response(body, headers={"Content-Type": kind})

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/alerts", alerts),
            Route("/tables/{table}", table),
            Route("/events", events),
            Route("/api/tables", api_tables),
            Route("/api/alerts", api_alerts),
            Route("/healthz", health),
            Route("/metrics", metrics),
            Route("/figures", figures_page),
            Route("/figures.csv", figures_csv),
            Route("/favicon.ico", favicon),
            Route("/favicon.svg", favicon),
            Route("/login", login_page, methods=["GET"]),
            Route("/login", login, methods=["POST"]),
            Route("/logout", logout, methods=["POST"]),
            Route("/alerts/{alert}/confirm", confirm, methods=["POST"]),
            Route("/alerts/{alert}/clear", clear, methods=["POST"]),
        ],
        middleware=[Middleware(BodyLimit, max_bytes=web.max_body_bytes)],
    )
    app.state.sessions = Sessions()
    app.state.console = console
    return app
