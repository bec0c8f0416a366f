"""The login throttle on its own clock: only the client that failed is held, per client
and per (client, user), with back-off, in bounded memory."""

from __future__ import annotations

from controller.floor.guard import MAX_BACKOFF_S, LoginThrottle
from controller.floor.settings import WebSettings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def throttle(clock: Clock, max_keys: int = 4096) -> LoginThrottle:
    web = WebSettings(login_failures_per_client=4, login_failures_per_user=2, login_window_s=60)
    return LoginThrottle(web, max_keys=max_keys, clock=clock)


def test_a_client_failing_for_a_user_never_holds_another_client_off() -> None:
    """Five wrong passwords for a user held the right one off from every client (#32)."""
    clock = Clock()
    t = throttle(clock)
    for _ in range(10):
        t.failed("10.0.0.1", "alice")
        assert t.wait_s("10.0.0.2", "alice") == 0
    assert t.wait_s("10.0.0.1", "alice") > 0


def test_a_client_and_user_are_held_the_window_then_twice_as_long_each_time() -> None:
    clock = Clock()
    t = throttle(clock)
    t.failed("10.0.0.1", "alice")
    assert t.wait_s("10.0.0.1", "alice") == 0
    clock.now += 10
    t.failed("10.0.0.1", "alice")
    assert t.wait_s("10.0.0.1", "alice") == 60
    assert t.wait_s("10.0.0.1", "bob") == 0  # the client itself has failed twice of four
    clock.now += 60
    assert t.wait_s("10.0.0.1", "alice") == 0
    t.failed("10.0.0.1", "alice")
    t.failed("10.0.0.1", "alice")
    assert t.wait_s("10.0.0.1", "alice") == 120  # held again: back-off
    waits = []
    for _ in range(8):
        clock.now += t.wait_s("10.0.0.1", "alice")
        t.failed("10.0.0.1", "alice")
        t.failed("10.0.0.1", "alice")
        waits.append(t.wait_s("10.0.0.1", "alice"))
    assert waits[0] == 240 and waits[-1] == MAX_BACKOFF_S


def test_failures_older_than_the_window_do_not_count() -> None:
    clock = Clock()
    t = throttle(clock)
    t.failed("10.0.0.1", "alice")
    clock.now += 61
    t.failed("10.0.0.1", "alice")
    assert t.wait_s("10.0.0.1", "alice") == 0


def test_a_success_starts_that_pair_again() -> None:
    clock = Clock()
    t = throttle(clock)
    t.failed("10.0.0.1", "alice")
    t.succeeded("10.0.0.1", "alice")
    t.failed("10.0.0.1", "alice")
    assert t.wait_s("10.0.0.1", "alice") == 0


def test_a_client_is_held_whatever_name_it_tries_and_no_other_client_is() -> None:
    clock = Clock()
    t = throttle(clock)
    for i in range(4):
        t.failed("10.0.0.9", f"user{i}")
    assert t.wait_s("10.0.0.9", "someone-new") == 60
    assert t.wait_s("10.0.0.8", "someone-new") == 0


def test_the_counts_are_bounded() -> None:
    clock = Clock()
    t = throttle(clock, max_keys=10)
    for i in range(1000):
        t.failed(f"10.1.{i // 250}.{i % 250}", f"x{i}")
    assert len(t._counts) <= 10
