"""The client's end of the control socket (``firebet status``, ``bet``, ...)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from controller.control.protocol import encode
from controller.core.errors import FirebetError, ServiceUnreachable


class ControlClient:
    """A client's end of the control socket; keeps one connection for many requests."""

    def __init__(self, path: Path | str, timeout: float = 5.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._file: Any = None
        self._next_id = 0

    def _unreachable(self, why: str) -> ServiceUnreachable:
        return ServiceUnreachable(
            f"firebet service is not running: {why} (start it with: sudo systemctl start firebet)"
        )

    def connect(self) -> None:
        """Open the connection now (``request`` does it on first use)."""
        if self._sock is not None:
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self.path))
        except FileNotFoundError as exc:
            sock.close()
            raise self._unreachable(f"no control socket at {self.path}") from exc
        except ConnectionRefusedError as exc:
            sock.close()
            raise self._unreachable(f"nothing answers on {self.path}") from exc
        except PermissionError as exc:
            sock.close()
            raise ServiceUnreachable(
                f"permission denied on the control socket {self.path}: "
                "your user must be in the service's group (sudo usermod -aG firebet $USER, "
                "then log in again)"
            ) from exc
        except OSError as exc:
            sock.close()
            raise ServiceUnreachable(f"cannot reach the control socket {self.path}: {exc}") from exc
        self._sock = sock
        self._file = sock.makefile("rb")

    def request(self, op: str, **args: Any) -> dict[str, Any]:
        """Send one request and return the service's reply (``ok`` false included)."""
        self.connect()
        assert self._sock is not None
        self._next_id += 1
        req_id = self._next_id
        data = encode({"op": op, "args": args, "id": req_id})
        try:
            self._sock.sendall(data)
            line = self._file.readline()
        except TimeoutError as exc:
            self.close()
            raise ServiceUnreachable(
                f"firebet service did not answer {op} within {self.timeout:g} s on {self.path}"
            ) from exc
        except OSError as exc:
            self.close()
            raise ServiceUnreachable(f"lost the control socket {self.path}: {exc}") from exc
        if not line.endswith(b"\n"):
            self.close()
            raise ServiceUnreachable(f"firebet service closed the control socket {self.path}")
        try:
            reply = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            self.close()
            raise FirebetError(f"garbled reply from the firebet service: {exc}") from exc
        if not isinstance(reply, dict):
            raise FirebetError("garbled reply from the firebet service: not an object")
        reply.pop("id", None)
        return reply

    def close(self) -> None:
        """Close the connection (a later request reconnects)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
