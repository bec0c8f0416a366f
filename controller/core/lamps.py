"""The lamps a table state calls for: point markers, status lamp, surveillance relay. Pure.

:func:`desired_outputs` turns a small :class:`LightsView` of the controller's
state into the lamp :class:`Outputs` it calls for; ``drivers/lights.py`` applies
them to the pins. Because the lamps are a function of the state, a restart (or
leaving diagnostics) re-derives every marker from the journal.

Effects: ``off``, ``on`` (steady), ``pulse`` (the newest marker breathes),
``blink`` (status lamp during a reader fault), ``fault`` (the halted pattern on
every marker and the status lamp), ``wink`` (status lamp in a storage fault: a short
flash once a second, the markers still showing the game), ``celebrate`` (quick flash of
the lit markers
when the 4th, 5th or 6th different point is made).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from controller.core.config.model import POINT_NUMBERS
from controller.core.state import Phase, TableState


class Mode(StrEnum):
    """The service's mode, as ``status --json`` ``mode`` names it."""

    RUNNING = "running"
    READER_FAULT = "reader_fault"
    DIAGNOSTICS = "diagnostics"
    HALTED = "halted"
    STORAGE_FAULT = "storage_fault"


class Effect(StrEnum):
    """What one lamp does."""

    OFF = "off"
    ON = "on"
    PULSE = "pulse"
    BLINK = "blink"
    FAULT = "fault"
    CELEBRATE = "celebrate"
    WINK = "wink"


@dataclass(frozen=True)
class LightsView:
    """What the lamps need to know about the table.

    ``markers``: point -> ordinal of each different point made. ``newest``: the
    point made last (its marker pulses). ``celebration``: the number of
    different points just reached when it is a tier worth a flash, else None.
    """

    markers: Mapping[int, int] = field(default_factory=dict)
    newest: int | None = None
    mode: Mode = Mode.RUNNING
    surveillance_alert: bool = False
    surveillance_confirmed: bool = False
    celebration: int | None = None


@dataclass(frozen=True)
class Outputs:
    """The effect of every marker (point -> effect), the status lamp and the relay.

    The surveillance relay blinks while an alert waits for surveillance (any hand's the
    table keeps open and unconfirmed), is steady once surveillance confirmed them all, and
    is off when there is no alert (or the dealer acknowledged it).
    """

    markers: Mapping[int, Effect]
    status: Effect
    surveillance: Effect


def desired_outputs(view: LightsView, points: Iterable[int] = POINT_NUMBERS) -> Outputs:
    """The lamp outputs ``view`` calls for, for the markers of ``points``. Pure."""
    if view.mode not in Mode.__members__.values():
        raise ValueError(f"unknown mode {view.mode!r} (known: {', '.join(Mode)})")
    points = tuple(points)
    relay = Effect.OFF
    if view.surveillance_alert:  # a raised alert is never dropped, whatever the mode
        relay = Effect.ON if view.surveillance_confirmed else Effect.BLINK
    if view.mode == Mode.HALTED:
        return Outputs(dict.fromkeys(points, Effect.FAULT), Effect.FAULT, relay)
    if view.mode == Mode.DIAGNOSTICS:  # the technician's tests own the lamps meanwhile
        return Outputs(dict.fromkeys(points, Effect.OFF), Effect.PULSE, relay)
    markers: dict[int, Effect] = {}
    for p in points:
        if p not in view.markers:
            markers[p] = Effect.OFF
        elif view.celebration is not None:
            markers[p] = Effect.CELEBRATE
        elif p == view.newest:
            markers[p] = Effect.PULSE
        else:
            markers[p] = Effect.ON
    status = {Mode.READER_FAULT: Effect.BLINK, Mode.STORAGE_FAULT: Effect.WINK}.get(
        view.mode, Effect.ON
    )
    return Outputs(markers, status, relay)


def view_from_state(
    state: TableState, mode: Mode, celebrate_at: Iterable[int] = (4, 5, 6)
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
        # steady only once surveillance confirmed every alert the table keeps open
        surveillance_confirmed=state.alert_hand is not None and not state.open_alerts(),
        celebration=celebration,
    )


def marker_report(view: LightsView, outputs: Outputs) -> dict[str, dict[str, Any]]:
    """``status --json`` ``markers``: ``{"4": {"lit": true, "ordinal": 2}, ...}``."""
    return {
        str(p): {"lit": effect != Effect.OFF, "ordinal": view.markers.get(p)}
        for p, effect in sorted(outputs.markers.items())
    }
