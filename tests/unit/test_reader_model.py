"""Reader protocol 3 on a hostile channel, pure and short (the long run: ``make
soak-reader``): ``tests/reader_model.py`` says what the channel may do and what must hold."""

from __future__ import annotations

from hypothesis import settings

from controller.core.table import SESSIONS_KEPT
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


def _replay_session(machine: HostileChannel, session: str, length: int) -> None:
    """Replay toward the table the frames sent from the first of ``session``'s on."""
    first = next(i for i, frame in enumerate(machine.sent_up) if session.encode() in frame)
    machine.replay(True, len(machine.sent_up) - first, length)


def test_a_replayed_hello_from_22_restarts_ago_applies_nothing_again() -> None:
    """The soak's find (seed 2932, 4 Dec 2026): a throw applied in the reader's second
    session, 22 restarts, then that session's HELLO and ROLL replayed: the table kept 16
    past sessions, took the HELLO for a new one and applied the roll twice."""
    machine = HostileChannel()
    machine.throw(1, 1)
    machine.restart_reader()
    machine.half_second([], [], 0)
    machine.half_second([], [], 0)
    session = machine.reader.session
    assert machine.table.applied == [(1, 1)]
    for _ in range(22):
        machine.restart_reader()
        machine.half_second([], [], 0)
        machine.applied_once_in_order()
    _replay_session(machine, session, 3)
    machine.half_second([], [], 0)
    machine.applied_once_in_order()
    machine.teardown()
    assert machine.table.applied == [(1, 1)]


def test_the_table_knows_the_reader_s_last_sessions_up_to_its_bound() -> None:
    """Every one of the last SESSIONS_KEPT sessions is known: the oldest one's HELLO and
    ROLL replayed take nothing (past that bound the limit is documented,
    docs/reader-protocol.md)."""
    machine = HostileChannel()
    machine.throw(2, 5)
    machine.half_second([], [], 0)
    machine.half_second([], [], 0)
    assert machine.table.applied == [(2, 5)]
    oldest = machine.reader.session
    for _ in range(SESSIONS_KEPT):
        machine.restart_reader()
        machine.half_second([], [], 0)
    assert machine.table.state.reader_past[0][0] == oldest
    _replay_session(machine, oldest, 3)
    machine.half_second([], [], 0)
    machine.teardown()
    assert machine.table.applied == [(2, 5)]
