"""One client connection of the control socket: its socket, its buffers, its state.

Owned by the selector thread (:mod:`controller.control.server`); the request desk
(:mod:`controller.control.desk`) reads who it is and marks it pending. :meth:`Conn.receive`
and :meth:`Conn.write` make the non-blocking socket calls and say when the connection is
dead, so the server closes it.
"""

from __future__ import annotations

import socket
import time

from controller.control.protocol import Identity, Role


class Conn:
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

    def receive(self) -> bool | None:
        """Read what the socket has into ``inbuf``: True when bytes came, False when none
        were there yet, None when the peer is gone (the server then closes it)."""
        try:
            chunk = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return None
        if not chunk:
            return None
        self.inbuf += chunk
        return True

    def write(self) -> bool:
        """Send what the socket takes now of ``outbuf``; False when the socket failed."""
        if not self.outbuf:
            return True
        try:
            sent = self.sock.send(self.outbuf)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        if sent:
            del self.outbuf[:sent]
            self.last_sent = time.monotonic()
        return True
