"""Reader protocol 3 on a hostile channel through the real service, short (the long run:
``make soak-reader SOAK_ARGS=--service``): ``tests/reader_service_model.py`` says what the
channel may do and what must hold."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

from tests.reader_model import FIGURES
from tests.reader_service_model import ServiceChannel

TestServiceChannel = ServiceChannel.TestCase
TestServiceChannel.settings = settings(
    max_examples=4,
    stateful_step_count=25,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # a real service's timing: no shrinking
    suppress_health_check=[HealthCheck.too_slow],
)


def test_the_figures_count_a_kill_and_the_throws_applied_once() -> None:
    machine = ServiceChannel()
    before = dict(FIGURES)
    machine.throw(3, 4, [], [], 0)
    machine.half_second(["drop", "duplicate"], ["delay"], 0)
    machine.kill_service(in_flight=True)
    machine.throw(5, 6, ["corrupt"], [], 3)
    machine.idle()
    machine.applied_once_in_order()
    machine.teardown()
    assert FIGURES["service.kills"] == before.get("service.kills", 0) + 1
    assert FIGURES["service.throws"] == before.get("service.throws", 0) + 2
