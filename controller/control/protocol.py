"""The control socket protocol: requests, roles and who the peer is.

Transport and privileges only, no game logic. A Unix stream socket (never a
network port) speaks JSON lines; see :mod:`controller.control.server` for the
server and :mod:`controller.control.client` for the client end, and
``docs/architecture.md`` for where the socket sits.

A request is one JSON object on one line (at most :data:`MAX_LINE` bytes)::

    {"op": "bet", "args": {"position": 3, "amount": 5}, "id": "6f1c...", "deadline_ms": 5000}

``op`` is required; ``args`` (an object), ``id`` (a whole number or a string of
1 to 128 characters) and ``deadline_ms`` (1 to 60000, default 5000) are
optional; no other key is taken. Numbers are whole and at most 18 digits; no
object or array nests deeper than 8 levels; strings are valid Unicode (no lone
surrogates). Each request is answered by one line, ``{"ok": true, ...}`` or
``{"ok": false, "error": "..."}``, with the ``id`` echoed. Every line gets a
reply, the ill-formed ones an error naming what is wrong.

Time limits, shared by both ends: the server never *starts* a request later
than ``deadline_ms`` after it arrived (it answers ``"expired": true``, nothing
done); once started, a request runs to the end and is answered. The client
waits ``deadline_ms`` plus :data:`CLIENT_GRACE_S` for the reply, so it is never
told "failed" about something the service then does. ``"busy": true`` means
nothing was done and the client may retry; a retry of a state-changing request
with the same ``id`` is applied once (the first reply is sent again).
"""

from __future__ import annotations

import contextlib
import grp
import hashlib
import json
import math
import os
import pwd
import re
import socket
import struct
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

# the roles and every op (the role it needs, the ones the server answers itself): one table
from controller.control.ops import BUILTIN_OPS as BUILTIN_OPS
from controller.control.ops import ROLES as ROLES
from controller.control.ops import Role as Role
from controller.core.commands import request_tag

MAX_LINE = 64 * 1024  # bytes in one request line, newline excluded
REQUEST_KEYS = ("op", "args", "id", "deadline_ms")
MAX_DEPTH = 8  # nesting of objects and arrays in one request
MAX_DIGITS = 18  # digits of one whole number in a request
MAX_ID = 128  # characters of a request id
MAX_OP = 64  # characters of an op name
IDLE_TIMEOUT_S = 30.0  # a connection with no request for this long is closed
DEFAULT_DEADLINE_MS = 5_000  # a request not started this long after it arrived is not done
MAX_DEADLINE_MS = 60_000
CLIENT_GRACE_S = 10.0  # the client waits this much longer than the deadline it sent
IDENTITY_TTL_S = 10.0  # how long a peer's user and groups are taken from the cache
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


@dataclass(frozen=True)
class Identity:
    """Who is on the other end of a connection, as the kernel and the user database say."""

    uid: int
    gid: int
    user: str
    groups: frozenset[str] = frozenset()
    pid: int | None = None

    @property
    def actor(self) -> str:
        """The name the journal records: ``"alice(1001)"``."""
        return f"{self.user}({self.uid})"


@dataclass(frozen=True)
class Request:
    """One request, checked for permission, as the service's handler receives it."""

    op: str
    args: dict[str, Any]
    identity: Identity
    role: Role
    id: str | int | None = None
    deadline: float = math.inf  # time.monotonic() after which it must not be started
    decided_at: int | None = None  # a retry of a request journaled before a restart: its record
    actor: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "actor", self.identity.actor)

    @property
    def tag(self) -> str:
        """What the journal keeps of a request with an ``id``, with the command it asked
        for: ``"uid:digest:id"`` (the digest of ``op`` and ``args``; the id as JSON), so a
        retry of it after a restart is known as already decided; "" without an id."""
        if self.id is None:
            return ""
        return request_tag(self.identity.uid, request_digest(self.op, self.args), self.id)


