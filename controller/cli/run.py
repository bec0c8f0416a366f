"""``firebet run``: the table controller as a service (systemd ``Type=notify``)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from controller.cli import logs
from controller.cli import options as paths
from controller.control.ops import ROLES
from controller.control.protocol import Handler
from controller.control.server import ControlServer
from controller.core.config import Config
from controller.core.errors import ConfigError, UsageError
from controller.core.lamps import Mode
from controller.core.table import TableState
from controller.service import recall
from controller.service.integrity import ProgramCheck
from controller.service.service import Parts, Service
from controller.service.status import Published
from drivers.buttons import DealerButtons
from drivers.lights import MarkerLights, Timing
from drivers.pins import make_pin_factory
from drivers.reader import DiceReader
from drivers.serial_reader import SerialDiceReader

if TYPE_CHECKING:  # only with --simulated-reader
    from drivers.sim_reader import SimulatedReader

log = logging.getLogger("firebet")

# state directory 0750, journal 0640, whoever started the service (docs/architecture.md)
UMASK = 0o027
# how long the engine thread may wait for the interpreter while a reading client keeps
# another thread busy (Python's default is 5 ms, more than the whole roll budget)
SWITCH_INTERVAL_S = 0.0005

# the simulated reader's port: a symlink in the state directory kept pointing at its
# pseudo-terminal, stable across unplug/replug as /dev/serial/by-id/... is
SIM_READER_LINK = "sim-reader.tty"


def simulated_reader(config: Config, state: Path, **settings: Any) -> SimulatedReader:
    """The bench's reader device (``run --simulated-reader``, ``sim``): on a pseudo-terminal
    whose port is the state directory's :data:`SIM_READER_LINK`, never the terminal's own
    number; ``settings``: :class:`SimulatedReader`'s (seed, interval_s, ...). Not started
    (the state directory must exist by then)."""
    from drivers.sim_reader import SimulatedReader  # a bench's only: not at a table's start

    return SimulatedReader(
        link=state / SIM_READER_LINK, protocol=config.reader.protocol, **settings
    )


def serial_reader(
    config: Config, port: str, device: SimulatedReader | None = None
) -> SerialDiceReader:
    """The table's reader driver on ``port``; on a bench's ``device``, it opens the port only
    while it leads to that device's own terminal (:meth:`SimulatedReader.open_port`)."""
    return SerialDiceReader(
        port,
        config.reader.baud,
        config.reader.heartbeat_timeout_s,
        protocol=config.reader.protocol,
        open_fn=device.open_port if device is not None else None,
    )


def url_schemes() -> list[str]:
    """The URL schemes pyserial can open (``socket``, ``rfc2217``, ``loop``, ...)."""
    import pkgutil

    import serial.urlhandler

    return sorted(
        m.name.removeprefix("protocol_")
        for m in pkgutil.iter_modules(serial.urlhandler.__path__)
        if m.name.startswith("protocol_")
    )


def check_port(port: str, given_as: str) -> None:
    """Refuse a URL no driver can open (exit 2); warn of a device path that is not there yet.

    A missing or forbidden device is not a bad configuration (the reader may be
    plugged in later): the service starts in reader fault, and the log says why.
    """
    if "://" in port:
        scheme = port.split("://", 1)[0]
        if scheme not in url_schemes():
            raise UsageError(
                f"{given_as} {port}: unknown URL scheme {scheme!r}; a device path "
                f"(/dev/ttyUSB0) or one of: {', '.join(s + '://' for s in url_schemes())}"
            )
        return
    device = Path(port)
    if not device.exists():
        log.warning(
            "dice reader port %s: no such file; the table is in reader fault (PORT_LOST) "
            "until it appears: check the reader's cable and power, and %s",
            port,
            given_as,
            extra={"fields": {"reader_problem": "no_such_file"}},
        )
    elif not os.access(device, os.R_OK | os.W_OK):
        log.warning(
            "dice reader port %s: permission denied for this user; the table is in reader "
            "fault (PORT_LOST): add the service's user to the dialout group "
            "(sudo usermod -aG dialout firebet)",
            port,
            extra={"fields": {"reader_problem": "permission_denied"}},
        )


def assemble(
    config: Config,
    state: Path,
    *,
    reader: DiceReader | None,
    pin_factory: Any,
    socket_path: Path | None,
    program: ProgramCheck | None = None,
    on_change: Callable[[Published], None] | None = None,
    lights_timing: Timing | None = None,
    bench_device: SimulatedReader | None = None,
) -> Service:
    """The composition root: the service of one table and every part it runs (the
    lamps and buttons on ``pin_factory``, the control socket at ``socket_path``, the floor
    link when ``[floor]`` names a broker, the ``reader``), wired to the service's queue.
    ``bench_device``: a bench's simulated reader; only then does the socket take the
    ``sim-reader`` op (:mod:`controller.cli.sim_device`), a real table's never."""
    service = Service(config, state, program=program, on_change=on_change)
    parts = Parts(reader=reader)
    try:
        parts.lights = MarkerLights(config.lights, pin_factory, lights_timing)
        parts.buttons = DealerButtons(config.buttons, pin_factory, service.post)
        if socket_path is not None:
            handler: Handler = service.on_request
            roles = ROLES
            if bench_device is not None:
                from controller.cli.sim_device import with_bench_device  # a bench's only

                handler, roles = with_bench_device(
                    service.on_request, bench_device, lambda: service.published
                )
            parts.control = ControlServer(
                socket_path,
                handler,
                config.control.dealer_group,
                config.control.technician_group,
                roles=roles,
            )
        if config.floor.enabled:
            from controller.link.link import FloorLink  # paho: only for a table on a floor

            parts.link = FloorLink(
                config.floor,
                config.table.id,
                service.journal.path,
                state,
                status=service.status,
                post=service.post,
                program=service.program_digest,  # known once start() checked it
                rules=config.firebet,  # in force before the journal's first rules record
            )
    except BaseException:
        for part in (parts.buttons, parts.lights):
            if part is not None:
                part.close()
        raise
    service.attach(parts)
    return service


