"""The reference dice reader driver: the reader protocol's frames over any pyserial URL.

A thin transport around :class:`drivers.session.ReaderSession`, which holds the whole
protocol policy (verdicts, faults, NAKs, protocol 3's session) and does no I/O. One
thread, :meth:`SerialDiceReader._supervise`, owns the port: it opens it with
:func:`serial.serial_for_url` (``/dev/ttyUSB0``, ``socket://``, ``rfc2217://``,
``loop://`` alike), hands the session the bytes it reads and the time, posts the
commands the session gives and writes the frames it gives, and when the port fails
closes it and opens it again with a capped backoff. A pseudo-terminal is opened again only
while it is the very terminal the driver had (:class:`Terminal`): its number goes to the
next program that asks once the reader's end closes it, and a path that still leads to that
number (``/dev/pts/N``, or a symlink to it nobody made anew) is then another program's.
A device port is opened exclusively (a second program gets "busy"). Nothing it
reads can stop it, and nothing that goes wrong in it ends it silently: any
exception becomes a ``DRIVER_ERROR`` fault with its reason (``status()`` and the
log), and the port is reopened after the backoff. ACKs are written from the
controller's thread under a lock.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import serial

from controller.clock import now_iso
from controller.core.errors import HardwareError
from drivers.codec import DEFAULT_PROTOCOL, Frame, NakReason, check_protocol
from drivers.reader import DiceReader, Post, ReaderStatus
from drivers.session import NAK_PER_S, ReaderSession, Step

log = logging.getLogger(__name__)

OpenPort = Callable[..., Any]
READ_CHUNK = 4096  # bytes taken from a device port at once
# the longest the reader thread sleeps on a silent device with no heartbeat to time (a
# fault in force): stop() wakes it at once through a pipe (SPEC section 7: the idle budget)
IDLE_WAIT_S = 10.0
__all__ = [
    "NAK_PER_S",
    "SerialDiceReader",
    "Terminal",
    "device_fd",
    "open_port",
    "port_problem",
]
PTY_MAJORS = range(136, 144)  # Linux's Unix98 pseudo-terminal slaves, /dev/pts/N


def _link_of(path: str) -> tuple[int, int, int] | None:
    """The identity of ``path`` itself when it is a symlink (its inode and when it was
    made), else None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns) if stat.S_ISLNK(st.st_mode) else None


@dataclass(frozen=True)
class Terminal:
    """Which pseudo-terminal a port path led to: its number (``rdev``), when that terminal
    was made (``born_ns``, its node's change time: a number given out again is a new node)
    and the symlink the path is (``link``, None when it is not one)."""

    rdev: int
    born_ns: int
    link: tuple[int, int, int] | None

    @classmethod
    def of(cls, path: str, fd: int | None = None) -> Terminal | None:
        """The pseudo-terminal ``path`` leads to now (or ``fd``, opened from it, is), or
        None: not a path, gone, or not a pseudo-terminal (a USB serial device keeps its
        name across a replug; only a pseudo-terminal's number is handed to another)."""
        try:
            st = os.fstat(fd) if fd is not None else os.stat(path)
        except OSError:
            return None
        if not stat.S_ISCHR(st.st_mode) or os.major(st.st_rdev) not in PTY_MAJORS:
            return None
        return cls(st.st_rdev, st.st_ctime_ns, _link_of(path))

    def still_ours(self, now: Terminal) -> bool:
        """Whether ``now`` (what the path leads to at a reopen) may be opened: the very
        terminal, or one a symlink made anew leads to (udev, or the bridge that made the
        terminal, pointed it there); never another terminal behind the same old path."""
        if (now.rdev, now.born_ns) == (self.rdev, self.born_ns):
            return True
        return now.link is not None and now.link != self.link


def device_fd(port: Any) -> int | None:
    """The file descriptor of a device port (a tty or pty), or None: a URL handler
    (``socket://``, ``loop://``) or a test's port, read and written through pyserial.

    On a device the reader waits and reads with one ``select`` and one ``read``, and
    writes an ACK with one ``write``: pyserial's ``read(1)``, ``in_waiting``,
    ``read(n)`` and ``write`` + ``flush`` cost the roll path twice the system calls, and
    ``flush`` (``tcdrain``) would hold the engine thread until the ACK's last bit had
    left a real UART (15 ms at 9600 baud), with nothing gained: the port sends it.
    """
    if not isinstance(port, serial.Serial):  # serial.Serial is the platform's device class
        return None
    try:
        fd = port.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return fd if isinstance(fd, int) and fd >= 0 else None


