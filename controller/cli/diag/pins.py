"""``firebet diag leds`` and ``diag buttons``: the lamps walked, the buttons watched live."""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from controller.cli import options
from controller.cli.diag.terminal import emit, keys_unbuffered, stop_on_sigterm
from controller.core.config import Config
from controller.core.errors import HardwareError
from controller.core.lamps import Effect, Outputs


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
        emit(out, json.dumps({"lamp": lamp, "pin": pin, "state": state}) if args.json else text)
        stop.wait(step)

    try:
        with stop_on_sigterm(stop):
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
                emit(out, json.dumps(event))
            else:
                note = "  (confirmed: would post)" if what == "held" else ""
                emit(out, f"{at:8.3f}s  {name:<9} BCM {pins[name]:<2}  {what}{note}")
            if what == "held":
                seen_per[name]["held"] += 1
            if what == "released":
                presses += 1
                seen_per[name]["presses"] += 1
                if count is not None and presses >= count:
                    stop.set()

    buttons = DealerButtons(cfg.buttons, factory, post=lambda command: None, watch=seen)
    if not as_json:
        emit(
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

    emit(out, "mock pins: keys v, s, a press void, surrender, ack (held long enough to confirm)")
    return tick


def run_buttons(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``firebet diag buttons``: every press live, then a summary (also on Ctrl-C)."""
    out = out if out is not None else sys.stdout
    cfg = options.load(args)
    factory = _pin_factory(cfg, args.pin_factory, "buttons")
    stop = threading.Event()
    with stop_on_sigterm(stop), keys_unbuffered():
        tick = _mock_presser(cfg, factory, out)
        seen = watch_buttons(
            cfg, factory, out, as_json=args.json, count=args.count, stop=stop, tick=tick
        )
    emit(out, buttons_summary(seen, args.json))
    return 0
