"""What the control socket's tests share: an echoing handler, a fake identity, raw lines."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from controller.control.protocol import Identity, Request

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


def raw_exchange(path: Path, payload: bytes, replies: int) -> list[dict[str, Any]]:
    """Send raw bytes on one connection and read ``replies`` reply lines."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(str(path))
        s.sendall(payload)
        f = s.makefile("rb")
        return [json.loads(f.readline()) for _ in range(replies)]
