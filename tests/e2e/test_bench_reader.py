"""`firebet run --simulated-reader` driven by `firebet sim-reader` as a bench tester does
(issue 14.3, docs/bench.md): throw, fault and manual roll, garbage, unplug and replug,
silence, all through the real driver, engine and journal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.control.client import ControlClient
from tests.support import PROCESS_DEADLINE_S, ROOT, run_firebet, wait_for

pytestmark = pytest.mark.slow


class Bench:
    """A `firebet run --simulated-reader` process and its state directory."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.log = state.parent / "service.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-m", "controller", "run", "--simulated-reader",
                    "--pin-factory", "mock", "--state-dir", str(state),
                ],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip

    def firebet(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_firebet(*args, "--state-dir", str(self.state))

    def status(self) -> dict[str, Any]:
        proc = self.firebet("status", "--json")
        assert proc.returncode == 0, proc.stderr
        reply: dict[str, Any] = json.loads(proc.stdout)
        return reply

    def up(self) -> bool:
        return self.firebet("status", "--json").returncode == 0

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=PROCESS_DEADLINE_S)


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    b = Bench(tmp_path / "state")
    try:
        wait_for(b.up, what="the bench service's socket")
        yield b
    finally:
        b.stop()


def test_a_bench_service_is_driven_from_the_command_line(bench: Bench) -> None:
    out = bench.firebet("sim-reader", "throw", "4", "4")
    assert out.returncode == 0, out.stderr
    assert "thrown 4 4" in out.stdout and "ACKed by the controller" in out.stdout
    s = bench.status()
    assert s["last_roll"] == [4, 4] and s["point"] == 8 and s["mode"] == "running"
    assert s["reader"]["port"] == str(bench.state / "sim-reader.tty")
    # the bench composition registers the bench device's op (a real table's has none)
    may = json.loads(bench.firebet("whoami", "--json").stdout)["may"]
    assert "sim-reader" in may

    # a reader fault lets the dealer enter a roll by hand, as at a live table
    assert bench.firebet("roll", "3", "3").returncode != 0  # the reader works: no manual roll
    assert bench.firebet("sim-reader", "fault", "camera").returncode == 0
    wait_for(lambda: bench.status()["reader"]["fault"] == "CAMERA", what="the CAMERA fault")
    assert bench.status()["mode"] == "reader_fault"
    manual = bench.firebet("roll", "4", "4")
    assert manual.returncode == 0, manual.stderr
    assert bench.status()["points"] == [8]
    assert bench.firebet("sim-reader", "ok").returncode == 0
    wait_for(lambda: bench.status()["mode"] == "running", what="the fault to clear")

    # garbage is counted, never applied
    rolls = bench.status()["rolls"]
    assert bench.firebet("sim-reader", "garbage", "64").returncode == 0
    wait_for(lambda: bench.status()["reader"]["counters"]["bad_checksum"] >= 1)
    assert bench.status()["rolls"] == rolls

    # the cable pulled: PORT_LOST; a throw waits in the reader until it is plugged back in
    assert bench.firebet("sim-reader", "unplug").returncode == 0
    wait_for(lambda: bench.status()["reader"]["fault"] == "PORT_LOST", what="PORT_LOST")
    held = bench.firebet("sim-reader", "throw", "2", "3")
    assert held.returncode == 0 and "unplugged" in held.stdout
    assert bench.firebet("sim-reader", "replug").returncode == 0
    # a roll was keyed by hand above, so the reader's rolls are held for the dealer
    # (docs/rules.md, "Reader fault and manual entry"): it applies this one
    wait_for(lambda: bench.status()["held_rolls"], what="the reader's roll to be held")
    assert bench.status()["held_rolls"][0]["dice"] == [2, 3]
    applied = bench.firebet("held", "apply", "1")
    assert applied.returncode == 0, applied.stderr
    wait_for(lambda: bench.status()["last_roll"] == [2, 3], what="the held throw")
    wait_for(lambda: bench.status()["mode"] == "running", what="the port to come back")

    # silence: a HEARTBEAT fault after the timeout, gone when the reader speaks again
    assert bench.firebet("sim-reader", "silence").returncode == 0
    wait_for(lambda: bench.status()["reader"]["fault"] == "HEARTBEAT", what="HEARTBEAT")
    assert bench.firebet("sim-reader", "speak").returncode == 0
    wait_for(lambda: bench.status()["mode"] == "running", what="the heartbeat to return")

    random_throw = bench.firebet("sim-reader", "throw", "--json")
    reply = json.loads(random_throw.stdout)
    assert reply["ok"] is True and reply["acked"] is True  # #33: it had no "ok"
    assert bench.status()["last_roll"] == reply["dice"]

    # the service's log lines carry the time in the foreground (issue 14)
    logged = bench.log.read_text().splitlines()
    assert logged and all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}", x) for x in logged)

    history = bench.firebet("history", "--json")
    # (the random throw may have been a seven-out that ended the hand)
    rolls_in_journal = [
        r for line in history.stdout.splitlines() for r in json.loads(line)["rolls"]
    ]
    assert rolls_in_journal[:3] == [[4, 4], [4, 4], [2, 3]]


