"""The simulated reader's end of the cable: a pseudo-terminal or a one-client TCP server.

:class:`~drivers.sim_reader.SimulatedReader` speaks through a :class:`Link`: the master
side of a pseudo-terminal (``"pty"``, the slave is the port the driver opens) or a TCP
serial server on 127.0.0.1 (``"tcp"``, a ``socket://`` URL). Unplugging closes the link
(:meth:`Link.unplug`); plugging opens it again. The TCP server keeps its listening socket
bound across an unplug, as a serial-to-network adapter keeps its port while its serial side
is disconnected: closed, the port could be taken by another program before the replug, and
the driver would connect to that program.

A pseudo-terminal's number (``/dev/pts/N``) goes to the next program that asks for one
once it is closed, so the driver is never given it: its port is a symlink kept pointing at
the current pseudo-terminal (as udev keeps ``/dev/serial/by-id/...``), and
:meth:`PtyLink.open_port`, the opener the composition root hands the driver, opens that
path only while it leads to this link's own terminal.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import shutil
import socket
import tempfile
import threading
import time
import tty
import weakref
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import serial

TRANSPORTS = ("pty", "tcp")


class Link(ABC):
    """The device's end of the cable."""

    port = ""  # what the driver opens: a device path or a ``socket://`` URL

    @abstractmethod
    def open(self) -> None:
        """Plug the cable in: make :attr:`port` reachable."""

    @abstractmethod
    def close(self) -> None:
        """Power off: the port goes away, and everything the link holds is released."""

    def unplug(self) -> None:
        """Pull the cable: the driver's port fails (:meth:`open` plugs it in again)."""
        self.close()

    @abstractmethod
    def read(self, timeout: float) -> bytes:
        """What the driver wrote (empty after ``timeout`` seconds of nothing)."""

    @abstractmethod
    def write(self, data: bytes) -> bool:
        """Send ``data`` to the driver; False when nobody takes it (the bytes are lost)."""

    def open_port(self, url: str, **settings: Any) -> Any:
        """The driver's opener (``SerialDiceReader(open_fn=...)``) for :attr:`port`."""
        return serial.serial_for_url(url, **settings)


class PtyLink(Link):
    """The master side of a pseudo-terminal; the slave is the terminal the driver opens,
    through :attr:`port`, a symlink that stays put across unplug and replug (``link``, or
    ``reader.tty`` in a private temporary folder when none is given): never the
    pseudo-terminal's own number, which another program may hold after an unplug."""

    def __init__(self, link: Path | None) -> None:
        self.link = link
        self.master: int | None = None
        self.slave: int | None = None  # held while plugged: the number is ours till unplug
        self.slave_path = ""
        self._lock = threading.Lock()  # master and slave change only under it

    def _link_path(self) -> Path:
        if self.link is None:  # a folder of our own, removed with this link
            folder = tempfile.mkdtemp(prefix="firebet-sim-reader-")
            weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)
            self.link = Path(folder) / "reader.tty"
        return self.link

    def open(self) -> None:
        """A new pseudo-terminal; the stable symlink points at its slave."""
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo, no line discipline, like a USB serial device
        os.set_blocking(master, False)
        link = self._link_path()
        slave_path = os.ttyname(slave)
        tmp = link.with_name(link.name + ".new")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        tmp.symlink_to(slave_path)
        with self._lock:
            self.master, self.slave, self.slave_path = master, slave, slave_path
            os.replace(tmp, link)  # pointed at the new terminal only once it is ours
        self.port = str(link)

    def close(self) -> None:
        """Unplug: the symlink goes first (as udev removes /dev/serial/by-id/...), then the
        terminal, so the link never leads to a number that was given away."""
        with self._lock:
            if self.link is not None:
                with contextlib.suppress(FileNotFoundError):
                    self.link.unlink()
            for fd in (self.master, self.slave):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self.master = self.slave = None

    def open_port(self, url: str, **settings: Any) -> serial.Serial:
        """The driver's opener (``SerialDiceReader(open_fn=...)``): ``url`` opened with
        pyserial only while it leads to this link's own pseudo-terminal now. Anything else
        (a stale link, a path another program's terminal now has) is refused without a
        byte read or a setting changed (OSError ENODEV: the driver's PORT_LOST)."""
        probe = os.open(url, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        try:
            with self._lock:
                ours = self.slave is not None and (
                    os.fstat(probe).st_rdev == os.fstat(self.slave).st_rdev
                )
            if not ours:
                raise OSError(
                    errno.ENODEV,
                    f"{url} does not lead to the simulated reader's terminal "
                    "(unplugged, or the number is another program's now): not opened",
                )
            # the very terminal checked, not the path again (it may change meanwhile)
            return serial.serial_for_url(f"/proc/self/fd/{probe}", **settings)
        finally:
            os.close(probe)

    def read(self, timeout: float) -> bytes:
        master = self.master  # unplug() may close it under our feet: then read nothing
        if master is None:
            time.sleep(timeout)
            return b""
        try:
            ready, _, _ = select.select([master], [], [], timeout)
        except (OSError, ValueError):
            return b""
        if not ready:
            return b""
        with self._lock:
            # closed meanwhile, its number perhaps another file's now: never read that
            if self.master != master:
                return b""
            try:
                return os.read(master, 1024)
            except OSError:
                return b""

    def write(self, data: bytes) -> bool:
        with self._lock:
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
        self.plugged = False  # unplugged: a connection is closed as soon as it comes

    def open(self) -> None:
        """Listen (or, after an :meth:`unplug`, take connections again on the same port)."""
        self.plugged = True
        if self.listener is not None:
            return
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

    def unplug(self) -> None:
        """The serial side disconnected: the client dropped, the port kept bound (and
        every connection closed at once until :meth:`open`)."""
        self.plugged = False
        self._drop_client()

    def close(self) -> None:
        self.plugged = False
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
                    if not self.plugged:  # no device behind the port: the line drops
                        conn.close()
                        continue
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
