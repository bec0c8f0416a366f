"""Dice reader frame codec (``docs/reader-protocol.md``): pure bytes in, frames out, no I/O.

A frame on the wire is ``$<BODY>*<CK>\\r\\n``. Under protocol 2 (the default) CK is four
uppercase hex digits, the CRC-16/CCITT-FALSE of BODY, and HELLO ends with the protocol
number (``HELLO,<seq>,<model>,<firmware>,2``); under protocol 1 (older readers) CK is
two uppercase hex digits, the XOR of every byte of BODY. A frame with the other
protocol's checksum is ``bad_checksum``. :func:`encode` and the ``encode_*`` helpers
build frames; :class:`FrameDecoder` takes bytes as they arrive, in pieces of any size,
and gives back one :class:`Frame` per line it saw, each with a verdict. It never raises
on input and never holds more than one frame's worth of bytes: bytes before a ``$`` are
skipped, a ``$`` inside a frame starts a new one, and more than :data:`MAX_FRAME` bytes
without a line end is ``overlong`` (the rest up to the next ``$`` is skipped).
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

MAX_FRAME = 82
"""Longest frame in bytes, from ``$`` to the checksum, without the line end."""

MAX_SEQ = 65535

PROTOCOLS: tuple[int, ...] = (1, 2, 3)
DEFAULT_PROTOCOL = 2
"""Protocol 2: CRC-16/CCITT-FALSE in four hex digits; protocol 1: XOR in two; protocol 3:
protocol 2's checksum and an explicit session (``docs/reader-protocol.md``)."""
CHECKSUM_DIGITS = {1: 2, 2: 4, 3: 4}
SESSION_DIGITS = 8
"""A protocol-3 session is eight uppercase hex digits; ``00000000`` names none."""
NO_SESSION = "0" * SESSION_DIGITS


class Verdict(StrEnum):
    """What the codec made of one line read from the reader (its text is the JSON's)."""

    OK = "ok"
    BAD_CHECKSUM = "bad_checksum"
    BAD_VALUE = "bad_value"
    BAD_FRAME = "bad_frame"
    OVERLONG = "overlong"
    NON_ASCII = "non_ascii"


VERDICTS: tuple[Verdict, ...] = tuple(Verdict)


class FrameName(StrEnum):
    """A frame's name: the first field of its body."""

    HELLO = "HELLO"
    ROLL = "ROLL"
    NOROLL = "NOROLL"
    HB = "HB"
    FAULT = "FAULT"
    OK = "OK"
    ACK = "ACK"
    NAK = "NAK"
    WELCOME = "WELCOME"


# frame name -> number of fields in its body, the name included (protocol 1; under
# protocol 2 HELLO has one more: the protocol number)
FIELD_COUNTS: dict[str, int] = {
    FrameName.HELLO: 4,  # HELLO,<seq>,<model>,<firmware>[,<protocol>]
    FrameName.ROLL: 4,  # ROLL,<seq>,<d1>,<d2>
    FrameName.NOROLL: 3,  # NOROLL,<seq>,<reason>
    FrameName.HB: 2,  # HB,<seq>
    FrameName.FAULT: 3,  # FAULT,<seq>,<code>
    FrameName.OK: 2,  # OK,<seq>
    FrameName.ACK: 2,  # ACK,<seq>
    FrameName.NAK: 3,  # NAK,<seq>,<reason>
}

FIELD_COUNTS_3: dict[str, int] = {
    # protocol 3: every frame names its session; HELLO names the protocol, its own new
    # session and the session of the roll it carries over with that roll's number
    FrameName.HELLO: 8,  # HELLO,<seq>,<model>,<firmware>,3,<session>,<carried>,<number>
    FrameName.ROLL: 5,  # ROLL,<number>,<d1>,<d2>,<session>
    FrameName.NOROLL: 4,  # NOROLL,<number>,<reason>,<session>
    FrameName.HB: 3,  # HB,<number>,<session>
    FrameName.FAULT: 4,  # FAULT,<number>,<code>,<session>
    FrameName.OK: 3,  # OK,<number>,<session>
    FrameName.ACK: 3,  # ACK,<number>,<session>
    FrameName.NAK: 4,  # NAK,<number>,<reason>,<session>
    FrameName.WELCOME: 3,  # WELCOME,<session>,<applied>
}


