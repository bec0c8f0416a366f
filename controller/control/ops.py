"""Every op of the control socket, in one table: its name, the role it needs, the lane that
answers it, its arguments, the core command it stands for and how the command line says it.

The protocol's role check (:data:`ROLES`), the server's own answers
(:data:`BUILTIN_OPS`), the desk's lanes (:data:`LANES`), the service's answers (the
command an op asks for, its arguments checked) and the command line (``firebet held
apply`` is the op ``held-apply``, the command ``held_apply``) are all read off
:data:`OPS`, so an op is spelled once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    """A privilege level on the control socket; each level includes the ones before it."""

    READER = "reader"
    DEALER = "dealer"
    TECHNICIAN = "technician"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def permits(self, needed: Role) -> bool:
        """Whether someone holding this role may do what ``needed`` guards."""
        return self.rank >= needed.rank


_RANK = {Role.READER: 0, Role.DEALER: 1, Role.TECHNICIAN: 2}


class Op(StrEnum):
    """The name of an op on the socket (a request's ``op``)."""

    PING = "ping"
    WHOAMI = "whoami"
    STATUS = "status"
    HISTORY = "history"
    ROLL = "roll"
    VOID = "void"
    CORRECT = "correct"
    SURRENDER = "surrender"
    BET = "bet"
    CANCEL = "cancel"
    ACK = "ack"
    HELD_APPLY = "held-apply"
    HELD_DISCARD = "held-discard"
    CLEAR_HALT = "clear-halt"
    DIAGNOSTICS_ON = "diagnostics-on"
    DIAGNOSTICS_OFF = "diagnostics-off"
    SIM_READER = "sim-reader"


class Lane(StrEnum):
    """Who answers an op: the server itself, or one of the desk's lanes."""

    BUILTIN = "builtin"  # the selector thread, at once (ping, whoami)
    STATUS = "status"  # the published snapshot
    READ = "read"  # the recall worker
    WRITE = "write"  # the engine thread (whatever changes the table), and the bench device


@dataclass(frozen=True)
class Arg:
    """One argument of an op: its name, whether it is text (else a whole number), and
    whether a request must give it."""

    name: str
    text: bool = False
    required: bool = True


@dataclass(frozen=True)
class OpSpec:
    """One row of :data:`OPS`."""

    op: Op
    role: Role
    lane: Lane
    args: tuple[Arg, ...] = ()
    command: str | None = None  # the core command's name (controller.core.commands)
    cli: tuple[str, ...] = ()  # the words of the command line that send it
    bench: bool = False  # a bench device's op: not on a real table's socket (BENCH_ROLES)


OPS: dict[Op, OpSpec] = {
    spec.op: spec
    for spec in (
        OpSpec(Op.PING, Role.READER, Lane.BUILTIN),
        OpSpec(Op.WHOAMI, Role.READER, Lane.BUILTIN, cli=("whoami",)),
        OpSpec(Op.STATUS, Role.READER, Lane.STATUS, cli=("status",)),
        OpSpec(
            Op.HISTORY, Role.READER, Lane.READ,
            (Arg("hands", required=False), Arg("detail", required=False)), cli=("history",),
        ),
        OpSpec(Op.ROLL, Role.DEALER, Lane.WRITE, (Arg("d1"), Arg("d2")), "roll", ("roll",)),
        OpSpec(Op.VOID, Role.DEALER, Lane.WRITE, (), "void", ("void",)),
        OpSpec(
            Op.CORRECT, Role.DEALER, Lane.WRITE,
            (Arg("d1"), Arg("d2"), Arg("roll", required=False)), "correct", ("correct",),
        ),
        OpSpec(
            Op.SURRENDER, Role.DEALER, Lane.WRITE, (Arg("kind", text=True, required=False),),
            "surrender", ("surrender",),
        ),
        OpSpec(Op.BET, Role.DEALER, Lane.WRITE, (Arg("position"), Arg("amount")), "bet", ("bet",)),
        OpSpec(Op.CANCEL, Role.DEALER, Lane.WRITE, (Arg("position"),), "cancel", ("cancel",)),
        OpSpec(Op.ACK, Role.DEALER, Lane.WRITE, (), "ack", ("ack",)),
        OpSpec(
            Op.HELD_APPLY, Role.DEALER, Lane.WRITE, (Arg("number", required=False),),
            "held_apply", ("held", "apply"),
        ),
        OpSpec(
            Op.HELD_DISCARD, Role.DEALER, Lane.WRITE, (Arg("number", required=False),),
            "held_discard", ("held", "discard"),
        ),
        OpSpec(
            Op.CLEAR_HALT, Role.TECHNICIAN, Lane.WRITE,
            (Arg("note", text=True, required=False), Arg("preview", required=False)),
            cli=("clear-halt",),
        ),
        OpSpec(Op.DIAGNOSTICS_ON, Role.TECHNICIAN, Lane.WRITE, cli=("diagnostics", "on")),
        OpSpec(Op.DIAGNOSTICS_OFF, Role.TECHNICIAN, Lane.WRITE, cli=("diagnostics", "off")),
        OpSpec(Op.SIM_READER, Role.TECHNICIAN, Lane.WRITE, cli=("sim-reader",), bench=True),
    )
}  # fmt: skip
"""Every op a control socket may accept; anything else is "unknown op"."""

ROLES: dict[str, Role] = {op.value: spec.role for op, spec in OPS.items() if not spec.bench}
"""The role each op of a table's socket needs: what the socket accepts."""

BENCH_ROLES: dict[str, Role] = {op.value: spec.role for op, spec in OPS.items() if spec.bench}
"""The bench device's ops (``sim-reader``) and their roles: a socket accepts them only when
the composition root registers them, for a service on a simulated reader (``firebet run
--simulated-reader``, ``firebet sim``); a real table's socket answers "unknown op"."""

BUILTIN_OPS = frozenset(op.value for op, spec in OPS.items() if spec.lane is Lane.BUILTIN)
"""The ops the server answers itself, without calling the handler."""

LANES: dict[str, str] = {
    op.value: spec.lane.value for op, spec in OPS.items() if spec.lane in (Lane.STATUS, Lane.READ)
}
"""The lane of each op the handler answers off the write lane (every other op: ``write``)."""

_BY_WORDS = {spec.cli: op for op, spec in OPS.items() if spec.cli}


def op_of(*words: str) -> Op:
    """The op the command line's ``words`` send (``op_of("held", "apply")``)."""
    return _BY_WORDS[words]
