"""Dealer buttons on MockFactory pins: holds post, brushes do not."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.core.commands import Ack, Command, Surrender, Void
from controller.core.config import ButtonsConfig
from controller.core.errors import HardwareError
from drivers.buttons import DealerButtons
from drivers.pins import make_pin_factory
from tests.support import wait_for

HOLD = 0.15
CONFIG = ButtonsConfig(void=17, surrender=27, ack=22, hold_s=HOLD)
BRUSH = 0.05
SLOW = ButtonsConfig(void=17, surrender=27, ack=22, hold_s=1.0)
"""For the brushes: a stalled test thread must not turn a 50 ms brush into a hold."""


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


def hold_until(factory: Any, pin: int, confirmed: Callable[[], object]) -> None:
    """Hold ``pin`` down until ``confirmed()`` (gpiozero's hold thread may run late on a
    busy machine: the test waits for it, never for a fixed time), then let go."""
    factory.pin(pin).drive_low()
    try:
        wait_for(confirmed, what=f"the hold of pin {pin} to be confirmed")
    finally:
        factory.pin(pin).drive_high()


@pytest.mark.parametrize(
    ("pin", "expected"),
    [
        (17, Void(arm=True, actor="button")),  # a misread: waits for the true dice
        (27, Surrender(kind="voluntary", actor="button")),
        (22, Ack(actor="button")),
    ],
)
def test_a_hold_posts_its_command(
    buttons: DealerButtons, factory: Any, posted: Posted, pin: int, expected: Command
) -> None:
    hold_until(factory, pin, posted.arrived.is_set)
    [command] = posted.commands
    assert type(command) is type(expected)
    assert command.to_dict() | {"at": ""} == expected.to_dict()
    assert command.at  # stamped with the time


def test_a_brush_under_hold_s_posts_nothing(factory: Any, posted: Posted) -> None:
    b = DealerButtons(SLOW, factory, posted, bounce_s=None)
    try:
        for pin in (17, 27, 22):
            hold(factory, pin, BRUSH)
        time.sleep(SLOW.hold_s + 0.1)  # a hold would have been confirmed by now
    finally:
        b.close()
    assert posted.commands == []


def test_one_long_hold_posts_once(buttons: DealerButtons, factory: Any, posted: Posted) -> None:
    factory.pin(17).drive_low()
    try:
        wait_for(posted.arrived.is_set, what="the hold to post")
        time.sleep(HOLD * 3)  # held on: three more hold times post nothing more
    finally:
        factory.pin(17).drive_high()
    assert [type(c) for c in posted.commands] == [Void]


def test_watcher_sees_presses_releases_and_holds(factory: Any, posted: Posted) -> None:
    seen: list[tuple[str, str]] = []
    b = DealerButtons(SLOW, factory, posted, bounce_s=None, watch=lambda n, w: seen.append((n, w)))
    try:
        hold(factory, 22, BRUSH)
        hold_until(factory, 22, lambda: ("ack", "held") in seen)
        wait_for(lambda: seen[-1] == ("ack", "released"), what="the release to be seen")
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
    finally:
        b.close()


def test_buttons_nobody_presses_keep_no_thread_awake(factory: Any, posted: Posted) -> None:
    # gpiozero's Button polled for a hold ten times a second in a thread per button, the
    # table idle or not (issue 31: the idle CPU budget); a hold is timed from its press
    before = set(threading.enumerate())
    b = DealerButtons(CONFIG, factory, posted, bounce_s=None)
    try:
        assert set(threading.enumerate()) - before == set()
        hold_until(factory, 17, posted.arrived.is_set)  # and a hold still posts
        wait_for(lambda: set(threading.enumerate()) - before == set(), what="the timer to end")
    finally:
        b.close()
    assert [type(c) for c in posted.commands] == [Void]


def test_a_failing_post_does_not_break_the_button(factory: Any) -> None:
    calls: list[Command] = []

    def post(command: Command) -> None:
        calls.append(command)
        raise RuntimeError("queue gone")

    b = DealerButtons(CONFIG, factory, post, bounce_s=None)
    try:
        hold_until(factory, 17, lambda: len(calls) == 1)
        hold_until(factory, 17, lambda: len(calls) == 2)
    finally:
        b.close()
    assert [type(c) for c in calls] == [Void, Void]


def test_pin_in_use_names_the_button_and_pin(buttons: DealerButtons, factory: Any) -> None:
    with pytest.raises(HardwareError, match=r"void button on BCM 17"):
        DealerButtons(CONFIG, factory, lambda c: None)
