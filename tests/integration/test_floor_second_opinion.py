"""The second opinion end to end: a real table (the service in this process, its floor link),
a real mosquitto with the example ACL, and ``firebet floor`` as its own process. The table
publishes what its engine decided; the floor compares it with its own engine under the
rules the table journaled. A table whose engine pays otherwise is caught; an honest one
is not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller.core.config import Config, FireBetRules, load_config
from controller.core.engine import Engine
from controller.journal import replay
from tests import support
from tests.broker import Mosquitto
from tests.floor_support import FloorProcess
from tests.support import wait_for

pytestmark = pytest.mark.slow


def table_config(tmp: Path, broker: Mosquitto) -> Config:
    path = tmp / "table.toml"
    path.write_text(
        '[table]\nid = "CR-07"\n[journal]\nkey_file = "journal.key"\n'
        f'[floor]\nbroker = "{broker.url}"\nusername = "CR-07"\n'
        f'password_file = "{broker.password_file("CR-07")}"\n'
    )
    return load_config(path)


@pytest.mark.parametrize("five_pays", [249, 300], ids=["honest", "pays-300-at-5-points"])
def test_the_floor_catches_a_table_whose_engine_pays_otherwise(
    tmp_path: Path, mosquitto: Mosquitto, monkeypatch: pytest.MonkeyPatch, five_pays: int
) -> None:
    if five_pays != 249:  # the table's program pays otherwise than the rules it journals
        crooked = FireBetRules(pays={4: 24, 5: five_pays, 6: 999})
        # its engine, the table's and its floor link's (history and the full journal check
        # run in worker processes of their own, which replay with the journaled rules: a
        # test cannot reach them)
        monkeypatch.setattr(replay, "engine_for", lambda rules: Engine(crooked))
    config = table_config(tmp_path, mosquitto)
    floor = FloorProcess(tmp_path / "floor", mosquitto)
    try:
        with support.table_running(tmp_path / "state", tmp_path / "sock", config) as table:
            assert table.ask("bet", position=3, amount=5)["ok"]
            table.make(4, 5, 6, 8, 9)
            table.throw(4, 4)
            table.throw(3, 4)  # seven-out: 5 points
            assert table.status()["last_settlement"]["payouts"] == {"3": 5 * five_pays}
            summary: dict[str, Any] = {}

            def checked() -> bool:
                summary.clear()
                summary.update(floor.table("CR-07") or {})
                return summary.get("checked_hand") == 1

            wait_for(checked, what="the floor's second opinion on hand 1")
        assert summary["unchecked_records"] == 0  # every command came with its events
        audits = [a for a in floor.get("/api/alerts?all=1") if a["kind"] == "audit"]
        if five_pays == 249:
            assert audits == []
            return
        (alert,) = audits
        assert (alert["table"], alert["hand"]) == ("CR-07", 1)
        assert alert["detail"]["what"] == "settlement"
        words = alert["detail"]["detail"]
        assert "win 300 to 1 (position 3 $1,500)" in words  # what the table paid
        assert "win 249 to 1 (position 3 $1,245)" in words  # what its journaled rules give
        assert "$1,500" in floor.page("/alerts")
    finally:
        floor.stop()
