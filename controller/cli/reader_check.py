"""firebet reader-check: the conformance kit for reader vendors. Drives a reader over its
serial line through reader protocol 3's cases (HELLO repeated until its WELCOME and anew on
NAK SESSION, no roll before it, heartbeats, a roll repeated until ACKed and not after,
every NAK reason, the numbering, a roll carried over a new session and sent again or
dropped, FAULT/OK and NOROLL, an idle line and the roll after it; --wrap: the numbering
across its wrap point) and prints a pass/fail report a vendor can send
(docs/reader-protocol.md, "Conformance kit"). The service must be stopped: the kit opens
the port itself. Throw the dice, fault the reader and make an invalid throw when it asks.
Exit 0: every case checked passed; 1: a case failed; 2: bad usage or a port that will not
open."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from controller.cli import options
from controller.core.errors import HardwareError, UsageError
from drivers.conformance import ReaderCheck
from drivers.serial_reader import open_port


def run(args: argparse.Namespace) -> int:
    try:
        port = open_port(args.port, args.baud, 0.05)
    except HardwareError as exc:
        raise UsageError(str(exc)) from exc

    def say(text: str) -> None:
        print(f"reader-check: {text}", file=sys.stderr, flush=True)

    try:
        check = ReaderCheck(
            port,
            args.port,
            wait_s=args.wait,
            idle_s=args.idle,
            say=say,
            exitfirst=args.exitfirst,
            wrap=args.wrap,
        )
        report = check.run()
    finally:
        with contextlib.suppress(Exception):
            port.close()
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        print(report.text())
    return 0 if report.ok else 1


def register(subparsers: Any) -> None:
    p = options.add_command(
        subparsers, "reader-check", "conformance kit: check a reader keeps protocol 3", __doc__
    )
    p.add_argument("--port", required=True, metavar="URL", help="device path or pyserial URL")
    p.add_argument("--baud", type=options.positive, default=9600, help="serial speed (9600)")
    p.add_argument(
        "--wait", type=options.positive, default=60, metavar="S",
        help="seconds to wait for each throw (60)",
    )  # fmt: skip
    p.add_argument(
        "--idle", type=options.positive, default=3, metavar="S",
        help="seconds of idle line to watch (3)",
    )  # fmt: skip
    p.add_argument(
        "-x", "--exitfirst", action="store_true",
        help="stop at the first failed case (the rest: not checked)",
    )  # fmt: skip
    p.add_argument(
        "--wrap", action="store_true",
        help="the wrap run instead: every roll ACKed up to 65,535, then the new session "
        "(a reader that throws by itself)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)
