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

import argparse
import contextlib
import json
import os
import select
import signal
import sys
import termios
import threading
import time
import tty
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from controller.cli import options
from controller.core.config import Config
from controller.core.errors import HardwareError
from controller.core.lamps import Effect, Outputs
from drivers.codec import DEFAULT_PROTOCOL, VERDICTS, Frame, FrameDecoder, encode_ack


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
                choices=(1, 2),
                help="reader protocol: 2 (CRC-16) or 1 (XOR); default reader.protocol",
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


@contextlib.contextmanager
def _stop_on_sigterm(stop: threading.Event) -> Iterator[None]:
    """SIGTERM sets ``stop`` (main thread only), so the summary is still printed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _emit(out: TextIO, text: str) -> None:
    out.write(text + "\n")
    out.flush()


# -- reader --------------------------------------------------------------------------


def frame_line(frame: Frame) -> str:
    """A readable line for one frame."""
    if frame.ok:
        detail = f"seq {frame.seq}"
        if frame.dice is not None:
            detail += f"  dice {frame.dice[0]} {frame.dice[1]}"
        rest = ",".join(frame.fields[2:]) if frame.name not in ("ROLL",) else ""
        if rest:
            detail += f"  {rest}"
        return f"{frame.verdict:<12} {frame.name or '?':<6} {detail}"
    return f"{frame.verdict:<12} {frame.name or '?':<6} {frame.raw!r}"


def monitor_reader(
    port: Any,
    out: TextIO,
    *,
    as_json: bool = False,
    count: int | None = None,
    ack: bool = False,
    stop: threading.Event | None = None,
    protocol: int = DEFAULT_PROTOCOL,
) -> tuple[dict[str, int], str | None]:
    """Print frames from an open ``port`` until ``count`` frames, ``stop`` or Ctrl-C.

    Returns the counts per verdict and the error that ended it (a lost port), if any.
    """
    stop = stop if stop is not None else threading.Event()
    decoder = FrameDecoder(protocol=protocol)
    seen = 0
    error: str | None = None
    try:
        while not stop.is_set() and (count is None or seen < count):
            try:
                data: bytes = port.read(1)
                if data and port.in_waiting:
                    data += port.read(port.in_waiting)
            except OSError as exc:
                error = f"serial port lost: {exc}; check the reader's cable and power"
                break
            for frame in decoder.feed(data):
                seen += 1
                _emit(out, json.dumps(frame.to_json()) if as_json else frame_line(frame))
                if ack and frame.ok and frame.name == "ROLL" and frame.seq is not None:
                    with contextlib.suppress(OSError):
                        port.write(encode_ack(frame.seq, protocol))
                if count is not None and seen >= count:
                    break
    except KeyboardInterrupt:
        pass
    return dict(decoder.counters), error


def summary_line(counters: dict[str, int], as_json: bool) -> str:
    """The last line of ``diag reader``."""
    summary = {v: counters.get(v, 0) for v in VERDICTS}
    if as_json:
        return json.dumps({"summary": summary})
    return "summary: " + ", ".join(f"{v} {n}" for v, n in summary.items())


def run_reader(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``firebet diag reader``."""
    from drivers.serial_reader import open_port

    out = out if out is not None else sys.stdout
    cfg = options.load(args)
    url = args.serial or cfg.reader.port
    protocol = args.protocol if args.protocol is not None else cfg.reader.protocol
    port = open_port(url, cfg.reader.baud, timeout=0.1)  # exclusive: refused beside the service
    started = time.monotonic()
    stop = threading.Event()
    try:
        with _stop_on_sigterm(stop):
            counters, error = monitor_reader(
                port,
                out,
                as_json=args.json,
                count=args.count,
                ack=args.ack,
                stop=stop,
                protocol=protocol,
            )
    finally:
        with contextlib.suppress(Exception):
            port.close()
    _emit(out, summary_line(counters, args.json))
    if error is not None:
        print(f"firebet: {url}: {error}", file=sys.stderr)
        return 1
    if not any(counters.values()):
        print(
            f"firebet: warning: nothing at all came from {url} ({time.monotonic() - started:.1f} s"
            f" at {cfg.reader.baud} baud): check the reader's power and cable, reader.port "
            "and reader.baud",
            file=sys.stderr,
        )
        return 1
    return 0


# -- GPIO ------------------------------------------------------------------------------


def _pin_factory(cfg: Config, name: str | None, what: str) -> Any:
    from drivers.pins import make_pin_factory

    try:
        return make_pin_factory(name)
    except HardwareError as exc:
        pins = ", ".join(f"{key} BCM {pin}" for key, pin in cfg.pins().items() if what in key)
        raise HardwareError(f"diag needs {pins}: {exc}") from exc


