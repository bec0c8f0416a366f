"""The control socket's request desk: what each checked request line gets.

The server (:mod:`controller.control.server`) moves bytes; the desk decides. For a
well-formed line it checks the op and the caller's role, answers ``ping`` and
``whoami`` itself, remembers state-changing request ids (a retry gets the first reply
again, or waits for it; one the journal decided longer ago, or before a restart, is
answered from its record: :attr:`RequestDesk.journaled`), paces each user's reading
requests, and hands the rest to a *lane*: a bounded queue and one worker thread per kind
of request (``status``, ``read``, ``write``). The lane calls the service's handler; the
reply comes back to the selector thread through :meth:`RequestDesk.deliver`. See
``docs/architecture.md`` (the control socket).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import math
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from controller.control import ops
from controller.control.conn import Conn
from controller.control.protocol import (
    BUILTIN_OPS,
    BadRequest,
    EncodedReply,
    Handler,
    Identity,
    Request,
    Role,
    clip,
    encode,
    parse_request,
    permission_error,
    request_digest,
)
from controller.core.errors import FirebetError, Refusal

log = logging.getLogger("firebet.control")

LANE_SIZE = 64  # requests waiting in one lane; more are answered "busy"
READ_RATE = 20.0  # reading requests (status, history) a second per user; more wait their turn
SEEN_IDS = 4096  # state-changing request ids whose replies are kept (older: the journal's)
# the lane of each op the handler answers; every other op goes to "write" (controller.control.ops)
LANES = ops.LANES
# the CPU share a lane's own thread may take (the rest of the time it rests); history is
# folded in the recall process, so the read lane's thread only passes jobs and replies
LANE_DUTY: dict[str, float] = {"read": 0.25}


class Wire(Protocol):
    """What the desk needs from the server's selector thread."""

    def send(self, conn: Conn, reply: Mapping[str, Any], rid: str | int | None) -> None:
        """Queue one reply on ``conn`` (with ``rid`` as its id)."""

    def send_line(self, conn: Conn, line: bytes) -> None:
        """Queue one encoded reply line on ``conn``."""

    def process(self, conn: Conn) -> None:
        """Answer the next complete lines waiting on ``conn``."""

    def wake(self) -> None:
        """Wake the selector thread (any thread)."""


@dataclass
class _Seen:
    """A state-changing request with an id: its reply once known, who else waits for it."""

    op: str
    args: dict[str, Any]
    line: bytes | None = None  # the reply, as sent
    waiters: list[Conn] = field(default_factory=list)


_Key = tuple[int, str | int]
_Item = tuple[Conn, Request, "_Key | None"]


class _Lane:
    """A queue and one worker thread for one kind of request."""

    def __init__(self, name: str, desk: RequestDesk, size: int, duty: float = 1.0) -> None:
        self.name = name
        self.size = size
        self.duty = duty  # the share of one CPU the lane may take; it rests the remainder
        self.queue: queue.Queue[_Item | None] = queue.Queue(size)
        self.thread = threading.Thread(
            target=self._work, args=(desk,), name=f"control-{name}", daemon=True
        )

    def _work(self, desk: RequestDesk) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            spent = time.thread_time()
            desk.run(*item)
            spent = time.thread_time() - spent
            if self.duty < 1.0 and spent > 0:
                time.sleep(spent * (1.0 / self.duty - 1.0))


