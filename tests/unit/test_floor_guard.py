"""The login throttle on its own clock: per client, per user, a sliding window, bounded
memory that a flood of made-up names cannot use to wipe a real user's count."""

from __future__ import annotations

from controller.floor.guard import LoginThrottle
from controller.floor.settings import WebSettings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def throttle(clock: Clock, max_keys: int = 4096) -> LoginThrottle:
    web = WebSettings(login_failures_per_client=4, login_failures_per_user=2, login_window_s=60)
    return LoginThrottle({"alice"}, web, max_keys=max_keys, clock=clock)


def test_a_user_is_held_from_every_client_until_the_window_passes() -> None:
    clock = Clock()
    t = throttle(clock)
    t.failed("10.0.0.1", "alice")
    assert t.wait_s("10.0.0.2", "alice") == 0
    clock.now += 10
    t.failed("10.0.0.2", "alice")
    assert t.wait_s("10.0.0.3", "alice") == 50  # the first failure leaves the window at 60 s
    clock.now += 50
    assert t.wait_s("10.0.0.3", "alice") == 0
    t.failed("10.0.0.3", "alice")
    t.succeeded("alice")
    assert t.wait_s("10.0.0.3", "alice") == 0


def test_a_client_is_held_whatever_name_it_tries() -> None:
    clock = Clock()
    t = throttle(clock)
    for i in range(4):
        t.failed("10.0.0.9", f"user{i}")
    assert t.wait_s("10.0.0.9", "someone-new") == 60
    assert t.wait_s("10.0.0.8", "someone-new") == 0


def test_made_up_names_are_bounded_and_cannot_push_out_a_real_user() -> None:
    clock = Clock()
    t = throttle(clock, max_keys=10)
    t.failed("10.0.0.1", "alice")
    t.failed("10.0.0.2", "alice")
    for i in range(1000):
        t.failed(f"10.1.{i // 250}.{i % 250}", f"x{i}")
    assert len(t._other) <= 10
    assert t.wait_s("10.9.9.9", "alice") > 0
