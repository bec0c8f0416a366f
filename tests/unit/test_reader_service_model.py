"""Reader protocol 3 (and 2) on a hostile channel through the real service, short (the long
run: ``make soak-reader SOAK_ARGS=--service``, ``... --service --protocol 2``):
``tests/reader_service_model.py`` says what the channel may do and what must hold."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

from tests.reader_model import FIGURES
from tests.reader_service_model import ServiceChannel, ServiceChannelP2


def _short(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # a real service's timing: no shrinking
        suppress_health_check=[HealthCheck.too_slow],
    )


TestServiceChannel = ServiceChannel.TestCase
TestServiceChannel.settings = _short(4, 25)
TestServiceChannelP2 = ServiceChannelP2.TestCase
TestServiceChannelP2.settings = _short(2, 20)


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


def test_a_protocol_2_roll_the_table_cannot_prove_is_held_and_applied_once() -> None:
    # a reader of protocol 2 restarts and its HELLO is lost: its next roll (seq 1) is not
    # newer than the last applied (seq 4) and not one the table applied: held, ACKed, shown
    machine = ServiceChannelP2()
    try:
        for _ in range(3):
            machine.half_second([], [], 0)
        machine.throw(3, 4, [], [], 0)
        machine.restart_reader(hello_lost=True)
        machine.throw(5, 6, [], [], 0)
        machine.applied_once_in_order()  # ACKed and unapplied: only while status shows it held
        status = machine.service.status()
        assert status is not None
        assert [h["dice"] for h in status["held_rolls"]] == [[5, 6]], status["held_rolls"]
        assert machine.reader.done == [1, 2]
        assert machine.service.journal()[0] == [(3, 4)]
        machine.dealer()  # firebet held apply: the next throw's seq and dice
        assert machine.service.journal()[0] == [(3, 4), (5, 6)]
        machine.applied_once_in_order()
    except BaseException:
        machine._release()
        raise
    machine.teardown()
