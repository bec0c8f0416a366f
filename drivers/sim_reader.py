"""The simulated dice reader: a fake reader *device* on the far end of a port.

:class:`SimulatedReader` sits where the real reader's cable would be, on the
master side of a pseudo-terminal (``transport="pty"``; :attr:`port` is the
slave's path, or a stable symlink to it) or as a TCP serial server
(``transport="tcp"``; :attr:`port` is a ``socket://`` URL). It speaks the reader
protocol (``docs/reader-protocol.md``), so
:class:`~drivers.serial_reader.SerialDiceReader` runs against it unchanged:
heartbeats, seeded random rolls at an interval, rolls from a script, rolls thrown
on demand (:meth:`throw`), an un-ACKed ROLL repeated with the same seq every
``retransmit_s`` until ACKed, and on demand garbage, bad checksums, NOROLL,
FAULT/OK, silence and an unplugged cable.

Rolls go out one at a time, in order: the next is sent when the one before is
ACKed, as a real reader holding a result until the controller confirms it.

Under protocol 3 it keeps a session as ``docs/reader-protocol.md`` says a reader must:
a HELLO draws a new session and is repeated every ``retransmit_s`` until the controller's
WELCOME names it (no roll goes out before); its rolls are numbered 1, 2, 3, ... in the
session and every other frame carries the last number; a roll still un-ACKed at a new
HELLO is carried over (its session and number in the HELLO) and sent again only when the
WELCOME says it was not applied; a NAK ``SESSION``, ``GAP`` or ``CONFLICT`` naming its
session makes it start a new one; so does its 65,535th roll, once ACKed.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drivers import codec
from drivers.sim_link import link_for

log = logging.getLogger(__name__)


@dataclass
class _Roll:
    d1: int
    d2: int
    seq: int | None = None
    frame: bytes = b""
    sent_at: float = 0.0
    session: str | None = None  # protocol 3: the session it was numbered in


def draw_session() -> str:
    """A new protocol-3 session: eight hex digits from the system's random source (never
    the seeded one: two readers, or one restarted, never draw the same), never 0."""
    while True:
        session = os.urandom(4).hex().upper()
        if session != codec.NO_SESSION:
            return session


class SimulatedReader:
    """A fake dice reader device for bench tests, ``firebet sim`` and CI.

    ``seed``/``interval_s``/``rolls``: throw seeded random rolls every
    ``interval_s`` seconds (after the previous one is ACKed), at most ``rolls``
    of them (None: no limit); no random rolls when ``interval_s`` is None.
    ``script``: dice thrown first, in order. ``heartbeat_s``: HB period (None:
    none). ``retransmit_s``: repeat period of an un-ACKed ROLL. ``link``: with
    the pty transport, the symlink kept pointing at the current slave, the
    :attr:`port` (stable across :meth:`unplug`/:meth:`replug`; default: one in a
    private temporary folder; never the pseudo-terminal's own number, see
    :mod:`drivers.sim_link`). ``protocol``: the version of the
    reader protocol (``docs/reader-protocol.md``) it speaks, 2 (CRC-16, the
    default), 1 (XOR, older readers) or 3 (a session). ``first_number``: protocol 3, a
    test mode as a vendor's firmware may have one: its first session's rolls are numbered
    from this, not 1 (``firebet reader-check --wrap`` reaches the wrap point without
    65,535 throws); every later session numbers from 1.
    """

    def __init__(
        self,
        *,
        transport: str = "pty",
        seed: int | None = None,
        interval_s: float | None = None,
        rolls: int | None = None,
        script: Sequence[tuple[int, int]] = (),
        heartbeat_s: float | None = 1.0,
        retransmit_s: float = 0.5,
        model: str = "SIMREADER",
        firmware: str = "1.0",
        link: str | Path | None = None,
        hello: bool = True,
        tick_s: float = 0.005,
        protocol: int = codec.DEFAULT_PROTOCOL,
        first_number: int = 1,
    ) -> None:
        codec.check_protocol(protocol)
        if not 1 <= first_number <= codec.MAX_SEQ:
            raise ValueError(f"first_number must be 1..{codec.MAX_SEQ}, not {first_number!r}")
        self.first_number = first_number
        self._link = link_for(transport, Path(link) if link else None)  # checks the transport
        for d1, d2 in script:
            codec.encode_roll(0, d1, d2)  # raises on dice outside 1..6
        self.transport = transport
        self.interval_s = interval_s
        self.rolls_left = rolls
        self.heartbeat_s = heartbeat_s
        self.retransmit_s = retransmit_s
        self.model = model
        self.firmware = firmware
        self.tick_s = tick_s
        self.protocol = protocol
        self._hello_at_start = hello
        self._random = random.Random(seed)
        self._script: deque[tuple[int, int]] = deque(script)
        self._lock = threading.RLock()
        self._acked_cv = threading.Condition(self._lock)
        self._queue: deque[_Roll] = deque()
        self._pending: _Roll | None = None
        self._seq = 0
        self._last_tx = 0.0
        self._next_auto = 0.0
        self._silent_until = 0.0
        self._plugged = False
        self._throws_paused = False
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._decoder = codec.FrameDecoder(protocol=protocol)
        self.acked: list[int] = []
        """Every ACK seq received, in order (including ACKs of copies)."""
        self.naks: list[tuple[int, str]] = []
        """Every NAK received, as (seq, reason), in order: a NAK changes nothing here (an
        un-ACKed ROLL is repeated as ever); a reader shows it to its technician."""
        self.transmissions: dict[int, int] = {}
        """ROLL seq -> how many times it was sent (1 + retransmissions)."""
        self.rolls_sent: list[tuple[str | None, int, int, int]] = []
        """Every roll's first sending, in order, as (session, seq, d1, d2) (session: None
        before protocol 3)."""
        self.acks: list[tuple[str | None, int]] = []
        """Every ACK received, as (session, seq) (session: None before protocol 3)."""
        self.sent: list[bytes] = []
        """Every frame written, in order (raw garbage included)."""
        self.session: str | None = None
        """Protocol 3: the session of the last HELLO (None before protocol 3)."""
        self.welcomed = protocol < 3
        """Protocol 3: the controller's WELCOME named :attr:`session` (always True before)."""
        self.sessions: list[str] = []
        """Protocol 3: every session drawn, in order."""
        self.dropped_carried: list[tuple[str, int]] = []
        """Protocol 3: carried-over rolls a WELCOME said were applied, as (session, number)."""
        self._hello_frame = b""
        self._hello_at = 0.0
        self._driver_opened = False  # the controller has opened the port (open_port)

    # -- life ---------------------------------------------------------------------

    @property
    def port(self) -> str:
        """What the driver opens: the pty slave's path (or its symlink) or a socket:// URL."""
        return self._link.port

    def open_port(self, url: str, **settings: Any) -> Any:
        """The driver's opener (``SerialDiceReader(open_fn=...)``): it opens ``url`` only
        while it leads to this device's own port (:meth:`drivers.sim_link.PtyLink.open_port`).

        A reader powered from the port says its power-on HELLO when the controller first
        opens it: the HELLO sent at :meth:`start` lay in the terminal's buffer, which
        opening the port flushes, and a protocol-1/2 reader never repeats a HELLO, so
        without this the table would meet numbering it never heard start (a bench with a
        journal from an earlier run took every roll for an old copy). Protocol 3 repeats
        its HELLO until the WELCOME by itself."""
        port = self._link.open_port(url, **settings)
        with self._lock:
            first, self._driver_opened = not self._driver_opened, True
        if first and self._hello_at_start and self.protocol < 3:
            self.hello()
        return port

    def start(self) -> SimulatedReader:
        """Plug in and power up: open the port, send HELLO, start the device thread."""
        if self._thread is not None:
            raise RuntimeError("the simulated reader is already started")
        self._link.open()
        self._plugged = True
        now = time.monotonic()
        self._next_auto = now + (self.interval_s or 0.0)
        if self._hello_at_start:
            self.hello()
        self._thread = threading.Thread(target=self._run, name="sim dice reader", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Power off: stop the thread and close the port."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        with self._lock:
            self._link.close()
            self._plugged = False

    def __enter__(self) -> SimulatedReader:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what a croupier or a test can make it do -------------------------------------

    def throw(self, d1: int, d2: int) -> None:
        """A throw the reader reads as ``d1 d2``: sent now, or after the pending roll's ACK."""
        codec.encode_roll(0, d1, d2)  # raises on dice outside 1..6
        with self._lock:
            self._queue.append(_Roll(d1, d2))

    def hello(self) -> None:
        """Restart: numbering starts again at 0 with a HELLO (protocol 3: a new session,
        the HELLO repeated until WELCOMEd, an un-ACKed roll carried over)."""
        with self._lock:
            self._seq = 0
            if self.protocol >= 3:
                self._open_session()
                return
            self._send(codec.encode_hello(0, self.model, self.firmware, self.protocol))
            if self._pending is not None:  # the result still lies on the table: re-report it
                self._queue.appendleft(_Roll(self._pending.d1, self._pending.d2))
                self._pending = None

    def _open_session(self) -> None:
        """Protocol 3: draw a session and say HELLO, carrying the un-ACKed roll over."""
        self.session = draw_session()
        self.sessions.append(self.session)
        self.welcomed = False
        # the new session's rolls are numbered from 1 (the first from first_number)
        self._seq = self.first_number - 1 if len(self.sessions) == 1 else 0
        pending = self._pending
        carried, number = codec.NO_SESSION, 0
        if pending is not None and pending.session is not None and pending.seq is not None:
            carried, number = pending.session, pending.seq
        self._hello_frame = codec.encode_hello(
            0, self.model, self.firmware, self.protocol, self.session, carried, number
        )
        self._send(self._hello_frame)
        self._hello_at = time.monotonic()

    def noroll(self, reason: str = "COCKED") -> None:
        """An invalid throw (COCKED, OFFTABLE, ONEDIE, ...)."""
        with self._lock:
            self._send(codec.encode_noroll(self._next_seq(), reason, self.protocol, self._tail()))

    def fault(self, code: str = "CAMERA") -> None:
        """The reader raises a fault."""
        with self._lock:
            self._send(codec.encode_fault(self._next_seq(), code, self.protocol, self._tail()))

    def clear_fault(self) -> None:
        """The reader's fault is cleared (OK frame)."""
        with self._lock:
            self._send(codec.encode_ok(self._next_seq(), self.protocol, self._tail()))

    def heartbeat(self) -> None:
        """One heartbeat now."""
        with self._lock:
            self._send(codec.encode_hb(self._next_seq(), self.protocol, self._tail()))

    def send_raw(self, data: bytes) -> None:
        """Put ``data`` on the line as is (line noise, a half frame, anything)."""
        with self._lock:
            self._send(data)

    def send_garbage(self, size: int = 64) -> bytes:
        """``size`` random bytes from the seeded generator; returns them."""
        data = self._random.randbytes(size)
        self.send_raw(data)
        return data

    def send_bad_checksum(self, d1: int = 3, d2: int = 4) -> None:
        """A ROLL frame whose checksum is wrong (must never be applied)."""
        with self._lock:
            frame = codec.encode_roll(self._next_seq() or 1, d1, d2, self.protocol, self._tail())
            star = frame.rindex(b"*")
            digits = codec.CHECKSUM_DIGITS[self.protocol]
            good = int(frame[star + 1 : star + 1 + digits], 16)
            wrong = f"{good ^ 0xFF:0{digits}X}".encode()
            self._send(frame[: star + 1] + wrong + b"\r\n")

    def roll_frame(self, seq: int, d1: int, d2: int) -> None:
        """A ROLL frame with the given ``seq`` sent now, outside the ACK discipline
        (a faulty reader that reuses a seq; a test of SEQ_CONFLICT)."""
        with self._lock:
            self._send(codec.encode_roll(seq, d1, d2, self.protocol, self._tail()))

    def silence(self, seconds: float | None = None) -> None:
        """Say nothing (no heartbeat, no repeats) for ``seconds``, or until :meth:`speak`."""
        with self._lock:
            self._silent_until = float("inf") if seconds is None else time.monotonic() + seconds

    def speak(self) -> None:
        """End a :meth:`silence`."""
        with self._lock:
            self._silent_until = 0.0

    def pause_throws(self, paused: bool = True) -> None:
        """Stop (or start again) the random and scripted throws at ``interval_s``; a
        :meth:`throw` still goes out. The shooter waits while the table cannot read him (a
        reader fault, rolls held for the dealer), as at a live table."""
        with self._lock:
            if self._throws_paused and not paused:  # a whole interval after the pause
                self._next_auto = time.monotonic() + (self.interval_s or 0.0)
            self._throws_paused = paused

    @property
    def throws_paused(self) -> bool:
        """Whether :meth:`pause_throws` stopped the throws at ``interval_s``."""
        with self._lock:
            return self._throws_paused

    def unplug(self) -> None:
        """Pull the cable: close the device's side, so the driver's port fails (a TCP
        device keeps its port bound, :meth:`drivers.sim_link.TcpLink.unplug`)."""
        with self._lock:
            self._link.unplug()
            self._plugged = False

    def replug(self, power_cycle: bool = False) -> None:
        """Plug the cable back in (same port); ``power_cycle`` also restarts (HELLO)."""
        with self._lock:
            if not self._plugged:
                self._link.open()
                self._plugged = True
            if power_cycle:
                self.hello()

    # -- what a test can look at ---------------------------------------------------------

    @property
    def pending_seq(self) -> int | None:
        """The seq of the ROLL waiting for its ACK, if any."""
        with self._lock:
            return self._pending.seq if self._pending is not None else None

    @property
    def plugged(self) -> bool:
        """Whether the cable is in (see :meth:`unplug`)."""
        with self._lock:
            return self._plugged

    @property
    def silent(self) -> bool:
        """Whether a :meth:`silence` is in force."""
        with self._lock:
            return time.monotonic() < self._silent_until

    @property
    def rolls_waiting(self) -> int:
        """Rolls not yet ACKed: the pending one and those queued behind it."""
        with self._lock:
            return len(self._queue) + (self._pending is not None)

    def wait_acked(self, seq: int, timeout: float = 30.0, session: str | None = None) -> bool:
        """Wait until an ACK for ``seq`` arrived (protocol 3: of ``session``, by default the
        current one); False on timeout."""
        with self._acked_cv:
            if self.protocol < 3:
                return self._acked_cv.wait_for(lambda: seq in self.acked, timeout)
            which = session or self.session
            return self._acked_cv.wait_for(lambda: (which, seq) in self.acks, timeout)

    # -- the device thread ---------------------------------------------------------------

    def _next_seq(self) -> int:
        """Protocols 1 and 2: the next frame's seq (every frame takes one). Protocol 3: the
        number of the last roll of the session (only a new roll takes a number)."""
        if self.protocol >= 3:
            return self._seq
        self._seq = (self._seq + 1) % (codec.MAX_SEQ + 1)
        return self._seq

    def _tail(self) -> str | None:
        """The session a protocol-3 frame names (None before protocol 3)."""
        if self.protocol < 3:
            return None
        if self.session is None:  # a reader says HELLO before anything else
            self._open_session()
        return self.session

    def _send(self, data: bytes) -> None:
        self.sent.append(data)
        self._link.write(data)
        self._last_tx = time.monotonic()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._tick()
            except Exception:  # a simulator must outlive its own bugs in a long bench run
                log.exception("simulated reader tick failed")
                time.sleep(self.tick_s)

    def _tick(self) -> None:
        data = self._link.read(self.tick_s)
        for frame in self._decoder.feed(data):
            if frame.ok and frame.name is codec.FrameName.ACK and frame.seq is not None:
                if frame.session is None or frame.session == self.session:
                    self._on_ack(frame.seq)
            elif frame.ok and frame.name is codec.FrameName.WELCOME:
                self._on_welcome(frame)
            elif frame.name is codec.FrameName.NAK:
                self._on_nak(frame)
        with self._lock:
            now = time.monotonic()
            if not self._plugged or now < self._silent_until:
                return
            if not self.welcomed:  # protocol 3: HELLO again until the WELCOME
                if self.session is None:  # (started without a HELLO: it says one now)
                    self._open_session()
                elif now - self._hello_at >= self.retransmit_s:
                    self._send(self._hello_frame)
                    self._hello_at = now
                return
            self._auto_throw(now)
            pending = self._pending
            if pending is None and self._queue:
                pending = self._pending = self._queue.popleft()
                if self.protocol >= 3:
                    self._seq += 1
                    pending.seq, pending.session = self._seq, self._tail()
                else:
                    pending.seq = self._next_seq()
                pending.frame = codec.encode_roll(
                    pending.seq, pending.d1, pending.d2, self.protocol, pending.session
                )
                pending.sent_at = 0.0
            due = pending is not None and (
                pending.sent_at == 0.0 or now - pending.sent_at >= self.retransmit_s
            )
            if pending is not None and pending.seq is not None and due:
                if pending.sent_at == 0.0:
                    self.rolls_sent.append((pending.session, pending.seq, pending.d1, pending.d2))
                self._send(pending.frame)
                pending.sent_at = now
                self.transmissions[pending.seq] = self.transmissions.get(pending.seq, 0) + 1
            if self.heartbeat_s is not None and now - self._last_tx >= self.heartbeat_s:
                self._send(codec.encode_hb(self._next_seq(), self.protocol, self._tail()))

    def _on_welcome(self, frame: codec.Frame) -> None:
        """Protocol 3: the controller journaled the HELLO of our session; a carried roll
        the WELCOME says was applied is done, any other goes out as this session's first."""
        with self._acked_cv:
            if frame.session != self.session or self.welcomed:
                return
            self.welcomed = True
            pending = self._pending
            if pending is not None and pending.session != self.session:
                applied = frame.seq or 0
                self._pending = None
                if (
                    pending.seq is not None
                    and pending.session is not None
                    and (pending.seq <= applied)
                ):
                    self.dropped_carried.append((pending.session, pending.seq))
                    self._next_auto = time.monotonic() + (self.interval_s or 0.0)
                else:
                    self._queue.appendleft(_Roll(pending.d1, pending.d2))
            self._acked_cv.notify_all()

    def _auto_throw(self, now: float) -> None:
        if self._pending is not None or self._queue or now < self._next_auto:
            return
        if self._throws_paused:
            return
        if self._script:
            d1, d2 = self._script.popleft()
        elif self.interval_s is not None and (self.rolls_left is None or self.rolls_left > 0):
            d1, d2 = self._random.randint(1, 6), self._random.randint(1, 6)
            if self.rolls_left is not None:
                self.rolls_left -= 1
        else:
            return
        self._queue.append(_Roll(d1, d2))

    def _on_nak(self, frame: codec.Frame) -> None:
        """A NAK: in this reader's protocol, or (``PROTOCOL``) in the other one, which the
        controller answers a HELLO of the other protocol in."""
        if not frame.ok:
            frame = codec.parse_line(frame.raw, 1 if self.protocol >= 2 else 2)
        if not frame.ok or frame.seq is None:
            return
        with self._acked_cv:
            self.naks.append((frame.seq, frame.text(2)))
            self._acked_cv.notify_all()
            if (
                self.protocol >= 3
                and frame.text(2) in codec.SESSION_NAKS
                and frame.session == self.session
                and (self.welcomed or frame.text(2) == codec.NakReason.SESSION)
            ):
                self._open_session()  # the controller does not hold our session: anew
        log.warning("simulated reader: the controller answered NAK,%d,%s", *self.naks[-1])

    def wait_nak(self, reason: str, timeout: float = 30.0) -> bool:
        """Wait until a NAK with ``reason`` arrived; False on timeout."""
        with self._acked_cv:
            return self._acked_cv.wait_for(
                lambda: any(r == reason for _, r in self.naks), timeout=timeout
            )

    def _on_ack(self, seq: int) -> None:
        with self._acked_cv:
            self.acked.append(seq)
            self.acks.append((self.session, seq))
            if self._pending is not None and self._pending.seq == seq:
                self._pending = None
                self._next_auto = time.monotonic() + (self.interval_s or 0.0)
                if self.protocol >= 3 and self._seq >= codec.MAX_SEQ:
                    self._numbers_spent()
            self._acked_cv.notify_all()

    def _numbers_spent(self) -> None:
        """Protocol 3, the session's last number ACKed: a new session (rule of the wrap;
        under the ACK lock)."""
        self._open_session()