def field_count(name: FrameName, protocol: int) -> int:
    """How many fields the body of a ``name`` frame has under ``protocol``."""
    if protocol >= 3:
        return FIELD_COUNTS_3[name]
    if name is FrameName.WELCOME:
        return -1  # no such frame before protocol 3
    return FIELD_COUNTS[name] + (name is FrameName.HELLO and protocol >= 2)


# the frames only the controller sends: never answered with a NAK
CONTROLLER_FRAMES = frozenset({FrameName.ACK, FrameName.NAK, FrameName.WELCOME})


class NakReason(StrEnum):
    """Why the controller answers a frame with ``NAK,<seq>,<reason>`` (its text is the
    frame's; ``docs/reader-protocol.md``, "NAK")."""

    PROTOCOL = "PROTOCOL"
    BAD_HELLO = "BAD_HELLO"
    BAD_FRAME = "BAD_FRAME"
    BAD_VALUE = "BAD_VALUE"
    SESSION = "SESSION"
    GAP = "GAP"
    CONFLICT = "CONFLICT"


SESSION_NAKS = frozenset({NakReason.SESSION, NakReason.GAP, NakReason.CONFLICT})
"""Protocol 3: the NAKs after which a reader starts a new session (a new HELLO carrying
its pending roll), when they name its own session."""

NAK_WORDS: dict[NakReason, str] = {
    NakReason.PROTOCOL: "a frame or HELLO of another protocol than [reader] protocol",
    NakReason.BAD_HELLO: "a HELLO of the wrong shape (fields, an empty model or firmware, "
    "a seq outside 0..65535)",
    NakReason.BAD_FRAME: "a frame with a good checksum but the wrong fields",
    NakReason.BAD_VALUE: "a frame with a good checksum but a value out of range",
    NakReason.SESSION: "a frame of a session the table does not hold (say HELLO)",
    NakReason.GAP: "a ROLL numbered past the next one the table expects (say HELLO)",
    NakReason.CONFLICT: "a ROLL numbered as one applied, with other dice (say HELLO)",
}

_DOLLAR = 0x24
_CR = 0x0D
_LF = 0x0A
_HEX = b"0123456789ABCDEFabcdef"
_PRINTABLE = bytes(range(0x20, 0x7F))
_NAMES: dict[str, FrameName] = {name.value: name for name in FrameName}


def _printable(b: int) -> bool:
    return 0x20 <= b <= 0x7E


def _all_printable(data: bytes) -> bool:
    """Whether every byte of ``data`` is printable ASCII (0x20..0x7E): one pass in C."""
    return not data.translate(None, _PRINTABLE)


@dataclass(frozen=True)
class Frame:
    """One line read from the reader and what the codec made of it.

    ``name`` is the frame's name (``ROLL``, ``HB``, ...: the body's first field) when the
    body names a known one (even in a rejected frame, to help the technician),
    else None. ``seq`` and ``dice`` are set only on an ``ok`` frame (``dice``
    only for ROLL). ``fields`` is the body split at commas, ``raw`` the bytes
    exactly as read (line end included when there was one).
    """

    verdict: Verdict
    name: FrameName | None = None
    seq: int | None = None
    dice: tuple[int, int] | None = None
    fields: tuple[str, ...] = ()
    raw: bytes = b""
    session: str | None = None

    @property
    def ok(self) -> bool:
        """True when the frame may be acted on."""
        return self.verdict is Verdict.OK

    def text(self, index: int) -> str:
        """The body field at ``index`` (e.g. the model of a HELLO, the code of a FAULT)."""
        return self.fields[index] if index < len(self.fields) else ""

    def to_json(self) -> dict[str, Any]:
        """The ``diag reader --json`` line for this frame (``docs/cli.md``)."""
        line: dict[str, Any] = {
            "verdict": self.verdict,
            "kind": self.name,  # the JSON key of docs/cli.md
            "seq": self.seq,
            "dice": list(self.dice) if self.dice is not None else None,
        }
        if self.ok and self.name is FrameName.HELLO:  # what the reader says it is
            line["model"] = self.text(2)
            line["firmware"] = self.text(3)
        return line


