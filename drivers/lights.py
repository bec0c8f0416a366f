"""Point markers, status lamp and surveillance relay on gpiozero pins.

:class:`MarkerLights` applies the :class:`~controller.core.lamps.Outputs` that
:func:`controller.core.lamps.desired_outputs` derives from the table state, so a
restart (or leaving diagnostics) re-derives every marker from the journal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.core.config.model import LightsConfig
from controller.core.lamps import Effect, LightsView, Outputs, desired_outputs
from drivers.effects import EffectPlayer, blink_steps, pulse_steps
from drivers.pins import pin_problem


@dataclass(frozen=True)
class Timing:
    """Lamp timings in seconds (tests shorten them)."""

    pulse_s: float = 0.6
    blink_s: float = 0.5
    fault_s: float = 0.25
    celebrate_s: float = 0.1
    wink_on_s: float = 0.1  # storage fault: a short flash ...
    wink_off_s: float = 0.9  # ... once a second


class MarkerLights:
    """The point markers (PWM LEDs), the status lamp and the surveillance relay.

    A lamp's PWM runs only while it is dimmed (a pulse); on, off and blinking are plain
    levels (:func:`drivers.effects.dims`).

    Built on the ``pin_factory`` passed in (never the global default), with the
    pins and polarity of ``lights``; :meth:`apply` changes only the lamps whose
    effect changed, so a steady blink keeps its rhythm. Blinks and pulses are played by
    one :class:`~drivers.effects.EffectPlayer` thread (an effect change never waits).
    """

    def __init__(
        self, lights: LightsConfig, pin_factory: Any, timing: Timing | None = None
    ) -> None:
        from gpiozero import PWMLED, DigitalOutputDevice

        self.config = lights
        self.timing = timing if timing is not None else Timing()
        self.markers: dict[int, Any] = {}
        self.status_lamp: Any = None
        self.relay: Any = None
        self._applied: dict[str, str] = {}
        self._player = EffectPlayer()  # blinks and pulses: one thread, no start or join
        what, pin = "lights", -1
        try:
            for point, pin in sorted(lights.markers.items()):
                what = f"marker {point}"
                self.markers[point] = PWMLED(  # PWM only while dimmed: drivers/effects.py
                    pin, active_high=lights.active_high, frequency=None, pin_factory=pin_factory
                )
            what, pin = "status lamp", lights.status
            self.status_lamp = PWMLED(
                pin, active_high=lights.active_high, frequency=None, pin_factory=pin_factory
            )
            what, pin = "surveillance relay", lights.surveillance
            self.relay = DigitalOutputDevice(
                pin, active_high=lights.active_high, initial_value=False, pin_factory=pin_factory
            )
        except Exception as exc:
            self.close()
            raise pin_problem(what, pin, exc) from exc

    def _set(self, key: str, lamp: Any, effect: Effect) -> None:
        if self._applied.get(key) == effect:
            return
        t, player = self.timing, self._player
        if effect == Effect.OFF:
            player.hold(lamp, 0)
        elif effect == Effect.ON:
            player.hold(lamp, 1)
        elif effect == Effect.PULSE:
            player.play(lamp, pulse_steps(t.pulse_s, t.pulse_s))
        elif effect == Effect.BLINK:
            player.play(lamp, blink_steps(t.blink_s, t.blink_s))
        elif effect == Effect.FAULT:
            player.play(lamp, blink_steps(t.fault_s, t.fault_s))
        elif effect == Effect.WINK:
            player.play(lamp, blink_steps(t.wink_on_s, t.wink_off_s))
        elif effect == Effect.CELEBRATE:
            player.play(lamp, blink_steps(t.celebrate_s, t.celebrate_s))
        else:
            raise ValueError(f"unknown lamp effect {effect!r}")
        self._applied[key] = effect

    def apply(self, outputs: Outputs) -> None:
        """Make the lamps show ``outputs`` (markers not configured are ignored)."""
        for point, effect in outputs.markers.items():
            lamp = self.markers.get(point)
            if lamp is not None:
                self._set(f"marker {point}", lamp, effect)
        self._set("status", self.status_lamp, outputs.status)
        self._set("relay", self.relay, outputs.surveillance)  # off, blink or on

    def show(self, view: LightsView) -> Outputs:
        """Apply :func:`desired_outputs` of ``view``; returns what was applied."""
        outputs = desired_outputs(view, self.markers)
        self.apply(outputs)
        return outputs

    def close(self) -> None:
        """Switch everything off and release the pins."""
        self._player.close()
        for lamp in (*self.markers.values(), self.status_lamp, self.relay):
            if lamp is not None:
                try:
                    lamp.off()
                finally:
                    lamp.close()
        self.markers = {}
        self.status_lamp = self.relay = None
        self._applied = {}
