"""A change of rules at start-up, key by key, through the real service (SPEC section 6):
the table restarted on other settings never halts an intact journal, the hand decided
before keeps what it was decided and paid (recall and meters), the change is journaled
with what changed and shown by ``status`` and ``history``, and the new rules are in force
for what comes next."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.core.config import load_config
from controller.journal.history import history
from tests.support import DICE, RunningTable, run_firebet, table_running, wait_for

pytestmark = pytest.mark.slow

BASE = {
    "table": {"id": '"CR-07"', "game": '"craps"', "positions": "16"},
    "firebet": {
        "preset": '"custom"',
        "pays": "{ 4 = 24, 5 = 249, 6 = 999 }",
        "min_wager": "1",
        "max_wager": "5",
        "wager_increment": "1",
        "pay_six_immediately": "false",
        "surrender_carries_points": "true",
        "surveillance_at": "5",
        "betting_closes": '"first_roll"',
        "history_hands": "10",
    },
}
# each rules key, and what a table restarted with it changed in its settings
CHANGES: dict[str, dict[str, str]] = {
    "table.id": {"table.id": '"CR-08"'},
    "table.game": {"table.game": '"mini-craps"', "table.positions": "9"},
    "table.positions": {"table.positions": "12"},
    "firebet.preset": {"firebet.preset": '"nj"'},
    "firebet.pays": {"firebet.pays": "{ 4 = 30, 5 = 300, 6 = 1000 }"},
    "firebet.min_wager": {"firebet.min_wager": "2"},
    "firebet.max_wager": {"firebet.max_wager": "10"},
    "firebet.wager_increment": {"firebet.wager_increment": "5", "firebet.min_wager": "5"},
    "firebet.pay_six_immediately": {"firebet.pay_six_immediately": "true"},
    "firebet.surrender_carries_points": {"firebet.surrender_carries_points": "false"},
    "firebet.surveillance_at": {"firebet.surveillance_at": "4"},
    "firebet.betting_closes": {"firebet.betting_closes": '"first_point"'},
    "firebet.history_hands": {"firebet.history_hands": "20"},
}


def config_file(path: Path, changes: dict[str, str], snapshot_every: int) -> Path:
    sections: dict[str, dict[str, str]] = {s: dict(keys) for s, keys in BASE.items()}
    for dotted, value in changes.items():
        section, key = dotted.split(".")
        sections[section][key] = value
    text = "".join(
        f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items())
        for s, keys in sections.items()
    )
    path.write_text(
        text + f'[journal]\nkey_file = "journal.key"\nsnapshot_every = {snapshot_every}\n'
    )
    return path


def four_point_hand(table: RunningTable) -> None:
    """$5 on position 3, four different points, the seven-out."""
    assert table.ask("bet", position=3, amount=5)["ok"]
    table.make(4, 5, 6, 8)
    table.throw(*DICE[9])
    table.throw(3, 4)


def recall(table: RunningTable, hands: int) -> list[dict[str, Any]]:
    service = table.controller
    with service.journal.view() as db:
        return history(db, service.config.firebet, hands)


@pytest.mark.parametrize("key", list(CHANGES))
def test_a_rules_change_at_start_keeps_every_record_s_meaning(tmp_path: Path, key: str) -> None:
    state, sock = tmp_path / "state", tmp_path / "control.sock"
    before = load_config(config_file(tmp_path / "before.toml", {}, snapshot_every=7))
    after = load_config(config_file(tmp_path / "after.toml", CHANGES[key], snapshot_every=7))
    with table_running(state, sock, before) as table:
        four_point_hand(table)  # $5 at 24 to 1: $120, and snapshots after it
        assert table.status()["meters"]["paid"] == {"4": {"count": 1, "amount": 120}}
    with table_running(state, sock, after) as table:
        service = table.controller
        wait_for(lambda: table.status()["journal_check"] == "ok", what="the full check")
        status = table.status()
        assert status["mode"] == "running" and status["halted"] is None
        assert status["meters"]["paid"] == {"4": {"count": 1, "amount": 120}}  # as paid
        assert set(CHANGES[key]) <= set(status["rules"]["changed"])
        assert service.table is not None and service.table.replay.rules == after.firebet
        first, current = recall(table, 2)
        assert (first["result"], first["odds_to_one"], first["payouts"]) == ("win", 24, {"3": 120})
        rules = [a for a in current["actions"] if a["action"] == "rules"]
        assert len(rules) == 1 and set(CHANGES[key]) <= set(rules[0]["changed"])
        assert rules[0]["actor"] == "service"
        if key == "firebet.pays":  # the new pay table pays the next hand
            # the new device's power-up HELLO may have gone before the port was open: again,
            # so its numbering is not taken for copies of the last run's rolls
            table.device.hello()
            wait_for(lambda: service.state.reader_seq is None, what="the reader's HELLO")
            four_point_hand(table)
            assert table.status()["last_settlement"]["payouts"] == {"3": 150}
        if key == "firebet.max_wager":
            assert table.ask("bet", position=2, amount=10)["ok"]
        if key == "firebet.betting_closes":
            assert table.ask("bet", position=2, amount=1)["ok"]
            table.device.hello()  # as above
            wait_for(lambda: service.state.reader_seq is None, what="the reader's HELLO")
            table.throw(6, 5)  # a natural: betting stays open until the first point
            assert table.ask("bet", position=4, amount=1)["ok"]
    # and the offline tools, on today's config, read the past as it was decided
    with table_running(state, sock, after) as table:
        wait_for(lambda: table.status()["journal_check"] == "ok", what="the full check")
        assert table.status()["rules"]["changed"] == {}  # the same rules again: no change
        first = recall(table, 1000)[0]
        assert (first["odds_to_one"], first["payouts"]) == (24, {"3": 120})
    if key == "firebet.pays":  # an export gives each record the rules it was decided under
        done = run_firebet(
            *("export", "--format", "jsonl"),
            *("--state-dir", str(state), "--config", str(tmp_path / "after.toml")),
        )
        assert done.returncode == 0, done.stderr
        exported = [json.loads(line) for line in done.stdout.splitlines()]
        rules_at = [r["record"] for r in exported if r["kind"] == "rules"]
        assert len(rules_at) == 3  # one a start
        for r in exported:
            newest = [n for n in rules_at if n <= r["record"]]
            assert r["decided_under"] == (newest[-1] if newest else None), r
        commands = {  # (a reader_sync: a reader restarted while the port was closed; no game)
            r["decided_under"]
            for r in exported
            if r["kind"] == "command" and '"reader_sync"' not in json.dumps(r)
        }
        assert commands == set(rules_at[:2])  # the $120 hand under the old, the $150 the new
