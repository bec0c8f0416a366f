"""The reader session: the reader protocol's policy as one pure object, apart from any port.

:class:`ReaderSession` takes what a transport reads (bytes, with the monotonic clock's
time) and what the table decided (a roll journaled, a HELLO journaled or refused) and
gives back what to do: the commands for the table's queue and the frames to write to
the reader (ACK, NAK, WELCOME). It never reads or writes a port, starts a thread or
looks at a clock itself (sans-IO, as h11's ``Connection`` or pyserial's ``Protocol``
apart from its ``ReaderThread``): :class:`drivers.serial_reader.SerialDiceReader` is a
thin transport around it, and a test or a new transport drives the same object.

What it decides (``docs/reader-protocol.md``):

* every line's verdict (the bounded :class:`~drivers.codec.FrameDecoder`), counted, and
  the NAK that answers a frame it cannot take (at most :data:`NAK_PER_S` a second);
* the reader's faults: its own FAULT (its rolls held) and OK, ``HEARTBEAT`` after
  ``heartbeat_timeout_s`` without a good frame, the transport's ``PORT_LOST`` and
  ``DRIVER_ERROR``, and their ends, each posted once;
* protocol 3's session: a HELLO is posted, and only the table's answer
  (:meth:`welcome`, after the HELLO is journaled) makes its session the one whose
  frames count; a frame of another session is never posted (a ``NAK ... SESSION`` tells
  the reader to say HELLO); nothing else, a heartbeat, a late copy, the first frame
  after a reopen, moves anything.

It does no sequence arithmetic: where a roll's number stands against the last roll
applied is the table's to decide, from its journal (:func:`controller.core.table.order`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controller.core.commands import Command, ReaderFault, ReaderHello, ReaderOk
from drivers.codec import (
    DEFAULT_PROTOCOL,
    NO_SESSION,
    Frame,
    FrameDecoder,
    FrameName,
    Nak,
    NakReason,
    check_protocol,
    encode_ack,
    encode_welcome,
    nak_for,
)
from drivers.reader import DRIVER_ERROR, HEARTBEAT, PORT_LOST, READER, command_for

NAK_PER_S = 4.0  # NAKs sent a second at most (a burst of 4): more are counted, not sent

RISKS: dict[int, str] = {
    1: (
        "reader protocol 1 (8-bit XOR, no session) cannot protect the table against: line "
        "noise that passes its check (about 1 corrupt frame in 256; a two-bit burst turns "
        "HB,1001 into HB,9009), a roll of a reader that restarted unseen whose seq and dice "
        "match one of the last 64 (taken for a copy, ACKed and not applied), and a serial "
        "bridge replaying old frames; a HELLO lost on the line, or an idle table whose "
        "heartbeats ran past half the seq ring (32,768 frames, about 9 hours), makes the "
        "next rolls unprovable: they are held for the dealer (firebet held), not counted "
        "by themselves"
    ),
    2: (
        "reader protocol 2 (CRC-16, no session) cannot protect the table against: a roll "
        "of a reader that restarted unseen whose seq and dice match one of the last 64 "
        "(taken for a copy, ACKed and not applied); a HELLO lost on the line, or an idle "
        "table whose heartbeats ran past half the seq ring (32,768 frames, about 9 hours), "
        "makes the next rolls unprovable: they are held for the dealer (firebet held), not "
        "counted by themselves"
    ),
}
"""What a reader of each protocol before 3 risks, in words the service logs once at start
(``docs/reader-protocol.md``, "Compatibility")."""


@dataclass
class Step:
    """What one input to the session gave: ``commands`` for the table's queue (in order),
    ``send`` for the reader's line (in order), ``frames`` every line read (any verdict, for
    monitors), ``naks`` the NAKs among ``send`` with the frame each answered, and ``log``
    (level, message) lines worth the service log."""

    commands: list[Command] = field(default_factory=list)
    send: list[bytes] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    naks: list[tuple[Nak, Frame | None]] = field(default_factory=list)
    log: list[tuple[str, str]] = field(default_factory=list)

    def extend(self, other: Step) -> None:
        """Add what ``other`` gave after this step's own."""
        self.commands += other.commands
        self.send += other.send
        self.frames += other.frames
        self.naks += other.naks
        self.log += other.log


