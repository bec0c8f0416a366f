"""The full check after READY runs at idle priority (issue 31, SPEC section 7: nothing the
service starts after READY competes with a roll): its process is SCHED_IDLE, so a roll
never waits for it on a busy core."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from controller.core.commands import Roll
from controller.core.engine import Engine
from controller.journal import Journal, recover
from controller.journal.play import decide
from controller.service import recall

ENGINE = Engine()


def test_the_full_check_runs_at_idle_priority(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = Journal(tmp_path / "journal.db")
    replayed = recover(journal, ENGINE.rules).replay
    for i in range(20):
        decide(journal, replayed, Roll(1 + i % 6, 1 + (i // 6) % 6, seq=i))
    policies: list[int] = []
    real = recall._Worker.ask

    def ask(self: Any, job: tuple[object, ...], wait: float) -> tuple[Any, ...]:
        policies.append(os.sched_getscheduler(self.process.pid))
        return real(self, job, wait)

    monkeypatch.setattr(recall._Worker, "ask", ask)
    with journal:
        assert recall.verify_apart(journal, ENGINE.rules) == ("ok", None, "")
    assert policies == [os.SCHED_IDLE]
