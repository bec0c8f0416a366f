"""``firebet sim-reader ACTION``: drive the simulated reader of a bench service.

The service must run with ``firebet run --simulated-reader`` or be ``firebet sim`` (see
``docs/bench.md``): only they have the op; the actions go through the control socket
(technician) to the fake reader device, whose frames then reach the real driver, engine
and journal as a real reader's would. Exit 0 when done, 1 when the service refused
(it reads a real reader, say) or a throw was not ACKed (a halted table), 2 for bad
usage, 3 when no service answers.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from controller.cli import options as paths
from controller.cli.dealer import call, refusal, refusal_json
from controller.control.ops import Op
from controller.core.errors import Refusal, RequestRefused, UsageError

_DICE_HELP = "the dice the reader reads (default: random)"


def run(args: argparse.Namespace) -> int:
    """Send one action to the service's simulated reader and print what it did."""
    if args.action == "throw" and (args.d1 is None) != (args.d2 is None):
        raise UsageError("throw takes two dice (D1 D2) or none (random dice)")
    fields: dict[str, Any] = {"action": args.action}
    for name in ("d1", "d2", "code", "reason", "size"):
        value = getattr(args, name, None)
        if value is not None:
            fields[name] = value
    for name in ("wait", "seconds"):  # the socket takes whole numbers: 0.5 s goes as 500 ms
        time_s: float | None = getattr(args, name, None)
        if time_s is not None and time_s.is_integer():
            fields[name] = int(time_s)
        elif time_s is not None:
            fields[f"{name}_ms"] = round(time_s * 1000)
    reply = call(args, Op.SIM_READER, **fields)
    if not reply.get("ok") and reply.get("code") == Refusal.UNKNOWN_OP:  # a real table's socket
        raise RequestRefused(
            "this service reads a real dice reader: its socket has no sim-reader; a simulated "
            "reader is driven only on firebet run --simulated-reader or firebet sim",
            Refusal.NOT_A_BENCH,
        )
    if not reply.get("ok"):
        raise refusal(reply)
    if args.action == "throw" and reply.get("acked") is False and not reply.get("pending"):
        # the table did not take the throw (halted, in diagnostics, ...): not done, exit 1;
        # a throw an unplugged or silenced reader keeps for later is done (it goes out then)
        refused = RequestRefused(str(reply.get("said", "not ACKed")), Refusal.NOT_ACKED)
        if args.json:
            print(json.dumps({**refusal_json(refused), "said": reply.get("said")}))
            return refused.exit_code
        raise refused
    if args.json:  # {"ok": true, "said", ...}: controller/schemas/cli-sim-reader.schema.json
        print(json.dumps(reply))
    else:
        print(reply.get("said", "done"))
    return 0


def _die(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 6:
        raise argparse.ArgumentTypeError(f"a die shows 1 to 6, not {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"seconds must not be negative, not {text!r}")
    return value


def _size(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 4096:
        raise argparse.ArgumentTypeError(f"a number of bytes from 1 to 4096, not {text!r}")
    return int(text)


def _code(text: str) -> str:
    if not (text.isascii() and text.isalnum()):
        raise argparse.ArgumentTypeError(f"letters and digits only, not {text!r}")
    return text.upper()


def register(subparsers: Any) -> None:
    """Add ``sim-reader`` and its actions."""
    p = paths.add_command(
        subparsers,
        "sim-reader",
        "bench: throw, fault, unplug or send garbage on a --simulated-reader service",
        __doc__,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, help_text: str) -> argparse.ArgumentParser:
        a: argparse.ArgumentParser = actions.add_parser(name, help=help_text, description=help_text)
        paths.add_location_options(a)
        a.add_argument("--json", action="store_true", help="the service's reply as JSON")
        a.set_defaults(func=run, _json_refusal=True)
        return a

    a = action("throw", "the reader reads a throw; waits for the controller's ACK")
    a.add_argument("d1", type=_die, nargs="?", metavar="D1", help=_DICE_HELP)
    a.add_argument("d2", type=_die, nargs="?", metavar="D2", help=_DICE_HELP)
    a.add_argument(
        "--wait", type=_seconds, metavar="S", help="seconds to wait for the ACK (default 5)"
    )
    a = action("fault", "the reader raises a fault (FAULT frame): manual rolls are taken")
    a.add_argument("code", type=_code, nargs="?", metavar="CODE", help="fault code (CAMERA)")
    action("ok", "the reader clears its fault (OK frame)")
    a = action("noroll", "the reader saw an invalid throw (NOROLL frame)")
    a.add_argument(
        "reason", type=_code, nargs="?", metavar="REASON", help="COCKED, OFFTABLE, ONEDIE..."
    )
    a = action("garbage", "line noise and a ROLL with a bad checksum (never applied)")
    a.add_argument("size", type=_size, nargs="?", metavar="N", help="bytes of noise (48)")
    a = action("silence", "no frames at all: a HEARTBEAT fault after the timeout")
    a.add_argument(
        "seconds", type=_seconds, nargs="?", metavar="S", help="how long (default: until speak)"
    )
    action("speak", "end a silence")
    action("unplug", "pull the reader's cable: the port vanishes (PORT_LOST)")
    action("replug", "plug the reader's cable back in")
    action("hello", "the reader restarts (HELLO, sequence numbers from 0)")
