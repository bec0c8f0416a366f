"""The floor link in real processes: `firebet run` SIGKILLed mid-stream (the will, then a
restart that resumes from the cursor), `firebet sim --broker`, and `firebet doctor`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.journal import Journal
from controller.link.cursor import CursorFile
from controller.link.link import WINDOW
from drivers.sim_reader import SimulatedReader
from tests.broker import Mosquitto, Subscriber
from tests.floor_support import Publisher
from tests.support import ROOT, run_firebet, wait_for

pytestmark = pytest.mark.slow

ONLINE = "firebet/CR-07/online"


def write_config(tmp: Path, broker: Mosquitto) -> Path:
    path = tmp / "table.toml"
    path.write_text(
        '[table]\nid = "CR-07"\n[journal]\nkey_file = "journal.key"\n'
        f'[floor]\nbroker = "{broker.url}"\nusername = "CR-07"\n'
        f'password_file = "{broker.password_file("CR-07")}"\n'
    )
    return path


def journal_head(state: Path) -> int:
    with Journal(state / "journal.db", read_only=True) as journal:
        journal.attach()
        last = journal.last()
        return last.record if last is not None else 0


@pytest.fixture
def floor(mosquitto: Mosquitto) -> Iterator[Subscriber]:
    subscriber = Subscriber(mosquitto)
    yield subscriber
    subscriber.close()


def test_table_sigkilled_mid_stream_resumes_from_the_cursor(
    tmp_path: Path, mosquitto: Mosquitto, floor: Subscriber
) -> None:
    config = write_config(tmp_path, mosquitto)
    state = tmp_path / "state"
    device = SimulatedReader(seed=5, interval_s=0.01, heartbeat_s=0.2, retransmit_s=0.05)
    device.start()
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        log = open(tmp_path / f"run-{len(procs)}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "controller", "run", "--config", str(config),
                "--serial", device.port, "--pin-factory", "mock",
                "--state-dir", str(state), "--socket", str(tmp_path / "control.sock"),
            ],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        procs.append(proc)
        return proc

    try:
        first = start()
        wait_for(lambda: len(floor.records()) >= 60, what="records streaming to the floor")
        wait_for(lambda: floor.on(ONLINE) and floor.on(ONLINE)[-1]["online"], what="online")
        first.send_signal(signal.SIGKILL)  # mid-stream: rolls are coming in every 10 ms
        first.wait()
        # the broker noticed the dead connection and published the will (retained)
        wait_for(lambda: floor.on(ONLINE)[-1] == {"online": False, "v": 1}, what="the will")
        killed_at = CursorFile(state).load().record
        heard_before = len(floor.records())
        assert killed_at >= 1 and heard_before >= killed_at

        second = start()
        wait_for(lambda: floor.on(ONLINE)[-1]["online"] is True, what="online again")
        wait_for(lambda: len(floor.records()) > heard_before + 30, what="more records")
        second.send_signal(signal.SIGTERM)  # a clean stop: says offline itself
        assert second.wait(timeout=60) == 0
        head = journal_head(state)
        wait_for(lambda: set(floor.records()) >= set(range(1, head + 1)), what="every record")
        assert floor.on(ONLINE)[-1] == {"online": False, "v": 1}
        heard = floor.records()
        assert sorted(set(heard)) == list(range(1, head + 1))  # nothing skipped
        assert list(dict.fromkeys(heard)) == list(range(1, head + 1))  # in order
        # only what was in flight at the kill came twice
        assert len(heard) - head <= WINDOW
        twice = sorted(r for r, n in Counter(heard).items() if n > 1)
        assert all(r > killed_at for r in twice), (killed_at, twice)  # never an ACKed one
        assert CursorFile(state).load().record == head
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        device.stop()


def test_sim_publishes_with_broker_and_doctor_shows_the_cursor(
    tmp_path: Path, mosquitto: Mosquitto, floor: Subscriber
) -> None:
    config = tmp_path / "table.toml"
    config.write_text(
        '[table]\nid = "CR-07"\n[journal]\nkey_file = "journal.key"\n[floor]\nusername = "CR-07"\n'
        f'password_file = "{mosquitto.password_file("CR-07")}"\n'
    )
    state = tmp_path / "state"
    sim = run_firebet(
        "sim", "--rolls", "40", "--seed", "3", "--config", str(config),
        "--state-dir", str(state), "--broker", mosquitto.url,
    )  # fmt: skip
    assert sim.returncode == 0, sim.stderr
    assert f"floor: {mosquitto.url}: published " in sim.stdout  # words, not "connected True"
    head = journal_head(state)
    wait_for(lambda: set(floor.records()) >= set(range(1, head + 1)), what="the sim's records")
    kinds = [m["kind"] for m in floor.on("firebet/CR-07/event")]
    assert kinds.count("rules") == 1 and kinds.count("command") >= 40

    with_broker = tmp_path / "with-broker.toml"
    with_broker.write_text(config.read_text() + f'broker = "{mosquitto.url}"\n')
    table = Publisher(mosquitto, "CR-07")  # the table's own login, on while doctor runs
    wait_for(lambda: table.client.is_connected(), what="the table's login")
    doctor = run_firebet(
        "doctor", "--config", str(with_broker), "--state-dir", str(state), "--json",
        "--pin-factory", "mock",
    )  # fmt: skip
    checks = {c["check"]: c for c in map(json.loads, doctor.stdout.splitlines())}
    floor_check = checks["floor"]
    assert floor_check["ok"], floor_check
    cursor = CursorFile(state).load().record
    assert f"publish cursor {cursor}, backlog {head - cursor}" in floor_check["detail"]
    # doctor probed as nobody: the table's session was not taken (issue 33)
    assert table.disconnects == 0, "doctor took the table's session"
    assert "the broker answers" in floor_check["detail"] and floor_check["warning"]
    table.close()

    mosquitto.stop()
    down = run_firebet(
        "doctor", "--config", str(with_broker), "--state-dir", str(state), "--json",
        "--pin-factory", "mock",
    )  # fmt: skip
    checks = {c["check"]: c for c in map(json.loads, down.stdout.splitlines())}
    assert not checks["floor"]["ok"] and "cannot reach" in checks["floor"]["detail"]
    assert "docs/floor.md" in checks["floor"]["fix"]

    bad = run_firebet("sim", "--rolls", "1", "--broker", "http://x", "--state-dir", str(state))
    assert bad.returncode == 2 and "mqtt://" in bad.stderr
