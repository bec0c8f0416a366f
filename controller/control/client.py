"""The client's end of the control socket (``firebet status``, ``bet``, ...).

Every request carries a fresh ``id`` and the deadline the client will honour
(:mod:`controller.control.protocol`): the client waits the deadline plus
:data:`~controller.control.protocol.CLIENT_GRACE_S` for the answer, longer than
the service may take to start and finish it. When the service says ``busy``, or
the connection drops before the service read the request, the very same request
(same id) is sent again until the deadline: the service applies it once. When the
connection is lost after the service may have read a state-changing request (it was
stopped or restarted mid-request), the client waits for the service to be back and sends
the same id again within what is left of the deadline: the service journals each
request's tag with its command, so one started again answers what was decided then and
never does it twice. Not back in time, the client says the request may have been applied
(exit 3). A reading is simply asked again.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from controller.control.protocol import (
    CLIENT_GRACE_S,
    DEFAULT_DEADLINE_MS,
    ROLES,
    Role,
    encode,
)
from controller.core.errors import FirebetError, ServiceUnreachable

_RETRY_PAUSE_S = (0.05, 0.1, 0.2, 0.5)  # between retries of a busy request
_RESTART_POLL_S = 0.1  # between tries to reach a service that is starting again


class _MayHaveBeenRead(Exception):
    """The connection was lost after the service may have read a state-changing request."""


INSTALLED_SOCKET_DIR = Path("/run/firebet")  # the installed unit's (systemd/firebet.service)


def _default_socket() -> str:
    """``[control] socket`` of the defaults (config/table.toml): the state directory's."""
    import tomllib

    from controller.core.config.presets import defaults_text

    return str(tomllib.loads(defaults_text())["control"]["socket"])


