"""Dealer buttons on MockFactory pins: holds post, brushes do not."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from controller.core.commands import Ack, Command, Surrender, Void
from controller.core.config import ButtonsConfig
from controller.core.errors import HardwareError
from drivers.buttons import DealerButtons
from drivers.pins import make_pin_factory

HOLD = 0.15
CONFIG = ButtonsConfig(void=17, surrender=27, ack=22, hold_s=HOLD)


class Posted:
    def __init__(self) -> None:
        self.commands: list[Command] = []
        self.arrived = threading.Event()

    def __call__(self, command: Command) -> None:
        self.commands.append(command)
        self.arrived.set()


@pytest.fixture
def factory() -> Iterator[Any]:
    f = make_pin_factory("mock")
    yield f
    f.reset()


@pytest.fixture
def posted() -> Posted:
    return Posted()


@pytest.fixture
def buttons(factory: Any, posted: Posted) -> Iterator[DealerButtons]:
    b = DealerButtons(CONFIG, factory, posted, bounce_s=None)
    yield b
    b.close()


def hold(factory: Any, pin: int, seconds: float) -> None:
    factory.pin(pin).drive_low()
    time.sleep(seconds)
    factory.pin(pin).drive_high()


@pytest.mark.parametrize(
    ("pin", "expected"),
    [
        (17, Void(actor="button")),
        (27, Surrender(kind="voluntary", actor="button")),
        (22, Ack(actor="button")),
    ],
)
def test_a_hold_posts_its_command(
    buttons: DealerButtons, factory: Any, posted: Posted, pin: int, expected: Command
) -> None:
    hold(factory, pin, HOLD + 0.15)
    assert posted.arrived.wait(1)
    [command] = posted.commands
    assert type(command) is type(expected)
    assert command.to_dict() | {"at": ""} == expected.to_dict()
    assert command.at  # stamped with the time


def test_a_brush_under_hold_s_posts_nothing(
    buttons: DealerButtons, factory: Any, posted: Posted
) -> None:
    for pin in (17, 27, 22):
        hold(factory, pin, HOLD / 4)
    time.sleep(HOLD + 0.1)
    assert posted.commands == []


def test_one_long_hold_posts_once(buttons: DealerButtons, factory: Any, posted: Posted) -> None:
    hold(factory, 17, HOLD * 4)
    time.sleep(0.05)
    assert [type(c) for c in posted.commands] == [Void]


def test_watcher_sees_presses_releases_and_holds(factory: Any, posted: Posted) -> None:
    seen: list[tuple[str, str]] = []
    b = DealerButtons(
        CONFIG, factory, posted, bounce_s=None, watch=lambda n, w: seen.append((n, w))
    )
    try:
        hold(factory, 22, HOLD / 4)
        hold(factory, 22, HOLD + 0.15)
        time.sleep(0.05)
    finally:
        b.close()
    assert seen == [
        ("ack", "pressed"),
        ("ack", "released"),
        ("ack", "pressed"),
        ("ack", "held"),
        ("ack", "released"),
    ]
    assert [type(c) for c in posted.commands] == [Ack]


def test_bounce_time_reaches_the_pins(factory: Any, posted: Posted) -> None:
    # debouncing itself is the pin backend's job (lgpio filters in the kernel);
    # MockPin only records it, so check every button asked for it
    b = DealerButtons(CONFIG, factory, posted, bounce_s=0.05)
    try:
        assert [factory.pin(p).bounce for p in (17, 27, 22)] == [0.05, 0.05, 0.05]
        assert all(button.hold_time == HOLD for button in b.buttons.values())
    finally:
        b.close()


def test_a_failing_post_does_not_break_the_button(factory: Any) -> None:
    calls: list[Command] = []

    def post(command: Command) -> None:
        calls.append(command)
        raise RuntimeError("queue gone")

    b = DealerButtons(CONFIG, factory, post, bounce_s=None)
    try:
        hold(factory, 17, HOLD + 0.1)
        hold(factory, 17, HOLD + 0.1)
        time.sleep(0.05)
    finally:
        b.close()
    assert [type(c) for c in calls] == [Void, Void]


def test_pin_in_use_names_the_button_and_pin(buttons: DealerButtons, factory: Any) -> None:
    with pytest.raises(HardwareError, match=r"void button on BCM 17"):
        DealerButtons(CONFIG, factory, lambda c: None)