def check_protocol(protocol: int) -> int:
    """``protocol`` itself when it is one this codec speaks, else ValueError."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"reader protocol must be 1, 2 or 3, not {protocol!r}")
    return protocol


def checksum(body: bytes | str, protocol: int = DEFAULT_PROTOCOL) -> str:
    """The checksum of ``body`` as the frame carries it.

    Protocol 2: four uppercase hex digits of the CRC-16/CCITT-FALSE (poly 0x1021,
    init 0xFFFF, ``binascii.crc_hqx(body, 0xFFFF)``). Protocol 1: two uppercase hex
    digits of the XOR of every byte.
    """
    data = body.encode("ascii") if isinstance(body, str) else body
    if check_protocol(protocol) >= 2:
        return f"{binascii.crc_hqx(data, 0xFFFF):04X}"
    ck = 0
    for b in data:
        ck ^= b
    return f"{ck:02X}"


def encode(body: str, protocol: int = DEFAULT_PROTOCOL) -> bytes:
    """The frame ``$BODY*CK\\r\\n`` for ``body`` (printable ASCII without ``$`` or ``*``)."""
    data = body.encode("ascii", errors="strict")
    if not _all_printable(data) or b"$" in data or b"*" in data:
        raise ValueError(f"frame body must be printable ASCII without '$' or '*': {body!r}")
    room = MAX_FRAME - 2 - CHECKSUM_DIGITS[check_protocol(protocol)]
    if len(data) > room:
        raise ValueError(f"frame body longer than {room} bytes: {body!r}")
    return b"$" + data + b"*" + checksum(data, protocol).encode("ascii") + b"\r\n"


def _seq(seq: int) -> str:
    if not 0 <= seq <= MAX_SEQ:
        raise ValueError(f"seq must be 0..{MAX_SEQ}, not {seq}")
    return str(seq)


def is_session(text: str) -> bool:
    """Whether ``text`` is a protocol-3 session: eight uppercase hex digits."""
    return len(text) == SESSION_DIGITS and all(c in "0123456789ABCDEF" for c in text)


def _tail(protocol: int, session: str | None) -> str:
    """The ``,<session>`` a protocol-3 frame ends with (nothing before protocol 3)."""
    if check_protocol(protocol) < 3:
        return ""
    if session is None or not is_session(session) or session == NO_SESSION:
        raise ValueError(f"a protocol-3 frame names its session (8 hex digits), not {session!r}")
    return f",{session}"


def encode_hello(
    seq: int,
    model: str,
    firmware: str,
    protocol: int = DEFAULT_PROTOCOL,
    session: str | None = None,
    carried: str = NO_SESSION,
    number: int = 0,
) -> bytes:
    """``HELLO,<seq>,<model>,<firmware>[,2]``: the reader started, numbering restarts.

    Protocol 3: ``HELLO,0,<model>,<firmware>,3,<session>,<carried>,<number>``: the new
    session the reader drew, and the session and number of the roll it still holds un-ACKed
    (``00000000,0``: none), so the controller's WELCOME can say whether it was applied.
    """
    if check_protocol(protocol) >= 3:
        if not is_session(carried):
            raise ValueError(f"the carried session must be 8 hex digits, not {carried!r}")
        tail = f",3{_tail(protocol, session)},{carried},{_seq(number)}"
    else:
        tail = f",{protocol}" if protocol >= 2 else ""
    return encode(f"HELLO,{_seq(seq)},{model},{firmware}{tail}", protocol)


def encode_welcome(session: str, applied: int, protocol: int = 3) -> bytes:
    """``WELCOME,<session>,<applied>`` (protocol 3): the controller journaled the HELLO of
    ``session``; ``applied`` is the number of the last roll it applied of the session the
    HELLO carried a roll over from (0: none of it)."""
    if check_protocol(protocol) < 3:
        raise ValueError("WELCOME is a protocol-3 frame")
    return encode(f"WELCOME{_tail(protocol, session)},{_seq(applied)}", protocol)


def encode_roll(
    seq: int, d1: int, d2: int, protocol: int = DEFAULT_PROTOCOL, session: str | None = None
) -> bytes:
    """``ROLL,<seq>,<d1>,<d2>[,<session>]``: a roll of the dice."""
    if not (1 <= d1 <= 6 and 1 <= d2 <= 6):
        raise ValueError(f"dice must be 1..6, not {d1} {d2}")
    return encode(f"ROLL,{_seq(seq)},{d1},{d2}{_tail(protocol, session)}", protocol)


def encode_noroll(
    seq: int, reason: str, protocol: int = DEFAULT_PROTOCOL, session: str | None = None
) -> bytes:
    """``NOROLL,<seq>,<reason>[,<session>]``: an invalid throw (COCKED, OFFTABLE, ...)."""
    return encode(f"NOROLL,{_seq(seq)},{reason}{_tail(protocol, session)}", protocol)


def encode_hb(seq: int, protocol: int = DEFAULT_PROTOCOL, session: str | None = None) -> bytes:
    """``HB,<seq>[,<session>]``: heartbeat."""
    return encode(f"HB,{_seq(seq)}{_tail(protocol, session)}", protocol)


def encode_fault(
    seq: int, code: str, protocol: int = DEFAULT_PROTOCOL, session: str | None = None
) -> bytes:
    """``FAULT,<seq>,<code>[,<session>]``: the reader raises a fault."""
    return encode(f"FAULT,{_seq(seq)},{code}{_tail(protocol, session)}", protocol)


def encode_ok(seq: int, protocol: int = DEFAULT_PROTOCOL, session: str | None = None) -> bytes:
    """``OK,<seq>[,<session>]``: the reader's fault is cleared."""
    return encode(f"OK,{_seq(seq)}{_tail(protocol, session)}", protocol)


