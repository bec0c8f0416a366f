"""An idle table's threads sleep until something happens (SPEC section 7: at most 1 ms of
CPU a second at idle, and a timer's wake-up costs about 0.1 ms on the development machine):
the checkpointer with nothing to copy, the control socket with no client, the reader
thread between heartbeats each use no CPU at all while nothing comes (#31)."""

from __future__ import annotations

import os
import queue
import threading
import time
import tty
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.control.server import ControlServer
from controller.core.commands import Command
from controller.journal import store
from controller.service import service as service_module
from drivers.codec import encode_hb
from drivers.serial_reader import SerialDiceReader
from tests.control_support import Recorder
from tests.support import DEALERS, TECHS, start_table, stop_engine, wait_for

KEY = b"k" * 32
MAC = bytes(range(32))
QUIET_S = 1.6  # more than three of the old timers' periods (0.5 s)


def cpu_ns(thread: threading.Thread) -> int:
    """CPU time ``thread`` (alive) has used so far, in nanoseconds."""
    assert thread.ident is not None
    return time.clock_gettime_ns(time.pthread_getcpuclockid(thread.ident))


def quiet(thread: threading.Thread, seconds: float = QUIET_S) -> int:
    """The CPU ``thread`` used over ``seconds`` of nothing happening (ns)."""
    before = cpu_ns(thread)
    time.sleep(seconds)
    return cpu_ns(thread) - before


def test_checkpointer_sleeps_with_nothing_to_copy_and_copies_after_settle(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.db"
    store.create(path, KEY, 1, "test", "{}")
    db = store.connect(path, read_only=False)
    checkpointer = store.Checkpointer(path)
    try:
        thread = checkpointer._thread
        wait_for(lambda: checkpointer._parked, what="the checkpointer parked")
        assert quiet(thread) == 0  # it used to wake once a second to find nothing
        store.insert(db, store.Row(2, 2, "dealer", "command", "{}", 0, MAC), None)
        checkpointer.wrote()
        checkpointer.settle()  # the service: after the ACK
        wait_for(lambda: checkpointer.checkpoints == 1, what="the checkpoint after the quiet")
        wait_for(lambda: checkpointer._parked, what="the checkpointer parked again")
        assert quiet(thread, 0.5) == 0
    finally:
        checkpointer.stop()
        db.close()
    assert not thread.is_alive()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ControlServer]:
    with ControlServer(tmp_path / "control.sock", Recorder(), DEALERS, TECHS) as served:
        yield served


def test_control_socket_sleeps_with_no_client(server: ControlServer) -> None:
    thread = server._thread
    assert thread is not None
    time.sleep(0.2)  # its first turn
    assert quiet(thread) == 0  # it used to sweep twice a second for no connection


def test_reader_thread_sleeps_between_heartbeats_and_stops_at_once() -> None:
    master, slave = os.openpty()
    tty.setraw(slave)
    commands: queue.Queue[Command] = queue.Queue()
    reader = SerialDiceReader(os.ttyname(slave), heartbeat_timeout_s=3.0)
    try:
        reader.start(commands.put)
        wait_for(lambda: reader.status().connected, what="the port open")
        thread = reader._thread
        assert thread is not None
        os.write(master, encode_hb(1))
        wait_for(lambda: reader.status().counters["ok"] >= 1, what="the heartbeat read")
        time.sleep(0.1)
        # the heartbeat's deadline is 3 s away: no timer until then (it woke every 0.5 s)
        assert quiet(thread, 1.5) == 0
        started = time.monotonic()
        reader.stop()  # wakes the thread's wait through its pipe, not after 3 s
        assert not thread.is_alive()
        assert time.monotonic() - started < 1.0
    finally:
        reader.stop()
        os.close(master)
        os.close(slave)


def test_the_idle_engine_thread_wakes_only_for_what_is_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine thread woke every second to look at the journal's files and systemd's
    status line; it now wakes for the look every :data:`IDLE_LOOK_S` (5 s; every append
    looks first as well), for systemd's watchdog at half its interval, and for a status
    line that waited, when its second is over. Here the look is put off for the test's
    length: with no watchdog and nothing waiting, the thread uses no CPU at all, while the
    reader's heartbeats come ten times a second (they stop at the reader's thread)."""
    monkeypatch.setattr(service_module, "IDLE_LOOK_S", 3600.0)
    table, engine = start_table(tmp_path / "state", tmp_path / "control.sock")
    try:
        status_line = table.controller.table.systemd_status
        wait_for(lambda: status_line.due_in() is None, what="the status line sent")
        time.sleep(0.2)  # its last turn
        assert quiet(engine) == 0
        heartbeats = table.controller.parts.reader.status().counters["ok"]
        assert heartbeats > 0
        table.throw(3, 4)  # and a roll wakes it at once
        assert table.status()["rolls"] == 1
    finally:
        stop_engine(table.controller, engine)
        table.controller.close()
        table.device.stop()
        table.factory.close()
