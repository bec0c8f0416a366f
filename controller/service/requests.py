"""A dealer's control-socket request as the core command it stands for.

The socket's ops and their arguments (``docs/architecture.md``, the control socket)
become :mod:`controller.core.commands` values here; a missing or ill-typed argument is a
usage error naming it (exit 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.clock import now_iso
from controller.control.ops import OPS, Op
from controller.core.commands import COMMANDS, Command, RollSource, SurrenderHow
from controller.core.errors import Refusal, RequestRefused, UsageError
from controller.core.lamps import Mode


def dealer_command(
    op: str, args: Mapping[str, Any], actor: str, mode: Mode, *, request: str = ""
) -> Command:
    """The command for a dealer's ``op`` (its row of :data:`~controller.control.ops.OPS`,
    its arguments checked); ``mode`` decides whether a manual roll is taken. ``request``:
    the request's tag (:attr:`~controller.control.protocol.Request.tag`), journaled with
    the command."""
    try:
        spec = OPS[Op(op)]
    except ValueError:
        spec = None
    if spec is None or spec.command is None:
        raise UsageError(f"unknown operation {op!r}")
    fields: dict[str, Any] = {}
    if spec.op is Op.ROLL:
        # halted or in diagnostics the refusal names that mode (the controller's reply)
        if mode is Mode.RUNNING:
            raise RequestRefused(
                "the dice reader is working: rolls come from the reader; manual entry is "
                "taken only while the reader is in fault",
                Refusal.READER_WORKING,
            )
        fields["source"] = RollSource.MANUAL
    for arg in spec.args:
        if args.get(arg.name) is None and not arg.required:
            continue
        fields[arg.name] = str(args[arg.name]) if arg.text else int_arg(args, arg.name)
    if spec.op is Op.SURRENDER:
        # the request names how under "kind"; the engine refuses any other text with a reason
        fields.setdefault("kind", SurrenderHow.VOLUNTARY)
    return COMMANDS[spec.command](**fields, actor=actor, at=now_iso(), request=request)


def int_arg(args: Mapping[str, Any], name: str, default: int | None = None) -> int:
    """A whole-number request argument; anything else is a usage error naming it."""
    value = args.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be a whole number, not {value!r}")
    return value
