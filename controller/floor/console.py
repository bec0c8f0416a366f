"""The console's renderer: pages and fragments from the floor's state, fed to the live streams.

The routes (:mod:`controller.floor.routes`) answer requests with what this renders;
:meth:`Console.on_changes` runs on the ingest thread after each stored batch and fans
the changed fragments out to every open event stream, each table's page hearing only
its table.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.responses import HTMLResponse

from controller.floor.figures import percent
from controller.floor.findings import money
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
from controller.floor.queue import Item, confirm_problem, queue_page
from controller.floor.server import FloorService
from controller.floor.settings import WebSettings, zone_name
from controller.floor.store import Alert
from controller.floor.summary import TILE_ALERTS, pays_at
from controller.floor.vocabulary import AlertKind, AlertStatus, Colour, Finding, finding_words

log = logging.getLogger("firebet.floor")
FRAME_S = 0.1  # the live stream's frame: one update per tile a frame, at most

RECENT_HANDS = 10


def _env(zone: tzinfo) -> Environment:
    env = Environment(
        loader=PackageLoader("controller.floor", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
        # the templates are the installed package's: they change only with a new install,
        # which restarts the service; checking each tile's file before each render took a
        # sixth of the live stream's time in a flood (bench/floor.py --publisher recorded)
        auto_reload=False,
    )
    env.filters["money"] = money
    env.filters["ordinal"] = ordinal
    env.filters["clock"] = lambda value: clock(value, zone)
    env.filters["finding"] = finding_words
    env.globals["AlertKind"] = AlertKind
    env.globals["AlertStatus"] = AlertStatus
    env.globals["Colour"] = Colour
    env.globals["Finding"] = Finding
    env.globals["timeline"] = timeline
    env.globals["zone_name"] = zone_name(zone)
    env.filters["percent"] = percent
    return env


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
        self.zone = service.settings.zone()
        self.env = _env(self.zone)
        self.env.globals["escalate_after_s"] = self.web.escalate_after_s
        self.env.globals["sound_after_s"] = self.web.sound_after_s
        # SPEC section 6: a floor with no approvals marks every hand as decided under
        # unapproved rules; with approvals, a table none covers is marked the same way
        self.env.globals["no_approvals"] = not service.settings.approved
        self.env.globals["approval_of"] = lambda table: service.ingest.approved_for(table)
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
            "problem": None, "can_confirm": False,
            "can_clear": alert.kind is not AlertKind.SURVEILLANCE,
        }  # fmt: skip
        if alert.hand is not None:
            hand = self.service.store.hand(alert.table, alert.hand)
            view["hand"] = hand
            if alert.kind is AlertKind.SURVEILLANCE and hand is not None:
                view["pays_at"] = pays_at(alert.detail.get("pays", {}), hand.get("wagers", {}))
                view["settled"] = hand.get("result") is not None
                view["paid"] = sum(int(v) for v in (hand.get("payouts") or {}).values())
        if alert.kind is AlertKind.SURVEILLANCE and alert.status is not AlertStatus.CONFIRMED:
            problem = confirm_problem(alert, self.service.ingest.summaries.get(alert.table))
            view["problem"] = problem
            view["can_confirm"] = problem is None
            view["can_clear"] = problem is not None or alert.status is AlertStatus.REFUSED
        return view

    def item_view(self, item: Item) -> dict[str, Any]:
        return {**self.alert_view(item.alert), "item": item}

    def queue_view(self, table: str | None = None, page: int = 1) -> dict[str, Any]:
        """One page of the queue, with the counts of everything open."""
        found = queue_page(self.service.store, table=table, page=page)
        return {
            "entries": [self.item_view(i) for i in found.items], "counts": found.counts,
            "open": found.open, "page": found.page, "pages": found.pages, "total": found.total,
            "table": table,
        }  # fmt: skip

    # fragments -------------------------------------------------------------------------
    def tile(self, summary: dict[str, Any], spot: tuple[int, int] | None = None) -> str:
        """A table's tile (``spot``: on the floor map; None: on its own page), with the
        Confirm of its newest open 5th point when the table would take it."""
        colour, words = tile_alert(summary, self.zone)
        return self.env.get_template("_tile.html").render(
            t=summary, spot=spot, boxes=boxes(summary), colour=colour, words=words,
            wagers=wagers_words(summary), confirm=self._tile_confirm(summary),
            back="/" if spot is not None else f"/tables/{quote(summary['table'])}",
        )  # fmt: skip

    def _tile_confirm(self, summary: dict[str, Any]) -> Alert | None:
        """The newest open 5th point of the table that the table would take a confirm for."""
        if not summary.get("waiting"):
            return None
        for alert in self.service.store.open_surveillance(
            table=summary["table"], limit=TILE_ALERTS
        ):
            if alert.status is not AlertStatus.SENT and confirm_problem(alert, summary) is None:
                return alert
        return None

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

    def page(self, name: str, user: str | None, **context: Any) -> HTMLResponse:
        """A whole page as ``user`` (None: the pit's read-only view) sees it."""
        return HTMLResponse(self.env.get_template(name).render(user=user, **context))

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
            began = time.monotonic()
            with self._frame_lock:
                changes, self._pending = self._pending, Changes()
            if changes and not self.closing:
                try:
                    self.render(changes)
                except Exception:  # the next frame tries again with what changes then
                    log.exception("the console could not render a live update")
            # a frame a FRAME_S from the start of the last, not a FRAME_S after its render
            time.sleep(max(0.0, FRAME_S - (time.monotonic() - began)))

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
        store = self.service.store
        return any(store.open_surveillance_of(t, hands) for t, hands in changes.hands.items())

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
