"""Dealer commands and ``status``: clients of the running service's control socket.

``firebet status [--json]``, ``roll D1 D2``, ``void``, ``surrender``,
``bet POS AMOUNT``, ``cancel POS``, ``ack``, ``held`` (reader rolls held after
manual entry: ``held`` lists them, ``held apply N`` / ``held discard N`` decides
one), and the technician's ``diagnostics on|off``. Exit 0 when done, 1 when the
service refused (the reason on stderr), 2 for bad usage or input (a position not on
the layout), 3 when the service cannot be reached, 4 when the table is halted.

Every dealer action takes ``--json`` (one JSON object: what was done, or the refusal's
stable code and words) and ``--request-id ID`` (a script's own id: the same action sent
again with the same id, after a lost reply or a restart, is answered with what was
decided and never done twice).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from controller.cli import options as paths
from controller.cli.wording import hand_line, paid_line
from controller.control.client import ControlClient
from controller.control.ops import ROLES, Op, Role, op_of
from controller.control.protocol import MAX_ID
from controller.core.commands import SurrenderHow
from controller.core.errors import FirebetError, Refusal, RequestRefused, UsageError

# the dealer's actions: each takes --json and --request-id
_ACTIONS = (
    "roll", "void", "correct", "surrender", "bet", "cancel", "ack", "held", "diagnostics",
)  # fmt: skip


def client_for(args: argparse.Namespace) -> ControlClient:
    """A client of the socket named by ``--socket`` or the configuration."""
    where = paths.locate(args)
    path = paths.socket_path(where.config, args.socket, where.state_dir)
    if getattr(args, "verbose", False):
        print(f"firebet: control socket: {path.absolute()}", file=sys.stderr)
    return ControlClient(path)


def call(args: argparse.Namespace, op: str, **fields: Any) -> dict[str, Any]:
    """One request to the service; raises ServiceUnreachable (exit 3) when it is not there."""
    client = client_for(args)
    try:
        return client.request(op, request_id=getattr(args, "request_id", None), **fields)
    finally:
        client.close()


def refusal(reply: dict[str, Any]) -> RequestRefused:
    """The refusal a service's reply (``ok`` false) says, with its stable code: the code's
    exit (2 bad input, 4 halted, else 1), or the service's own exit 2 or 4."""
    refused = RequestRefused(str(reply.get("error", "refused")), Refusal.of(reply.get("code")))
    given = reply.get("exit")
    if "code" not in reply and given in (2, 4):
        refused.exit_code = given
    return refused


def refused_exit(reply: dict[str, Any]) -> int:
    """The exit code of a refused request (:func:`refusal`)."""
    return refusal(reply).exit_code


def refusal_json(exc: FirebetError) -> dict[str, Any]:
    """What ``--json`` prints for a request that was not done: its stable code and words."""
    reason = exc.reason if isinstance(exc, RequestRefused) else str(exc)
    return {"ok": False, "code": str(exc.code), "error": reason, "exit": exc.exit_code}


def _finish(reply: dict[str, Any], done: str, args: argparse.Namespace | None = None) -> int:
    if not reply.get("ok"):
        raise refusal(reply)  # the words on stderr; with --json the code too (cli.main)
    if args is not None and getattr(args, "json", False):
        print(
            json.dumps(
                {
                    "ok": True,
                    "said": done,
                    "request_id": getattr(args, "request_id", None),
                    "repeated": reply.get("repeated"),
                    "events": reply.get("events", []),
                    "status": reply.get("status"),
                }
            )
        )
        return 0
    print(done)
    if reply.get("repeated"):  # a retry after a restart: the first reply was lost
        print(f"(the same request was {reply['repeated']})")
    for event in reply.get("events", []):
        reversed_settlement = (
            event.get("reversed_settlement") if event.get("event") == "void" else None
        )
        if reversed_settlement:
            hand = reversed_settlement["hand"]
            print(f"settlement of hand {hand} reversed: hand {hand} is back in play")
        if event.get("event") == "settlement":
            hand = hand_line(
                event["hand"], event["unique_points"], event["points"], event["result"],
                event["odds_to_one"],
            )  # fmt: skip
            print(f"settled {hand} - {paid_line(event)}")
    return 0


