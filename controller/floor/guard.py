"""The console's HTTP limits, where uvicorn does not enforce them itself.

uvicorn (h11) has no deadline for a request's head or body, no cap on connections
that keeps a slot for a real request (``limit_concurrency`` answers 503 to everyone,
after the connection is already open), and reads any request body its app asks for.
Here:

* :func:`protocol_class`: uvicorn's h11 protocol with a deadline (``request_timeout_s``)
  for the head, then for the body; a head over ``max_header_bytes`` answered 431; at
  most ``max_connections`` open, the oldest connection still sending its head closed to
  make room (a slowloris, never a request being answered or a live stream); and a way
  for the app to drop its own connection (``scope["extensions"]["firebet.abort"]``).
* :class:`BodyLimit`: a body over ``max_body_bytes`` is refused (413) before it is
  read: by its Content-Length at once, by counting when it comes chunked.
* :class:`LoginThrottle`: failed logins per client and per user in a sliding window.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from controller.floor.settings import WebSettings

log = logging.getLogger("firebet.floor")

ABORT = "firebet.abort"
"""The ASGI scope extension that drops the request's connection (a slow stream reader)."""
STREAMING = "firebet.streaming"
"""The ASGI scope extension a long-lived response calls: its socket's send buffer is
fixed (``STREAM_SEND_BUFFER``, no autotuning to megabytes), so that a reader that stops
reading is seen to fall behind soon and the kernel holds little for it."""
STREAM_SEND_BUFFER = 65536


def _plain(status: int, reason: str, text: str) -> bytes:
    body = text.encode()
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


