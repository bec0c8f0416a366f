"""Choosing the gpiozero pin factory by name, never silently.

``mock`` is gpiozero's :class:`~gpiozero.pins.mock.MockFactory` with PWM-capable
pins (bench tests, ``firebet sim``); ``lgpio``, ``rpigpio``, ``pigpio`` and
``native`` are the real backends; None is gpiozero's default choice (which
honours ``GPIOZERO_PIN_FACTORY``). Mock is always an explicit choice: when a
real factory cannot load, :class:`~controller.core.errors.HardwareError` says which
and how to fix it. The factory is passed to every device (``pin_factory=``); the
global default is never changed here.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from controller.core.errors import HardwareError

FACTORIES: dict[str, tuple[str, str]] = {
    "lgpio": ("gpiozero.pins.lgpio", "LGPIOFactory"),
    "rpigpio": ("gpiozero.pins.rpigpio", "RPiGPIOFactory"),
    "pigpio": ("gpiozero.pins.pigpio", "PiGPIOFactory"),
    "native": ("gpiozero.pins.native", "NativeFactory"),
}
NAMES: tuple[str, ...] = ("mock", *FACTORIES)

FIXES: dict[str, str] = {
    "lgpio": "install lgpio (sudo apt install python3-lgpio, or pip install lgpio in the venv) "
    "and add the user to the gpio group: sudo usermod -aG gpio $USER",
    "rpigpio": "install RPi.GPIO (sudo apt install python3-rpi-lgpio) "
    "and add the user to the gpio group: sudo usermod -aG gpio $USER",
    "pigpio": "install python3-pigpio and start the daemon: sudo systemctl enable --now pigpiod",
    "native": "run on a Raspberry Pi and add the user to the gpio group: "
    "sudo usermod -aG gpio $USER",
}


def make_pin_factory(name: str | None) -> Any:
    """The gpiozero pin factory called ``name`` (see :data:`NAMES`), or gpiozero's default.

    Raises :class:`HardwareError` naming the factory and the fix when it cannot be
    loaded (missing library, not a Pi, no permission). Never falls back to mock.
    """
    if name is not None:
        name = name.strip().lower()
    if name == "mock":
        from gpiozero.pins.mock import MockFactory, MockPWMPin

        return MockFactory(pin_class=MockPWMPin)
    if name is None:
        from gpiozero import Device

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                factory = Device._default_pin_factory()
            except Exception as exc:
                tried = "; ".join(str(w.message) for w in seen)
                raise HardwareError(
                    f"no GPIO pin factory could be loaded ({exc}; {tried}); on a Raspberry Pi: "
                    f"{FIXES['lgpio']}; on a bench machine pass --pin-factory mock"
                ) from exc
        # gpiozero's default never picks mock unless GPIOZERO_PIN_FACTORY=mock asks for it
        return factory
    if name not in FACTORIES:
        raise HardwareError(f"unknown pin factory {name!r} (known: {', '.join(NAMES)})")
    module_name, class_name = FACTORIES[name]
    try:
        module = importlib.import_module(module_name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return getattr(module, class_name)()
    except Exception as exc:
        raise HardwareError(
            f"GPIO pin factory {name!r} cannot be loaded ({type(exc).__name__}: {exc}); "
            f"{FIXES[name]}"
        ) from exc


def pin_problem(what: str, pin: int, exc: BaseException) -> HardwareError:
    """A :class:`HardwareError` for a GPIO device that could not be set up on ``pin``."""
    text = f"{type(exc).__name__}: {exc}"
    if "ermission" in text or getattr(exc, "errno", None) in (1, 13):
        fix = "add the user to the gpio group: sudo usermod -aG gpio $USER (then log in again)"
    elif "busy" in text.lower() or "in use" in text.lower():
        fix = "another program or device holds the pin; check the config for a pin used twice"
    else:
        fix = "check the wiring and the BCM pin number in the config (docs/wiring.md)"
    return HardwareError(f"{what} on BCM {pin}: {text}; {fix}")
