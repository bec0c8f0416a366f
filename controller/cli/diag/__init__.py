"""Technician tests: ``firebet diag leds|buttons|reader``.

``diag reader`` is the raw reader monitor: one line per frame read (``--json``:
``{"verdict": "ok", "kind": "ROLL", "seq": 17, "dice": [3, 4]}``) until
``--count N`` frames of any verdict, SIGTERM or Ctrl-C, then a summary line of
the counts per verdict; when nothing at all came it warns and exits 1. It only
listens (``--ack`` also ACKs every good ROLL).

``diag leds`` lights each point marker in turn, then the status lamp, then runs
the lamp test (everything steady, then the fault pattern); ``--relay`` also
clicks the surveillance relay (warn the surveillance room first).

``diag buttons`` shows every press, release and confirmed hold live, until
``--count N`` presses or Ctrl-C, then a summary; it posts nothing to the game.
With ``--pin-factory mock`` on a terminal the keys v, s and a press the buttons.

A missing or forbidden port or GPIO prints which port or pin and the fix, exit 1.
Run them with the service stopped: they open the port and the pins themselves.
``diag reader`` opens the port exclusively, as the service does: while the service
holds it, it refuses and says so (two readers would split the byte stream).
"""

from __future__ import annotations

from typing import Any

from controller.cli import options
from controller.cli.diag.pins import run_buttons, run_leds
from controller.cli.diag.reader import run_reader


def register(subparsers: Any) -> None:
    """Add ``diag`` and its three tests to the command line."""
    p = options.add_command(
        subparsers, "diag", "technician tests: lamp test, button test, raw reader monitor", __doc__
    )
    tests = p.add_subparsers(dest="test", metavar="TEST", required=True)
    for name, func, help_text in (
        ("leds", run_leds, "walk each point marker, then the lamp test"),
        ("buttons", run_buttons, "show each button press and hold live"),
        ("reader", run_reader, "print every frame the dice reader sends"),
    ):
        t = tests.add_parser(name, help=help_text, description=help_text)
        options.add_config_option(t)
        t.add_argument("--json", action="store_true", help="one JSON object a line")
        t.add_argument("--count", type=options.positive, metavar="N", help=_COUNT_HELP[name])
        if name == "reader":
            t.add_argument("--serial", metavar="URL", help="port or pyserial URL (reader.port)")
            t.add_argument("--ack", action="store_true", help="ACK every good ROLL")
            t.add_argument(
                "--protocol",
                type=int,
                choices=(1, 2, 3),
                help="reader protocol: 3 (a session), 2 (CRC-16) or 1 (XOR); "
                "default reader.protocol",
            )
        else:
            t.add_argument(
                "--pin-factory",
                metavar="NAME",
                help="mock, lgpio, rpigpio, pigpio or native (default: gpiozero's choice)",
            )
        if name == "leds":
            t.add_argument(
                "--step",
                type=options.seconds,
                default=1.0,
                metavar="S",
                help="seconds per lamp (1.0)",
            )
            t.add_argument("--relay", action="store_true", help="also click the relay")
        t.set_defaults(func=func)


_COUNT_HELP = {
    "leds": "walk the markers N times (1)",
    "buttons": "stop after N presses",
    "reader": "stop after N frames of any verdict",
}
