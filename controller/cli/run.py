"""``firebet run``: the table controller as a service (systemd ``Type=notify``)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from types import FrameType
from typing import Any

from controller.cli import options as paths
from controller.service.controller import Controller
from drivers.pins import make_pin_factory
from drivers.serial_reader import SerialDiceReader

log = logging.getLogger("firebet")

UMASK = 0o027  # state directory 0750, journal 0640, whoever started the service (SPEC §6)


def install_signal_handlers(controller: Controller) -> None:
    """SIGTERM and SIGINT finish the command in hand, then leave cleanly."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # only a flag: the engine loop polls it (queue locks are not signal-safe)
        controller.stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def run(args: argparse.Namespace) -> int:
    os.umask(UMASK)  # before any file is made: outside systemd nobody else sets it
    logging.basicConfig(
        level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    logging.getLogger("transitions").setLevel(logging.WARNING)  # a line per callback otherwise
    config = paths.load(args)
    state = paths.state_dir(args.state_dir)
    port = args.serial or config.reader.port
    reader = SerialDiceReader(port, config.reader.baud, config.reader.heartbeat_timeout_s)
    controller = Controller(
        config,
        state,
        reader=reader,
        pin_factory=make_pin_factory(args.pin_factory),
        socket_path=paths.socket_path(config, args.socket, state),
    )
    install_signal_handlers(controller)
    try:
        controller.start()
        log.info(
            "ready in %.3f s: table %s, reader %s, socket %s, state %s",
            controller.ready_after_s or 0.0,
            config.table.id,
            port,
            controller.socket_path,
            state,
        )
        controller.serve()
    finally:
        controller.close()
    log.info("stopped")
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        help="run the table controller (the service)",
        description="Run the controller: dice reader, engine, journal, lamps, buttons, socket.",
    )
    paths.add_location_options(p)
    p.add_argument("--serial", metavar="URL", help="reader port or pyserial URL (reader.port)")
    p.add_argument(
        "--pin-factory",
        metavar="NAME",
        help="gpiozero pin factory: lgpio, rpigpio, pigpio, native or mock (default: gpiozero's)",
    )
    p.set_defaults(func=run)
