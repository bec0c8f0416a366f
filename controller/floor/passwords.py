"""Surveillance users' passwords: scrypt hashes in the floor's config, and console sessions.

A hash reads ``scrypt$<n>$<r>$<p>$<salt>$<key>`` (salt and key in base64). Make one
with ``firebet floor passwd USER`` and paste the line it prints under ``[users]``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

N, R, P = 2**14, 8, 1
_KEY_BYTES = 32


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_password(password: str, *, n: int = N, r: int = R, p: int = P) -> str:
    """A salted scrypt hash of ``password`` in the form the floor's config takes."""
    salt = secrets.token_bytes(16)
    key = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=_KEY_BYTES)
    return f"scrypt${n}${r}${p}${_b64(salt)}${_b64(key)}"


def hash_problem(encoded: str) -> str | None:
    """Why ``encoded`` is not a usable hash (None when it is)."""
    parts = encoded.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        return "is not a password hash (scrypt$n$r$p$salt$key: make one with firebet floor passwd)"
    try:
        n, r, p = (int(x) for x in parts[1:4])
        base64.b64decode(parts[4], validate=True)
        key = base64.b64decode(parts[5], validate=True)
    except ValueError:
        return "is a damaged password hash (bad number or base64)"
    if n < 2**10 or n & (n - 1) or r < 1 or p < 1:
        return "has scrypt parameters too weak or not valid (n a power of 2 >= 1024)"
    if len(key) < 16:
        return "has a key too short to be a password hash"
    return None


def verify_password(password: str, encoded: str) -> bool:
    """Whether ``password`` matches the hash (constant time in the key comparison)."""
    if hash_problem(encoded) is not None:
        return False
    _, n, r, p, salt, key = encoded.split("$")
    want = base64.b64decode(key)
    got = hashlib.scrypt(
        password.encode(),
        salt=base64.b64decode(salt),
        n=int(n),
        r=int(r),
        p=int(p),
        dklen=len(want),
        maxmem=2**27,
    )
    return hmac.compare_digest(got, want)


@dataclass(frozen=True)
class Session:
    user: str
    expires: float


class Sessions:
    """Logged-in surveillance users, by an unguessable cookie token (kept in memory)."""

    def __init__(self, ttl_s: float = 12 * 3600, clock: Callable[[], float] = time.monotonic):
        self.ttl_s = ttl_s
        self.clock = clock
        self._by_token: dict[str, Session] = {}

    def open(self, user: str) -> str:
        """A new session for ``user``; its token."""
        token = secrets.token_urlsafe(32)
        self._by_token[token] = Session(user, self.clock() + self.ttl_s)
        return token

    def user(self, token: str | None) -> str | None:
        """The user of a live session, None for the pit (no or expired session)."""
        if not token:
            return None
        session = self._by_token.get(token)
        if session is None:
            return None
        if session.expires < self.clock():
            self._by_token.pop(token, None)
            return None
        return session.user

    def close(self, token: str | None) -> None:
        if token:
            self._by_token.pop(token, None)
