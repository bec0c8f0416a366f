"""The control socket protocol: requests, roles and who the peer is.

Transport and privileges only, no game logic. A Unix stream socket (never a
network port) speaks JSON lines; see :mod:`controller.control.server` for the
server and :mod:`controller.control.client` for the client end, and
``docs/architecture.md`` for where the socket sits.
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import socket
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

MAX_LINE = 64 * 1024  # bytes in one request line, newline excluded
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class Role(StrEnum):
    """A privilege level on the control socket; each level includes the ones before it."""

    READER = "reader"
    DEALER = "dealer"
    TECHNICIAN = "technician"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def permits(self, needed: Role) -> bool:
        """Whether someone holding this role may do what ``needed`` guards."""
        return self.rank >= needed.rank


_RANK = {Role.READER: 0, Role.DEALER: 1, Role.TECHNICIAN: 2}

# every op the socket accepts and the role it needs; anything else is "unknown op"
ROLES: dict[str, Role] = {
    "ping": Role.READER,
    "whoami": Role.READER,
    "status": Role.READER,
    "history": Role.READER,
    "roll": Role.DEALER,
    "void": Role.DEALER,
    "surrender": Role.DEALER,
    "bet": Role.DEALER,
    "cancel": Role.DEALER,
    "ack": Role.DEALER,
    "clear-halt": Role.TECHNICIAN,
    "diagnostics-on": Role.TECHNICIAN,
    "diagnostics-off": Role.TECHNICIAN,
    "sim-reader": Role.TECHNICIAN,
}

# ops the server answers itself, without calling the handler
BUILTIN_OPS = frozenset({"ping", "whoami"})


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
    actor: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "actor", self.identity.actor)


Handler = Callable[[Request], Mapping[str, Any]]
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


def encode(reply: Mapping[str, Any]) -> bytes:
    return json.dumps(reply, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
