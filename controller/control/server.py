"""The control socket: how ``firebet status``, ``roll``, ``clear-halt``... reach the service.

Transport and privileges only, no game logic. A Unix stream socket (never a
network port) speaks JSON lines: each request is one object on one line,
``{"op": "roll", "args": {"d1": 3, "d2": 4}, "id": 7}``, answered by one object
on one line, ``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}`` (with the
request's ``id`` echoed when it had one). A connection may send many requests.

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
the journal with every state change.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import stat
import threading
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from controller.control.protocol import (
    MAX_LINE,
    ROLES,
    Handler,
    Identify,
    Identity,
    Request,
    Role,
    encode,
    identify,
    peer_credentials,
    permission_error,
    role_of,
)
from controller.core.errors import FirebetError, UsageError

log = logging.getLogger("firebet.control")

MAX_CONNECTIONS = 32  # clients served at once; more are told to retry
SOCKET_MODE = 0o660
_AF_UNIX_PATH_MAX = 107  # sun_path is 108 bytes with the terminating NUL


class ControlServer:
    """The service's end of the control socket, served from a background thread.

    ``handler(request)`` is called from connection threads, possibly several at
    once: it must be thread-safe (post to the controller's queue and wait). It
    returns the reply; ``"ok": true`` is added when the reply has no ``ok``. A
    :class:`FirebetError` it raises becomes ``{"ok": false, "error": str(exc)}``;
    any other exception is logged and answered as an internal error.
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
        idle_timeout: float | None = 600.0,
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
        self._listener: socket.socket | None = None
        self._inode: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._stopping = threading.Event()

    # lifecycle ----------------------------------------------------------------------
    @property
    def address(self) -> str:
        """The socket's filesystem path."""
        return str(self.path)

    @property
    def serving(self) -> bool:
        """Whether the accept thread is running."""
        return self._thread is not None and self._thread.is_alive()

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
            listener.listen(16)
            os.replace(tmp, self.path)
        except OSError:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        st = os.stat(self.path)
        self._inode = (st.st_dev, st.st_ino)
        self._listener = listener
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._accept_loop, name="control-accept", daemon=True
        )
        self._thread.start()
        log.info("control socket listening at %s", self.path)

    def stop(self, timeout: float = 2.0) -> None:
        """Stop accepting, close every connection and remove the socket file."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        self._stopping.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        listener.close()
        with self._lock:
            conns = list(self._conns.items())
        for conn, _ in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout)
        for _, thread in conns:
            thread.join(timeout)
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

    # serving ------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stopping.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                log.exception("control socket accept failed")
                continue
            with self._lock:
                busy = len(self._conns) >= self.max_connections
                if not busy:
                    thread = threading.Thread(
                        target=self._serve, args=(conn,), name="control-conn", daemon=True
                    )
                    self._conns[conn] = thread
            if busy:
                with contextlib.suppress(OSError):
                    conn.sendall(encode({"ok": False, "error": "control socket busy: retry"}))
                conn.close()
                continue
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(self.idle_timeout)
            pid, uid, gid = peer_credentials(conn)
            identity = self.identify(uid, gid)
            if identity.pid is None:
                identity = replace(identity, pid=pid)
            dealers, techs = self.groups[Role.DEALER], self.groups[Role.TECHNICIAN]
            role = role_of(identity, dealers, techs, self.service_uid)
            for line, error in self._lines(conn):
                reply = (
                    {"ok": False, "error": error} if error else self._answer(line, identity, role)
                )
                conn.sendall(encode(reply))
        except (OSError, TimeoutError):
            pass  # the client went away, timed out, or the server is stopping
        except Exception:  # pragma: no cover - a bug here must not take the server down
            log.exception("control connection failed")
        finally:
            with self._lock:
                self._conns.pop(conn, None)
            conn.close()

    def _lines(self, conn: socket.socket) -> Iterator[tuple[bytes, str | None]]:
        """Yield ``(line, None)`` per complete line, ``(b"", error)`` per oversized one."""
        buf = bytearray()
        skipping = False  # inside an oversized line, dropping bytes up to its newline
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                return
            buf += chunk
            while True:
                nl = buf.find(b"\n")
                if nl < 0:
                    if not skipping and len(buf) > self.max_line:
                        skipping = True
                        yield b"", f"request line too long: more than {self.max_line} bytes"
                    if skipping:
                        buf.clear()
                    break
                line = bytes(buf[:nl])
                del buf[: nl + 1]
                if skipping:
                    skipping = False
                    continue
                if len(line) > self.max_line:
                    yield b"", f"request line too long: more than {self.max_line} bytes"
                    continue
                if line.strip():
                    yield line, None

    def _answer(self, line: bytes, identity: Identity, role: Role) -> dict[str, Any]:
        try:
            message = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return {"ok": False, "error": f"malformed request: not JSON ({exc})"}
        if not isinstance(message, dict):
            return {"ok": False, "error": "malformed request: expected a JSON object"}
        req_id = message.get("id")
        reply = self._dispatch(message, identity, role)
        if req_id is not None:
            reply["id"] = req_id
        return reply

    def _dispatch(self, message: dict[str, Any], identity: Identity, role: Role) -> dict[str, Any]:
        op = message.get("op")
        if not isinstance(op, str) or not op:
            return {"ok": False, "error": 'malformed request: missing "op"'}
        needed = self.roles.get(op)
        if needed is None:
            known = ", ".join(sorted(self.roles))
            return {"ok": False, "error": f"unknown op {op!r} (known: {known})"}
        args = message.get("args", {})
        if not isinstance(args, dict):
            return {"ok": False, "error": 'malformed request: "args" must be a JSON object'}
        if not role.permits(needed):
            error = permission_error(identity, op, needed, self.groups)
            log.warning("%s refused %s: %s", identity.actor, op, error)
            return {"ok": False, "error": error}
        if op == "ping":
            return {"ok": True, "pong": True, "pid": os.getpid()}
        if op == "whoami":
            return {
                "ok": True,
                "user": identity.user,
                "uid": identity.uid,
                "groups": sorted(identity.groups),
                "role": role.value,
                "actor": identity.actor,
            }
        request = Request(op=op, args=args, identity=identity, role=role)
        try:
            reply = dict(self.handler(request))
        except FirebetError as exc:
            return {"ok": False, "error": str(exc)}
        except Exception as exc:
            log.exception("control handler failed on %s from %s", op, identity.actor)
            return {"ok": False, "error": f"internal error handling {op}: {exc}"}
        reply.setdefault("ok", True)
        try:
            json.dumps(reply)
        except (TypeError, ValueError) as exc:
            log.error("control handler reply to %s is not JSON: %s", op, exc)
            return {"ok": False, "error": f"internal error handling {op}: reply is not JSON"}
        return reply
