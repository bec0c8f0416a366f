"""Real tables on the floor: ``firebet run`` with its floor link, a real mosquitto with the
example ACL, and ``firebet floor``. The floor holds every record, checks every settlement
with the rules the table journaled, and its confirm reaches the table's journal."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.floor.passwords import hash_password
from drivers.sim_reader import SimulatedReader
from tests.broker import Mosquitto
from tests.floor_support import FloorProcess, login, post_form
from tests.support import ROOT, run_firebet, wait_for

pytestmark = pytest.mark.slow

PASSWORD = "correct horse battery"
DICE = {4: (2, 2), 5: (2, 3), 6: (3, 3), 8: (4, 4), 9: (4, 5), 10: (5, 5)}


class RealTable:
    """``firebet run`` on a simulated reader device, publishing to the floor broker."""

    def __init__(self, folder: Path, broker: Mosquitto, table: str) -> None:
        folder.mkdir(parents=True)
        self.config = folder / "table.toml"
        self.config.write_text(
            f'[table]\nid = "{table}"\n[journal]\nkey_file = "journal.key"\n'
            f'[floor]\nbroker = "{broker.url}"\nusername = "{table}"\n'
            f'password_file = "{broker.password_file(table)}"\n'
        )
        self.socket = folder / "control.sock"
        self.device = SimulatedReader(heartbeat_s=0.2, retransmit_s=0.05)
        self.device.start()
        with open(folder / "run.log", "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "controller", "run", "--config", str(self.config),
                 "--serial", self.device.port, "--pin-factory", "mock",
                 "--state-dir", str(folder / "state"), "--socket", str(self.socket)],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        wait_for(self.socket.exists, what="the table's control socket")
        wait_for(lambda: self.status().get("mode") == "running", what="the table ready")

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_firebet(*args, "--socket", str(self.socket), "--config", str(self.config))

    def status(self) -> dict[str, Any]:
        done = self.cli("status", "--json")
        return json.loads(done.stdout) if done.returncode == 0 else {}

    def throw(self, d1: int, d2: int) -> None:
        rolls = self.status()["rolls"]
        self.device.throw(d1, d2)
        wait_for(lambda: self.status()["rolls"] == rolls + 1, what=f"the roll {d1} {d2}")

    def make(self, *points: int) -> None:
        for p in points:
            self.throw(*DICE[p])
            self.throw(*DICE[p])

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=60)
        self.device.stop()


@pytest.fixture
def floor(tmp_path: Path, mosquitto: Mosquitto) -> Iterator[FloorProcess]:
    f = FloorProcess(tmp_path / "floor", mosquitto, users={"alice": hash_password(PASSWORD)})
    try:
        yield f
    finally:
        f.stop()


def test_a_real_table_is_checked_alerted_confirmed_and_seen_going_offline(
    tmp_path: Path, mosquitto: Mosquitto, floor: FloorProcess
) -> None:
    table = RealTable(tmp_path / "CR-07", mosquitto, "CR-07")
    try:
        assert table.cli("bet", "3", "5").returncode == 0
        assert table.cli("bet", "9", "2").returncode == 0
        table.make(4, 5, 6, 8, 9)
        wait_for(lambda: [a["kind"] for a in floor.get("/api/alerts")] == ["surveillance"])
        (alert,) = floor.get("/api/alerts")
        assert (alert["table"], alert["hand"]) == ("CR-07", 1)
        session = login(floor.url, "alice", PASSWORD)
        assert post_form(floor.url, f"/alerts/{alert['id']}/confirm", {}, session)[0] == 303
        wait_for(lambda: table.status().get("surveillance_confirmed") is not None)
        assert table.status()["surveillance_confirmed"] == {"hand": 1, "by": "alice"}
        wait_for(lambda: floor.get("/api/alerts?all=1")[0]["status"] == "confirmed")
        table.throw(4, 4)
        table.throw(3, 4)  # seven-out: 5 points pay 249 to 1
        head = table.status()
        summary: dict[str, Any] = {}

        def checked() -> bool:
            summary.update(floor.table("CR-07") or {})
            return summary.get("checked_hand") == 1

        wait_for(checked, what="the floor's second opinion on hand 1")
        assert summary["online"] is True and summary["missing"] is None
        assert summary["unchecked_records"] == 0  # compared with what the table's engine decided
        assert summary["rules_record"] is not None  # the rules journaled at the start
        assert summary["program"] == head["program"]["digest"]
        assert [a["kind"] for a in floor.get("/api/alerts?all=1")] == ["surveillance"]
        page = floor.page("/tables/CR-07")
        assert "win at 5 points (249 to 1)" in page
        assert "$1,245" in page and "$498" in page
        assert "surveillance confirmed" in page
        table.stop(signal.SIGKILL)  # gone without a goodbye: the broker sends its will
        wait_for(lambda: [a["kind"] for a in floor.get("/api/alerts")] == ["offline"])
        assert (floor.table("CR-07") or {})["online"] is False
    finally:
        table.stop()
