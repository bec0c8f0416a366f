"""Point markers, status lamp and surveillance relay: a pure mapping, then the pins.

:func:`desired_outputs` turns a small :class:`LightsView` of the controller's
state into the lamp :class:`Outputs` it calls for; :class:`MarkerLights` applies
outputs to gpiozero devices. Because the lamps are a function of the state, a
restart (or leaving diagnostics) re-derives every marker from the journal.

Effects: ``off``, ``on`` (steady), ``pulse`` (the newest marker breathes),
``blink`` (status lamp during a reader fault), ``fault`` (the halted pattern on
every marker and the status lamp), ``celebrate`` (quick flash of the lit markers
when the 4th, 5th or 6th different point is made).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.config import POINT_NUMBERS, LightsConfig
from controller.state import Phase, TableState
from drivers.pins import pin_problem

RUNNING = "running"
READER_FAULT = "reader_fault"
HALTED = "halted"
DIAGNOSTICS = "diagnostics"
MODES: tuple[str, ...] = (RUNNING, READER_FAULT, HALTED, DIAGNOSTICS)

OFF = "off"
ON = "on"
PULSE = "pulse"
BLINK = "blink"
FAULT = "fault"
CELEBRATE = "celebrate"
EFFECTS: tuple[str, ...] = (OFF, ON, PULSE, BLINK, FAULT, CELEBRATE)


@dataclass(frozen=True)
class LightsView:
    """What the lamps need to know about the table.

    ``markers``: point -> ordinal of each different point made. ``newest``: the
    point made last (its marker pulses). ``celebration``: the number of
    different points just reached when it is a tier worth a flash, else None.
    """

    markers: Mapping[int, int] = field(default_factory=dict)
    newest: int | None = None
    mode: str = RUNNING
    surveillance_alert: bool = False
    celebration: int | None = None


@dataclass(frozen=True)
class Outputs:
    """The effect of every marker (point -> effect), the status lamp and the relay."""

    markers: Mapping[int, str]
    status: str
    surveillance: bool


def desired_outputs(view: LightsView, points: Iterable[int] = POINT_NUMBERS) -> Outputs:
    """The lamp outputs ``view`` calls for, for the markers of ``points``. Pure."""
    if view.mode not in MODES:
        raise ValueError(f"unknown mode {view.mode!r} (known: {', '.join(MODES)})")
    points = tuple(points)
    if view.mode == HALTED:
        return Outputs(dict.fromkeys(points, FAULT), FAULT, view.surveillance_alert)
    if view.mode == DIAGNOSTICS:  # the technician's tests own the lamps meanwhile
        return Outputs(dict.fromkeys(points, OFF), PULSE, view.surveillance_alert)
    markers: dict[int, str] = {}
    for p in points:
        if p not in view.markers:
            markers[p] = OFF
        elif view.celebration is not None:
            markers[p] = CELEBRATE
        elif p == view.newest:
            markers[p] = PULSE
        else:
            markers[p] = ON
    status = BLINK if view.mode == READER_FAULT else ON
    return Outputs(markers, status, view.surveillance_alert)


def view_from_state(
    state: TableState, mode: str, celebrate_at: Iterable[int] = (4, 5, 6)
) -> LightsView:
    """The :class:`LightsView` of a table state in ``mode``.

    The celebration lasts from the roll that made the 4th (5th, 6th) different
    point until the next accepted roll.
    """
    newest = state.points[-1] if state.points else None
    celebration = None
    just_made = (
        newest is not None
        and state.phase != Phase.POINT
        and state.last_roll is not None
        and sum(state.last_roll) == newest
    )
    if just_made and state.unique_points in tuple(celebrate_at):
        celebration = state.unique_points
    return LightsView(
        markers=state.markers(),
        newest=newest,
        mode=mode,
        surveillance_alert=state.surveillance_alert,
        celebration=celebration,
    )


def marker_report(view: LightsView, outputs: Outputs) -> dict[str, dict[str, Any]]:
    """``status --json`` ``markers``: ``{"4": {"lit": true, "ordinal": 2}, ...}``."""
    return {
        str(p): {"lit": effect != OFF, "ordinal": view.markers.get(p)}
        for p, effect in sorted(outputs.markers.items())
    }


@dataclass(frozen=True)
class Timing:
    """Lamp timings in seconds (tests shorten them)."""

    pulse_s: float = 0.6
    blink_s: float = 0.5
    fault_s: float = 0.25
    celebrate_s: float = 0.1


class MarkerLights:
    """The point markers (PWM LEDs), the status lamp and the surveillance relay.

    Built on the ``pin_factory`` passed in (never the global default), with the
    pins and polarity of ``lights``; :meth:`apply` changes only the lamps whose
    effect changed, so a steady blink keeps its rhythm.
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
        what, pin = "lights", -1
        try:
            for point, pin in sorted(lights.markers.items()):
                what = f"marker {point}"
                self.markers[point] = PWMLED(
                    pin, active_high=lights.active_high, pin_factory=pin_factory
                )
            what, pin = "status lamp", lights.status
            self.status_lamp = PWMLED(pin, active_high=lights.active_high, pin_factory=pin_factory)
            what, pin = "surveillance relay", lights.surveillance
            self.relay = DigitalOutputDevice(
                pin, active_high=lights.active_high, initial_value=False, pin_factory=pin_factory
            )
        except Exception as exc:
            self.close()
            raise pin_problem(what, pin, exc) from exc

    def _set(self, key: str, lamp: Any, effect: str) -> None:
        if self._applied.get(key) == effect:
            return
        t = self.timing
        if effect == OFF:
            lamp.off()
        elif effect == ON:
            lamp.on()
        elif effect == PULSE:
            lamp.pulse(fade_in_time=t.pulse_s, fade_out_time=t.pulse_s)
        elif effect == BLINK:
            lamp.blink(on_time=t.blink_s, off_time=t.blink_s)
        elif effect == FAULT:
            lamp.blink(on_time=t.fault_s, off_time=t.fault_s)
        elif effect == CELEBRATE:
            lamp.blink(on_time=t.celebrate_s, off_time=t.celebrate_s)
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
        if self._applied.get("relay") != str(outputs.surveillance):
            if outputs.surveillance:
                self.relay.on()
            else:
                self.relay.off()
            self._applied["relay"] = str(outputs.surveillance)

    def show(self, view: LightsView) -> Outputs:
        """Apply :func:`desired_outputs` of ``view``; returns what was applied."""
        outputs = desired_outputs(view, self.markers)
        self.apply(outputs)
        return outputs

    def all_markers(self, effect: str) -> None:
        """Every marker and the status lamp to ``effect`` (lamp test)."""
        self.apply(Outputs(dict.fromkeys(self.markers, effect), effect, bool(self.relay.value)))

    def close(self) -> None:
        """Switch everything off and release the pins."""
        for lamp in (*self.markers.values(), self.status_lamp, self.relay):
            if lamp is not None:
                try:
                    lamp.off()
                finally:
                    lamp.close()
        self.markers = {}
        self.status_lamp = self.relay = None
        self._applied = {}
