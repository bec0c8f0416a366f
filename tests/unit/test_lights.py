"""Lamp outputs: the pure mapping, then the pins on gpiozero's MockFactory."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from gpiozero import Device
from gpiozero.pins.mock import MockFactory, MockPWMPin

from controller.core.config import LightsConfig, load_config
from controller.core.errors import HardwareError
from controller.core.lamps import (
    Effect,
    LightsView,
    Outputs,
    desired_outputs,
    marker_report,
    view_from_state,
)
from controller.core.state import Phase, TableState
from drivers.effects import PWM_HZ, blink_steps, dims, pulse_steps
from drivers.lights import MarkerLights, Timing
from drivers.pins import make_pin_factory
from tests.support import wait_for

FAST = Timing(pulse_s=0.02, blink_s=0.02, fault_s=0.02, celebrate_s=0.02)


@pytest.fixture
def config() -> LightsConfig:
    return load_config().lights


@pytest.fixture
def factory() -> Iterator[Any]:
    before = Device.pin_factory
    f = make_pin_factory("mock")
    yield f
    f.reset()
    assert Device.pin_factory is before  # the global default was never touched


@pytest.fixture
def lights(config: LightsConfig, factory: Any) -> Iterator[MarkerLights]:
    board = MarkerLights(config, factory, FAST)
    yield board
    board.close()


# -- the pure mapping ----------------------------------------------------------------


def test_markers_steady_and_newest_pulsing() -> None:
    out = desired_outputs(LightsView(markers={6: 1, 8: 2, 5: 3}, newest=5))
    assert out.markers == {
        4: Effect.OFF,
        5: Effect.PULSE,
        6: Effect.ON,
        8: Effect.ON,
        9: Effect.OFF,
        10: Effect.OFF,
    }
    assert out.status == Effect.ON and out.surveillance == Effect.OFF


def test_reader_fault_blinks_the_status_lamp_only() -> None:
    out = desired_outputs(LightsView(markers={4: 1}, newest=4, mode="reader_fault"))
    assert out.status == Effect.BLINK
    assert out.markers[4] == Effect.PULSE


def test_halted_shows_the_fault_pattern_on_every_marker() -> None:
    out = desired_outputs(LightsView(markers={4: 1}, mode="halted", surveillance_alert=True))
    assert set(out.markers.values()) == {Effect.FAULT} and len(out.markers) == 6
    assert out.status == Effect.FAULT
    assert out.surveillance == Effect.BLINK  # a raised alert is never dropped


def test_diagnostics_leaves_the_markers_to_the_technician() -> None:
    out = desired_outputs(LightsView(markers={4: 1}, mode="diagnostics"))
    assert set(out.markers.values()) == {Effect.OFF}


def test_surveillance_relay_blinks_until_confirmed_then_is_steady() -> None:
    assert desired_outputs(LightsView(surveillance_alert=True)).surveillance == Effect.BLINK
    confirmed = LightsView(surveillance_alert=True, surveillance_confirmed=True)
    assert desired_outputs(confirmed).surveillance == Effect.ON
    assert desired_outputs(LightsView(surveillance_alert=False)).surveillance == Effect.OFF
    # acknowledged (alert cleared) after the confirmation: off
    acked = LightsView(surveillance_alert=False, surveillance_confirmed=True)
    assert desired_outputs(acked).surveillance == Effect.OFF


def test_celebration_flashes_the_lit_markers() -> None:
    view = LightsView(markers={4: 1, 5: 2, 6: 3, 8: 4}, newest=8, celebration=4)
    out = desired_outputs(view)
    assert [p for p, e in out.markers.items() if e == Effect.CELEBRATE] == [4, 5, 6, 8]
    assert out.markers[9] == Effect.OFF


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown mode"):
        desired_outputs(LightsView(mode="party"))


def test_view_from_state_and_celebration_window() -> None:
    made_fourth = TableState(phase=Phase.COME_OUT, points=(6, 8, 5, 4), last_roll=(1, 3))
    view = view_from_state(made_fourth, "running")
    assert view.markers == {6: 1, 8: 2, 5: 3, 4: 4}
    assert view.newest == 4 and view.celebration == 4
    next_roll = replace(made_fourth, phase=Phase.POINT, point=9, last_roll=(4, 5))
    assert view_from_state(next_roll, "running").celebration is None
    third = TableState(phase=Phase.COME_OUT, points=(6, 8, 5), last_roll=(2, 3))
    assert view_from_state(third, "running").celebration is None
    assert view_from_state(TableState(), "halted").mode == "halted"


def test_marker_report_for_status_json() -> None:
    view = LightsView(markers={6: 1, 4: 2}, newest=4)
    report = marker_report(view, desired_outputs(view))
    assert report["4"] == {"lit": True, "ordinal": 2}
    assert report["6"] == {"lit": True, "ordinal": 1}
    assert report["9"] == {"lit": False, "ordinal": None}


# -- the pins ----------------------------------------------------------------------------


def test_steady_markers_on_their_pins(
    lights: MarkerLights, factory: Any, config: LightsConfig
) -> None:
    lights.show(LightsView(markers={4: 1, 10: 2}, newest=None))
    assert factory.pin(config.markers[4]).state == 1
    assert factory.pin(config.markers[10]).state == 1
    assert factory.pin(config.markers[6]).state == 0
    assert factory.pin(config.status).state == 1
    assert factory.pin(config.surveillance).state == 0
    factory.pin(config.markers[4]).assert_states([0, 1])


def test_pulse_and_blink_move_the_pins(
    lights: MarkerLights, factory: Any, config: LightsConfig
) -> None:
    lights.timing = replace(FAST, pulse_s=0.4)  # four frames a fade at 10 a second
    lights.show(LightsView(markers={5: 1}, newest=5, mode="reader_fault"))
    marker = factory.pin(config.markers[5])
    status = factory.pin(config.status)
    # the effect player's thread moves the pins: however late a busy machine runs it
    wait_for(
        lambda: len({round(s, 2) for s in (c.state for c in marker.states)}) > 3,
        what="the marker fading",
    )
    wait_for(lambda: {c.state for c in status.states} >= {0, 1}, what="the status blinking")


def test_unchanged_effect_is_not_restarted(
    lights: MarkerLights, factory: Any, config: LightsConfig
) -> None:
    lights.show(LightsView(markers={4: 1}))
    pin = factory.pin(config.markers[4])
    changes = len(pin.states)
    lights.show(LightsView(markers={4: 1}))
    assert len(pin.states) == changes


def test_relay_blinks_on_alert_steady_when_confirmed_off_after_ack(
    lights: MarkerLights, factory: Any, config: LightsConfig
) -> None:
    relay = factory.pin(config.surveillance)
    lights.show(LightsView(surveillance_alert=True))
    wait_for(lambda: len(relay.states) >= 4, what="the relay blinking")
    lights.show(LightsView(surveillance_alert=True, surveillance_confirmed=True))
    assert relay.state == 1
    steady = len(relay.states)
    lights.show(LightsView(surveillance_alert=True, surveillance_confirmed=True))
    assert len(relay.states) == steady  # steady: no more changes
    lights.show(LightsView(surveillance_alert=False))
    assert relay.state == 0


def test_active_low_wiring_inverts_every_pin(config: LightsConfig, factory: Any) -> None:
    board = MarkerLights(replace(config, active_high=False), factory, FAST)
    try:
        board.apply(Outputs(dict.fromkeys(config.markers, Effect.OFF), Effect.OFF, Effect.OFF))
        assert factory.pin(config.markers[8]).state == 1
        board.show(LightsView(markers={8: 1}, surveillance_alert=True, surveillance_confirmed=True))
        assert factory.pin(config.markers[8]).state == 0
        assert factory.pin(config.surveillance).state == 0
    finally:
        board.close()


def test_close_switches_off_and_releases_the_pins(config: LightsConfig, factory: Any) -> None:
    board = MarkerLights(config, factory, FAST)
    board.show(LightsView(markers={4: 1}, surveillance_alert=True))
    board.close()
    assert factory.pin(config.markers[4]).state == 0
    assert factory.pin(config.surveillance).state == 0
    again = MarkerLights(config, factory, FAST)  # pins free again
    again.close()


def test_pin_in_use_names_the_pin(config: LightsConfig, factory: Any) -> None:
    board = MarkerLights(config, factory, FAST)
    try:
        with pytest.raises(HardwareError, match=r"marker 4 on BCM 5"):
            MarkerLights(config, factory, FAST)
    finally:
        board.close()


def test_mock_factory_has_pwm_pins() -> None:
    f = make_pin_factory("mock")
    assert isinstance(f, MockFactory)
    assert isinstance(f.pin(5), MockPWMPin)
    f.reset()


def test_real_factory_that_cannot_load_says_the_fix() -> None:
    pytest.importorskip("gpiozero.pins.native")
    try:
        import lgpio  # noqa: F401
    except ImportError:
        with pytest.raises(HardwareError, match=r"'lgpio'.*python3-lgpio.*gpio group"):
            make_pin_factory("lgpio")
    else:  # pragma: no cover - on a Pi with lgpio installed
        pytest.skip("lgpio is installed here")
    with pytest.raises(HardwareError, match="unknown pin factory"):
        make_pin_factory("magic")


def test_effect_changes_start_and_join_no_thread(
    lights: MarkerLights, factory: Any, config: LightsConfig
) -> None:
    """A point made moves the pulse from one marker to another: the engine thread only
    notes the new patterns (one player thread for every lamp, none started per effect),
    and each lamp shows its new effect's first value before apply() returns."""
    before = {t.ident for t in threading.enumerate()}
    for newest in (4, 5, 6, 8, 9, 10) * 5:
        lights.show(LightsView(markers={p: 1 for p in (4, 5, 6, 8, 9, 10)}, newest=newest))
        assert factory.pin(config.markers[newest]).state == 0  # the pulse starts dark
    lights.show(LightsView(markers={4: 1}, mode="reader_fault"))
    assert factory.pin(config.status).state == 1  # the blink starts lit
    started = [t for t in threading.enumerate() if t.ident not in before]
    assert [t.name for t in started] == ["lamp effects"]