def encode_ack(seq: int, protocol: int = DEFAULT_PROTOCOL, session: str | None = None) -> bytes:
    """``ACK,<seq>[,<session>]``: the controller durably recorded the ROLL with this seq."""
    return encode(f"ACK,{_seq(seq)}{_tail(protocol, session)}", protocol)


def encode_nak(
    seq: int, reason: str, protocol: int = DEFAULT_PROTOCOL, session: str | None = None
) -> bytes:
    """``NAK,<seq>,<reason>[,<session>]``: the controller cannot take the frame with this
    seq (protocol 3: of this session; ``00000000`` when the frame named none readable)."""
    tail = ""
    if check_protocol(protocol) >= 3:
        tail = f",{session if session is not None and is_session(session) else NO_SESSION}"
    return encode(f"NAK,{_seq(seq)},{reason}{tail}", protocol)


@dataclass(frozen=True)
class Nak:
    """The controller's answer to a frame it cannot take: ``NAK,<seq>,<reason>`` framed
    in ``protocol`` (the protocol the frame itself was framed in, so the reader can read
    the answer)."""

    seq: int
    reason: NakReason
    protocol: int
    session: str | None = None

    def frame(self) -> bytes:
        """The NAK frame on the wire."""
        return encode_nak(self.seq, self.reason, self.protocol, self.session)

    def describe(self) -> str:
        """``NAK,0,PROTOCOL (a HELLO of another protocol than [reader] protocol)``."""
        return f"NAK,{self.seq},{self.reason} ({NAK_WORDS[self.reason]})"

    def to_json(self) -> dict[str, Any]:
        """The ``nak`` of a ``diag reader --json`` line."""
        out: dict[str, Any] = {"seq": self.seq, "reason": self.reason, "protocol": self.protocol}
        if self.session is not None:
            out["session"] = self.session
        return out