class ReaderSession:
    """The reader protocol's policy for one reader (see the module's docstring).

    ``protocol``: 1, 2 or 3. ``heartbeat_timeout_s``: no good frame for this long is a
    ``HEARTBEAT`` fault. ``wall``: the time text a command carries (``at``), so the
    object reads no clock of its own.
    """

    def __init__(
        self,
        protocol: int = DEFAULT_PROTOCOL,
        heartbeat_timeout_s: float = 3.0,
        *,
        wall: Callable[[], str] = lambda: "",
    ) -> None:
        self.protocol = check_protocol(protocol)
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.wall = wall
        self.decoder = FrameDecoder(protocol=protocol)
        self.fault: str | None = None
        self.reason: str | None = None  # what the fault in force means, in words
        self.session: str | None = None  # protocol 3: the session the table holds
        self.opening: str | None = None  # a HELLO's session posted, not yet answered
        # a good frame of ``session`` came since this start (or its WELCOME was sent): the
        # reader has not restarted since the HELLO that opened it
        self.session_heard = False
        self.naks: dict[str, int] = dict.fromkeys(NakReason, 0)
        self.naks_withheld = 0
        self.last_nak: str | None = None
        self.acks = 0
        self.welcomes = 0
        self.foreign = 0  # protocol 3: good frames of another session, never posted
        self._last_good: float | None = None
        self._ok_seen = False  # an OK frame came since this start
        self._nak_budget = NAK_PER_S
        self._nak_at: float | None = None

    # -- the transport's inputs --------------------------------------------------------

    def opened(self, now: float) -> Step:
        """The port is open (again): an unfinished frame is forgotten, the heartbeat timer
        starts. Nothing about the reader's numbering changes."""
        self.decoder.reset()
        self._last_good = now
        return Step()

    def receive(self, data: bytes, now: float) -> Step:
        """Bytes read from the reader at ``now``: what they make the table and line do."""
        step = Step()
        for frame in self.decoder.feed(data):
            step.frames.append(frame)
            self._frame(frame, now, step)
        step.extend(self.tick(now))
        return step

    def tick(self, now: float) -> Step:
        """Time passes: no good frame for ``heartbeat_timeout_s`` is a HEARTBEAT fault."""
        if self._last_good is None:
            self._last_good = now
        if now - self._last_good > self.heartbeat_timeout_s and self.fault is None:
            return self._raise(
                HEARTBEAT,
                f"no frame from the reader for {self.heartbeat_timeout_s:g} s "
                "(heartbeat_timeout_s): check its cable and power",
            )
        return Step()

    def quiet_left(self, now: float) -> float:
        """Seconds of silence left before :meth:`tick` raises HEARTBEAT (infinity while a
        fault is in force: nothing to watch for)."""
        if self.fault is not None or self._last_good is None:
            return float("inf")
        return self._last_good + self.heartbeat_timeout_s - now

    def lost(self, reason: str, *, driver: bool = False) -> Step:
        """The port failed or would not open (``PORT_LOST``), or the transport's own thread
        failed (``driver``: ``DRIVER_ERROR``), with ``reason`` in words."""
        return self._raise(DRIVER_ERROR if driver else PORT_LOST, reason)

    # -- the table's inputs ----------------------------------------------------------------

    def ack(self, seq: int) -> bytes:
        """The ACK of the ROLL ``seq`` (the table journaled it): protocol 3 names the
        session the table holds."""
        if self.protocol >= 3:
            if self.session is None:  # (never: only the held session's rolls are posted)
                return b""
            self.acks += 1
            return encode_ack(seq, self.protocol, self.session)
        self.acks += 1
        return encode_ack(seq, self.protocol)

    def resume(self, session: str | None) -> None:
        """The session the table's journal holds (at start, before any frame is read)."""
        self.session = session or None
        self.session_heard = False

    def welcome(self, session: str, applied: int) -> bytes:
        """The table journaled (or already held) the HELLO of ``session``: from now on its
        frames count; the WELCOME to send (``applied``: the last roll applied of the
        session the HELLO carried a roll over from)."""
        self.session, self.session_heard = session, True
        if self.opening == session:
            self.opening = None
        self.welcomes += 1
        return encode_welcome(session, applied, self.protocol)

    def hello_refused(self, session: str, now: float, *, over: bool = False) -> Step:
        """The table did not take the HELLO of ``session`` (``over``: a session already past,
        or the table could not record it): the session it holds stays the one that counts.
        A session past is answered ``NAK,0,SESSION,<session>``: a reader still repeating
        that HELLO starts anew; a replayed copy's NAK is ignored by the reader (not its)."""
        if self.opening == session:
            self.opening = None
        step = Step()
        if over and self.protocol >= 3:
            self._nak(Nak(0, NakReason.SESSION, self.protocol, session), None, now, step)
        return step

    def refuse(self, seq: int, reason: NakReason, now: float) -> Step:
        """The table refused the ROLL ``seq`` of the session it holds (protocol 3: ``GAP``
        or ``CONFLICT``): the NAK that tells the reader to start a new session."""
        step = Step()
        if self.protocol >= 3:
            self._nak(Nak(seq, reason, self.protocol, self.session), None, now, step)
        return step

    # -- what it says of itself --------------------------------------------------------------

    def counters(self) -> dict[str, Any]:
        """Frames per verdict, NAKs per reason (``withheld`` beside), the session and
        whether a frame of it came since this start."""
        return {
            "counters": dict(self.decoder.counters),
            "naks": dict(self.naks) | {"withheld": self.naks_withheld},
            "last_nak": self.last_nak,
            "session": self.session,
            "session_heard": self.session_heard,
            "foreign": self.foreign,
        }

    # -- the policy ---------------------------------------------------------------------------

    def _raise(self, code: str, reason: str | None, *, reported: bool = False) -> Step:
        step = Step()
        self.reason = reason
        if self.fault == code:
            return step
        self.fault = code
        step.log.append(
            ("warning", f"dice reader fault {code}" + (f": {reason}" if reason else ""))
        )
        step.commands.append(
            ReaderFault(code=code, reported=reported, actor=READER, at=self.wall())
        )
        return step

    def _clear(self, step: Step) -> None:
        if self.fault is None:
            return
        was, self.fault, self.reason = self.fault, None, None
        step.log.append(("info", f"dice reader fault {was} cleared"))
        step.commands.append(ReaderOk(actor=READER, at=self.wall()))

    def _nak(self, nak: Nak, frame: Frame | None, now: float, step: Step) -> None:
        if self._nak_at is not None:
            self._nak_budget = min(NAK_PER_S, self._nak_budget + (now - self._nak_at) * NAK_PER_S)
        self._nak_at = now
        if self._nak_budget < 1.0:  # a flood: counted, not answered (the line is the ACKs')
            self.naks_withheld += 1
            return
        self._nak_budget -= 1.0
        self.naks[nak.reason] += 1
        answered = frame.raw if frame is not None else f"ROLL {nak.seq}".encode()
        self.last_nak = f"{nak.describe()} for {answered!r}"
        step.send.append(nak.frame())
        step.naks.append((nak, frame))

    def _frame(self, frame: Frame, now: float, step: Step) -> None:
        if not frame.ok:
            nak = nak_for(frame, self.protocol)
            if nak is not None:
                self._nak(nak, frame, now, step)
            return
        self._last_good = now
        if frame.name in (FrameName.ACK, FrameName.NAK, FrameName.WELCOME):
            return  # the controller's own frames, echoed: nothing to do
        if self.protocol >= 3 and not self._ours(frame, now, step):
            return
        at = self.wall()
        if frame.name is FrameName.FAULT:
            code = frame.text(2) or "FAULT"
            step.extend(
                self._raise(
                    code,
                    f"the reader itself reports the fault {code}; its rolls are held for the "
                    "dealer until it says OK",
                    reported=True,
                )
            )
            return
        if frame.name is FrameName.OK:
            if self.fault is None and not self._ok_seen:
                # the first OK since this start ends a FAULT the journal holds from before it
                step.commands.append(ReaderOk(actor=READER, at=at))
            self._ok_seen = True
            self._clear(step)
            return
        if self.fault in (HEARTBEAT, PORT_LOST, DRIVER_ERROR) or (
            self.fault is not None and frame.name is FrameName.HELLO
        ):
            self._clear(step)  # frames flow again / the reader restarted
        command = command_for(frame, at)
        if isinstance(command, ReaderHello) and self.protocol >= 3:
            command = ReaderHello(
                seq=command.seq,
                model=command.model,
                firmware=command.firmware,
                session=frame.session or "",
                carried="" if frame.text(6) == NO_SESSION else frame.text(6),
                actor=READER,
                at=at,
            )
        if command is not None:
            step.commands.append(command)

    def _ours(self, frame: Frame, now: float, step: Step) -> bool:
        """Protocol 3: whether ``frame`` may act (a HELLO always goes to the table, which
        decides; any other frame only when of the session the table holds, and no HELLO of
        another is waiting for the table's answer)."""
        if frame.name is FrameName.HELLO:
            if frame.session != self.session:
                self.opening = frame.session
            return True
        if frame.session == self.session and self.opening is None:
            self.session_heard = self.session is not None
            return True
        self.foreign += 1
        if frame.session not in (self.opening, self.session):
            # (the held session's and the opening one's wait for the table's answer)
            nak = Nak(frame.seq or 0, NakReason.SESSION, self.protocol, frame.session)
            self._nak(nak, frame, now, step)
        return False