class GuardedProtocol(H11Protocol):
    """uvicorn's h11 protocol with the console's deadlines and connection cap."""

    limits: ClassVar[WebSettings] = WebSettings()
    cap: ClassVar[int] = WebSettings().max_connections
    waiting: ClassVar[dict[GuardedProtocol, None]] = {}
    """Open connections that have not sent a whole request head yet, oldest first."""
    closed_early: ClassVar[int] = 0

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        inner = self.app

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if _head_size(scope) > self.limits.max_header_bytes:  # it came whole, at once
                text = self._too_large().encode()
                await send({"type": "http.response.start", "status": 431,
                            "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                        (b"content-length", str(len(text)).encode()),
                                        (b"connection", b"close")]})  # fmt: skip
                await send({"type": "http.response.body", "body": text})
                return
            extensions = scope.setdefault("extensions", {})
            extensions[ABORT] = self.abort
            extensions[STREAMING] = self.streaming
            await inner(scope, receive, send)

        self.app = app
        self._deadline: asyncio.TimerHandle | None = None
        self._awaiting: str | None = None
        self._head_bytes = 0

    # deadlines -------------------------------------------------------------------------
    def _arm(self, what: str) -> None:
        self._disarm()
        self._awaiting = what
        self._deadline = self.loop.call_later(self.limits.request_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        self._awaiting = None

    def _expired(self) -> None:
        self._deadline = None
        log.debug("closed a connection: no whole request %s in time", self._awaiting)
        type(self).closed_early += 1
        self.abort()

    def _await_head(self) -> None:
        self._head_bytes = 0
        self.waiting[self] = None
        self._arm("head")

    def streaming(self) -> None:
        """This connection carries a live stream: a small, fixed kernel send buffer."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, STREAM_SEND_BUFFER)

    def abort(self) -> None:
        """Drop this connection now (nothing more is sent or read)."""
        self.waiting.pop(self, None)
        self._disarm()
        if not self.transport.is_closing():
            self.transport.abort()

    # the protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()
        if len(self.connections) > self.cap:
            oldest = next(iter(self.waiting))  # this one when no other is waiting
            type(self).closed_early += 1
            oldest.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.waiting.pop(self, None)
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._awaiting == "head":
            self._head_bytes += len(data)
        super().data_received(data)
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        if self._awaiting == "head" and state is not h11.IDLE:
            self.waiting.pop(self, None)
            if state is h11.SEND_BODY:
                self._arm("body")
            else:
                self._disarm()
        elif self._awaiting == "body" and state is not h11.SEND_BODY:
            self._disarm()

    def _too_large(self) -> str:
        return (
            f"the request line and headers are over {self.limits.max_header_bytes} bytes "
            "(web.max_header_bytes)\n"
        )

    def send_400_response(self, msg: str) -> None:
        if self._awaiting == "head" and self._head_bytes > self.limits.max_header_bytes:
            self.transport.write(_plain(431, "Request Header Fields Too Large", self._too_large()))
            self.transport.close()
            return
        super().send_400_response(msg)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._await_head()


def _head_size(scope: Any) -> int:
    """About the bytes of a request's line and headers."""
    line = len(scope["raw_path"]) + len(scope["query_string"]) + 16
    return line + sum(len(name) + len(value) + 4 for name, value in scope["headers"])


def protocol_class(limits: WebSettings, cap: int) -> type[GuardedProtocol]:
    """A protocol class for uvicorn's ``http=`` with these limits (one server a class)."""
    return type(
        "FloorProtocol",
        (GuardedProtocol,),
        {"limits": limits, "cap": cap, "waiting": {}, "closed_early": 0},
    )


class _TooLarge(Exception):
    pass


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` is answered 413, unread."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _refuse(self, send: Send) -> None:
        text = f"the request body is over {self.max_bytes} bytes (web.max_body_bytes)\n".encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(text)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": text})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and int(value) > self.max_bytes:  # h11 checked it
                await self._refuse(send)
                return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except _TooLarge:
            if started:
                raise
            await self._refuse(send)


MAX_BACKOFF_S = 900.0
"""The longest a client is held off (the back-off doubles up to this)."""


@dataclass
class _Failures:
    """One client's (or one client and user's) failed logins: the recent ones, how often
    they were held off (each hold twice the last), and until when."""

    times: deque[float]
    holds: int = 0
    until: float = 0.0


class LoginThrottle:
    """Failed logins counted per client and per (client, user), with back-off.

    Only the client that failed is held: after ``per_client`` failures within the window
    (any names) or ``per_user`` failures for one name, that client waits the window, and
    twice as long each time it is held again, up to :data:`MAX_BACKOFF_S`. Another client
    is never refused because this one failed, so no one can lock surveillance out of the
    room by failing on purpose. A name that is no surveillance user counts like one (the
    answer must not tell them apart). The counts are kept in a bounded LRU map.
    """

    def __init__(
        self,
        web: WebSettings,
        *,
        max_keys: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_client = web.login_failures_per_client
        self.per_user = web.login_failures_per_user
        self.window_s = web.login_window_s
        self.max_keys = max_keys
        self.clock = clock
        self._counts: OrderedDict[tuple[str, ...], _Failures] = OrderedDict()

    def _keys(self, client: str, user: str) -> tuple[tuple[tuple[str, ...], int], ...]:
        return ((("client", client[:80]), self.per_client),
                (("user", client[:80], user[:80]), self.per_user))  # fmt: skip

    def _get(self, key: tuple[str, ...], limit: int) -> _Failures:
        found = self._counts.get(key)
        if found is None:
            found = self._counts[key] = _Failures(deque(maxlen=limit))
            while len(self._counts) > self.max_keys:
                self._counts.popitem(last=False)
        else:
            self._counts.move_to_end(key)
        return found

    def wait_s(self, client: str, user: str) -> float:
        """Seconds before ``client`` may try ``user`` again (0: now)."""
        now = self.clock()
        waits = [0.0]
        for key, _ in self._keys(client, user):
            found = self._counts.get(key)
            if found is not None:
                waits.append(found.until - now)
        return max(waits)

    def failed(self, client: str, user: str) -> None:
        """Count one failed login of ``client`` for ``user``; hold the client off when it
        has failed too often."""
        now = self.clock()
        for key, limit in self._keys(client, user):
            found = self._get(key, limit)
            while found.times and found.times[0] <= now - self.window_s:
                found.times.popleft()
            found.times.append(now)
            if len(found.times) >= limit:
                found.until = now + min(self.window_s * 2**found.holds, MAX_BACKOFF_S)
                found.holds += 1
                found.times.clear()

    def succeeded(self, client: str, user: str) -> None:
        """``user`` is in from ``client``: that pair's count starts again."""
        self._counts.pop(("user", client[:80], user[:80]), None)