def test_a_held_lamp_stays_put_while_others_blink(
    lights: MarkerLights, factory: Any, config: LightsConfig
) -> None:
    lights.show(LightsView(markers={4: 1, 5: 2}, newest=5, mode="reader_fault"))
    lights.show(LightsView(markers={4: 1, 5: 2}, newest=4))  # 5 steady now, 4 pulses
    held = factory.pin(config.markers[5])
    seen = len(held.states)
    pulsing = factory.pin(config.markers[4])
    wait_for(lambda: len(pulsing.states) > 20, what="the newest marker pulsing")
    assert len(held.states) == seen and held.state == 1


def test_patterns_are_gpiozero_s() -> None:
    """The same values at the same times as gpiozero's blink(); pulse() as gpiozero's fade
    in and out at 10 frames a second, not 25 (each frame wakes the lamps' thread: #31)."""
    assert blink_steps(0.5, 0.25) == [(1.0, 0.5), (0.0, 0.25)]
    steps = pulse_steps(0.6, 0.6)
    rising = [v for v, _ in steps[:6]]
    assert rising == sorted(rising) and rising[0] == 0 and len(steps) == 14
    assert steps[6] == (1.0, 0.0) and steps[-1] == (0.0, 0.0)
    falling = [v for v, _ in steps[7:13]]
    assert falling == sorted(falling, reverse=True) and falling[0] == 1.0
    assert all(d == pytest.approx(0.1) for _, d in steps[:6] + steps[7:13])
    frames = sum(1 for _, d in steps if d > 0) / sum(d for _, d in steps)
    assert frames <= 10.0 + 1e-9  # lamp frames a second while a marker pulses


