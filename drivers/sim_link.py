"""The simulated reader's end of the cable: a pseudo-terminal or a one-client TCP server.

:class:`~drivers.sim_reader.SimulatedReader` speaks through a :class:`Link`: the master
side of a pseudo-terminal (``"pty"``, the slave is the port the driver opens) or a TCP
serial server on 127.0.0.1 (``"tcp"``, a ``socket://`` URL). Unplugging closes the link;
plugging opens it again.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import time
import tty
from abc import ABC, abstractmethod
from pathlib import Path

TRANSPORTS = ("pty", "tcp")


class Link(ABC):
    """The device's end of the cable."""

    port = ""  # what the driver opens: a device path or a ``socket://`` URL

    @abstractmethod
    def open(self) -> None:
        """Plug the cable in: make :attr:`port` reachable."""

    @abstractmethod
    def close(self) -> None:
        """Unplug the cable: the port goes away."""

    @abstractmethod
    def read(self, timeout: float) -> bytes:
        """What the driver wrote (empty after ``timeout`` seconds of nothing)."""

    @abstractmethod
    def write(self, data: bytes) -> bool:
        """Send ``data`` to the driver; False when nobody takes it (the bytes are lost)."""


class PtyLink(Link):
    """The master side of a pseudo-terminal; the slave is the port the driver opens."""

    def __init__(self, link: Path | None) -> None:
        self.link = link
        self.master: int | None = None
        self.slave: int | None = None
        self.slave_path = ""

    def open(self) -> None:
        """A new pseudo-terminal; the stable symlink (if any) points at its slave."""
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo, no line discipline, like a USB serial device
        os.set_blocking(master, False)
        self.master, self.slave = master, slave
        self.slave_path = os.ttyname(slave)
        if self.link is not None:
            tmp = self.link.with_name(self.link.name + ".new")
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            tmp.symlink_to(self.slave_path)
            os.replace(tmp, self.link)
            self.port = str(self.link)
        else:
            self.port = self.slave_path

    def close(self) -> None:
        if self.link is not None:
            with contextlib.suppress(FileNotFoundError):
                self.link.unlink()  # as udev removes /dev/serial/by-id/... on unplug
        for fd in (self.master, self.slave):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.master = self.slave = None

    def read(self, timeout: float) -> bytes:
        master = self.master  # unplug() may close it under our feet: then read nothing
        if master is None:
            time.sleep(timeout)
            return b""
        try:
            ready, _, _ = select.select([master], [], [], timeout)
            return os.read(master, 1024) if ready else b""
        except (OSError, ValueError):
            return b""

    def write(self, data: bytes) -> bool:
        if self.master is None:
            return False
        try:
            os.write(self.master, data)
            return True
        except OSError as exc:  # nobody reading and the buffer is full: the bytes are lost
            if exc.errno in (errno.EAGAIN, errno.EIO):
                return False
            raise


class TcpLink(Link):
    """A one-client TCP serial server on 127.0.0.1 (``socket://`` URL); keeps its port."""

    def __init__(self) -> None:
        self.listener: socket.socket | None = None
        self.client: socket.socket | None = None
        self.tcp_port = 0

    def open(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.tcp_port))
        listener.listen(1)
        listener.setblocking(False)
        self.tcp_port = listener.getsockname()[1]
        self.listener = listener
        self.port = f"socket://127.0.0.1:{self.tcp_port}"

    def _drop_client(self) -> None:
        if self.client is not None:
            with contextlib.suppress(OSError):
                self.client.close()
            self.client = None

    def close(self) -> None:
        self._drop_client()
        if self.listener is not None:
            with contextlib.suppress(OSError):
                self.listener.close()
            self.listener = None

    def read(self, timeout: float) -> bytes:
        socks = [s for s in (self.listener, self.client) if s is not None]
        if not socks:
            time.sleep(timeout)
            return b""
        try:
            ready, _, _ = select.select(socks, [], [], timeout)
        except (OSError, ValueError):  # closed by unplug() meanwhile
            return b""
        data = b""
        for s in ready:
            if s is self.listener:
                with contextlib.suppress(BlockingIOError):
                    conn, _ = s.accept()
                    conn.setblocking(True)
                    conn.settimeout(0.5)
                    self._drop_client()  # a new connection replaces the old, as a device server
                    self.client = conn
            elif s is self.client:
                try:
                    data = s.recv(1024)
                except OSError:
                    data = b""
                if not data:
                    self._drop_client()
        return data

    def write(self, data: bytes) -> bool:
        if self.client is None:
            return False
        try:
            self.client.sendall(data)
            return True
        except OSError:
            self._drop_client()
            return False


def link_for(transport: str, link: Path | None = None) -> Link:
    """The link for ``transport`` (one of :data:`TRANSPORTS`); ``link``: a pty's symlink."""
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {TRANSPORTS}, not {transport!r}")
    return PtyLink(link) if transport == "pty" else TcpLink()