class RequestDesk:
    """Checks, paces and dispatches requests; collects the lanes' replies.

    Everything but :meth:`run` and :meth:`complete` runs on the selector thread.
    """

    def __init__(
        self,
        wire: Wire,
        handler: Handler,
        roles: Mapping[str, Role],
        groups: Mapping[Role, str],
        *,
        lanes: Mapping[str, str] = LANES,
        lane_size: int = LANE_SIZE,
        read_rate: float = READ_RATE,
        lane_duty: Mapping[str, float] = LANE_DUTY,
    ) -> None:
        self.wire = wire
        self.handler = handler
        self.roles = dict(roles)
        self.groups = dict(groups)
        self.lane_of = dict(lanes)
        self.lane_size = lane_size
        self.read_rate = read_rate
        self.lane_duty = dict(lane_duty)
        self._reading: dict[int, float] = {}  # uid -> when its last paced reading starts
        self._paced: list[tuple[float, int, Conn, Request]] = []  # a heap, by start time
        self._order = itertools.count()
        self._lanes: dict[str, _Lane] = {}
        self._seen: OrderedDict[_Key, _Seen] = OrderedDict()
        # the journal's index of the requests it holds: (uid, id) -> (digest, record) or
        # None; raises FirebetError when it cannot tell (set before start)
        self.journaled: Callable[[int, str | int], tuple[str, int] | None] | None = None
        self._done: list[tuple[Conn, _Key | None, bytes, bool]] = []
        self._done_lock = threading.Lock()

    def start(self) -> None:
        """Start one worker thread per lane."""
        for name in {"status", "read", "write", *self.lane_of.values()}:
            self._lanes[name] = _Lane(name, self, self.lane_size, self.lane_duty.get(name, 1.0))
            self._lanes[name].thread.start()

    def stop(self, timeout: float) -> None:
        """Let each lane finish the request in hand, then end its thread."""
        for lane in self._lanes.values():
            with contextlib.suppress(queue.Full):
                lane.queue.put_nowait(None)
        for lane in self._lanes.values():
            lane.thread.join(timeout)
        self._lanes.clear()

    # the selector thread --------------------------------------------------------------
    def request(self, conn: Conn, line: bytes) -> None:
        """One complete, non-blank line from ``conn``: answer it or hand it to a lane."""
        send = self.wire.send
        try:
            message = parse_request(line)
        except BadRequest as exc:
            send(conn, {"ok": False, "error": f"malformed request: {exc}"}, exc.request_id)
            return
        op, rid = message.op, message.id
        needed = self.roles.get(op)
        if needed is None:
            known = ", ".join(sorted(self.roles))
            reply = {
                "ok": False,
                "code": Refusal.UNKNOWN_OP,
                "error": f"unknown op {op!r} (known: {known})",
            }
            send(conn, reply, rid)
            return
        who, role = conn.identity, conn.role
        if not role.permits(needed):
            error = permission_error(who, op, needed, self.groups)
            log.warning("%s refused %s: %s", who.actor, op, error)
            send(conn, {"ok": False, "error": error, "code": "not_permitted"}, rid)
            return
        if op in BUILTIN_OPS:  # answered here, the handler never sees them
            send(conn, _builtin(op, who, role, self.roles), rid)
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
                    send(conn, {"ok": False, "error": error, "code": "request_id_reused"}, rid)
                elif seen.line is not None:
                    log.info("%s repeated %s (id %s): sent the first reply", who.actor, op, rid)
                    self.wire.send_line(conn, seen.line)
                else:
                    seen.waiters.append(conn)
                    conn.pending = True
                return
            try:
                journaled = self.journaled(who.uid, rid) if self.journaled is not None else None
            except FirebetError as exc:  # never done twice: not done while it cannot tell
                log.warning("%s %s (id %s) not done: %s", who.actor, op, rid, exc)
                error = (
                    f"{op} not done: whether id {clip(str(rid))} was already done cannot be "
                    f"told ({exc}); nothing was changed, try again"
                )
                send(conn, {"ok": False, "busy": True, "error": error}, rid)
                return
            if journaled is not None:
                digest, record = journaled
                if digest != request_digest(op, message.args):
                    error = f"id {clip(str(rid))} was already used for another request"
                    send(conn, {"ok": False, "error": error, "code": "request_id_reused"}, rid)
                    return
                # decided earlier (before a restart, or past the replies kept): the handler
                # answers from the record
                log.info("%s repeated %s (id %s) decided at record %d", who.actor, op, rid, record)
                request = replace(request, decided_at=record)
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
                send(conn, {"ok": False, "busy": True, "error": busy}, rid)
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

    def release_paced(self, now: float) -> float:
        """Dispatch the paced requests whose time came; seconds until the next one."""
        while self._paced and self._paced[0][0] <= now:
            _, _, conn, request = heapq.heappop(self._paced)
            if conn.open:
                self._dispatch(conn, request, None)
        return self._paced[0][0] - now if self._paced else math.inf

    def _dispatch(self, conn: Conn, request: Request, key: _Key | None) -> None:
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
            self.wire.send(conn, {"ok": False, "busy": True, "error": busy}, rid)
            return
        conn.pending = True

    def deliver(self) -> None:
        """Send the replies the lanes finished (to retries of the same id as well)."""
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
                self.wire.send_line(who, line)
                self.wire.process(who)

    # the lanes ---------------------------------------------------------------------------
    def run(self, conn: Conn, request: Request, key: _Key | None) -> None:
        """On a lane thread: answer ``request`` (never start one whose deadline passed)."""
        late = time.monotonic() - request.deadline
        if late > 0:
            self.complete(conn, request, key, _expired(request))
            return
        try:
            result = self.handler(request)
        except FirebetError as exc:
            self.complete(conn, request, key, {"ok": False, "error": str(exc)})
            return
        except Exception as exc:
            log.exception("control handler failed on %s from %s", request.op, request.actor)
            error = f"internal error handling {request.op}: {exc}"
            self.complete(conn, request, key, {"ok": False, "error": error})
            return
        if isinstance(result, Future):
            result.add_done_callback(
                lambda done: self.complete(conn, request, key, _outcome(request, done))
            )
            return
        reply = result if isinstance(result, EncodedReply) else _checked(result)
        self.complete(conn, request, key, reply)

    def complete(
        self,
        conn: Conn,
        request: Request,
        key: _Key | None,
        reply: dict[str, Any] | EncodedReply,
    ) -> None:
        """Any thread: encode the reply (here, not on the selector thread) and hand it over."""
        if isinstance(reply, EncodedReply):  # a reading reply, encoded by the recall process
            self._hand_over(conn, key, reply.line(request.id), retry=False)
            return
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
        self._hand_over(conn, key, line, retry)

    def _hand_over(self, conn: Conn, key: _Key | None, line: bytes, retry: bool) -> None:
        with self._done_lock:
            self._done.append((conn, key, line, retry))
        self.wire.wake()