def resumed_at(record: int, state: TableState) -> str:
    """Where the start took up the game, for the ready line: the newest record recovered
    and the hand in play there (its point, when one is on)."""
    if record == 0:
        return f"a new journal, hand {state.hand}"
    point = f", point {state.point}" if state.point else ""
    return f"resumed at record {record:,}, hand {state.hand}{point}"


def install_signal_handlers(service: Service) -> None:
    """SIGTERM and SIGINT finish the command in hand, then leave cleanly."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # only a flag: the engine loop polls it (queue locks are not signal-safe)
        service.stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def run(args: argparse.Namespace) -> int:
    os.umask(UMASK)  # before any file is made: outside systemd nobody else sets it
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    if args.simulated_reader and args.serial:
        raise UsageError("--serial and --simulated-reader exclude each other: give one")
    if args.sim_interval is not None and not args.simulated_reader:
        raise UsageError("--sim-interval needs --simulated-reader")
    if args.sim_interval is not None and not args.sim_interval > 0:
        raise UsageError(f"--sim-interval must be more than 0 seconds, not {args.sim_interval}")
    where = paths.locate(args)
    config, state = where.config, where.state_dir
    logs.configure(table=config.table.id)  # time-stamped lines, or journald's fields
    socket_path = paths.socket_path(config, args.socket, state)
    folder = socket_path.parent
    if not folder.is_dir() and folder.resolve() != state.resolve():
        if args.socket:
            raise UsageError(f"--socket {args.socket}: the folder {folder} does not exist")
        raise ConfigError(config.source, "control.socket", f"the folder {folder} does not exist")
    # the full check's and the history reader's processes, copied now, while this is the
    # only thread: after READY they start with nothing to load (issue 31)
    recall.prefork()
    device: SimulatedReader | None = None
    if args.simulated_reader:
        # a fake reader device on a pseudo-terminal: the real driver reads it unchanged
        state.mkdir(parents=True, exist_ok=True)
        device = simulated_reader(
            config, state, seed=args.sim_seed, interval_s=args.sim_interval
        ).start()
        port = device.port
    else:
        port = args.serial or config.reader.port
        check_port(port, "--serial" if args.serial else f"reader.port in {config.source}")
    try:
        service = assemble(
            config,
            state,
            reader=serial_reader(config, port, device),
            pin_factory=make_pin_factory(args.pin_factory),
            socket_path=socket_path,
            bench_device=device,
        )
        install_signal_handlers(service)
        try:
            service.start()
            published = service.published
            why = published.halted if published is not None else None
            halted = service.mode == Mode.HALTED
            log.log(
                logging.ERROR if halted else logging.INFO,
                "%s in %.3f s: table %s, %s, reader %s, socket %s, state %s, journal key %s%s",
                "HALTED" if halted else "ready",
                service.ready_after_s or 0.0,
                config.table.id,
                resumed_at(service.first_record, service.state),
                f"simulated on {port} (firebet sim-reader ACTION)" if device else port,
                socket_path,
                state,
                where.key_file,
                f"; nothing is played until a technician lifts the halt ({why}): "
                "firebet journal verify, then firebet clear-halt (docs/runbook.md, Halted)"
                if halted
                else "",
                extra={
                    "fields": {
                        "event": "halted" if halted else "ready",
                        "state_dir": state,
                        "hand": service.state.hand,
                        "record": service.first_record,
                    }
                },
            )
            service.serve()
        finally:
            service.close()
    finally:
        recall.drop_spares()
        if device is not None:
            device.stop()
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
    bench = p.add_argument_group(
        "bench testing without a reader (docs/bench.md)",
    )
    bench.add_argument(
        "--simulated-reader",
        action="store_true",
        help="read a simulated dice reader on a pseudo-terminal instead of --serial; "
        "drive it with firebet sim-reader ACTION",
    )
    bench.add_argument(
        "--sim-interval",
        type=paths.seconds,
        metavar="S",
        help="the simulated reader also throws random dice every S seconds (default: only "
        "when told)",
    )
    bench.add_argument(
        "--sim-seed",
        type=paths.whole,
        metavar="N",
        help="seed for the simulated reader's random dice",
    )
    p.set_defaults(func=run)