def sealed(raw: bytes, protocol: int) -> bool:
    """Whether ``raw`` (one line from ``$``) ends in the right checksum of its body under
    ``protocol``: the reader sent the frame as it is, whatever its fields."""
    if not raw.endswith(b"\n"):  # cut short by the next ``$``: not as the reader sent it
        return False
    content = raw.rstrip(b"\r\n")
    star = content.rfind(b"*")
    if not content.startswith(b"$") or star < 0 or len(content) > MAX_FRAME:
        return False
    region, ck = content[1:star], content[star + 1 :]
    if len(ck) != CHECKSUM_DIGITS[protocol] or not _all_printable(region):
        return False
    return ck.decode("ascii", errors="replace").upper() == checksum(region, protocol)


def nak_for(frame: Frame, protocol: int = DEFAULT_PROTOCOL) -> Nak | None:
    """The NAK that answers ``frame`` under ``protocol``, or None (``docs/reader-protocol.md``).

    Answered: a frame framed in the other protocol, or a HELLO claiming another protocol
    (``PROTOCOL``), a sealed HELLO of the wrong shape (``BAD_HELLO``), and a sealed frame
    of a known name with the wrong fields or a value out of range (``BAD_FRAME``,
    ``BAD_VALUE``). Never a good frame (a ROLL it can take is ACKed, or left un-ACKed),
    never line noise (a checksum that fails: the reader repeats a ROLL anyway), an
    unknown frame (a newer reader's), nor the controller's own frames.
    """
    if frame.ok or frame.name is None or frame.name in CONTROLLER_FRAMES:
        return None
    said = _number(frame.text(1))
    seq = said if said is not None and said <= MAX_SEQ else 0
    said_session = frame.fields[-1] if frame.fields and is_session(frame.fields[-1]) else None
    session = said_session if protocol >= 3 else None
    if frame.verdict is Verdict.BAD_CHECKSUM:
        other = 1 if protocol >= 2 else 2
        if sealed(frame.raw, other):  # a reader of the other protocol (never line noise:
            return Nak(seq, NakReason.PROTOCOL, other)  # the other's CK has other digits)
        return None
    if frame.verdict not in (Verdict.BAD_FRAME, Verdict.BAD_VALUE) or not sealed(
        frame.raw, protocol
    ):
        return None
    if frame.name is FrameName.HELLO:
        count = len(frame.fields)
        claims = _number(frame.fields[4]) if count >= 5 else None
        if claims is not None and claims != protocol and (count in (5, 8) or protocol == 1):
            return Nak(seq, NakReason.PROTOCOL, protocol, session)
        return Nak(seq, NakReason.BAD_HELLO, protocol, session)
    reason = NakReason.BAD_VALUE if frame.verdict is Verdict.BAD_VALUE else NakReason.BAD_FRAME
    return Nak(seq, reason, protocol, session)


def _number(text: str) -> int | None:
    if not (text.isascii() and text.isdigit()):  # (ASCII digits only; "" is neither)
        return None
    return int(text)