def _builtin(op: str, who: Identity, role: Role, roles: Mapping[str, Role]) -> dict[str, Any]:
    """The reply to ``ping`` (the service's pid) or ``whoami`` (who the socket sees, and the
    ops of this socket that role may send)."""
    if op == "ping":
        return {"ok": True, "pong": True, "pid": os.getpid()}
    return {
        "ok": True,
        "user": who.user,
        "uid": who.uid,
        "groups": sorted(who.groups),
        "role": role.value,
        "actor": who.actor,
        "may": sorted(name for name, needed in roles.items() if role.permits(needed)),
    }


def _expired(request: Request) -> dict[str, Any]:
    return {
        "ok": False,
        "expired": True,
        "error": (
            f"{request.op} not done: the service could not start it before its deadline; "
            "nothing was changed, try again"
        ),
    }


def _checked(result: Mapping[str, Any]) -> dict[str, Any]:
    reply = dict(result)
    reply.setdefault("ok", True)
    return reply


def _outcome(request: Request, done: Future[Mapping[str, Any]]) -> dict[str, Any]:
    try:
        return _checked(done.result())
    except FirebetError as exc:
        return {"ok": False, "error": str(exc)}
    except Exception as exc:
        log.error("control handler failed on %s from %s: %r", request.op, request.actor, exc)
        return {"ok": False, "error": f"internal error handling {request.op}: {exc}"}