def run_leds(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``firebet diag leds``: walk every marker, then the lamp test."""
    from drivers.lights import MarkerLights

    out = out if out is not None else sys.stdout
    cfg = options.load(args)
    factory = _pin_factory(cfg, args.pin_factory, "lights")
    lights = MarkerLights(cfg.lights, factory)
    stop = threading.Event()
    step = max(args.step, 0.0)
    off = dict.fromkeys(lights.markers, Effect.OFF)

    def show(lamp: str, pin: int | None, state: str, outputs: Outputs) -> None:
        lights.apply(outputs)
        where = f"BCM {pin:<2}" if pin is not None else "all   "
        text = f"{lamp:<20} {where}  {state}"
        _emit(out, json.dumps({"lamp": lamp, "pin": pin, "state": state}) if args.json else text)
        stop.wait(step)

    try:
        with _stop_on_sigterm(stop):
            for _ in range(args.count or 1):
                for point, pin in sorted(cfg.lights.markers.items()):
                    if stop.is_set():
                        break
                    show(
                        f"marker {point}",
                        pin,
                        Effect.ON,
                        Outputs({**off, point: Effect.ON}, Effect.OFF, Effect.OFF),
                    )
                if not stop.is_set():
                    show(
                        "status lamp",
                        cfg.lights.status,
                        Effect.ON,
                        Outputs(off, Effect.ON, Effect.OFF),
                    )
            if not stop.is_set():
                every = dict.fromkeys(lights.markers, Effect.ON)
                show("lamp test", None, "all on", Outputs(every, Effect.ON, Effect.OFF))
                every = dict.fromkeys(lights.markers, Effect.FAULT)
                show("lamp test", None, "fault pattern", Outputs(every, Effect.FAULT, Effect.OFF))
            if args.relay and not stop.is_set():
                show(
                    "surveillance relay",
                    cfg.lights.surveillance,
                    Effect.ON,
                    Outputs(off, Effect.OFF, Effect.ON),
                )
            show("all lamps", None, "off", Outputs(off, Effect.OFF, Effect.OFF))
    except KeyboardInterrupt:
        pass
    finally:
        lights.close()
    return 0


BUTTON_KEYS = {"v": "void", "s": "surrender", "a": "ack"}


def watch_buttons(
    cfg: Config,
    factory: Any,
    out: TextIO,
    *,
    as_json: bool = False,
    count: int | None = None,
    stop: threading.Event | None = None,
    tick: Callable[[], None] | None = None,
) -> dict[str, dict[str, int]]:
    """Show each press, release and confirmed hold until ``count`` presses or ``stop``.

    ``tick`` is called every tenth of a second (the mock buttons' keyboard). Returns
    the presses and confirmed holds per button. Nothing is posted to the game.
    """
    from drivers.buttons import DealerButtons

    stop = stop if stop is not None else threading.Event()
    presses = 0
    started = time.monotonic()
    lock = threading.Lock()
    pins = {
        "void": cfg.buttons.void,
        "surrender": cfg.buttons.surrender,
        "ack": cfg.buttons.ack,
        "apply_held": cfg.buttons.apply_held,
        "discard_held": cfg.buttons.discard_held,
    }
    seen_per = {name: {"presses": 0, "held": 0} for name in pins}

    def seen(name: str, what: str) -> None:
        nonlocal presses
        with lock:
            at = time.monotonic() - started
            if as_json:
                event = {"button": name, "pin": pins[name], "event": what, "t": round(at, 3)}
                _emit(out, json.dumps(event))
            else:
                note = "  (confirmed: would post)" if what == "held" else ""
                _emit(out, f"{at:8.3f}s  {name:<9} BCM {pins[name]:<2}  {what}{note}")
            if what == "held":
                seen_per[name]["held"] += 1
            if what == "released":
                presses += 1
                seen_per[name]["presses"] += 1
                if count is not None and presses >= count:
                    stop.set()

    buttons = DealerButtons(cfg.buttons, factory, post=lambda command: None, watch=seen)
    if not as_json:
        _emit(
            out,
            f"press the buttons (hold {cfg.buttons.hold_s:g} s to confirm); Ctrl-C to stop",
        )
    try:
        while not stop.wait(0.1):
            if tick is not None:
                tick()
    except KeyboardInterrupt:
        pass
    finally:
        buttons.close()
    with lock:
        return {name: dict(n) for name, n in seen_per.items()}


def buttons_summary(seen: dict[str, dict[str, int]], as_json: bool) -> str:
    """The last line of ``diag buttons``: presses and confirmed holds per button."""
    if as_json:
        return json.dumps({"summary": seen})
    return "summary: " + ", ".join(
        f"{name} {n['presses']} pressed, {n['held']} held" for name, n in seen.items()
    )


def _mock_presser(cfg: Config, factory: Any, out: TextIO) -> Callable[[], None] | None:
    """With mock pins on a terminal: keys v, s, a press that button for its hold time."""
    from gpiozero.pins.mock import MockFactory

    if not isinstance(factory, MockFactory) or not sys.stdin.isatty():
        return None
    pins = {"void": cfg.buttons.void, "surrender": cfg.buttons.surrender, "ack": cfg.buttons.ack}
    hold = cfg.buttons.hold_s + 0.2

    def tick() -> None:
        while select.select([sys.stdin], [], [], 0)[0]:
            key = os.read(sys.stdin.fileno(), 1).decode(errors="replace").lower()
            name = BUTTON_KEYS.get(key)
            if name is None:
                continue
            pin = factory.pin(pins[name])
            pin.drive_low()  # pressed (the buttons pull up)
            threading.Timer(hold, pin.drive_high).start()

    _emit(out, "mock pins: keys v, s, a press void, surrender, ack (held long enough to confirm)")
    return tick


def run_buttons(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``firebet diag buttons``: every press live, then a summary (also on Ctrl-C)."""
    out = out if out is not None else sys.stdout
    cfg = options.load(args)
    factory = _pin_factory(cfg, args.pin_factory, "buttons")
    stop = threading.Event()
    with _stop_on_sigterm(stop), _keys_unbuffered():
        tick = _mock_presser(cfg, factory, out)
        seen = watch_buttons(
            cfg, factory, out, as_json=args.json, count=args.count, stop=stop, tick=tick
        )
    _emit(out, buttons_summary(seen, args.json))
    return 0


@contextlib.contextmanager
def _keys_unbuffered() -> Iterator[None]:
    """Single keys from a terminal without Enter (and no echo), restored afterwards."""
    if not sys.stdin.isatty():
        yield
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