def parse_line(line: bytes, protocol: int = DEFAULT_PROTOCOL) -> Frame:
    """Judge one complete line starting with ``$`` (line end optional) under ``protocol``.

    A checksum of the other protocol's length (two hex digits under protocol 2, four
    under protocol 1) is ``bad_checksum``: that frame is not ours to act on.
    """
    raw = line
    content = line
    if content.endswith(b"\n"):
        content = content[:-1]
    if content.endswith(b"\r"):
        content = content[:-1]
    if len(content) > MAX_FRAME:
        return Frame(Verdict.OVERLONG, raw=raw)
    star = content.rfind(b"*")
    region = content[1:star] if star >= 0 else content[1:]
    if not _all_printable(region):
        return Frame(Verdict.NON_ASCII, raw=raw)
    body = region.decode("ascii")
    fields = tuple(body.split(","))
    name = _NAMES.get(fields[0])
    if star < 0:
        return Frame(Verdict.BAD_FRAME, name=name, fields=fields, raw=raw)
    ck = content[star + 1 :]
    if len(ck) not in (2, 4) or ck.translate(None, _HEX):
        return Frame(Verdict.BAD_FRAME, name=name, fields=fields, raw=raw)
    if len(ck) != CHECKSUM_DIGITS[protocol] or ck.decode("ascii").upper() != checksum(
        region, protocol
    ):
        return Frame(Verdict.BAD_CHECKSUM, name=name, fields=fields, raw=raw)
    if name is None or len(fields) != field_count(name, protocol):
        return Frame(Verdict.BAD_FRAME, name=name, fields=fields, raw=raw)
    if protocol >= 3:
        return _judge_3(name, fields, raw)
    seq = _number(fields[1])
    if seq is None:
        return Frame(Verdict.BAD_FRAME, name=name, fields=fields, raw=raw)
    dice: tuple[int, int] | None = None
    if name is FrameName.ROLL:
        d1, d2 = _number(fields[2]), _number(fields[3])
        if d1 is None or d2 is None:
            return Frame(Verdict.BAD_FRAME, name=name, fields=fields, raw=raw)
        if not (1 <= d1 <= 6 and 1 <= d2 <= 6):
            return Frame(Verdict.BAD_VALUE, name=name, fields=fields, raw=raw)
        dice = (d1, d2)
    elif any(not f for f in fields[2:]):  # model, firmware, reason, code
        return Frame(Verdict.BAD_FRAME, name=name, fields=fields, raw=raw)
    if name is FrameName.HELLO and protocol >= 2:
        said = _number(fields[-1])
        if said is None:
            return Frame(Verdict.BAD_FRAME, name=name, fields=fields, raw=raw)
        if said != protocol:  # a reader that claims another protocol than it speaks
            return Frame(Verdict.BAD_VALUE, name=name, fields=fields, raw=raw)
    if seq > MAX_SEQ:
        return Frame(Verdict.BAD_VALUE, name=name, fields=fields, raw=raw)
    return Frame(Verdict.OK, name=name, seq=seq, dice=dice, fields=fields, raw=raw)


def _judge_3(name: FrameName, fields: tuple[str, ...], raw: bytes) -> Frame:
    """Judge the fields of a protocol-3 frame whose checksum and field count are right."""

    def bad(verdict: Verdict = Verdict.BAD_FRAME) -> Frame:
        return Frame(verdict, name=name, fields=fields, raw=raw)

    if name is FrameName.WELCOME:
        session, applied = fields[1], _number(fields[2])
        if not is_session(session) or applied is None:
            return bad()
        if session == NO_SESSION or applied > MAX_SEQ:
            return bad(Verdict.BAD_VALUE)
        return Frame(Verdict.OK, name=name, seq=applied, fields=fields, raw=raw, session=session)
    seq = _number(fields[1])
    if seq is None or any(not f for f in fields[2:]):
        return bad()
    if name is FrameName.HELLO:
        said, session, carried, number = _number(fields[4]), fields[5], fields[6], fields[7]
        count = _number(number)
        if said is None or not is_session(session) or not is_session(carried) or count is None:
            return bad()
        if said != 3 or session == NO_SESSION or count > MAX_SEQ:
            return bad(Verdict.BAD_VALUE)
    else:
        session = fields[-1]
        if not is_session(session):
            return bad()
        if session == NO_SESSION:
            return bad(Verdict.BAD_VALUE)
    dice: tuple[int, int] | None = None
    if name is FrameName.ROLL:
        d1, d2 = _number(fields[2]), _number(fields[3])
        if d1 is None or d2 is None:
            return bad()
        if not (1 <= d1 <= 6 and 1 <= d2 <= 6):
            return bad(Verdict.BAD_VALUE)
        dice = (d1, d2)
    if seq > MAX_SEQ:
        return bad(Verdict.BAD_VALUE)
    return Frame(Verdict.OK, name=name, seq=seq, dice=dice, fields=fields, raw=raw, session=session)


