"""The full check after READY runs at idle priority (issue 31, SPEC section 7: nothing the
service starts after READY competes with a roll): its process is SCHED_IDLE, so a roll
never waits for it on a busy core."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from controller.core.commands import Roll
from controller.core.engine import Engine
from controller.journal import Journal, recover
from controller.journal.play import decide
from controller.service import health, recall
from tests.support import PROCESS_DEADLINE_S, python_process, read_line, table_running, wait_for

ENGINE = Engine()


def test_the_full_check_runs_at_idle_priority(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = Journal(tmp_path / "journal.db")
    replayed = recover(journal, ENGINE.rules).replay
    for i in range(20):
        decide(journal, replayed, Roll(1 + i % 6, 1 + (i // 6) % 6, seq=i))
    monkeypatch.setattr(recall, "IDLE_PRIORITY", True)  # as shipped (the suite's is off)
    policies: list[int] = []
    real = recall._Worker.ask

    def ask(self: Any, job: tuple[object, ...], wait: float, cancel: Any = None) -> tuple[Any, ...]:
        # idle only once it said it is bound to die with the service (PR_SET_PDEATHSIG)
        assert self._ready, "put at idle priority before it could die with the service"
        policies.append(os.sched_getscheduler(self.process.pid))
        # seen; now let it run at the table's priority, or beside busy loops it never would
        os.sched_setscheduler(self.process.pid, os.SCHED_OTHER, os.sched_param(0))
        return real(self, job, wait, cancel)

    monkeypatch.setattr(recall._Worker, "ask", ask)
    with journal:
        assert recall.verify_apart(journal, ENGINE.rules) == ("ok", None, "")
    assert policies == [os.SCHED_IDLE]


def starved_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every full check's process from now on gets no CPU at all (SIGSTOP: what SCHED_IDLE
    gives it beside busy loops); the list fills with their pids."""
    pids: list[int] = []
    real = recall._Worker.ask

    def ask(self: Any, job: tuple[object, ...], wait: float, cancel: Any = None) -> Any:
        if job[0] == "verify":
            pids.append(self.process.pid)
            os.kill(self.process.pid, signal.SIGSTOP)
        return real(self, job, wait, cancel)

    monkeypatch.setattr(recall._Worker, "ask", ask)
    return pids


def gone(pid: int) -> bool:
    """The process has ended (a zombie nobody reaped counts: it holds nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_a_stop_ends_a_full_check_that_gets_no_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside busy loops a check at idle priority gets no CPU, and its thread waited up to
    an hour for it: a run of the suite beside four busy loops left 45 checks of stopped
    services running, each holding its journal open. The service's stop now ends it, and
    nothing is posted for an engine that is gone."""
    journal = Journal(tmp_path / "journal.db")
    replayed = recover(journal, ENGINE.rules).replay
    for i in range(20):
        decide(journal, replayed, Roll(1 + i % 6, 1 + (i // 6) % 6, seq=i))
    pids = starved_checks(monkeypatch)
    stop, posted = threading.Event(), []
    with journal:
        check = threading.Thread(
            target=health.check_whole_journal,
            args=(journal, ENGINE.rules, posted.append, 0, stop),
            daemon=True,
        )
        check.start()
        wait_for(lambda: pids, what="the check's process")
        stop.set()
        check.join(timeout=PROCESS_DEADLINE_S)
        assert not check.is_alive(), "the check's thread still waits for its process"
    assert gone(pids[0]) and posted == []


def test_a_service_s_close_ends_its_full_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids = starved_checks(monkeypatch)
    with table_running(tmp_path / "state", tmp_path / "control.sock"):
        wait_for(lambda: pids, what="the full check after ready")
    wait_for(lambda: gone(pids[0]), what="the check's process to end with the service")


SERVICE = """
import os, signal, sys
from controller.service import recall
worker = recall._Worker.spawn()
os.kill(worker.process.pid, signal.SIGSTOP)  # no CPU yet: not bound to die with us
print(worker.process.pid, flush=True)
sys.stdin.readline()
"""


def test_a_worker_whose_service_died_before_it_was_ready_ends(tmp_path: Path) -> None:
    """A worker that got no CPU until its service had gone ends as soon as it runs (its
    pipes closed, another parent), never holding the journal or the service's standard
    error. It gets that CPU because it goes to idle priority only once ready (the test
    above): born at ``SCHED_IDLE`` beside busy loops it never ran, and a ``firebet sim``
    test waited for ever for the end of the sim's standard error."""
    with python_process(SERVICE) as service:
        assert service.stdout is not None
        pid = int(read_line(service.stdout, "the worker's pid"))
        try:
            service.kill()
            service.wait(timeout=PROCESS_DEADLINE_S)
            assert not gone(pid)
            os.kill(pid, signal.SIGCONT)
            wait_for(lambda: gone(pid), what="the orphaned worker to end")
        finally:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
