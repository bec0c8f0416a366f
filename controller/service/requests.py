"""A dealer's control-socket request as the core command it stands for.

The socket's ops and their arguments (``docs/architecture.md``, the control socket)
become :mod:`controller.core.commands` values here; a missing or ill-typed argument is a
usage error naming it (exit 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.clock import now_iso
from controller.core.commands import (
    Ack,
    ApplyHeld,
    Bet,
    Cancel,
    Command,
    DiscardHeld,
    Roll,
    Surrender,
    SurrenderHow,
    Void,
)
from controller.core.errors import UsageError
from controller.core.lamps import Mode


def dealer_command(
    op: str, args: Mapping[str, Any], actor: str, mode: Mode, *, request: str = ""
) -> Command:
    """The command for a dealer's ``op``; ``mode`` decides whether a manual roll is taken.
    ``request``: the request's tag (:attr:`~controller.control.protocol.Request.tag`),
    journaled with the command."""
    at = now_iso()
    if op == "roll":
        # halted or in diagnostics the refusal names that mode (the controller's reply)
        if mode is Mode.RUNNING:
            raise UsageError(
                "the dice reader is working: rolls come from the reader; manual entry is "
                "taken only while the reader is in fault"
            )
        return Roll(
            int_arg(args, "d1"),
            int_arg(args, "d2"),
            source="manual",
            actor=actor,
            at=at,
            request=request,
        )
    if op == "void":
        return Void(actor=actor, at=at, request=request)
    if op == "surrender":
        # the request names how under "kind"; the engine refuses any other text with a reason
        how = str(args.get("kind", SurrenderHow.VOLUNTARY))
        return Surrender(kind=how, actor=actor, at=at, request=request)
    if op == "bet":
        return Bet(
            int_arg(args, "position"), int_arg(args, "amount"), actor=actor, at=at, request=request
        )
    if op == "cancel":
        return Cancel(int_arg(args, "position"), actor=actor, at=at, request=request)
    if op == "ack":
        return Ack(actor=actor, at=at, request=request)
    if op in ("held-apply", "held-discard"):
        number = args.get("number")
        if number is not None:
            number = int_arg(args, "number")
        if op == "held-apply":
            return ApplyHeld(number, actor=actor, at=at, request=request)
        return DiscardHeld(number, actor=actor, at=at, request=request)
    raise UsageError(f"unknown operation {op!r}")


def int_arg(args: Mapping[str, Any], name: str, default: int | None = None) -> int:
    """A whole-number request argument; anything else is a usage error naming it."""
    value = args.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be a whole number, not {value!r}")
    return value
