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


class LoginThrottle:
    """Failed logins counted per client and per user name over a sliding window.

    A name that is not a surveillance user is counted like one (the answer must not tell
    them apart); such names and the clients are kept in bounded LRU maps, the real
    users' counts apart so that a flood of other names cannot push them out.
    """

    def __init__(
        self,
        users: set[str],
        web: WebSettings,
        *,
        max_keys: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.users = users
        self.per_client = web.login_failures_per_client
        self.per_user = web.login_failures_per_user
        self.window_s = web.login_window_s
        self.max_keys = max_keys
        self.clock = clock
        self._known: dict[str, deque[float]] = {}
        self._other: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()

    def _times(self, kind: str, name: str, limit: int) -> deque[float]:
        if kind == "user" and name in self.users:
            return self._known.setdefault(name, deque(maxlen=limit))
        key = (kind, name[:80])
        times = self._other.get(key)
        if times is None:
            times = self._other[key] = deque(maxlen=limit)
            while len(self._other) > self.max_keys:
                self._other.popitem(last=False)
        else:
            self._other.move_to_end(key)
        return times

    def _wait(self, times: deque[float], limit: int, now: float) -> float:
        if len(times) < limit:
            return 0.0
        return max(0.0, times[0] + self.window_s - now)

    def wait_s(self, client: str, user: str) -> float:
        """Seconds before ``client`` may try ``user`` again (0: now)."""
        now = self.clock()
        return max(
            self._wait(self._times("client", client, self.per_client), self.per_client, now),
            self._wait(self._times("user", user, self.per_user), self.per_user, now),
        )

    def failed(self, client: str, user: str) -> None:
        """Count one failed login."""
        now = self.clock()
        self._times("client", client, self.per_client).append(now)
        self._times("user", user, self.per_user).append(now)

    def succeeded(self, user: str) -> None:
        """The user is in: their count starts again."""
        self._known.pop(user, None)
