"""The dealer's buttons: void, surrender (new shooter), acknowledge, and apply or
discard the oldest reader roll held after manual entry.

Each is a gpiozero :class:`~gpiozero.Button` wired to ground (pressed = low,
internal pull-up), debounced, and hold-to-confirm: its command is posted only
when the button has been held ``hold_s`` seconds (``when_held``), so a brush of
a sleeve never voids a roll. Callbacks run on gpiozero's threads and do nothing
but post on the controller's one queue (and tell an optional watcher).
"""

from __future__ import annotations

import logging
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
        from gpiozero import Button

        self.config = buttons
        self.post = post
        self.watch = watch
        self.buttons: dict[str, Any] = {}
        pins = {
            "void": buttons.void,
            "surrender": buttons.surrender,
            "ack": buttons.ack,
            "apply_held": buttons.apply_held,
            "discard_held": buttons.discard_held,
        }
        for name, pin in pins.items():
            try:
                button = Button(
                    pin,
                    pull_up=True,
                    bounce_time=bounce_s,
                    hold_time=buttons.hold_s,
                    pin_factory=pin_factory,
                )
            except Exception as exc:
                self.close()
                raise pin_problem(f"{name} button", pin, exc) from exc
            button.when_pressed = self._callback(name, "pressed")
            button.when_released = self._callback(name, "released")
            button.when_held = self._callback(name, "held")
            self.buttons[name] = button

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
        """Release the pins."""
        for button in self.buttons.values():
            button.close()
        self.buttons = {}
