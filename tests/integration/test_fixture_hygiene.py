"""A test fixture that fails in set-up stops every thread it started (issue 29): a table
that cannot start raises its own error at once and leaves nothing running, so one error
never becomes an unrelated failure in the next test."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from controller.core.errors import FirebetError
from tests.support import PROCESS_DEADLINE_S, start_table, table_running, wait_for


def _started_since(before: set[threading.Thread]) -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t not in before and t.is_alive())


def test_a_table_that_fails_to_start_stops_every_thread_it_started(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    # the control socket cannot be bound (where its folder should be is a file, which a
    # start cannot make a folder of): start() fails after the simulated reader, the pins
    # and the journal are up
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(FirebetError, match="cannot make the control socket's folder"):
        start_table(tmp_path / "state", tmp_path / "a-file" / "control.sock")  # at once
    left = _started_since(before)
    assert left == [], f"threads left running by a failed start_table: {left}"

    # the next table starts as if nothing had happened
    with table_running(tmp_path / "state2", tmp_path / "control.sock") as table:
        table.throw(3, 4)
        assert table.status()["last_roll"] == [3, 4]
    # its journal check (a process of its own) may still be finishing on a busy machine
    wait_for(
        lambda: not _started_since(before),
        timeout=PROCESS_DEADLINE_S,
        what=f"the second table's threads to end ({_started_since(before)})",
    )