def port_problem(url: str, exc: BaseException) -> str:
    """A technician's message for a port that cannot be opened: what, and the fix."""
    code = getattr(exc, "errno", None)
    text = str(exc)
    if code in (errno.EACCES, errno.EPERM) or "Permission denied" in text:
        return (
            f"serial port {url}: permission denied; add the user to the dialout group: "
            "sudo usermod -aG dialout $USER (then log in again)"
        )
    if code == errno.ENOENT or "No such file" in text:
        return (
            f"serial port {url}: no such device; check the reader's cable and power, "
            "and reader.port in the config (ls /dev/serial/by-id/)"
        )
    if code in (errno.EBUSY, errno.EAGAIN) or "busy" in text.lower() or "exclusive" in text:
        return (
            f"serial port {url}: busy; another program holds it (is the firebet service "
            "running? stop it first: sudo systemctl stop firebet)"
        )
    if "refused" in text.lower():
        return f"serial port {url}: connection refused; is the reader's network adapter up?"
    if not isinstance(exc, OSError):  # a setting the port cannot take (a baud rate, ...)
        return f"serial port {url}: cannot open: {type(exc).__name__}: {text}"
    return f"serial port {url}: cannot open: {text}"


def open_port(url: str, baud: int, timeout: float, open_fn: OpenPort | None = None) -> Any:
    """Open ``url`` (device path or pyserial URL) exclusively; :class:`HardwareError` says
    the fix for any failure (a refused baud rate, a port another program holds, ...)."""
    opener = open_fn if open_fn is not None else serial.serial_for_url
    try:
        return opener(url, baudrate=baud, timeout=timeout, write_timeout=0.5, exclusive=True)
    except Exception as exc:  # SerialException is an OSError; a baud rate may OverflowError
        raise HardwareError(port_problem(url, exc)) from exc