def test_sim_reader_bad_usage_exits_2_before_asking(tmp_path: Path) -> None:
    where = ("--state-dir", str(tmp_path))
    for args in (("throw", "3"), ("throw", "7", "1"), ("garbage", "0"), ("fault", "CAM ERA")):
        proc = run_firebet("sim-reader", *args, *where)
        assert proc.returncode == 2, (args, proc.stderr)
    nobody = run_firebet("sim-reader", "throw", *where)
    assert nobody.returncode == 3 and "not running" in nobody.stderr


def test_run_refuses_serial_beside_the_simulated_reader(tmp_path: Path) -> None:
    proc = run_firebet(
        "run", "--simulated-reader", "--serial", "/dev/ttyUSB0", "--state-dir", str(tmp_path)
    )
    assert proc.returncode == 2 and "--serial and --simulated-reader" in proc.stderr


def test_a_real_tables_socket_has_no_sim_reader_op(tmp_path: Path) -> None:
    """The bench device leaves the production service (issue 29): `firebet run` on a
    serial reader answers `sim-reader` as an unknown op; only a bench composition has it."""
    master, slave = os.openpty()  # the table's reader port: a real terminal, no bench
    state = tmp_path / "state"
    log = tmp_path / "service.log"
    try:
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [
                    sys.executable, "-m", "controller", "run", "--serial", os.ttyname(slave),
                    "--pin-factory", "mock", "--state-dir", str(state),
                ],
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip
        try:
            where = ("--state-dir", str(state))
            wait_for(lambda: run_firebet("status", *where).returncode == 0, what="the service")
            with ControlClient(state / "control.sock") as client:
                reply = client.request("sim-reader", action="throw", d1=3, d2=4)
            assert reply["ok"] is False and reply["code"] == "unknown_op", reply
            assert "unknown op 'sim-reader'" in reply["error"]
            said = run_firebet("sim-reader", "throw", "3", "4", "--json", *where)
            assert said.returncode == 1, said.stderr
            refused = json.loads(said.stdout)
            assert refused["code"] == "not_a_bench" and refused["exit"] == 1
            assert "firebet run --simulated-reader or firebet sim" in refused["error"]
            plain = run_firebet("sim-reader", "unplug", *where)
            assert plain.returncode == 1 and "reads a real dice reader" in plain.stderr
            may = json.loads(run_firebet("whoami", "--json", *where).stdout)["may"]
            assert "clear-halt" in may and "sim-reader" not in may
            assert run_firebet("status", "--json", *where).returncode == 0  # still serving
        finally:
            proc.terminate()
            proc.wait(timeout=PROCESS_DEADLINE_S)
    finally:
        os.close(master)
        os.close(slave)


def test_run_refuses_a_url_scheme_no_driver_knows(tmp_path: Path) -> None:
    proc = run_firebet("run", "--serial", "foo://bar", "--state-dir", str(tmp_path))
    assert proc.returncode == 2
    assert "--serial foo://bar: unknown URL scheme 'foo'" in proc.stderr
    assert "socket://" in proc.stderr


def test_run_says_why_the_reader_port_cannot_be_opened(tmp_path: Path) -> None:
    missing = tmp_path / "ttyUSB9"
    log = tmp_path / "service.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "controller", "run", "--serial", str(missing),
                "--pin-factory", "mock", "--state-dir", str(tmp_path / "state"),
            ],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        wait_for(lambda: "ready in" in log.read_text(), what="the service to be ready")
        text = log.read_text()
        assert f"dice reader port {missing}: no such file" in text
        assert "check the reader's cable and power, and --serial" in text
    finally:
        proc.terminate()
        proc.wait(timeout=PROCESS_DEADLINE_S)
