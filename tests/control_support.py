"""What the control socket's tests share: an echoing handler, a fake identity, raw lines."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from controller.control.protocol import Identity, Request
from tests.support import DEALERS

SERVICE_UID = 999  # the fake service user in tests; the test process itself runs as someone else


class Recorder:
    """A handler that remembers every request and echoes it back."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Mapping[str, Any]:
        with self.lock:
            self.requests.append(request)
        return {"op": request.op, "args": request.args, "actor": request.actor}


def fake_identity(user: str, uid: int, *groups: str) -> Callable[[int, int], Identity]:
    """An ``identify`` that ignores the real peer and says it is ``user``."""

    def identify_fake(_uid: int, gid: int) -> Identity:
        return Identity(uid=uid, gid=gid, user=user, groups=frozenset(groups))

    return identify_fake


def raw_exchange(
    path: Path, payload: bytes, replies: int, timeout: float = 5.0
) -> list[dict[str, Any]]:
    """Send raw bytes on one connection and read ``replies`` reply lines."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(path))
        s.sendall(payload)
        f = s.makefile("rb")
        return [json.loads(f.readline()) for _ in range(replies)]


class GatedRecorder:
    """Remembers every request; answers at once, or waits for ``gate`` on the ``slow`` ops."""

    def __init__(self, slow: frozenset[str] = frozenset()) -> None:
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.slow = slow
        self.gate = threading.Event()
        self.entered = threading.Event()

    def __call__(self, request: Request) -> Mapping[str, Any]:
        with self.lock:
            self.requests.append(request)
        if request.op in self.slow:
            self.entered.set()
            self.gate.wait(30)
        return {"op": request.op, "args": request.args, "n": len(self.requests)}

    def count(self, op: str) -> int:
        with self.lock:
            return sum(1 for r in self.requests if r.op == op)


def dealer(_uid: int, gid: int) -> Identity:
    """An ``identify`` that says every peer is dana, of the dealer group."""
    return Identity(uid=1001, gid=gid, user="dana", groups=frozenset({DEALERS}))


class Line:
    """A raw connection speaking lines."""

    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))  # blocking: waits while the listen queue is full
        self.sock.settimeout(timeout)
        self.file = self.sock.makefile("rb")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def reply(self) -> dict[str, Any]:
        line = self.file.readline()
        assert line.endswith(b"\n"), f"no reply line, got {line[:80]!r}"
        body: dict[str, Any] = json.loads(line)
        return body

    def ask(self, body: dict[str, Any]) -> dict[str, Any]:
        self.send(json.dumps(body).encode() + b"\n")
        return self.reply()

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def __enter__(self) -> Line:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