class SerialDiceReader(DiceReader):
    """A reader of ``docs/reader-protocol.md`` on a serial port or pyserial URL.

    ``heartbeat_timeout_s``: no good frame for this long is a HEARTBEAT fault.
    ``backoff_s``/``backoff_max_s``: first and largest wait between reopen tries.
    ``on_frame``: called (on the reader thread) with every frame of any verdict,
    for monitors and logs. ``open_fn`` replaces :func:`serial.serial_for_url`.
    ``protocol``: the reader protocol's version, 1 (XOR), 2 (CRC-16, the default) or 3
    (CRC-16 and an explicit session).
    """

    def __init__(
        self,
        port_url: str,
        baud: int = 9600,
        heartbeat_timeout_s: float = 3.0,
        *,
        backoff_s: float = 0.1,
        backoff_max_s: float = 2.0,
        read_timeout_s: float = 0.05,
        on_frame: Callable[[Frame], None] | None = None,
        open_fn: OpenPort | None = None,
        protocol: int = DEFAULT_PROTOCOL,
    ) -> None:
        self.port_url = port_url
        self.protocol = check_protocol(protocol)
        self.baud = baud
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.read_timeout_s = read_timeout_s
        self.on_frame = on_frame
        self._open_fn = open_fn
        self.session = ReaderSession(protocol, heartbeat_timeout_s, wall=now_iso)
        self._lock = threading.Lock()  # guards _port and the session (reader + engine threads)
        self._port: Any = None
        self._fd: int | None = None  # the port's descriptor when it is a device (device_fd)
        self.terminal: Terminal | None = None  # the pseudo-terminal opened last, if one
        self._stopping = threading.Event()
        self._wakes: tuple[int, int] | None = None  # a pipe: stop() wakes the device's wait
        self._thread: threading.Thread | None = None
        self._post: Post | None = None
        self.acks_sent = 0
        self.reopens = 0
        # (reason, when) of the last NAK logged: once a minute a reason
        self._nak_logged: tuple[str | None, float] = (None, 0.0)

    @property
    def naks_withheld(self) -> int:
        """Frames a NAK would answer beyond :data:`NAK_PER_S`."""
        return self.session.naks_withheld

    # -- the contract -------------------------------------------------------------

    def start(self, post: Post) -> None:
        """Start the reader thread; commands go to ``post``."""
        if self._thread is not None:
            raise RuntimeError("the dice reader is already started")
        self._post = post
        self._wakes = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        with self._lock:
            self.session.tick(time.monotonic())  # the heartbeat timer starts now
        self._thread = threading.Thread(
            target=self._supervise, name=f"dice-reader {self.port_url}", daemon=True
        )
        self._thread.start()

    def ack(self, seq: int) -> None:
        """Write the ACK of ROLL ``seq``; a lost port is logged (the reader repeats the ROLL)."""
        with self._lock:
            frame = self.session.ack(seq)
            if self._write(frame, f"ACK {seq}"):
                self.acks_sent += 1

    def resume(self, session: str | None) -> None:
        """The protocol-3 session the table's journal holds (before :meth:`start`)."""
        with self._lock:
            self.session.resume(session)

    def welcome(self, session: str, applied: int) -> None:
        """Write the WELCOME of ``session``: the table journaled its HELLO."""
        with self._lock:
            self._write(self.session.welcome(session, applied), f"WELCOME {session}")

    def hello_refused(self, session: str, *, over: bool = False) -> None:
        """The table did not take the HELLO of ``session`` (``over``: a session past)."""
        with self._lock:
            step = self.session.hello_refused(session, time.monotonic(), over=over)
        self._do(step)

    def refuse(self, seq: int, reason: NakReason) -> None:
        """The table refused ROLL ``seq`` (protocol 3: ``GAP``, ``CONFLICT``): its NAK."""
        with self._lock:
            step = self.session.refuse(seq, reason, time.monotonic())
        self._do(step)

    def stop(self) -> None:
        """Stop the thread and close the port."""
        self._stopping.set()
        wakes = self._wakes
        if wakes is not None:
            with contextlib.suppress(OSError):  # full: a wake-up is already waiting
                os.write(wakes[1], b"!")
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
        self._close()
        if wakes is not None and (thread is None or not thread.is_alive()):
            self._wakes = None
            for end in wakes:
                os.close(end)

    def status(self) -> ReaderStatus:
        """Connected, the fault in force, counters per verdict, the port."""
        with self._lock:
            said = self.session.counters()
            return ReaderStatus(
                connected=self._port is not None,
                fault=self.session.fault,
                counters=said["counters"],
                port=self.port_url,
                reason=self.session.reason,
                naks=said["naks"],
                last_nak=said["last_nak"],
                session=said["session"],
                session_heard=said["session_heard"],
            )

    # -- the transport ----------------------------------------------------------------

    def _write(self, data: bytes, what: str) -> bool:
        """Write ``data`` to the open port (the caller holds the lock); False when it could
        not be (logged: an un-ACKed roll is repeated by the reader)."""
        if not data:
            return False
        port, fd = self._port, self._fd
        if port is None:
            log.warning("%s not sent: port %s is not open", what, self.port_url)
            return False
        try:
            sent = 0
            if fd is not None:
                with contextlib.suppress(BlockingIOError):  # the output buffer is full
                    sent = os.write(fd, data)
            if sent < len(data):  # a URL port, or the rest: pyserial waits (write_timeout)
                port.write(data[sent:])
                if fd is None:
                    port.flush()
            return True
        except Exception as exc:  # a vanished port: the supervisor reopens it
            log.warning("%s not sent on %s: %s", what, self.port_url, exc)
            return False

    def _do(self, step: Step) -> None:
        """Carry out what the session said: frames to the line, commands to the table."""
        if step.send:
            with self._lock:
                for data in step.send:
                    self._write(data, "NAK")
        now = time.monotonic()
        for nak, frame in step.naks:
            reason, when = self._nak_logged
            if reason != nak.reason or now - when >= 60.0:
                self._nak_logged = (nak.reason, now)
                answered = frame.raw if frame is not None else b""
                log.warning(
                    "dice reader on %s: answered %r with %s",
                    self.port_url,
                    answered,
                    nak.describe(),
                )
        for level, message in step.log:
            getattr(log, level)("%s on %s", message, self.port_url)
        if self.on_frame is not None:
            for frame in step.frames:
                try:
                    self.on_frame(frame)
                except Exception:
                    log.exception("on_frame failed for %r", frame)
        for frame in step.frames:
            if not frame.ok:
                log.info("dice reader: %s frame %r", frame.verdict, frame.raw)
        post = self._post
        if post is None:
            return
        for command in step.commands:
            try:
                post(command)
            except Exception:  # the queue's problem must not end the reader
                log.exception("posting %r failed", command)

    def _close(self) -> None:
        with self._lock:
            port, self._port, self._fd = self._port, None, None
        if port is not None:
            with contextlib.suppress(Exception):
                port.close()

    def _supervise(self) -> None:
        """The thread: open, read, and on any failure a fault with its reason, then again."""
        backoff = self.backoff_s
        while not self._stopping.is_set():
            opened = lost = False
            try:
                self._check_terminal()
                port = open_port(self.port_url, self.baud, self.read_timeout_s, self._open_fn)
                opened = True
                fd = device_fd(port)
                if fd is not None:
                    self.terminal = Terminal.of(self.port_url, fd)
                with self._lock:
                    self._port, self._fd = port, fd
                    self.session.opened(time.monotonic())
                self._read(port, fd)
            except BaseException as exc:  # whatever it is, the table must hear of it
                self._close()
                if self._stopping.is_set():
                    break
                self._failed(exc)
                if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: not ours
                    raise
                lost = opened and isinstance(exc, OSError)
            if opened:
                self.reopens += 1
            if lost:  # a working port that went away: try again soon
                backoff = self.backoff_s
            log.debug("dice reader on %s: next try in %g s", self.port_url, backoff)
            self._stopping.wait(backoff)
            if not lost:  # it would not open, or the driver failed: back off further
                backoff = min(backoff * 2, self.backoff_max_s)
        self._close()

    def _check_terminal(self) -> None:
        """Refuse (a :class:`HardwareError`: ``PORT_LOST``, tried again after the backoff)
        to reopen a path that leads to another pseudo-terminal than the one this driver had,
        without opening it: not a byte read, not a setting changed."""
        if self.terminal is None:
            return
        now = Terminal.of(self.port_url)
        if now is not None and not self.terminal.still_ours(now):
            raise HardwareError(
                f"serial port {self.port_url}: leads to another pseudo-terminal than the "
                "reader's (its number was given to another program since): not opened; "
                "point the path at the reader's terminal anew (or restart the service)"
            )

    def _wait_s(self) -> float:
        """How long the device may stay silent before this thread looks again: until the
        heartbeat's deadline (a reader's heartbeats wake it, a timer only when they stop:
        SPEC section 7's idle budget), at most :data:`IDLE_WAIT_S`."""
        with self._lock:
            left = self.session.quiet_left(time.monotonic())
        if left > IDLE_WAIT_S:
            return IDLE_WAIT_S
        return max(left, self.read_timeout_s)

    def _failed(self, exc: BaseException) -> None:
        """Turn what ended a session into a fault with its reason (and a log line)."""
        reason_now = self.session.reason
        if isinstance(exc, HardwareError) and not isinstance(exc.__cause__, OSError | None):
            # the port refused a setting (pyserial's OverflowError on a huge baud rate)
            if str(exc) != reason_now:
                log.error("dice reader on %s cannot start: %s", self.port_url, exc)
            reason, driver = str(exc), True
        elif isinstance(exc, HardwareError):  # the port would not open: open_port says why
            log.debug("%s", exc)
            reason, driver = str(exc), False
        elif isinstance(exc, OSError):  # unplugged, the adapter gone
            log.warning("dice reader port %s lost: %s", self.port_url, exc)
            reason, driver = f"serial port {self.port_url} lost: {exc}", False
        else:  # a bug or an impossible setting: never silent (the trace once per reason)
            reason, driver = f"{type(exc).__name__}: {exc}", True
            if reason != reason_now:
                log.error("dice reader on %s failed; restarting it", self.port_url, exc_info=exc)
        with self._lock:
            step = self.session.lost(reason, driver=driver)
        self._do(step)

    def _read(self, port: Any, fd: int | None) -> None:
        """Read ``port`` until stopped: on its descriptor ``fd`` when it is a device."""
        while not self._stopping.is_set():
            data: bytes
            if fd is not None:
                data = _read_device(fd, self._wait_s(), self._wakes)
            else:
                data = port.read(1)
                if data:
                    waiting = port.in_waiting
                    if waiting:
                        data += port.read(waiting)
            with self._lock:
                now = time.monotonic()
                step = self.session.receive(data, now) if data else self.session.tick(now)
            self._do(step)


def _read_device(fd: int, timeout_s: float, wakes: tuple[int, int] | None = None) -> bytes:
    """What a device port holds, waiting up to ``timeout_s`` for a first byte (b"": none,
    or a wake-up on the pipe ``wakes``: the reader is stopping).

    A port that says it is readable but gives nothing was unplugged (pyserial's own
    test, and its words); a read that fails (``EIO``) is an OSError: both end the session.
    """
    watched = [fd] if wakes is None else [fd, wakes[0]]
    ready, _, _ = select.select(watched, [], [], timeout_s)
    if fd not in ready:
        return b""
    try:
        data = os.read(fd, READ_CHUNK)
    except BlockingIOError:  # another reader took it (the port is exclusive): wait again
        return b""
    if not data:
        raise serial.SerialException(
            "device reports readiness to read but returned no data "
            "(device disconnected or multiple access on port?)"
        )
    return data