def request_digest(op: str, args: Mapping[str, Any]) -> str:
    """A short digest of what a request asks: its ``op`` and ``args``."""
    text = json.dumps([op, args], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


Handler = Callable[[Request], "Mapping[str, Any] | EncodedReply | Future[Mapping[str, Any]]"]
Identify = Callable[[int, int], Identity]


def identify(uid: int, gid: int) -> Identity:
    """Look a peer's uid/gid up in the user and group databases (pwd, grp).

    Groups come from ``os.getgrouplist``: membership as /etc/group says now,
    which is what an administrator just changed with ``usermod -aG``.
    """
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    gids = {gid}
    if user != str(uid):
        with contextlib.suppress(OSError):
            gids.update(os.getgrouplist(user, gid))
    names = set()
    for g in gids:
        try:
            names.add(grp.getgrgid(g).gr_name)
        except KeyError:
            names.add(str(g))
    return Identity(uid=uid, gid=gid, user=user, groups=frozenset(names))


class IdentityCache:
    """:func:`identify` (or a stand-in) remembered per (uid, gid) for ``ttl`` seconds: a look-up
    in the user and group databases for every connect would cost a flood of connects more
    than the socket work does."""

    def __init__(self, identify: Identify, ttl: float = IDENTITY_TTL_S) -> None:
        self.identify = identify
        self.ttl = ttl
        self._seen: dict[tuple[int, int], tuple[float, Identity]] = {}

    def __call__(self, uid: int, gid: int) -> Identity:
        now = time.monotonic()
        cached = self._seen.get((uid, gid))
        if cached is not None and cached[0] > now:
            return cached[1]
        if len(self._seen) > 1024:
            self._seen.clear()
        who = self.identify(uid, gid)
        self._seen[(uid, gid)] = (now + self.ttl, who)
        return who


def role_of(
    who: Identity, dealer_group: str, technician_group: str, service_uid: int | None = None
) -> Role:
    """The highest role ``who`` holds: root and the service's own user are technicians."""
    own = os.getuid() if service_uid is None else service_uid
    if who.uid in (0, own) or technician_group in who.groups:
        return Role.TECHNICIAN
    if dealer_group in who.groups:
        return Role.DEALER
    return Role.READER


def permission_error(who: Identity, op: str, needed: Role, groups: Mapping[Role, str]) -> str:
    """The refusal a client shows: who, which group is missing, and for what."""
    if needed is Role.TECHNICIAN:
        missing = groups[Role.TECHNICIAN]
    else:
        missing = f"{groups[Role.DEALER]} or {groups[Role.TECHNICIAN]}"
    return f"permission denied: {who.user} is not in {missing} (needed for {op})"


def peer_credentials(conn: socket.socket) -> tuple[int, int, int]:
    """The connected peer's (pid, uid, gid) from ``SO_PEERCRED``."""
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return pid, uid, gid


def encode(message: Mapping[str, Any]) -> bytes:
    """One protocol line (ASCII: any string, even a lone surrogate, is escaped)."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


class EncodedReply:
    """A reply encoded elsewhere (the recall process): one JSON object, without its id.

    :meth:`line` adds the request's id as :func:`encode` would have written it, so a
    large reply is never decoded and encoded again on the service's threads.
    """

    __slots__ = ("body",)

    def __init__(self, body: bytes) -> None:
        if not (body.startswith(b"{") and body.endswith(b"}")) or b"\n" in body:
            raise ValueError("an encoded reply is one JSON object on one line")
        self.body = body

    def line(self, request_id: str | int | None) -> bytes:
        """The protocol line, with ``"id"`` last when the request had one."""
        if request_id is None:
            return self.body + b"\n"
        comma = b"," if self.body[1:-1].strip() else b""
        return self.body[:-1] + comma + b'"id":' + json.dumps(request_id).encode() + b"}\n"


# reading a request line: everything is checked before anything acts on it --------------

_SURROGATE = re.compile("[\ud800-\udfff]")


class BadRequest(ValueError):
    """A request line the server cannot act on; the text names what is wrong."""

    def __init__(self, reason: str, request_id: str | int | None = None) -> None:
        super().__init__(reason)
        self.request_id = request_id  # echoed in the error reply when it could be read


@dataclass(frozen=True)
class Message:
    """One well-formed request as it came off the wire (permission not yet checked)."""

    op: str
    args: dict[str, Any]
    id: str | int | None = None
    deadline_ms: int = DEFAULT_DEADLINE_MS


def clip(text: str, width: int = 40) -> str:
    """``text`` quoted for an error message: shortened, every odd character escaped."""
    return json.dumps(text if len(text) <= width else text[:width] + "...")


def _fraction(text: str) -> Any:
    raise BadRequest(f"number {clip(text)}: only whole numbers are taken")


def _whole(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_DIGITS:
        raise BadRequest(f"number too large: {digits} digits (at most {MAX_DIGITS})")
    return int(text)


def _constant(text: str) -> Any:
    raise BadRequest(f"{text} is not a number JSON knows")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BadRequest(f"key {clip(key)} appears twice in one object")
        out[key] = value
    return out


_DECODER = json.JSONDecoder(
    object_pairs_hook=_object, parse_int=_whole, parse_float=_fraction, parse_constant=_constant
)


def _check(value: Any, where: str, depth: int) -> None:
    """Nesting depth (``depth``: the level of ``value`` if it is an object or array) and
    Unicode of every part of a parsed request."""
    if isinstance(value, str):
        bad = _SURROGATE.search(value)
        if bad:
            raise BadRequest(f"bad Unicode: lone surrogate U+{ord(bad.group()):04X} in {where}")
        return
    if isinstance(value, dict | list) and depth > MAX_DEPTH:
        raise BadRequest(f"nested deeper than {MAX_DEPTH} levels (at {where})")
    if isinstance(value, dict):
        for key, item in value.items():
            _check(key, f"a key of {where}", depth)
            _check(item, f"{where}.{key}" if key.isidentifier() else where, depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check(item, f"{where}[{i}]", depth + 1)


def _good_id(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and 0 < len(value) <= MAX_ID and not _SURROGATE.search(value)


def parse_request(line: bytes) -> Message:
    """The request on one line, or :class:`BadRequest` naming what is wrong with it."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(
            f"not UTF-8: byte 0x{line[exc.start]:02X} at position {exc.start}"
        ) from None
    try:
        data = _DECODER.decode(text)
    except BadRequest:
        raise
    except RecursionError:
        raise BadRequest(f"nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise BadRequest(f"not JSON ({exc.msg} at position {exc.pos})") from None
    except ValueError as exc:  # pragma: no cover - the hooks catch what json would raise
        raise BadRequest(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadRequest("expected a JSON object")
    rid = data.get("id")
    if rid is not None and not _good_id(rid):
        raise BadRequest(f'"id" must be a whole number or a string of 1 to {MAX_ID} characters')
    try:
        _check(data, "the request", 1)
        unknown = [k for k in data if k not in REQUEST_KEYS]
        if unknown:
            raise BadRequest(
                f"unknown key {clip(unknown[0])} (a request has {', '.join(REQUEST_KEYS)})"
            )
        op = data.get("op")
        if not isinstance(op, str) or not op:
            raise BadRequest('missing "op"')
        if len(op) > MAX_OP:
            raise BadRequest(f'"op" is longer than {MAX_OP} characters')
        args = data.get("args", {})
        if not isinstance(args, dict):
            raise BadRequest('"args" must be a JSON object')
        deadline = data.get("deadline_ms", DEFAULT_DEADLINE_MS)
        if (
            isinstance(deadline, bool)
            or not isinstance(deadline, int)
            or not 0 < deadline <= MAX_DEADLINE_MS
        ):
            raise BadRequest(f'"deadline_ms" must be a whole number from 1 to {MAX_DEADLINE_MS}')
    except BadRequest as exc:
        raise BadRequest(str(exc), rid) from None
    return Message(op, args, rid, deadline)
