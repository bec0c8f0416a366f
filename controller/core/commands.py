"""Commands: every input to the controller, from any driver, as a plain value.

Drivers (dice reader, buttons, control socket, timers, replay scripts) turn what
they see into one of these and post it on the controller's one queue. Time and
the actor arrive inside the command, so the rules engine stays pure.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, ClassVar


class SurrenderHow(StrEnum):
    """How a shooter gave up the dice: by choice, or ordered by the boxperson."""

    VOLUNTARY = "voluntary"
    COMPULSORY = "compulsory"


SURRENDER_KINDS: tuple[SurrenderHow, ...] = tuple(SurrenderHow)  # the engine checks against it


class RollSource(StrEnum):
    """Where a roll came from."""

    READER = "reader"  # the dice reader (with its seq)
    MANUAL = "manual"  # keyed by a dealer while the reader was in fault
    SCRIPT = "script"  # a replay script's line
    SIM = "sim"  # the simulator's shooter
    HELD = "held"  # a held reader roll the dealer applied (never sent from outside)
    CORRECTED = "corrected"  # the true dice of a misread roll (a Correct; never sent alone)


class ReaderFaultCode(StrEnum):
    """The controller's own names for a reader fault (a reader's FAULT frame names its own
    code, which is kept as the reader sent it)."""

    HEARTBEAT = "HEARTBEAT"  # no good frame for the heartbeat timeout
    PORT_LOST = "PORT_LOST"  # the port cannot be read or opened (unplugged)
    DRIVER_ERROR = "DRIVER_ERROR"  # the driver's own thread failed (restarted after a backoff)
    SEQ_CONFLICT = "SEQ_CONFLICT"  # a ROLL came again with other dice, until HELLO
    NO_READER = "NO_READER"  # the table runs without a reader
    FAULT = "FAULT"  # a FAULT frame that named no code


# the sources a Roll command may come with (a held roll is applied by the engine itself)
ROLL_SOURCES = frozenset(RollSource) - {RollSource.HELD, RollSource.CORRECTED}


def request_tag(uid: int, digest: str, rid: str | int) -> str:
    """The tag a command keeps of the control-socket request that asked for it:
    ``"uid:digest:id"`` (``digest``: of the request's op and arguments; the id as JSON),
    so a retry of it, even long after, is known as already decided."""
    return f"{uid}:{digest}:{json.dumps(rid)}"


def parse_request_tag(tag: str) -> tuple[int, str, str | int] | None:
    """``(uid, digest, id)`` of a request tag (:func:`request_tag`); None if ``tag`` is not
    one."""
    uid, _, rest = tag.partition(":")
    digest, _, id_text = rest.partition(":")
    try:
        number = int(uid)
        rid = json.loads(id_text)
    except (ValueError, RecursionError):
        return None
    if len(digest) != 16 or isinstance(rid, bool) or not isinstance(rid, str | int):
        return None
    return number, digest, rid


@dataclass(frozen=True)
class Command:
    """Base of every command. ``actor`` says who, ``at`` when (ISO 8601 or empty);
    ``request`` tags the control-socket request that asked for it (empty otherwise), so
    that a retry of that request after a restart is known as already decided."""

    name: ClassVar[str] = "command"
    actor: str = field(default="dealer", kw_only=True)
    at: str = field(default="", kw_only=True)
    request: str = field(default="", kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the command's name under ``"command"``."""
        return {"command": self.name, **asdict(self)}


@dataclass(frozen=True, init=False)
class Roll(Command):
    """A roll of the dice: two dice, where it came from, and the reader's sequence number."""

    name: ClassVar[str] = "roll"
    d1: int
    d2: int
    source: str = RollSource.READER
    seq: int | None = None

    def __init__(
        self,
        d1: int,
        d2: int,
        source: str = RollSource.READER,
        seq: int | None = None,
        *,
        actor: str = "dealer",
        at: str = "",
        request: str = "",
    ) -> None:
        # written out: the generated frozen __init__ is the slowest step of a roll (and
        # seven stores cost less than update() with keywords)
        fields = self.__dict__
        fields["d1"] = d1
        fields["d2"] = d2
        fields["source"] = source
        fields["seq"] = seq
        fields["actor"] = actor
        fields["at"] = at
        fields["request"] = request


@dataclass(frozen=True)
class Void(Command):
    """Void the last accepted roll (a misread). ``arm``: and wait for its true dice (the
    dealer's void button): until a :class:`Correct` gives them, the reader's rolls are
    held and wagers wait (docs/runbook.md, "Misread roll")."""

    name: ClassVar[str] = "void"
    arm: bool = False


@dataclass(frozen=True)
class Correct(Command):
    """A misread roll corrected, as one action: the last accepted roll voided and
    ``d1``, ``d2`` (the dice as they lie) taken in its place; or, after a void that
    armed a correction, those dice taken for the roll it voided. ``roll``: the number
    of the roll corrected (the table's roll count with it), when the caller names it: a
    roll accepted after it refuses the correction."""

    name: ClassVar[str] = "correct"
    d1: int
    d2: int
    roll: int | None = None


@dataclass(frozen=True)
class Surrender(Command):
    """The shooter gives up the dice before a loser 7.

    ``kind`` is how (:class:`SurrenderHow`); the field keeps its name because it is the
    key in the journal's command records and in the socket's ``surrender`` request. It
    is a plain string on purpose: the engine refuses any other text with a reason.
    """

    name: ClassVar[str] = "surrender"
    kind: str = SurrenderHow.VOLUNTARY


@dataclass(frozen=True)
class Bet(Command):
    """A fire-bet wager of ``amount`` dollars on numbered ``position``."""

    name: ClassVar[str] = "bet"
    position: int
    amount: int


@dataclass(frozen=True)
class Cancel(Command):
    """Take back the wager on ``position`` while betting is still open."""

    name: ClassVar[str] = "cancel"
    position: int


@dataclass(frozen=True)
class Ack(Command):
    """Surveillance (or the boxperson) acknowledges the alert."""

    name: ClassVar[str] = "ack"


@dataclass(frozen=True)
class Confirm(Command):
    """Surveillance confirms the fire bets and payouts of alerted ``hand`` (from the floor).

    ``by`` is the floor user who confirmed; ``id`` the floor's command id (a uuid).
    """

    name: ClassVar[str] = "confirm"
    hand: int
    by: str
    id: str = ""


@dataclass(frozen=True)
class ApplyHeld(Command):
    """Apply the held reader roll ``number`` (None: the oldest one) as a roll."""

    name: ClassVar[str] = "held_apply"
    number: int | None = None


@dataclass(frozen=True)
class DiscardHeld(Command):
    """Discard the held reader roll ``number`` (None: the oldest one): never counted."""

    name: ClassVar[str] = "held_discard"
    number: int | None = None


@dataclass(frozen=True)
class ReaderHello(Command):
    """The dice reader restarted: its sequence numbering starts again. ``model`` and
    ``firmware`` are what its HELLO said (journaled with it; empty in older records).

    Protocol 3 (``docs/reader-protocol.md``): ``session`` is the session the HELLO opens,
    ``carried`` the session of the roll it still holds un-ACKed (empty: none); only this
    command, journaled and then answered with a WELCOME, starts a new numbering. Empty
    under protocols 1 and 2 (and then left out of the record, as before).
    """

    name: ClassVar[str] = "reader_hello"
    seq: int = 0
    model: str = ""
    firmware: str = ""
    session: str = ""
    carried: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The record's body; the protocol-3 keys only when a session is named."""
        out = super().to_dict()
        if not self.session:
            del out["session"], out["carried"]
        return out


@dataclass(frozen=True)
class ReaderSync(Command):
    """A record written before issue 29 only (no driver sends it now: the session is known,
    never guessed): the seq of a frame the driver read, from which the table inferred a
    restart or moved its reference (:func:`controller.core.table.legacy_sync`). Kept so
    the journals that hold one still fold to the states they recorded."""

    name: ClassVar[str] = "reader_sync"
    seq: int = 0


@dataclass(frozen=True)
class RecordFault(Command):
    """A fault worth a meter tick (reader fault, disk full, ...)."""

    name: ClassVar[str] = "fault"
    code: str = "fault"


@dataclass(frozen=True)
class ReaderFault(Command):
    """The dice reader is in fault: ``code`` is HEARTBEAT, PORT_LOST or the reader's FAULT code.

    ``reported``: the reader itself reported it (a FAULT frame): its rolls are held until
    it says OK (records written before this existed read as False).
    """

    name: ClassVar[str] = "reader_fault"
    code: str = ReaderFaultCode.FAULT
    reported: bool = False


@dataclass(frozen=True)
class ReaderOk(Command):
    """The dice reader is healthy again (frames flowing, OK frame, port back)."""

    name: ClassVar[str] = "reader_ok"


COMMANDS: dict[str, type[Command]] = {
    c.name: c
    for c in (
        Roll,
        Void,
        Correct,
        Surrender,
        Bet,
        Cancel,
        Ack,
        Confirm,
        ApplyHeld,
        DiscardHeld,
        ReaderHello,
        ReaderSync,
        RecordFault,
        ReaderFault,
        ReaderOk,
    )
}


def command_from_dict(data: dict[str, Any]) -> Command:
    """Rebuild a command from :meth:`Command.to_dict` output (journal, socket)."""
    body = dict(data)
    name = body.pop("command", None)
    cls = COMMANDS.get(str(name))
    if cls is None:
        raise ValueError(f"unknown command {name!r}")
    return cls(**body)
