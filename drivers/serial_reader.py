"""The reference dice reader driver: the reader protocol's frames over any pyserial URL.

One thread, :meth:`SerialDiceReader._supervise`, owns the port: it opens it
with :func:`serial.serial_for_url` (``/dev/ttyUSB0``, ``socket://``,
``rfc2217://``, ``loop://`` alike), reads bytes into the bounded
:class:`~drivers.codec.FrameDecoder`, posts commands, watches the heartbeat,
and when the port fails closes it and opens it again with a capped backoff.
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
import threading
import time
from collections.abc import Callable
from typing import Any

import serial

from controller.clock import now_iso
from controller.core.commands import Command, ReaderFault, ReaderOk, ReaderSync
from controller.core.errors import HardwareError
from controller.core.table import SEQ_MODULO, SEQ_SYNC_EVERY
from drivers.codec import (
    DEFAULT_PROTOCOL,
    Frame,
    FrameDecoder,
    FrameName,
    Nak,
    NakReason,
    check_protocol,
    encode_ack,
    nak_for,
)
from drivers.reader import (
    DRIVER_ERROR,
    HEARTBEAT,
    PORT_LOST,
    READER,
    DiceReader,
    Post,
    ReaderStatus,
    command_for,
)

log = logging.getLogger(__name__)

OpenPort = Callable[..., Any]
READ_CHUNK = 4096  # bytes taken from a device port at once
NAK_PER_S = 4.0  # NAKs sent a second at most (a burst of 4): more are counted, not sent
IDLE_WAIT_S = 0.5  # the longest the reader thread sleeps on a silent device (stop waits this)


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
    ``protocol``: the reader protocol's version, 2 (CRC-16, the default) or 1 (XOR).
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
        self._decoder = FrameDecoder(protocol=protocol)
        self._lock = threading.Lock()  # guards _port, _fault and the counters copy
        self._port: Any = None
        self._fd: int | None = None  # the port's descriptor when it is a device (device_fd)
        self._fault: str | None = None
        self._reason: str | None = None  # what the fault in force means, in words
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._post: Post | None = None
        self._last_good = time.monotonic()
        self.acks_sent = 0
        self.reopens = 0
        self._ok_seen = False  # an OK frame came since this start
        self._synced = False  # a good frame came since the port opened
        self._told: int | None = None  # the seq the table last heard of (a roll, a sync)
        self._naks: dict[str, int] = dict.fromkeys(NakReason, 0)  # NAKs sent, by reason
        self.naks_withheld = 0  # frames a NAK would answer beyond NAK_PER_S
        self._nak_budget, self._nak_at = float(NAK_PER_S), time.monotonic()
        self._last_nak: str | None = None  # the last NAK in words, with the frame it answered
        # (reason, when) of the last NAK logged: once a minute a reason
        self._nak_logged: tuple[str | None, float] = (None, 0.0)

    # -- the contract -------------------------------------------------------------

    def start(self, post: Post) -> None:
        """Start the reader thread; commands go to ``post``."""
        if self._thread is not None:
            raise RuntimeError("the dice reader is already started")
        self._post = post
        self._last_good = time.monotonic()
        self._thread = threading.Thread(
            target=self._supervise, name=f"dice-reader {self.port_url}", daemon=True
        )
        self._thread.start()

    def nak(self, nak: Nak, frame: Frame) -> None:
        """Answer ``frame`` with ``nak`` (on the reader thread): counted, and logged at most
        once a minute for each reason; a lost port is only logged."""
        data = nak.frame()
        now = time.monotonic()
        with self._lock:
            self._nak_budget = min(NAK_PER_S, self._nak_budget + (now - self._nak_at) * NAK_PER_S)
            self._nak_at = now
            if self._nak_budget < 1.0:  # a flood: counted, not answered (the line is the ACKs')
                self.naks_withheld += 1
                return
            self._nak_budget -= 1.0
            self._naks[nak.reason] += 1
            self._last_nak = f"{nak.describe()} for {frame.raw!r}"
            port, fd = self._port, self._fd
            if port is not None:
                try:
                    sent = 0
                    if fd is not None:
                        with contextlib.suppress(BlockingIOError):  # the output buffer is full
                            sent = os.write(fd, data)
                    if sent < len(data):
                        port.write(data[sent:])
                        if fd is None:
                            port.flush()
                except Exception as exc:
                    log.warning("NAK not sent on %s: %s", self.port_url, exc)
        reason, when = self._nak_logged
        now = time.monotonic()
        if reason != nak.reason or now - when >= 60.0:
            self._nak_logged = (nak.reason, now)
            log.warning(
                "dice reader on %s: answered %s with %s", self.port_url, frame.raw, nak.describe()
            )

    def ack(self, seq: int) -> None:
        """Write ``ACK,<seq>``; a lost port is logged (the reader will repeat the ROLL)."""
        frame = encode_ack(seq, self.protocol)
        with self._lock:
            port, fd = self._port, self._fd
            if port is None:
                log.warning("ACK %d not sent: port %s is not open", seq, self.port_url)
                return
            try:
                sent = 0
                if fd is not None:
                    with contextlib.suppress(BlockingIOError):  # the output buffer is full
                        sent = os.write(fd, frame)
                if sent < len(frame):  # a URL port, or the rest: pyserial waits (write_timeout)
                    port.write(frame[sent:])
                    if fd is None:
                        port.flush()
                self.acks_sent += 1
            except Exception as exc:  # a vanished port: the supervisor reopens it
                log.warning("ACK %d not sent on %s: %s", seq, self.port_url, exc)

    def stop(self) -> None:
        """Stop the thread and close the port."""
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
        self._close()

    def status(self) -> ReaderStatus:
        """Connected, the fault in force, counters per verdict, the port."""
        with self._lock:
            return ReaderStatus(
                connected=self._port is not None,
                fault=self._fault,
                counters=dict(self._decoder.counters),
                port=self.port_url,
                reason=self._reason,
                naks=dict(self._naks) | {"withheld": self.naks_withheld},
                last_nak=self._last_nak,
            )

    # -- the reader thread ----------------------------------------------------------

    def _emit(self, command: Command) -> None:
        post = self._post
        if post is None:
            return
        try:
            post(command)
        except Exception:  # the queue's problem must not end the reader
            log.exception("posting %r failed", command)

    def _set_fault(self, code: str, reason: str | None = None, *, reported: bool = False) -> None:
        with self._lock:
            self._reason = reason
            if self._fault == code:
                return
            self._fault = code
        if reason:
            log.warning("dice reader fault %s on %s: %s", code, self.port_url, reason)
        else:
            log.warning("dice reader fault %s on %s", code, self.port_url)
        self._emit(ReaderFault(code=code, reported=reported, actor=READER, at=now_iso()))

    def _clear_fault(self) -> None:
        with self._lock:
            if self._fault is None:
                return
            was, self._fault, self._reason = self._fault, None, None
        log.info("dice reader fault %s cleared on %s", was, self.port_url)
        self._emit(ReaderOk(actor=READER, at=now_iso()))

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
                port = open_port(self.port_url, self.baud, self.read_timeout_s, self._open_fn)
                opened = True
                self._decoder.reset()
                self._synced = False  # a new session: the reader's numbering is told again
                fd = device_fd(port)
                with self._lock:
                    self._port, self._fd = port, fd
                self._last_good = time.monotonic()
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

    def _failed(self, exc: BaseException) -> None:
        """Turn what ended a session into a fault with its reason (and a log line)."""
        if isinstance(exc, HardwareError) and not isinstance(exc.__cause__, OSError | None):
            # the port refused a setting (pyserial's OverflowError on a huge baud rate)
            if str(exc) != self._reason:
                log.error("dice reader on %s cannot start: %s", self.port_url, exc)
            self._set_fault(DRIVER_ERROR, str(exc))
        elif isinstance(exc, HardwareError):  # the port would not open: open_port says why
            log.debug("%s", exc)
            self._set_fault(PORT_LOST, str(exc))
        elif isinstance(exc, OSError):  # unplugged, the adapter gone
            log.warning("dice reader port %s lost: %s", self.port_url, exc)
            self._set_fault(PORT_LOST, f"serial port {self.port_url} lost: {exc}")
        else:  # a bug or an impossible setting: never silent (the trace once per reason)
            reason = f"{type(exc).__name__}: {exc}"
            if reason != self._reason:
                log.error("dice reader on %s failed; restarting it", self.port_url, exc_info=exc)
            self._set_fault(DRIVER_ERROR, reason)

    def _read(self, port: Any, fd: int | None) -> None:
        """Read ``port`` until stopped: on its descriptor ``fd`` when it is a device."""
        while not self._stopping.is_set():
            data: bytes
            if fd is not None:
                data = _read_device(fd, self._wait_s())
            else:
                data = port.read(1)
                if data:
                    waiting = port.in_waiting
                    if waiting:
                        data += port.read(waiting)
            if data:
                for frame in self._decoder.feed(data):
                    self._frame(frame)
            if (
                time.monotonic() - self._last_good > self.heartbeat_timeout_s
                and self._fault is None
            ):
                self._set_fault(
                    HEARTBEAT,
                    f"no frame from the reader for {self.heartbeat_timeout_s:g} s "
                    "(heartbeat_timeout_s): check its cable and power",
                )

    def _wait_s(self) -> float:
        """How long the device may stay silent before this thread looks again: long while
        the heartbeat's deadline is far (an idle table's reader thread wakes a few times a
        second, not twenty: SPEC section 7's idle budget), then up to it."""
        left = self._last_good + self.heartbeat_timeout_s - time.monotonic()
        if self._fault is not None or left > IDLE_WAIT_S:
            return IDLE_WAIT_S
        return max(left, self.read_timeout_s)

    def _frame(self, frame: Frame) -> None:
        if self.on_frame is not None:
            try:
                self.on_frame(frame)
            except Exception:
                log.exception("on_frame failed for %r", frame)
        if not frame.ok:
            log.info("dice reader: %s frame %r", frame.verdict, frame.raw)
            nak = nak_for(frame, self.protocol)
            if nak is not None:
                self.nak(nak, frame)
            return
        self._last_good = time.monotonic()
        at = now_iso()
        if not self._synced:  # the first good frame since the port opened: where it counts
            self._synced = True
            self._told = frame.seq
            if frame.name is not FrameName.HELLO and frame.seq is not None:
                self._emit(ReaderSync(seq=frame.seq, actor=READER, at=at))
        elif frame.seq is not None:
            if frame.name in (FrameName.HELLO, FrameName.ROLL) or self._told is None:
                self._told = frame.seq
            elif (frame.seq - self._told) % SEQ_MODULO >= SEQ_SYNC_EVERY:
                # hours of heartbeats and no roll: the table hears where the numbering
                # stands, so its next roll is never taken for an old copy (SEQ_ADVANCE)
                self._told = frame.seq
                self._emit(ReaderSync(seq=frame.seq, actor=READER, at=at))
        if frame.name is FrameName.FAULT:
            code = frame.text(2) or "FAULT"
            self._set_fault(
                code,
                f"the reader itself reports the fault {code}; its rolls are held for the "
                "dealer until it says OK",
                reported=True,
            )
            return
        if frame.name is FrameName.OK:
            if self._fault is None and not self._ok_seen:
                # the first OK since this start ends a FAULT the journal holds from before it
                self._emit(ReaderOk(actor=READER, at=at))
            self._ok_seen = True
            self._clear_fault()
            return
        fault = self._fault
        if fault in (HEARTBEAT, PORT_LOST, DRIVER_ERROR) or (
            fault is not None and frame.name is FrameName.HELLO
        ):
            self._clear_fault()  # frames flow again / the reader restarted
        command = command_for(frame, at)
        if command is not None:
            self._emit(command)


def _read_device(fd: int, timeout_s: float) -> bytes:
    """What a device port holds, waiting up to ``timeout_s`` for a first byte (b"": none).

    A port that says it is readable but gives nothing was unplugged (pyserial's own
    test, and its words); a read that fails (``EIO``) is an OSError: both end the session.
    """
    ready, _, _ = select.select([fd], [], [], timeout_s)
    if not ready:
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