def test_a_lamp_runs_pwm_only_while_it_is_dimmed(
    lights: MarkerLights, factory: Any, config: LightsConfig
) -> None:
    """On a Pi every PWM pin is timed by a thread of the pin library in the service's own
    process, waking every PWM cycle whatever the duty (#31): a lamp on, off or blinking is
    a plain level, and only a pulsing marker runs PWM, for as long as it pulses."""
    lights.timing = replace(FAST, pulse_s=0.4)  # a fade of four frames (FAST's is a blink)
    pins = {f"marker {p}": factory.pin(pin) for p, pin in config.markers.items()}
    pins["status"] = factory.pin(config.status)
    assert {name: pin.frequency for name, pin in pins.items()} == dict.fromkeys(pins)
    lights.show(LightsView(markers={4: 1, 6: 2}, newest=6))  # 6 the newest point: pulses
    dimmed = {name for name, pin in pins.items() if pin.frequency is not None}
    assert dimmed == {"marker 6"} and pins["marker 6"].frequency == PWM_HZ
    assert pins["marker 4"].state == 1 and pins["marker 5"].state == 0
    lights.show(LightsView(markers={4: 1, 6: 2}, newest=6, mode="reader_fault"))
    status = pins["status"]
    wait_for(lambda: len({c.state for c in status.states}) >= 2, what="the status blinking")
    assert status.frequency is None  # a blink is on and off: no PWM
    lights.show(LightsView(markers={4: 1, 6: 2}, newest=4))  # the pulse moves to 4
    assert {name for name, pin in pins.items() if pin.frequency is not None} == {"marker 4"}
    assert pins["marker 6"].state == 1  # held on, as a plain level
    lights.show(LightsView())  # seven-out: every marker dark
    assert all(pin.frequency is None for pin in pins.values())
    assert all(pins[f"marker {p}"].state == 0 for p in config.markers)


def test_only_a_fade_needs_pwm() -> None:
    assert dims(pulse_steps(0.6, 0.6))
    assert not dims(blink_steps(0.5, 0.5))
    assert not dims([(1.0, 1.0)]) and not dims([(0.0, 1.0)])