class ControlClient:
    """A client's end of the control socket; keeps one connection for many requests."""

    def __init__(
        self,
        path: Path | str,
        timeout: float = DEFAULT_DEADLINE_MS / 1000,
        grace: float = CLIENT_GRACE_S,
    ) -> None:
        """``timeout``: the deadline sent with each request (the service never starts it
        later); the client waits ``grace`` longer for the reply."""
        self.path = Path(path)
        self.timeout = timeout
        self.grace = grace
        self._sock: socket.socket | None = None
        self._file: Any = None

    def _unreachable(self, why: str) -> ServiceUnreachable:
        return ServiceUnreachable(f"firebet service is not running: {why} ({self._advice()})")

    def _advice(self) -> str:
        """How to start the service this socket belongs to: the installed unit's socket
        (under ``/run/firebet``) by systemd, any other (a bench, a checkout) by hand."""
        if self.path.parent == INSTALLED_SOCKET_DIR:
            return "start it with: sudo systemctl start firebet"
        # a socket by another name than the state directory's own: the bench names it too
        named = "" if self.path.name == _default_socket() else f" --socket {self.path}"
        return (
            "on a bench start it with: firebet run --simulated-reader --pin-factory mock "
            f"--state-dir {self.path.parent}{named}; an installed table: sudo systemctl "
            "start firebet"
        )

    def connect(self) -> None:
        """Open the connection now (``request`` does it on first use)."""
        if self._sock is not None:
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.settimeout(self.timeout + self.grace)
        give_up = time.monotonic() + self.timeout
        try:
            while True:
                try:
                    sock.connect(str(self.path))
                    break
                except BlockingIOError:  # the listen queue is full (a flood): wait a turn
                    if time.monotonic() > give_up:
                        raise
                    time.sleep(0.02)
        except BlockingIOError as exc:
            sock.close()
            raise FirebetError(
                f"the control socket {self.path} is flooded with connections: "
                f"none accepted within {self.timeout:g} s; try again"
            ) from exc
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

    def request(self, op: str, *, request_id: str | None = None, **args: Any) -> dict[str, Any]:
        """Send one request and return the service's reply (``ok`` false included).

        ``request_id``: the caller's own id (``--request-id``), so that a script sending
        the same request again is answered with what was decided, never doing it twice;
        else a fresh one. Raises :class:`ServiceUnreachable` (exit 3) when there is no
        service or it did not answer in time, :class:`FirebetError` (exit 1) when it
        stayed busy.
        """
        request_id = request_id or uuid.uuid4().hex
        deadline_ms = max(1, round(self.timeout * 1000))
        data = encode({"op": op, "args": args, "id": request_id, "deadline_ms": deadline_ms})
        start = time.monotonic()
        give_up = start + self.timeout + self.grace
        pauses = iter(_RETRY_PAUSE_S)
        while True:
            try:
                reply = self._exchange(op, request_id, data, give_up)
            except _MayHaveBeenRead:
                reply = self._after_a_restart(op, args, request_id, start + self.timeout, give_up)
            if reply is not None and not reply.get("busy"):
                reply.pop("id", None)
                return reply
            pause = next(pauses, _RETRY_PAUSE_S[-1])
            if time.monotonic() + pause >= give_up - self.grace:
                if reply is None:
                    raise ServiceUnreachable(
                        f"lost the control socket {self.path} before {op} was answered"
                    )
                raise FirebetError(
                    f"{reply.get('error', 'the service is busy')} (gave up after "
                    f"{self.timeout:g} s)"
                )
            time.sleep(pause)

    def _after_a_restart(
        self, op: str, args: dict[str, Any], request_id: str, deadline: float, give_up: float
    ) -> dict[str, Any] | None:
        """The service stopped after it may have read state-changing ``op``: send it again
        (same id) once a service answers, within what is left of its deadline, so the
        service never starts it later than the first send allowed. A service started again
        knows the id from its journal and answers what was decided, never doing it twice.
        No service in time: :class:`ServiceUnreachable` saying it may have been applied."""
        while (left := deadline - time.monotonic()) > 0:
            try:
                self.connect()
            except ServiceUnreachable:  # not back yet (no socket, or nothing answers)
                time.sleep(min(_RESTART_POLL_S, max(0.0, left)))
                continue
            data = encode(
                {"op": op, "args": args, "id": request_id, "deadline_ms": max(1, int(left * 1000))}
            )
            try:
                return self._exchange(op, request_id, data, give_up)
            except (_MayHaveBeenRead, ServiceUnreachable):
                continue  # stopped again, or not answering yet: the journal knows the id
        raise ServiceUnreachable(
            f"firebet service stopped before answering {op} on {self.path} and was not back "
            "within the request's deadline: it may have been applied; check firebet status "
            "before repeating it"
        )

    def _exchange(
        self, op: str, request_id: str, data: bytes, give_up: float
    ) -> dict[str, Any] | None:
        """One send and its reply line; None when a kept connection turned out closed."""
        fresh = self._sock is None
        self.connect()
        assert self._sock is not None
        try:
            self._sock.settimeout(max(0.001, give_up - time.monotonic()))
            self._sock.sendall(data)
        except OSError as exc:  # refused at once: the service never had it
            self.close()
            if fresh:
                raise ServiceUnreachable(f"lost the control socket {self.path}: {exc}") from exc
            return None  # a kept connection the service closed (idle): send again
        try:
            line = self._file.readline()
        except TimeoutError as exc:
            self.close()
            raise ServiceUnreachable(
                f"firebet service did not answer {op} within "
                f"{self.timeout + self.grace:g} s on {self.path}; it may still be "
                "busy with it: check firebet status before repeating it"
            ) from exc
        except ConnectionResetError as exc:  # closed with the request unread: never had it
            self.close()
            if fresh:
                raise ServiceUnreachable(f"lost the control socket {self.path}: {exc}") from exc
            return None
        except OSError:
            line = b""  # lost after the service may have read it
        if not line.endswith(b"\n"):
            self.close()
            if ROLES.get(op) is not Role.READER:
                raise _MayHaveBeenRead(op)
            if fresh:
                raise ServiceUnreachable(f"firebet service closed the control socket {self.path}")
            return None  # a reading: ask again
        try:
            reply = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            self.close()
            raise FirebetError(f"garbled reply from the firebet service: {exc}") from exc
        if not isinstance(reply, dict):
            raise FirebetError("garbled reply from the firebet service: not an object")
        if reply.get("id") != request_id and not fresh:
            self.close()  # the service's goodbye to a kept, idle connection: send again
            return None
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
