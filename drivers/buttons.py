"""The dealer's buttons: void, surrender (new shooter), acknowledge, and apply or
discard the oldest reader roll held after manual entry.

Each is a gpiozero :class:`~gpiozero.DigitalInputDevice` wired to ground (pressed =
low, internal pull-up), debounced, and hold-to-confirm: its command is posted only
when the button has been held ``hold_s`` seconds, so a brush of a sleeve never voids
a roll. The hold is timed by a timer started at the press and cancelled at the
release, not by gpiozero's ``Button``, whose hold thread wakes ten times a second for
every button while nothing is pressed (SPEC section 7: the idle CPU budget).
Callbacks run on gpiozero's threads (and the timer's) and do nothing but post on the
controller's one queue (and tell an optional watcher).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from controller.clock import now_iso
from controller.core.commands import (
    Ack,
    ApplyHeld,
    Command,
    DiscardHeld,
    Surrender,
    SurrenderHow,
    Void,
)
from controller.core.config.model import ButtonsConfig
from drivers.pins import pin_problem
from drivers.reader import Post

log = logging.getLogger(__name__)

BUTTON = "button"
NAMES: tuple[str, ...] = ("void", "surrender", "ack", "apply_held", "discard_held")

Watcher = Callable[[str, str], None]
"""Told ``(button, what)`` with what = "pressed", "released" or "held" (``diag buttons``)."""


def command_for(name: str) -> Command:
    """The command a confirmed hold of button ``name`` posts."""
    at = now_iso()
    if name == "void":  # a misread: voided, and the true dice wait for the dealer
        return Void(arm=True, actor=BUTTON, at=at)
    if name == "surrender":
        return Surrender(kind=SurrenderHow.VOLUNTARY, actor=BUTTON, at=at)
    if name == "ack":
        return Ack(actor=BUTTON, at=at)
    if name == "apply_held":
        return ApplyHeld(None, actor=BUTTON, at=at)  # the oldest held roll
    if name == "discard_held":
        return DiscardHeld(None, actor=BUTTON, at=at)
    raise ValueError(f"no button called {name!r}")


class DealerButtons:
    """The dealer buttons on the ``pin_factory`` passed in.

    ``post`` receives ``Void``, ``Surrender`` (voluntary), ``Ack``,
    ``ApplyHeld()`` or ``DiscardHeld()`` (the oldest held reader roll), all with
    ``actor="button"``, once per hold of ``buttons.hold_s`` seconds.
    ``bounce_s`` is the debounce time; ``watch`` sees every press, release and hold.
    """

    def __init__(
        self,
        buttons: ButtonsConfig,
        pin_factory: Any,
        post: Post,
        *,
        bounce_s: float | None = 0.02,
        watch: Watcher | None = None,
    ) -> None:
        from gpiozero import DigitalInputDevice

        self.config = buttons
        self.post = post
        self.watch = watch
        self.buttons: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._timers: dict[str, threading.Timer] = {}  # the holds being timed, by button
        pins = {
            "void": buttons.void,
            "surrender": buttons.surrender,
            "ack": buttons.ack,
            "apply_held": buttons.apply_held,
            "discard_held": buttons.discard_held,
        }
        for name, pin in pins.items():
            try:
                button = DigitalInputDevice(
                    pin, pull_up=True, bounce_time=bounce_s, pin_factory=pin_factory
                )
            except Exception as exc:
                self.close()
                raise pin_problem(f"{name} button", pin, exc) from exc
            button.when_activated = self._pressed(name)
            button.when_deactivated = self._released(name)
            self.buttons[name] = button

    def _pressed(self, name: str) -> Callable[[], None]:
        said = self._callback(name, "pressed")
        held = self._callback(name, "held")

        def pressed() -> None:
            said()
            timer = threading.Timer(self.config.hold_s, self._held, (name, held))
            timer.daemon = True
            timer.name = f"{name} button hold"
            with self._lock:
                old = self._timers.pop(name, None)
                self._timers[name] = timer
            if old is not None:
                old.cancel()
            timer.start()

        return pressed

    def _released(self, name: str) -> Callable[[], None]:
        said = self._callback(name, "released")

        def released() -> None:
            with self._lock:
                timer = self._timers.pop(name, None)
            if timer is not None:
                timer.cancel()  # let go before hold_s: a brush, nothing posted
            said()

        return released

    def _held(self, name: str, held: Callable[[], None]) -> None:
        """The timer of a press ran out: still this press and still down, it is a hold."""
        with self._lock:
            timer = self._timers.get(name)
            if timer is None or timer is not threading.current_thread():
                return  # released meanwhile, or pressed again since
            del self._timers[name]
            button = self.buttons.get(name)
        if button is not None and button.is_active:
            held()

    def _callback(self, name: str, what: str) -> Callable[[], None]:
        def fire() -> None:
            if self.watch is not None:
                try:
                    self.watch(name, what)
                except Exception:
                    log.exception("button watcher failed")
            if what == "held":
                try:
                    self.post(command_for(name))
                except Exception:  # the queue's problem must not kill gpiozero's thread
                    log.exception("posting the %s button failed", name)

        return fire

    def close(self) -> None:
        """Release the pins (a hold being timed posts nothing)."""
        with self._lock:
            timers, self._timers = list(self._timers.values()), {}
        for timer in timers:
            timer.cancel()
        for button in self.buttons.values():
            button.close()
        self.buttons = {}
