"""`firebet run` as a real subprocess: a simulated reader on a pty, mock pins, a temporary
state directory, sd_notify on a real datagram socket, SIGKILL and restart, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.service.integrity import write_manifest
from drivers.sim_reader import SimulatedReader
from tests.control_support import raw_exchange
from tests.support import DICE, wait_for


class Notifications:
    """A systemd-like NOTIFY_SOCKET: every datagram with the time it came."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.1)
        self.messages: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            self.messages.append((time.monotonic(), data.decode()))

    def first(self, text: str) -> float | None:
        for at, message in self.messages:
            if text in message.splitlines():
                return at
        return None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


class Service:
    def __init__(self, tmp: Path, device: SimulatedReader) -> None:
        self.tmp = tmp
        self.device = device
        self.state = tmp / "state"
        self.sock = tmp / "control.sock"
        self.proc: subprocess.Popen[str] | None = None
        self.notify: Notifications | None = None
        self.starts = 0

    def start(self, umask: int = -1, **extra_env: str) -> None:
        self.starts += 1
        if self.notify is not None:
            self.notify.close()
        self.notify = Notifications(self.tmp / f"notify-{self.starts}.sock")
        env = dict(os.environ, NOTIFY_SOCKET=str(self.notify.path), **extra_env)
        log = open(self.tmp / f"service-{self.starts}.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "controller", "run",
                "--serial", self.device.port, "--pin-factory", "mock",
                "--state-dir", str(self.state), "--socket", str(self.sock),
            ],
            stdout=log, stderr=subprocess.STDOUT, text=True, env=env, umask=umask,
        )  # fmt: skip
        log.close()
        wait_for(lambda: self.notify is not None and self.notify.first("READY=1") is not None, 60)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "controller", *args, "--socket", str(self.sock)],
            capture_output=True,
            text=True,
            timeout=30,
        )

    def status(self) -> dict:  # type: ignore[type-arg]
        proc = self.cli("status", "--json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)  # type: ignore[no-any-return]

    def throw(self, d1: int, d2: int) -> int:
        before = set(self.device.transmissions)
        self.device.throw(d1, d2)
        wait_for(lambda: set(self.device.transmissions) - before != set())
        (seq,) = set(self.device.transmissions) - before
        return seq

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.notify is not None:
            self.notify.close()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    with SimulatedReader(heartbeat_s=0.2, retransmit_s=0.1) as device:  # stopped whatever fails
        svc = Service(tmp_path, device)
        try:
            yield svc
        finally:
            svc.stop()


def test_frames_in_acks_out_status_settlement_kill_9_restart_and_sigterm(service: Service) -> None:
    service.start()
    assert service.cli("bet", "2", "5").returncode == 0
    over = service.cli("bet", "3", "9")
    assert over.returncode == 1 and "over the $5 maximum" in over.stderr
    for point in (4, 5, 6, 8):
        for _ in range(2):
            assert service.device.wait_acked(service.throw(*DICE[point]), timeout=30)
    assert service.device.wait_acked(service.throw(3, 3), timeout=30)  # point 6 on
    before = service.status()
    assert before["points"] == [4, 5, 6, 8] and before["point"] == 6
    assert before["markers"]["8"] == {"lit": True, "ordinal": 4}

    # SIGKILL mid-hand; a roll is thrown while the service is down: it must wait
    assert service.proc is not None
    service.proc.send_signal(signal.SIGKILL)
    service.proc.wait()
    acked_before = len(service.device.acked)
    seq = service.throw(3, 4)  # the loser 7, retransmitted until someone ACKs it
    time.sleep(0.3)
    assert len(service.device.acked) == acked_before
    service.start()
    assert service.device.wait_acked(seq, timeout=30)
    assert service.notify is not None
    ready_at = service.notify.first("READY=1")
    assert ready_at is not None
    after = service.status()
    # the state was exactly restored, then the waiting loser 7 settled it once
    assert after["hand"] == 2 and after["rolls"] == before["rolls"] + 1
    assert after["last_settlement"]["payouts"] == {"2": 120}
    history = service.cli("history", "--json", "--hands", "2")
    hand1 = json.loads(history.stdout.splitlines()[0])
    assert hand1["points"] == [4, 5, 6, 8] and hand1["result"] == "win"
    assert hand1["rolls"][-1] == [3, 4] and hand1["rolls"].count([3, 4]) == 1

    # SIGTERM: finish and leave cleanly
    assert service.proc is not None
    service.proc.send_signal(signal.SIGTERM)
    assert service.proc.wait(timeout=10) == 0
    assert service.cli("status").returncode == 3


def test_nothing_is_acked_before_ready_and_the_engine_feeds_the_watchdog(service: Service) -> None:
    seq = service.throw(2, 2)  # waiting on the line before the service even starts
    service.start(WATCHDOG_USEC="400000")
    assert service.device.wait_acked(seq, timeout=30)
    first_ack = time.monotonic()
    assert service.notify is not None
    ready_at = service.notify.first("READY=1")
    assert ready_at is not None and ready_at <= first_ack
    statuses = [m for _, m in service.notify.messages if m.startswith("STATUS=")]
    assert statuses and "hand 1" in statuses[-1]
    wait_for(lambda: sum(m == "WATCHDOG=1" for _, m in service.notify.messages) >= 3)


def test_clients_without_a_service_exit_3(tmp_path: Path) -> None:
    for args in (["status"], ["void"], ["bet", "1", "5"], ["roll", "3", "4"], ["ack"]):
        proc = subprocess.run(
            [sys.executable, "-m", "controller", *args, "--socket", str(tmp_path / "none.sock")],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 3, args
        assert "not running" in proc.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "controller", "roll", "7", "1"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "a die shows 1 to 6" in bad.stderr


def test_a_program_that_differs_from_its_manifest_halts_the_table(
    service: Service, tmp_path: Path
) -> None:
    manifest = tmp_path / "program.manifest"
    digest = write_manifest(manifest)
    body = json.loads(manifest.read_text())
    body["files"]["controller/core/engine.py"] = "0" * 64  # as if engine.py were edited
    manifest.write_text(json.dumps(body))
    service.start(FIREBET_MANIFEST=str(manifest))
    status = service.status()
    assert status["mode"] == "halted"
    assert status["halted"].startswith("program integrity: controller/core/engine.py differs")
    assert status["program"]["digest"] == digest and status["program"]["ok"] is False
    assert all(m["lit"] for m in status["markers"].values())  # the fault pattern
    seq = service.throw(2, 2)
    log = service.tmp / "service-1.log"
    wait_for(lambda: "roll not applied: the table is halted (program" in log.read_text())
    bet = service.cli("bet", "1", "5")
    assert bet.returncode == 4 and "program integrity" in bet.stderr  # halted: exit 4
    cleared = service.cli("clear-halt", "--note", "tried", "--yes")
    assert cleared.returncode != 0 and "reinstall" in cleared.stderr
    assert seq not in service.device.acked
    assert service.status()["rolls"] == 0


def test_a_matching_manifest_runs_and_status_shows_the_digest(
    service: Service, tmp_path: Path
) -> None:
    manifest = tmp_path / "program.manifest"
    digest = write_manifest(manifest)
    service.start(FIREBET_MANIFEST=str(manifest))
    status = service.status()
    assert status["mode"] == "running"
    assert status["program"] == {
        "digest": digest, "manifest": str(manifest), "ok": True, "problem": None,
    }  # fmt: skip


@pytest.mark.slow
def test_run_sets_its_own_umask_whatever_it_was_started_with(service: Service) -> None:
    service.start(umask=0o000)  # a careless shell: files would be world-writable
    journal = service.state / "journal.db"
    wait_for(journal.exists)
    assert oct(service.state.stat().st_mode & 0o777) == oct(0o750)
    assert oct(journal.stat().st_mode & 0o777) == oct(0o640)
    for extra in service.state.iterdir():  # -wal, -shm, the lock: nothing for "other"
        assert extra.stat().st_mode & 0o007 == 0, extra


def ask(path: Path, request: dict[str, Any]) -> dict[str, Any]:
    """One request on a fresh connection, as a client resending after a restart would."""
    return raw_exchange(path, json.dumps(request).encode() + b"\n", 1, timeout=30)[0]


def test_a_request_journaled_before_a_restart_is_answered_not_done_again(
    service: Service,
) -> None:
    """#9 item 2 across a restart: the first reply was lost with the old process (kill -9),
    the client sends the same id again, and the service started again answers what was
    decided then from its journal; a $1 bet never becomes $2."""
    service.start()
    bet = {"op": "bet", "args": {"position": 2, "amount": 1}, "id": "dealer-7"}
    over = {"op": "bet", "args": {"position": 3, "amount": 9}, "id": 8}
    first = ask(service.sock, bet)
    assert first["ok"] is True
    refused = ask(service.sock, over)
    assert refused["ok"] is False and "over the $5 maximum" in refused["error"]
    assert service.proc is not None
    service.proc.send_signal(signal.SIGKILL)
    service.proc.wait()
    service.start()

    again = ask(service.sock, bet)
    assert again["ok"] is True and again["id"] == "dealer-7"
    assert "before the service restarted; not done again" in again["repeated"]
    assert again["events"] == first["events"]  # what was decided then, re-derived
    assert service.status()["bets"] == {"2": 1}  # applied once
    over_again = ask(service.sock, over)
    assert over_again["ok"] is False and over_again["id"] == 8
    assert "over the $5 maximum" in over_again["error"]
    assert "before the service restarted" in over_again["error"]
    other = ask(service.sock, {**bet, "args": {"position": 4, "amount": 1}})
    assert other["ok"] is False and "already used for another request" in other["error"]
    # another id is another bet; and the CLI (a fresh id each time) is unchanged
    assert ask(service.sock, {**bet, "id": "dealer-9"})["ok"] is True
    assert service.status()["bets"] == {"2": 2}
    done = service.cli("bet", "5", "1")
    assert done.returncode == 0, done.stderr
    assert service.status()["bets"] == {"2": 2, "5": 1}


def test_the_check_and_the_history_reader_start_as_copies_of_the_service(
    service: Service,
) -> None:
    """`firebet run` copies itself for the full check and the history reader before its
    threads start (issue 31: a new interpreter's start after READY took a Pi's rolls' CPU
    for seconds); a history request and the check start no interpreter, and a killed
    service leaves none of them behind."""
    from tests.integration.test_full_check_priority import gone
    from tests.integration.test_prefork import children_of

    service.start()
    assert service.proc is not None
    pid = service.proc.pid
    own = Path(f"/proc/{pid}/cmdline").read_bytes()
    wait_for(lambda: service.status()["journal_check"] not in (None, "running"), 60)
    assert service.status()["journal_check"] == "ok"
    (history,) = children_of(pid)  # the check's copy ended with the check
    assert Path(f"/proc/{history}/cmdline").read_bytes() == own
    assert service.device.wait_acked(service.throw(3, 4), timeout=30)
    asked = service.cli("history", "--json", "--hands", "1")
    assert asked.returncode == 0, asked.stderr
    assert children_of(pid) == [history]
    service.proc.kill()
    service.proc.wait()
    wait_for(lambda: gone(history), 60)