def status(args: argparse.Namespace) -> int:
    if args.watch is not None:
        from controller.cli.watch import watch  # rich's live view: only for --watch

        return watch(args)
    reply = call(args, Op.STATUS)
    if not reply.get("ok", True):
        raise refusal(reply)  # the words on stderr; with --json the refusal object (cli.main)
    reply.pop("ok", None)
    if args.json:
        print(json.dumps(reply))
    else:
        from rich.console import Console  # the table drawn: a script's --json never loads rich

        from controller.cli.display import render_status

        Console().print(render_status(reply))
    return 0


def whoami(args: argparse.Namespace) -> int:
    """The caller's user, groups and role on the control socket, and what the role may do."""
    reply = call(args, Op.WHOAMI)
    if not reply.get("ok"):
        raise refusal(reply)
    reply.pop("ok", None)
    role = Role(reply["role"])
    if "may" not in reply:  # a service from before the socket said which ops it serves
        reply["may"] = sorted(op for op, needed in ROLES.items() if role.permits(needed))
    if args.json:
        print(json.dumps(reply))
        return 0
    print(f"{reply['user']} (uid {reply['uid']}): {role.value}")
    print(f"  groups: {', '.join(reply['groups']) or 'none'}")
    print(f"  may: {', '.join(reply['may'])}")
    return 0


def roll(args: argparse.Namespace) -> int:
    return _finish(
        call(args, Op.ROLL, d1=args.d1, d2=args.d2), f"roll {args.d1} {args.d2} entered", args
    )


def void(args: argparse.Namespace) -> int:
    return _finish(call(args, Op.VOID), "last roll voided", args)


def correct(args: argparse.Namespace) -> int:
    """``firebet correct D1 D2 [--roll N]``: the last roll (or the one a void armed for
    correction) voided and the true dice taken in its place, as one action."""
    asked: dict[str, int] = {"d1": args.d1, "d2": args.d2}
    if args.roll is not None:
        asked["roll"] = args.roll
    reply = call(args, Op.CORRECT, **asked)
    was = next((e for e in reply.get("events", []) if e.get("event") == "correction"), None)
    before = f" (read as {was['was'][0]} {was['was'][1]})" if was else ""
    return _finish(reply, f"roll corrected to {args.d1} {args.d2}{before}", args)


def surrender(args: argparse.Namespace) -> int:
    how = SurrenderHow.COMPULSORY if args.compulsory else SurrenderHow.VOLUNTARY
    return _finish(call(args, Op.SURRENDER, kind=how), f"{how} surrender: new shooter", args)


def bet(args: argparse.Namespace) -> int:
    reply = call(args, Op.BET, position=args.position, amount=args.amount)
    riding = reply.get("status", {}).get("bets", {}).get(str(args.position), args.amount)
    added = "taken" if riding == args.amount else f"added: ${riding} riding"
    return _finish(reply, f"position {args.position}: ${args.amount} fire bet {added}", args)


def cancel(args: argparse.Namespace) -> int:
    return _finish(
        call(args, Op.CANCEL, position=args.position), f"position {args.position} cancelled", args
    )


def ack(args: argparse.Namespace) -> int:
    return _finish(call(args, Op.ACK), "surveillance alert acknowledged", args)


def held(args: argparse.Namespace) -> int:
    """``firebet held [apply N | discard N]``: list the held reader rolls, or decide one."""
    if args.action is None:
        reply = call(args, Op.STATUS)
        if "held_rolls" not in reply:
            print(f"firebet: {reply.get('error', 'no status from the service')}", file=sys.stderr)
            return 1
        rolls = reply["held_rolls"]
        if args.json:
            print(json.dumps({"ok": True, "held_rolls": rolls}))
            return 0
        if not rolls:
            print("no reader roll is held")
            return 0
        print("reader rolls held for the dealer (firebet held apply N / discard N):")
        for h in rolls:
            d1, d2 = h["dice"]
            print(f"  {h['number']}: {d1} {d2}  (reader seq {h['seq']}, {h['at']})")
            if h.get("reason"):
                print(f"     held because {h['reason']}")
        return 0
    if args.number is None:
        raise UsageError(f"held {args.action}: which held roll? give its number N")
    op = op_of("held", args.action)
    done = (
        f"held roll {args.number} applied"
        if args.action == "apply"
        else f"held roll {args.number} discarded: it does not count"
    )
    return _finish(call(args, op, number=args.number), done, args)


def diagnostics(args: argparse.Namespace) -> int:
    op = op_of("diagnostics", args.switch)
    done = (
        "diagnostics mode on: game input paused, lamps free for tests"
        if args.switch == "on"
        else "diagnostics mode off: every output back to the game's state"
    )
    return _finish(call(args, op), done, args)