def _cut_short(partial: bytes, protocol: int) -> Frame:
    """Judge a frame that the next ``$`` cut off before its line end: never ok."""
    frame = parse_line(partial, protocol)
    if frame.verdict is Verdict.OK:
        return Frame(Verdict.BAD_FRAME, name=frame.name, fields=frame.fields, raw=partial)
    return frame


@dataclass
class FrameDecoder:
    """Incremental, bounded decoder: :meth:`feed` bytes, get frames back.

    ``protocol`` is the reader protocol (1 or 2) the frames are judged under.
    ``counters`` counts frames per verdict; ``skipped`` counts bytes dropped
    outside any frame (line noise before a ``$``, the tail of an overlong frame).
    """

    protocol: int = DEFAULT_PROTOCOL
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    skipped: int = 0
    _buf: bytearray = field(default_factory=bytearray, repr=False)
    _in_frame: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        check_protocol(self.protocol)

    @property
    def buffered(self) -> int:
        """Bytes of an unfinished frame held right now (never more than MAX_FRAME + 1)."""
        return len(self._buf)

    def reset(self) -> None:
        """Forget any unfinished frame (the port was closed and reopened)."""
        self._buf.clear()
        self._in_frame = False

    def _emit(self, frame: Frame, out: list[Frame]) -> None:
        self.counters[frame.verdict] += 1
        out.append(frame)

    def feed(self, data: bytes) -> list[Frame]:
        """Take the next bytes from the line; return the frames they completed.

        The bytes are cut at each ``$`` and line end with ``bytes.find`` (no Python work a
        byte): a frame's middle is copied whole while it fits in :data:`MAX_FRAME`, and only
        a run that would overflow it is walked byte by byte (:meth:`_overflow`).
        """
        out: list[Frame] = []
        buf = self._buf
        at, end = 0, len(data)
        while at < end:
            if not self._in_frame:
                start = data.find(b"$", at)
                if start < 0:
                    self.skipped += end - at
                    break
                self.skipped += start - at
                buf.clear()
                buf.append(_DOLLAR)
                self._in_frame = True
                at = start + 1
                continue
            dollar, lf = data.find(b"$", at), data.find(b"\n", at)
            stop = min(dollar if dollar >= 0 else end, lf if lf >= 0 else end)
            size = len(buf) + stop - at
            # the frame's last byte so far: this read's, or the held one's when this read
            # starts at the line end (a read cut just after a \r at the limit: data[-1]
            # here was another byte, and the loop never moved on, #31)
            last = data[stop - 1] if stop > at else buf[-1]
            if size <= MAX_FRAME or (size == MAX_FRAME + 1 and last == _CR):
                buf += data[at:stop]
            else:  # an overlong run: judged a byte at a time, as it always was
                self._overflow(data, at, stop, out)
                at = stop
                continue
            if stop == end:
                break
            if data[stop] == _DOLLAR:  # a frame cut short by the next one: resync here
                self._emit(_cut_short(bytes(buf), self.protocol), out)
                buf.clear()
                buf.append(_DOLLAR)
            else:
                buf.append(_LF)
                self._emit(parse_line(bytes(buf), self.protocol), out)
                buf.clear()
                self._in_frame = False
            at = stop + 1
        return out

    def _overflow(self, data: bytes, at: int, stop: int, out: list[Frame]) -> None:
        """Bytes ``data[at:stop]`` (no ``$``, no line end) inside a frame that they make too
        long: ``overlong`` at the byte past :data:`MAX_FRAME` (a ``\\r`` may stand there),
        the rest skipped until the next ``$``."""
        buf = self._buf
        for i in range(at, stop):
            b = data[i]
            if not self._in_frame:
                self.skipped += stop - i
                return
            buf.append(b)
            if len(buf) > MAX_FRAME and not (len(buf) == MAX_FRAME + 1 and b == _CR):
                self._emit(Frame(Verdict.OVERLONG, raw=bytes(buf)), out)
                buf.clear()
                self._in_frame = False
