"""Reader protocol 3 on a hostile channel, pure and short (the long run: ``make
soak-reader``): ``tests/reader_model.py`` says what the channel may do and what must hold."""

from __future__ import annotations

from hypothesis import settings

from tests.reader_model import FIGURES, HostileChannel

TestHostileChannel = HostileChannel.TestCase
TestHostileChannel.settings = settings(max_examples=60, stateful_step_count=60, deadline=None)


def test_the_figures_count_what_the_model_survived() -> None:
    machine = HostileChannel()
    before = FIGURES["faults"]
    machine.throw(3, 4)
    machine.half_second(["drop", "duplicate"], ["delay"], 0)
    machine.idle()
    machine.teardown()
    assert FIGURES["faults"] == before + 4 and machine.table.applied == [(3, 4)]
