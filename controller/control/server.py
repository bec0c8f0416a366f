"""The control socket: how ``firebet status``, ``roll``, ``clear-halt``... reach the service.

Transport and privileges only, no game logic. A Unix stream socket (never a
network port) speaks JSON lines (:mod:`controller.control.protocol`): each
request is one object on one line, answered by one object on one line. A
connection may send many requests; they are answered in order.

One selector thread does all the socket work: it accepts, reads, checks each
line (every ill-formed line gets an error reply naming what is wrong), checks
the role, and hands the request to a *lane*: a queue and one worker thread per
kind of request (``status``, ``read`` for history, ``write`` for everything that
changes the table). A slow history never delays a dealer, a dealer never waits
behind a reader, and a full lane answers "busy" at once. So hundreds of idle or
slow connections cost a file descriptor each and nothing else; a connection with
no request for ``idle_timeout`` (30 s) is closed, and when the connection cap is
reached the longest-idle connection of the user holding the most is closed to
make room.

Reading requests are paced per user (``read_rate`` a second, a second's burst; the
rest wait their turn), and the reading lane rests after each request so that it
takes at most ``lane_duty`` of a CPU: a flood of reading clients cannot take the
processor, or the interpreter, from the engine thread for long.

A request that changes the table and carries an ``id`` is applied at most once
per user and id: a retry (same id) gets the first reply again, or waits for it
while it is being done. A request not started within its ``deadline_ms`` of
arriving is answered "not done" and never started later.

Who may do what is decided here, from the peer's kernel credentials
(``SO_PEERCRED``), before the service's handler ever sees the request:

* ``reader`` -- anyone who can connect (the socket is mode 0660, so the service's
  group): ``status``, ``history``, ``ping``, ``whoami``;
* ``dealer`` -- the dealer group, the technician group, root or the service's own
  user: ``roll``, ``void``, ``surrender``, ``bet``, ``cancel``, ``ack``;
* ``technician`` -- the technician group, root or the service's own user:
  ``clear-halt``, ``diagnostics-on``, ``diagnostics-off``, ``sim-reader`` (a bench
  service's simulated reader).

The handler gets a :class:`Request` whose ``actor`` ("alice(1001)") goes into
the journal with every state change. It returns the reply, or a
:class:`~concurrent.futures.Future` of it (the service's engine jobs).
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import itertools
import logging
import math
import os
import queue
import resource
import selectors
import socket
import stat
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from controller.control.protocol import (
    IDLE_TIMEOUT_S,
    MAX_LINE,
    ROLES,
    BadRequest,
    Handler,
    Identify,
    Identity,
    Request,
    Role,
    clip,
    encode,
    identify,
    parse_request,
    peer_credentials,
    permission_error,
    role_of,
)
from controller.core.errors import FirebetError, UsageError

log = logging.getLogger("firebet.control")

LISTEN_BACKLOG = 512  # connections the kernel holds until the selector accepts them
MAX_CONNECTIONS = 1000  # open connections at once (fewer if the file limit is lower)
LANE_SIZE = 64  # requests waiting in one lane; more are answered "busy"
READ_RATE = 20.0  # reading requests (status, history) a second per user; more wait their turn
SEEN_IDS = 4096  # state-changing request ids remembered for retries
IDENTITY_TTL_S = 10.0  # how long a peer's user and groups are taken from the cache
SOCKET_MODE = 0o660
_AF_UNIX_PATH_MAX = 107  # sun_path is 108 bytes with the terminating NUL
_RESERVED_FDS = 64  # file descriptors left for the journal, the reader, the lamps
# the lane of each op the handler answers; every other op goes to "write"
LANES: dict[str, str] = {"status": "status", "history": "read"}
# the CPU share a lane may take (the rest of the time it rests): a long history never
# keeps the interpreter from the engine thread for long
LANE_DUTY: dict[str, float] = {"read": 0.25}
_LISTEN, _WAKE = object(), object()


class _Conn:
    """One client connection, owned by the selector thread."""

    __slots__ = (
        "events", "identity", "inbuf", "last_request", "last_sent", "open", "outbuf",
        "pending", "role", "skipping", "sock",
    )  # fmt: skip

    def __init__(self, sock: socket.socket, identity: Identity, role: Role, now: float) -> None:
        self.sock = sock
        self.identity = identity
        self.role = role
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.skipping = False  # inside an oversized line, dropping bytes up to its newline
        self.pending = False  # a request of this connection is being answered
        self.open = True
        self.events = 0  # what the selector watches for
        self.last_request = now  # when the last complete request arrived (or the connect)
        self.last_sent = now  # when output last made progress


@dataclass
class _Seen:
    """A state-changing request with an id: its reply once known, who else waits for it."""

    op: str
    args: dict[str, Any]
    line: bytes | None = None  # the reply, as sent
    waiters: list[_Conn] = field(default_factory=list)


_Key = tuple[int, str | int]
_Item = tuple[_Conn, Request, "_Key | None"]


class _Lane:
    """A queue and one worker thread for one kind of request."""

    def __init__(self, name: str, server: ControlServer, size: int, duty: float = 1.0) -> None:
        self.name = name
        self.size = size
        self.duty = duty  # the share of one CPU the lane may take; it rests the remainder
        self.queue: queue.Queue[_Item | None] = queue.Queue(size)
        self.thread = threading.Thread(
            target=self._work, args=(server,), name=f"control-{name}", daemon=True
        )

    def _work(self, server: ControlServer) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            spent = time.thread_time()
            server._run(*item)
            spent = time.thread_time() - spent
            if self.duty < 1.0 and spent > 0:
                time.sleep(spent * (1.0 / self.duty - 1.0))


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
        self.handler = handler
        self.groups = {Role.DEALER: dealer_group, Role.TECHNICIAN: technician_group}
        self.identify = identify
        self.service_uid = os.getuid() if service_uid is None else service_uid
        self.roles = dict(roles)
        self.max_line = max_line
        self.max_connections = max_connections
        self.idle_timeout = idle_timeout
        self.lane_of = dict(lanes)
        self.lane_size = lane_size
        self.read_rate = read_rate
        self.lane_duty = dict(lane_duty)
        self._reading: dict[int, float] = {}  # uid -> when its last paced reading starts
        self._paced: list[tuple[float, int, _Conn, Request]] = []  # a heap, by start time
        self._order = itertools.count()
        self._listener: socket.socket | None = None
        self._listening = False
        self._resume_at = 0.0
        self._inode: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        self._sel: selectors.BaseSelector | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._lanes: dict[str, _Lane] = {}
        self._conns: dict[_Conn, None] = {}  # insertion-ordered set
        self._seen: OrderedDict[_Key, _Seen] = OrderedDict()
        self._identities: dict[tuple[int, int], tuple[float, Identity]] = {}
        self._done: list[tuple[_Conn, _Key | None, bytes, bool]] = []
        self._done_lock = threading.Lock()
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
        if len(os.fsencode(self.path)) > _AF_UNIX_PATH_MAX:
            raise UsageError(
                f"control socket path {self.path} is too long for a Unix socket "
                f"(at most {_AF_UNIX_PATH_MAX} bytes)"
            )
        self._clear_stale()
        # bind under a temporary name, set the mode, then rename into place: the
        # socket is never reachable at ``path`` with the wrong permissions
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        if len(os.fsencode(tmp)) > _AF_UNIX_PATH_MAX:
            tmp = self.path.with_name(f".cs{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            listener.bind(str(tmp))
            os.chmod(tmp, SOCKET_MODE)
            listener.listen(LISTEN_BACKLOG)
            os.replace(tmp, self.path)
        except OSError:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        listener.setblocking(False)
        st = os.stat(self.path)
        self._inode = (st.st_dev, st.st_ino)
        self._listener = listener
        self._cap_connections()
        self._stopping.clear()
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, _WAKE)
        self._sel.register(listener, selectors.EVENT_READ, _LISTEN)
        self._listening = True
        for name in {"status", "read", "write", *self.lane_of.values()}:
            self._lanes[name] = _Lane(name, self, self.lane_size, self.lane_duty.get(name, 1.0))
            self._lanes[name].thread.start()
        self._thread = threading.Thread(target=self._loop, name="control-socket", daemon=True)
        self._thread.start()
        log.info("control socket listening at %s", self.path)

    def _cap_connections(self) -> None:
        """Raise the open-file limit as far as allowed; keep the cap under it."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = self.max_connections + 2 * _RESERVED_FDS
        if soft != resource.RLIM_INFINITY and soft < want:
            new = want if hard == resource.RLIM_INFINITY else min(want, hard)
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
                soft = new
        if soft != resource.RLIM_INFINITY:
            self.max_connections = max(1, min(self.max_connections, soft - _RESERVED_FDS))

    def stop(self, timeout: float = 2.0) -> None:
        """Stop accepting, close every connection and remove the socket file."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        self._stopping.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout)
        for lane in self._lanes.values():
            with contextlib.suppress(queue.Full):
                lane.queue.put_nowait(None)
        for lane in self._lanes.values():
            lane.thread.join(timeout)
        self._lanes.clear()
        listener.close()
        for end in (self._wake_r, self._wake_w):
            if end is not None:
                end.close()
        if self._sel is not None:
            self._sel.close()
        self._remove_socket_file()
        log.info("control socket at %s closed", self.path)

    def __enter__(self) -> ControlServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _clear_stale(self) -> None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(st.st_mode):
            raise FirebetError(
                f"{self.path} exists and is not a socket: refusing to replace it "
                "(check the [control] socket setting)"
            )
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        probe.settimeout(1.0)
        try:
            probe.connect(str(self.path))
        except (ConnectionRefusedError, FileNotFoundError):
            log.info("removing stale control socket %s", self.path)
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            return
        except OSError as exc:
            raise FirebetError(f"cannot check the control socket {self.path}: {exc}") from exc
        finally:
            probe.close()
        raise FirebetError(
            f"another firebet service is already serving the control socket {self.path}"
        )

    def _remove_socket_file(self) -> None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        if (st.st_dev, st.st_ino) == self._inode:  # never remove a successor's socket
            self.path.unlink()

    # the selector thread --------------------------------------------------------------
    def _loop(self) -> None:
        sel = self._sel
        assert sel is not None
        tick = max(0.01, min(0.5, self.idle_timeout / 4))
        next_sweep = 0.0
        try:
            wait = tick
            while not self._stopping.is_set():
                for key, mask in sel.select(wait):
                    if key.data is _LISTEN:
                        self._accept()
                    elif key.data is _WAKE:
                        self._drain_wake()
                    else:
                        conn: _Conn = key.data
                        if mask & selectors.EVENT_WRITE:
                            self._flush(conn)
                        if mask & selectors.EVENT_READ and conn.open:
                            self._read(conn)
                self._deliver()
                now = time.monotonic()
                wait = min(tick, self._release_paced(now))
                if now >= next_sweep:
                    self._sweep(now)
                    next_sweep = now + tick
        except Exception:  # pragma: no cover - a bug here must be loud, not a silent stop
            log.exception("control socket loop failed")
            raise
        finally:
            for conn in list(self._conns):
                self._close(conn)

    def _wake(self) -> None:
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
            identity = replace(self._identity(uid, gid), pid=pid)
        except Exception:
            log.exception("control socket: cannot tell who connected")
            sock.close()
            return
        if len(self._conns) >= self.max_connections:
            self._evict()
        role = role_of(
            identity, self.groups[Role.DEALER], self.groups[Role.TECHNICIAN], self.service_uid
        )
        conn = _Conn(sock, identity, role, time.monotonic())
        self._conns[conn] = None
        self._want(conn)

    def _identity(self, uid: int, gid: int) -> Identity:
        now = time.monotonic()
        cached = self._identities.get((uid, gid))
        if cached is not None and cached[0] > now:
            return cached[1]
        if len(self._identities) > 1024:
            self._identities.clear()
        who = self.identify(uid, gid)
        self._identities[(uid, gid)] = (now + IDENTITY_TTL_S, who)
        return who

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

    def _say_goodbye(self, conn: _Conn, why: str) -> None:
        with contextlib.suppress(OSError):
            conn.sock.send(encode({"ok": False, "error": why}))
        self._close(conn)

    def _close(self, conn: _Conn) -> None:
        if not conn.open:
            return
        conn.open = False
        if conn.events and self._sel is not None:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._sel.unregister(conn.sock)
        conn.events = 0
        conn.sock.close()
        self._conns.pop(conn, None)

    def _want(self, conn: _Conn) -> None:
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

    def _read(self, conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not chunk:
            self._close(conn)
            return
        conn.inbuf += chunk
        self._process(conn)

    def _process(self, conn: _Conn) -> None:
        """Answer the complete lines waiting on ``conn``, one at a time, in order."""
        while conn.open and not conn.pending and not conn.outbuf:
            nl = conn.inbuf.find(b"\n")
            if nl < 0:
                if conn.skipping:
                    conn.inbuf.clear()
                elif len(conn.inbuf) > self.max_line:
                    conn.skipping = True
                    conn.inbuf.clear()
                    self._send(conn, self._too_long(), None)
                    continue
                break
            line = bytes(conn.inbuf[:nl])
            del conn.inbuf[: nl + 1]
            if conn.skipping:
                conn.skipping = False
                continue
            conn.last_request = time.monotonic()
            if len(line) > self.max_line:
                self._send(conn, self._too_long(), None)
            elif line.strip():
                self._request(conn, line)
        self._want(conn)

    def _too_long(self) -> dict[str, Any]:
        return {"ok": False, "error": f"request line too long: more than {self.max_line} bytes"}

    def _request(self, conn: _Conn, line: bytes) -> None:
        try:
            message = parse_request(line)
        except BadRequest as exc:
            self._send(conn, {"ok": False, "error": f"malformed request: {exc}"}, exc.request_id)
            return
        op, rid = message.op, message.id
        needed = self.roles.get(op)
        if needed is None:
            known = ", ".join(sorted(self.roles))
            self._send(conn, {"ok": False, "error": f"unknown op {op!r} (known: {known})"}, rid)
            return
        who, role = conn.identity, conn.role
        if not role.permits(needed):
            error = permission_error(who, op, needed, self.groups)
            log.warning("%s refused %s: %s", who.actor, op, error)
            self._send(conn, {"ok": False, "error": error}, rid)
            return
        if op == "ping":
            self._send(conn, {"ok": True, "pong": True, "pid": os.getpid()}, rid)
            return
        if op == "whoami":
            self._send(conn, self._whoami(who, role), rid)
            return
        request = Request(
            op=op,
            args=message.args,
            identity=who,
            role=role,
            id=rid,
            deadline=conn.last_request + message.deadline_ms / 1000,
        )
        key: _Key | None = None
        if needed is not Role.READER and rid is not None:
            key = (who.uid, rid)
            seen = self._seen.get(key)
            if seen is not None:
                if (seen.op, seen.args) != (op, message.args):
                    error = f"id {clip(str(rid))} was already used for another request"
                    self._send(conn, {"ok": False, "error": error}, rid)
                elif seen.line is not None:
                    log.info("%s repeated %s (id %s): sent the first reply", who.actor, op, rid)
                    self._send_line(conn, seen.line)
                else:
                    seen.waiters.append(conn)
                    conn.pending = True
                return
            self._seen[key] = _Seen(op, message.args)
            while len(self._seen) > SEEN_IDS:
                self._seen.popitem(last=False)
        if needed is Role.READER:  # reading: each user gets its fair share, no more
            start = self._pace(who.uid, request)
            if start is None:
                busy = (
                    f"the service is busy: {who.user} asks for more than "
                    f"{self.read_rate:g} readings a second; nothing was done, try again"
                )
                self._send(conn, {"ok": False, "busy": True, "error": busy}, rid)
                return
            if start > time.monotonic():
                heapq.heappush(self._paced, (start, next(self._order), conn, request))
                conn.pending = True
                return
        self._dispatch(conn, request, key)

    def _pace(self, uid: int, request: Request) -> float | None:
        """When ``uid``'s next reading request may start (a token bucket: ``read_rate`` a
        second, bursts of as many); None when that is past the request's deadline."""
        now = time.monotonic()
        floor = now - 1.0  # a second's worth of burst
        start = max(self._reading.get(uid, floor), floor) + 1.0 / self.read_rate
        if start > request.deadline:
            return None
        self._reading[uid] = start
        if len(self._reading) > 4096:
            self._reading = {u: t for u, t in self._reading.items() if t > now}
        return start

    def _release_paced(self, now: float) -> float:
        """Dispatch the paced requests whose time came; seconds until the next one."""
        while self._paced and self._paced[0][0] <= now:
            _, _, conn, request = heapq.heappop(self._paced)
            if conn.open:
                self._dispatch(conn, request, None)
        return self._paced[0][0] - now if self._paced else math.inf

    def _dispatch(self, conn: _Conn, request: Request, key: _Key | None) -> None:
        """Hand ``request`` to its lane; a full lane answers "busy" at once."""
        lane = self._lanes[self.lane_of.get(request.op, "write")]
        rid = request.id
        try:
            lane.queue.put_nowait((conn, request, key))
        except queue.Full:
            if key is not None:
                self._seen.pop(key, None)
            busy = (
                f"the service is busy: {lane.size} {lane.name} requests are waiting; "
                "nothing was done, try again"
            )
            self._send(conn, {"ok": False, "busy": True, "error": busy}, rid)
            return
        conn.pending = True

    @staticmethod
    def _whoami(who: Identity, role: Role) -> dict[str, Any]:
        return {
            "ok": True,
            "user": who.user,
            "uid": who.uid,
            "groups": sorted(who.groups),
            "role": role.value,
            "actor": who.actor,
        }

    def _send(self, conn: _Conn, reply: Mapping[str, Any], rid: str | int | None) -> None:
        """Queue one reply line on ``conn`` and send what the socket takes now."""
        body = dict(reply)
        if rid is not None:
            body["id"] = rid
        else:
            body.pop("id", None)
        self._send_line(conn, encode(body))

    def _send_line(self, conn: _Conn, line: bytes) -> None:
        if not conn.open:
            return
        conn.outbuf += line
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        if not conn.open or not conn.outbuf:
            return
        try:
            sent = conn.sock.send(conn.outbuf)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._close(conn)
            return
        if sent:
            del conn.outbuf[:sent]
            conn.last_sent = time.monotonic()

    def _flush(self, conn: _Conn) -> None:
        """The socket can take more: send, then serve the next waiting line when all went."""
        self._write(conn)
        self._process(conn)

    # replies from the lanes ------------------------------------------------------------
    def _run(self, conn: _Conn, request: Request, key: _Key | None) -> None:
        """On a lane thread: answer ``request`` (never start one whose deadline passed)."""
        late = time.monotonic() - request.deadline
        if late > 0:
            self._complete(conn, request, key, _expired(request))
            return
        try:
            result = self.handler(request)
        except FirebetError as exc:
            self._complete(conn, request, key, {"ok": False, "error": str(exc)})
            return
        except Exception as exc:
            log.exception("control handler failed on %s from %s", request.op, request.actor)
            error = f"internal error handling {request.op}: {exc}"
            self._complete(conn, request, key, {"ok": False, "error": error})
            return
        if isinstance(result, Future):
            result.add_done_callback(
                lambda done: self._complete(conn, request, key, _outcome(request, done))
            )
            return
        self._complete(conn, request, key, _checked(request, result))

    def _complete(
        self, conn: _Conn, request: Request, key: _Key | None, reply: dict[str, Any]
    ) -> None:
        """Any thread: encode the reply (here, not on the selector thread) and hand it over."""
        body = dict(reply)
        if request.id is not None:
            body["id"] = request.id
        try:
            line = encode(body)
        except (TypeError, ValueError) as exc:
            log.error("control handler reply to %s is not JSON: %s", request.op, exc)
            error = f"internal error handling {request.op}: reply is not JSON"
            line = encode({"ok": False, "error": error, "id": request.id})
        retry = bool(reply.get("busy") or reply.get("expired"))  # nothing was done
        with self._done_lock:
            self._done.append((conn, key, line, retry))
        self._wake()

    def _deliver(self) -> None:
        with self._done_lock:
            done, self._done = self._done, []
        for conn, key, line, retry in done:
            waiters = []
            if key is not None:
                seen = self._seen.get(key)
                if seen is not None:
                    waiters, seen.waiters = seen.waiters, []
                    if retry:
                        del self._seen[key]  # not done: a retry with this id may do it
                    else:
                        seen.line = line
            now = time.monotonic()
            for who in [conn, *waiters]:  # the waiters sent the same id
                who.pending = False
                who.last_request = now  # idle from its answer on, not from its question
                self._send_line(who, line)
                self._process(who)


def _expired(request: Request) -> dict[str, Any]:
    return {
        "ok": False,
        "expired": True,
        "error": (
            f"{request.op} not done: the service could not start it before its deadline; "
            "nothing was changed, try again"
        ),
    }


def _checked(request: Request, result: Mapping[str, Any]) -> dict[str, Any]:
    reply = dict(result)
    reply.setdefault("ok", True)
    return reply


def _outcome(request: Request, done: Future[Mapping[str, Any]]) -> dict[str, Any]:
    try:
        return _checked(request, done.result())
    except FirebetError as exc:
        return {"ok": False, "error": str(exc)}
    except Exception as exc:
        log.error("control handler failed on %s from %s: %r", request.op, request.actor, exc)
        return {"ok": False, "error": f"internal error handling {request.op}: {exc}"}
