"""sd_notify without a dependency: tell systemd we are ready, alive, or stopping.

systemd passes ``$NOTIFY_SOCKET`` (a path, or ``@name`` for an abstract socket)
to a ``Type=notify`` service; one datagram of ``KEY=VALUE`` lines tells it
something. Outside systemd the variable is unset and every call does nothing,
so the service, ``firebet sim`` and the tests run the same code.

The watchdog: with ``WatchdogSec=`` set, systemd passes ``$WATCHDOG_USEC``
(and ``$WATCHDOG_PID``); the service must call :func:`watchdog` more often than
that, best at half of :func:`watchdog_interval`, or systemd kills and restarts it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable

log = logging.getLogger("firebet.notify")


def _address() -> str | None:
    addr = os.environ.get("NOTIFY_SOCKET", "")
    if not addr:
        return None
    if addr.startswith("@"):
        return "\0" + addr[1:]  # abstract namespace
    if addr.startswith("/"):
        return addr
    log.warning("NOTIFY_SOCKET=%r is not a Unix socket address; not notifying", addr)
    return None


_failing = False  # log a failing notify socket once, not at every roll
_lock = threading.Lock()
_open: tuple[str, socket.socket] | None = None  # one socket, kept: not one a roll


def _send(addr: str, data: bytes, timeout: float) -> None:
    """Send one datagram on the kept socket (made again once when it fails)."""
    global _open
    with _lock:
        for attempt in (1, 2):
            if _open is None or _open[0] != addr:
                if _open is not None:
                    _open[1].close()
                    _open = None
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                try:
                    sock.connect(addr)
                except OSError:
                    sock.close()
                    raise
                _open = (addr, sock)
            sock = _open[1]
            sock.settimeout(timeout)
            try:
                sock.send(data)
                return
            except OSError:
                sock.close()
                _open = None
                if attempt == 2:
                    raise


def notify(*lines: str, timeout: float = 0.0) -> bool:
    """Send ``KEY=VALUE`` lines to systemd in one datagram.

    Returns True when sent, False when not running under systemd or the send
    failed (logged: a notification must never crash the service). By default
    the send never waits: a receiver whose queue is full (a stalled systemd)
    must not stall the engine thread that calls this after every roll; such a
    message is dropped. ``timeout`` lets READY and STOPPING wait that long.
    The socket is kept between calls (the engine thread sends a status a roll).
    """
    global _failing
    addr = _address()
    if addr is None or not lines:
        return False
    for line in lines:
        if "\n" in line or "=" not in line:
            raise ValueError(f"a notify line is KEY=VALUE on one line, not {line!r}")
    try:
        _send(addr, "\n".join(lines).encode(), timeout)
    except OSError as exc:
        if not _failing:
            log.warning("sd_notify %s failed: %s", lines[0].split("=", 1)[0], exc)
        _failing = True
        return False
    _failing = False
    return True


def _announce(line: str, status_text: str | None) -> bool:
    """READY or STOPPING (with a status): worth a short wait when systemd is busy."""
    lines = [line] if status_text is None else [line, f"STATUS={_one_line(status_text)}"]
    return notify(*lines, timeout=2.0)


def ready(status_text: str | None = None) -> bool:
    """The service finished start-up (recovery done, outputs re-lit): ``READY=1``."""
    return _announce("READY=1", status_text)


def status(text: str) -> bool:
    """A one-line status that ``systemctl status firebet`` shows: ``STATUS=...``."""
    return notify(f"STATUS={_one_line(text)}")


STATUS_EVERY_S = 1.0  # systemd's status line: the counts at most this often


class StatusLine:
    """systemd's status line, kept cheap on the roll path (one thread: the engine's).

    A new line goes out at once when its ``kind`` (what a technician reads: the mode)
    changed; a line where only the counts moved waits until :data:`STATUS_EVERY_S` has
    passed since the last one sent (:meth:`flush`, called when the engine is idle, sends
    what waited). A line equal to the one shown is not sent again. The text is made only
    when it is sent.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """``clock`` is injectable for tests."""
        self._clock = clock
        self._kind: str | None = None
        self._shown: str | None = None
        self._sent_at = float("-inf")
        self._waiting: Callable[[], str] | None = None
        self.sent = 0  # lines sent (for the tests and the bench)

    def offer(self, kind: str, text: Callable[[], str]) -> None:
        """The status now is ``text()`` (its mode ``kind``): sent now or within
        :data:`STATUS_EVERY_S`."""
        if kind != self._kind or self._clock() - self._sent_at >= STATUS_EVERY_S:
            self._waiting = None
            self._send(kind, text())
        else:
            self._waiting = text

    def due_in(self) -> float | None:
        """Seconds until the line that waits may be sent (0: now); None when none waits."""
        if self._waiting is None:
            return None
        return max(0.0, self._sent_at + STATUS_EVERY_S - self._clock())

    def flush(self) -> None:
        """Send the line that waited, once :data:`STATUS_EVERY_S` has passed."""
        if self._waiting is not None and self.due_in() == 0.0:
            text, self._waiting = self._waiting, None
            self._send(self._kind or "", text())

    def _send(self, kind: str, line: str) -> None:
        self._kind = kind
        if line == self._shown:
            return
        self._shown, self._sent_at = line, self._clock()
        self.sent += 1
        status(line)


def watchdog() -> bool:
    """Keep-alive for ``WatchdogSec=``: ``WATCHDOG=1``."""
    return notify("WATCHDOG=1")


def stopping(status_text: str | None = None) -> bool:
    """The service is shutting down cleanly: ``STOPPING=1``."""
    return _announce("STOPPING=1", status_text)


def watchdog_interval() -> float | None:
    """The watchdog timeout in seconds, or None when no watchdog applies to this process.

    Ping with :func:`watchdog` at least every half of this. ``$WATCHDOG_PID``,
    when set, must name this process (a child does not inherit the duty).
    """
    usec = os.environ.get("WATCHDOG_USEC", "")
    pid = os.environ.get("WATCHDOG_PID", "")
    if not usec:
        return None
    if pid:
        try:
            if int(pid) != os.getpid():
                return None
        except ValueError:
            return None
    try:
        value = int(usec)
    except ValueError:
        log.warning("WATCHDOG_USEC=%r is not a number; no watchdog", usec)
        return None
    return value / 1_000_000 if value > 0 else None


def _one_line(text: str) -> str:
    return " ".join(text.split())
