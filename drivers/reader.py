"""The dice reader contract: what every reader driver must do, and what it may do.

The controller talks to "a dice reader" only through :class:`DiceReader`. The
reference implementation is :class:`drivers.serial_reader.SerialDiceReader`
(``docs/reader-protocol.md`` over any pyserial URL); its simulated twin is
:class:`drivers.sim_reader.SimulatedReader`, a fake *device* the real driver
talks to unchanged. An adapter for another manufacturer's reader implements this
class (see ``docs/reader-protocol.md``).

A driver MUST:

* :meth:`~DiceReader.start` its own thread(s) and return at once; from then on
  turn what the reader says into commands and hand each to ``post`` (which only
  puts it on the controller's queue and never blocks for long):

  - every ROLL frame, *every copy* of a retransmitted one, as
    ``Roll(d1, d2, source="reader", seq=seq, actor="reader")``: the engine
    recognises a repeated seq and the controller ACKs each copy, so a driver
    never drops a copy silently;
  - HELLO as ``ReaderHello(seq=seq, model=..., firmware=...)`` (protocol 3: with its
    ``session`` and ``carried``); nothing else ever says where the reader's numbering
    stands (the session is known, never guessed);
  - a reader fault as ``ReaderFault(code=...)``: the reader's FAULT code,
    ``"HEARTBEAT"`` when no good frame came for the heartbeat timeout,
    ``"PORT_LOST"`` when the port cannot be read or opened, ``"DRIVER_ERROR"``
    when the driver's own thread failed (with the reason in ``status()``);
  - the end of a fault as ``ReaderOk()`` (an OK frame, or good frames flowing
    again after a heartbeat or port fault), once per fault.

* keep going whatever arrives: bad input is counted per verdict
  (:data:`drivers.codec.VERDICTS`), logged and never posted; a lost port is
  reopened with a capped backoff until it returns; any exception in its thread
  becomes a fault with its reason and the thread carries on; only :meth:`stop`
  ends it. A device port is opened exclusively.
* :meth:`~DiceReader.ack` the ROLL with ``seq``: the controller calls it only
  after the roll is durably journaled, from its own thread.
* answer :meth:`~DiceReader.status` from any thread, at any time.

A driver MAY post nothing for frames that carry no command (HB, NOROLL) and may
add keys of its own to ``counters``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.core.commands import (
    Command,
    ReaderFault,
    ReaderFaultCode,
    ReaderHello,
    ReaderOk,
    Roll,
    RollSource,
)
from drivers.codec import VERDICTS, Frame, FrameName, NakReason

Post = Callable[[Command], None]
"""Where a driver hands its commands: the controller's one queue."""

HEARTBEAT = ReaderFaultCode.HEARTBEAT
PORT_LOST = ReaderFaultCode.PORT_LOST
DRIVER_ERROR = ReaderFaultCode.DRIVER_ERROR
READER = "reader"


@dataclass(frozen=True)
class ReaderStatus:
    """A snapshot of a dice reader driver.

    ``connected``: the port is open. ``fault``: the fault in force (a FAULT code,
    HEARTBEAT, PORT_LOST or DRIVER_ERROR) or None. ``counters``: frames seen per
    verdict. ``port``: the device path or URL. ``reason``: the fault in words, when
    there is more to say than its code (the exception, the port's problem). ``naks``:
    NAK frames sent, by reason; ``last_nak``: the last in words, with the frame it answered.
    ``session``: protocol 3, the session whose frames count (None before protocol 3).
    ``session_heard``: protocol 3, a good frame of ``session`` came since the driver started
    (the reader has not restarted since the HELLO that opened it).
    """

    connected: bool
    fault: str | None
    counters: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    port: str = ""
    reason: str | None = None
    naks: Mapping[str, int] = field(default_factory=dict)
    last_nak: str | None = None
    session: str | None = None
    session_heard: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for ``status --json`` (``reader``)."""
        return {
            "connected": self.connected,
            "fault": self.fault,
            "counters": dict(self.counters),
            "port": self.port,
            "reason": self.reason,
            "naks": dict(self.naks),
            "last_nak": self.last_nak,
            **(
                {"session": self.session, "session_heard": self.session_heard}
                if self.session is not None
                else {}
            ),
        }


class DiceReader(ABC):
    """A dice reader driver (the contract is in this module's docstring)."""

    @abstractmethod
    def start(self, post: Post) -> None:
        """Start reading; every command goes to ``post``. Call once."""

    @abstractmethod
    def ack(self, seq: int) -> None:
        """Tell the reader the ROLL ``seq`` is durably recorded (never raises)."""

    @abstractmethod
    def stop(self) -> None:
        """Stop the threads and close the port; idempotent."""

    @abstractmethod
    def status(self) -> ReaderStatus:
        """The driver's state right now."""

    # protocol 3's session (``docs/reader-protocol.md``): a driver of a reader without
    # sessions keeps these as they are
    def resume(self, session: str | None) -> None:  # noqa: B027 (optional, does nothing)
        """The session the table's journal holds, told before :meth:`start`."""

    def welcome(self, session: str, applied: int) -> None:  # noqa: B027
        """The table journaled (or already held) the HELLO of ``session``: answer it."""

    def hello_refused(self, session: str, *, over: bool = False) -> None:  # noqa: B027
        """The table did not take the HELLO of ``session`` (``over``: a session past)."""

    def refuse(self, seq: int, reason: NakReason) -> None:  # noqa: B027
        """The table refused the ROLL ``seq`` (``GAP``, ``CONFLICT``): tell the reader."""


def command_for(frame: Frame, at: str = "") -> Command | None:
    """The command an ``ok`` frame from the reader asks for, or None (HB, NOROLL, ACK).

    Faults and their ends are not decided here: the driver tracks them (see
    :class:`drivers.serial_reader.SerialDiceReader`).
    """
    if not frame.ok:
        return None
    if frame.name is FrameName.ROLL and frame.dice is not None:
        d1, d2 = frame.dice
        return Roll(d1, d2, source=RollSource.READER, seq=frame.seq, actor=READER, at=at)
    if frame.name is FrameName.HELLO and frame.seq is not None:
        model, firmware = frame.text(2), frame.text(3)
        return ReaderHello(seq=frame.seq, model=model, firmware=firmware, actor=READER, at=at)
    if frame.name is FrameName.FAULT:
        return ReaderFault(code=frame.text(2), reported=True, actor=READER, at=at)
    if frame.name is FrameName.OK:
        return ReaderOk(actor=READER, at=at)
    return None
