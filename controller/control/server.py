"""The control socket: how ``firebet status``, ``roll``, ``clear-halt``... reach the service.

Transport and privileges only, no game logic. A Unix stream socket (never a
network port) speaks JSON lines (:mod:`controller.control.protocol`): each
request is one object on one line, answered by one object on one line, in order.

One selector thread does all the socket work: it accepts, reads, cuts lines and
writes replies; :mod:`controller.control.desk` decides what each line gets (the
role check, retries of the same ``id``, per-user pacing of readings, the lanes
that call the handler) and :mod:`controller.control.socketfile` binds the file.
So hundreds of idle or slow connections cost a file descriptor each and nothing
else; a connection with no request for ``idle_timeout`` (30 s) is closed, and when
the connection cap is reached the longest-idle connection of the user holding the
most is closed to make room.

Who may do what is decided from the peer's kernel credentials (``SO_PEERCRED``),
before the service's handler ever sees the request: ``reader`` (anyone who can
connect: the socket is mode 0660), ``dealer`` or ``technician``, each op's role in
:data:`~controller.control.protocol.ROLES`.

The handler gets a :class:`~controller.control.protocol.Request` whose ``actor``
("alice(1001)") goes into the journal with every state change. It returns the
reply, or a :class:`~concurrent.futures.Future` of it (the service's engine jobs).
See ``docs/architecture.md`` (the control socket).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from controller.control import socketfile
from controller.control.conn import Conn
from controller.control.desk import LANE_DUTY, LANE_SIZE, LANES, READ_RATE, RequestDesk
from controller.control.protocol import (
    IDLE_TIMEOUT_S,
    MAX_LINE,
    ROLES,
    Handler,
    Identify,
    IdentityCache,
    Role,
    encode,
    identify,
    peer_credentials,
    role_of,
)
from controller.core.errors import FirebetError

log = logging.getLogger("firebet.control")

MAX_CONNECTIONS = 1000  # open connections at once (fewer if the file limit is lower)
_LISTEN, _WAKE = object(), object()


class ControlServer:
    """The service's end of the control socket, served from background threads.

    ``handler(request)`` is called from the lane threads (one thread per lane,
    so two lanes may call it at once): it must be thread-safe. It returns the
    reply (or a Future of it); ``"ok": true`` is added when the reply has no
    ``ok``. A :class:`FirebetError` it raises becomes ``{"ok": false, "error":
    str(exc)}``; any other exception is logged and answered as an internal error.
    """

    def __init__(
        self,
        path: Path | str,
        handler: Handler,
        dealer_group: str,
        technician_group: str,
        *,
        identify: Identify = identify,
        service_uid: int | None = None,
        roles: Mapping[str, Role] = ROLES,
        max_line: int = MAX_LINE,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT_S,
        lanes: Mapping[str, str] = LANES,
        lane_size: int = LANE_SIZE,
        read_rate: float = READ_RATE,
        lane_duty: Mapping[str, float] = LANE_DUTY,
    ) -> None:
        self.path = Path(path)
        self.groups = {Role.DEALER: dealer_group, Role.TECHNICIAN: technician_group}
        self.identities = IdentityCache(identify)  # who a connecting uid and gid are
        self.service_uid = os.getuid() if service_uid is None else service_uid
        self.max_line = max_line
        self.max_connections = max_connections
        self.idle_timeout = idle_timeout
        self.desk = RequestDesk(
            self,
            handler,
            roles,
            self.groups,
            lanes=lanes,
            lane_size=lane_size,
            read_rate=read_rate,
            lane_duty=lane_duty,
        )
        self._listener: socket.socket | None = None
        self._listening = False
        self._resume_at = 0.0
        self._inode: socketfile.Inode | None = None
        self._thread: threading.Thread | None = None
        self._sel: selectors.BaseSelector | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._conns: dict[Conn, None] = {}  # insertion-ordered set
        self._stopping = threading.Event()

    # lifecycle ----------------------------------------------------------------------
    @property
    def address(self) -> str:
        """The socket's filesystem path."""
        return str(self.path)

    @property
    def serving(self) -> bool:
        """Whether the selector thread is running."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def connections(self) -> int:
        """Open client connections (for tests and the benchmark)."""
        return len(self._conns)

    def start(self) -> None:
        """Bind the socket (mode 0660, stale file replaced) and serve in the background.

        Raises :class:`FirebetError` if another live server answers on the path or
        the path is something other than a socket.
        """
        if self._listener is not None:
            raise FirebetError(f"control socket {self.path} is already being served")
        listener, self._inode = socketfile.bind(self.path)
        self._listener = listener
        self.max_connections = socketfile.cap_connections(self.max_connections)
        self._stopping.clear()
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, _WAKE)
        self._sel.register(listener, selectors.EVENT_READ, _LISTEN)
        self._listening = True
        self.desk.start()
        self._thread = threading.Thread(target=self._loop, name="control-socket", daemon=True)
        self._thread.start()
        log.info("control socket listening at %s", self.path)

    def stop(self, timeout: float = 2.0) -> None:
        """Stop accepting, close every connection and remove the socket file."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        self._stopping.set()
        self.wake()
        if self._thread is not None:
            self._thread.join(timeout)
        self.desk.stop(timeout)
        listener.close()
        for end in (self._wake_r, self._wake_w):
            if end is not None:
                end.close()
        if self._sel is not None:
            self._sel.close()
        socketfile.remove(self.path, self._inode)
        log.info("control socket at %s closed", self.path)

    def __enter__(self) -> ControlServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # the selector thread --------------------------------------------------------------
    def _loop(self) -> None:
        sel = self._sel
        assert sel is not None
        tick = max(0.01, min(0.5, self.idle_timeout / 4))
        next_sweep = 0.0
        try:
            wait: float | None = None  # no client yet: nothing to time
            while not self._stopping.is_set():
                for key, mask in sel.select(wait):
                    if key.data is _LISTEN:
                        self._accept()
                    elif key.data is _WAKE:
                        self._drain_wake()
                    else:
                        conn: Conn = key.data
                        if mask & selectors.EVENT_WRITE:
                            self._flush(conn)
                        if mask & selectors.EVENT_READ and conn.open:
                            self._read(conn)
                self.desk.deliver()
                now = time.monotonic()
                paced = self.desk.release_paced(now)
                # the sweep's tick only while it has work (a connection to time out, the
                # listener paused): an idle socket sleeps until a client or a wake-up comes
                # (SPEC section 7: the idle CPU budget)
                timed = self._conns or not self._listening
                wait = min(tick, paced) if timed else paced
                if wait == math.inf:
                    wait = None
                if now >= next_sweep:
                    self._sweep(now)
                    next_sweep = now + tick
        except Exception:  # pragma: no cover - a bug here must be loud, not a silent stop
            log.exception("control socket loop failed")
            raise
        finally:
            for conn in list(self._conns):
                self._close(conn)

    def wake(self) -> None:
        """Wake the selector thread (any thread)."""
        if self._wake_w is not None:
            with contextlib.suppress(OSError):  # full: a wake-up is already pending
                self._wake_w.send(b"!")

    def _drain_wake(self) -> None:
        assert self._wake_r is not None
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass

    def _accept(self) -> None:
        listener = self._listener
        assert listener is not None
        for _ in range(64):  # a burst, then the others get their turn
            try:
                sock, _ = listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    if self._evict():
                        continue
                    self._pause_listening(time.monotonic() + 0.1)
                    log.warning("control socket: out of file descriptors (%s)", exc)
                    return
                log.warning("control socket accept failed: %s", exc)
                return
            self._admit(sock)

    def _admit(self, sock: socket.socket) -> None:
        try:
            sock.setblocking(False)
            pid, uid, gid = peer_credentials(sock)
            identity = replace(self.identities(uid, gid), pid=pid)
        except Exception:
            log.exception("control socket: cannot tell who connected")
            sock.close()
            return
        if len(self._conns) >= self.max_connections:
            self._evict()
        role = role_of(
            identity, self.groups[Role.DEALER], self.groups[Role.TECHNICIAN], self.service_uid
        )
        conn = Conn(sock, identity, role, time.monotonic())
        self._conns[conn] = None
        self._want(conn)

    def _evict(self) -> bool:
        """Close the longest-idle connection of the user holding the most; False if none."""
        counts = Counter(c.identity.uid for c in self._conns)
        for uid, _ in counts.most_common():
            idle = [
                c for c in self._conns if c.identity.uid == uid and not c.pending and not c.outbuf
            ]
            if idle:
                victim = min(idle, key=lambda c: c.last_request)
                self._say_goodbye(victim, "closed: the control socket is full and you were idle")
                return True
        return False

    def _pause_listening(self, until: float) -> None:
        if self._listening and self._sel is not None and self._listener is not None:
            self._sel.unregister(self._listener)
            self._listening = False
        self._resume_at = until

    def _sweep(self, now: float) -> None:
        if not self._listening and now >= self._resume_at and self._listener is not None:
            assert self._sel is not None
            self._sel.register(self._listener, selectors.EVENT_READ, _LISTEN)
            self._listening = True
        limit = now - self.idle_timeout
        for conn in list(self._conns):
            if conn.outbuf and conn.last_sent < limit:
                self._close(conn)  # not reading its replies
            elif not conn.pending and not conn.outbuf and conn.last_request < limit:
                self._say_goodbye(conn, f"closed: no request for {self.idle_timeout:g} s")

    def _say_goodbye(self, conn: Conn, why: str) -> None:
        with contextlib.suppress(OSError):
            conn.sock.send(encode({"ok": False, "error": why}))
        self._close(conn)

    def _close(self, conn: Conn) -> None:
        if not conn.open:
            return
        conn.open = False
        if conn.events and self._sel is not None:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._sel.unregister(conn.sock)
        conn.events = 0
        conn.sock.close()
        self._conns.pop(conn, None)

    def _want(self, conn: Conn) -> None:
        """Watch for what ``conn`` can do next: read when idle, write while output waits."""
        if not conn.open or self._sel is None:
            return
        events = 0
        if conn.outbuf:
            events |= selectors.EVENT_WRITE
        elif not conn.pending:
            events |= selectors.EVENT_READ
        if events == conn.events:
            return
        if conn.events == 0:
            self._sel.register(conn.sock, events, conn)
        elif events == 0:
            self._sel.unregister(conn.sock)
        else:
            self._sel.modify(conn.sock, events, conn)
        conn.events = events

    def _read(self, conn: Conn) -> None:
        got = conn.receive()
        if got is None:
            self._close(conn)
        elif got:
            self.process(conn)

    def process(self, conn: Conn) -> None:
        """Answer the complete lines waiting on ``conn``, one at a time, in order."""
        while conn.open and not conn.pending and not conn.outbuf:
            nl = conn.inbuf.find(b"\n")
            if nl < 0:
                if conn.skipping:
                    conn.inbuf.clear()
                elif len(conn.inbuf) > self.max_line:
                    conn.skipping = True
                    conn.inbuf.clear()
                    self.send(conn, self._too_long(), None)
                    continue
                break
            line = bytes(conn.inbuf[:nl])
            del conn.inbuf[: nl + 1]
            if conn.skipping:
                conn.skipping = False
                continue
            conn.last_request = time.monotonic()
            if len(line) > self.max_line:
                self.send(conn, self._too_long(), None)
            elif line.strip():
                self.desk.request(conn, line)
        self._want(conn)

    def _too_long(self) -> dict[str, Any]:
        return {"ok": False, "error": f"request line too long: more than {self.max_line} bytes"}

    def send(self, conn: Conn, reply: Mapping[str, Any], rid: str | int | None) -> None:
        """Queue one reply line on ``conn`` and send what the socket takes now."""
        body = dict(reply)
        if rid is not None:
            body["id"] = rid
        else:
            body.pop("id", None)
        self.send_line(conn, encode(body))

    def send_line(self, conn: Conn, line: bytes) -> None:
        """Queue one encoded reply line on ``conn`` and send what the socket takes now."""
        if not conn.open:
            return
        conn.outbuf += line
        self._write(conn)

    def _write(self, conn: Conn) -> None:
        if conn.open and not conn.write():
            self._close(conn)

    def _flush(self, conn: Conn) -> None:
        """The socket can take more: send, then serve the next waiting line when all went."""
        self._write(conn)
        self.process(conn)