def _die(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 6:
        raise argparse.ArgumentTypeError(f"a die shows 1 to 6, not {text!r}")
    return int(text)


def _position(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a position is a number from 1, not {text!r}")
    return int(text)


def _amount(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a wager is whole dollars, at least 1, not {text!r}")
    return int(text)


def _held_number(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a held roll's number is from 1, not {text!r}")
    return int(text)


def _roll_number(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) < 10**15:
        raise argparse.ArgumentTypeError(f"a roll's number is a whole number from 1, not {text!r}")
    return int(text)


def add_action_options(p: argparse.ArgumentParser) -> None:
    """``--json`` and ``--request-id ID``: what every dealer action takes."""
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON object: what was done, or the refusal's code and words",
    )
    p.add_argument(
        "--request-id",
        type=request_id,
        metavar="ID",
        help="your own id for this request: sent again with the same id, it is never "
        "done twice (the answer is what was decided)",
    )
    p.set_defaults(_json_refusal=True)


def request_id(text: str) -> str:
    """argparse type: a request id, 1 to 128 printable ASCII characters."""
    if not 1 <= len(text) <= MAX_ID or not (text.isascii() and text.isprintable()):
        raise argparse.ArgumentTypeError(
            f"a request id is 1 to {MAX_ID} printable ASCII characters, not {text!r}"
        )
    return text


def register(subparsers: Any) -> None:
    def add(name: str, func: Any, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = subparsers.add_parser(
            name, help=help_text, description=help_text
        )
        paths.add_location_options(p)
        p.set_defaults(func=func)
        if name in _ACTIONS:
            add_action_options(p)
        return p

    p = add("status", status, "current state of the table, from the running service")
    p.add_argument("--json", action="store_true", help="one JSON object (or a refusal's)")
    p.set_defaults(_json_refusal=True)  # no service under --json: the no_service object
    p.add_argument(
        "--watch",
        nargs="?",
        const=0.5,
        type=paths.seconds,
        metavar="S",
        help="draw the table live, asking every S seconds (0.5); read-only, Ctrl-C to stop",
    )
    p = add("whoami", whoami, "your role on the control socket and what it lets you do")
    p.add_argument("--json", action="store_true", help="one JSON object (or a refusal's)")
    p.set_defaults(_json_refusal=True)
    p = add("roll", roll, "manual roll entry while the dice reader is in fault")
    p.add_argument("d1", type=_die, metavar="D1", help="the first die, 1 to 6")
    p.add_argument("d2", type=_die, metavar="D2", help="the second die, 1 to 6")
    add("void", void, "void the last accepted roll (a misread)")
    p = add(
        "correct",
        correct,
        "a misread roll: void the last roll and take the true dice D1 D2, as one action",
    )
    p.add_argument("d1", type=_die, metavar="D1", help="the first die as it lies, 1 to 6")
    p.add_argument("d2", type=_die, metavar="D2", help="the second die as it lies, 1 to 6")
    p.add_argument(
        "--roll",
        type=_roll_number,
        metavar="N",
        help="the number of the roll corrected (status: rolls); refused if another followed",
    )
    p = add("surrender", surrender, "the shooter gives up the dice: new shooter")
    p.add_argument("--compulsory", action="store_true", help="ordered by the boxperson")
    p = add("bet", bet, "take a fire bet of AMOUNT dollars on position POS")
    p.add_argument("position", type=_position, metavar="POS", help="the player's position")
    p.add_argument(
        "amount", type=_amount, metavar="AMOUNT", help="whole dollars; adds to a wager riding"
    )
    p = add("cancel", cancel, "take back the fire bet on position POS while betting is open")
    p.add_argument("position", type=_position, metavar="POS", help="the player's position")
    add("ack", ack, "acknowledge the surveillance alert")
    p = add(
        "held",
        held,
        "reader rolls held after manual entry: list them, or apply / discard one by number",
    )
    p.add_argument("action", nargs="?", choices=("apply", "discard"), help="what to do")
    p.add_argument(
        "number", nargs="?", type=_held_number, metavar="N", help="the held roll's number"
    )
    p = add("diagnostics", diagnostics, "technician: pause the game for tests (on) or resume (off)")
    p.add_argument("switch", choices=("on", "off"), help="on: pause the game; off: resume")
